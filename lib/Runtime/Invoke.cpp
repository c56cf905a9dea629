//===- Invoke.cpp - One call into compiled code, for the Python binding ---===//
//
// mxrtInvoke does in C what the Python binding otherwise did in five ctypes
// calls and one more per result (each costing about a microsecond of host
// time): run a compiled function's C interface in call-stream mode on the
// caller's stream, collect the error it left, and hand every result to
// DLPack (mxrtExportDLPack). Arguments are passed as pointers (memref
// descriptors); functions with by-value scalar arguments keep the generic
// ctypes path. It notes each argument that an earlier call exported on
// another stream (mxrt::noteExportRead), so that freeing it waits for this
// call's stream.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <array>
#include <utility>

namespace {

constexpr int32_t kMaxArguments = 16;

using Caller = void (*)(void *function, void *results, void *const *args);

// Calls `function(results, args[0], ..., args[N-1])`, or without `results`
// when the function has none (the C interface then has no result pointer).
template <size_t... I>
void callWithResults(void *function, void *results, void *const *args,
                     std::index_sequence<I...>) {
  using Function = void (*)(void *, decltype((void)I, (void *)nullptr)...);
  reinterpret_cast<Function>(function)(results, args[I]...);
}

template <size_t... I>
void callWithoutResults(void *function, void *, void *const *args,
                        std::index_sequence<I...>) {
  using Function = void (*)(decltype((void)I, (void *)nullptr)...);
  reinterpret_cast<Function>(function)(args[I]...);
}

template <size_t N> void callN(void *function, void *results, void *const *args) {
  if (results)
    callWithResults(function, results, args, std::make_index_sequence<N>());
  else
    callWithoutResults(function, results, args, std::make_index_sequence<N>());
}

template <size_t... N>
constexpr std::array<Caller, sizeof...(N)> makeCallers(std::index_sequence<N...>) {
  return {&callN<N>...};
}

constexpr auto kCallers =
    makeCallers(std::make_index_sequence<kMaxArguments + 1>());

// The first fields of every ranked memref descriptor.
struct DescriptorHead {
  char *allocated;
  char *aligned;
  int64_t offset;
};

// Whether `allocation` belongs to an argument or an earlier result, so that
// the caller must not free it again.
bool isAliased(const char *allocation, int32_t numArgs, void *const *args,
               void *const *earlier, int32_t numEarlier) {
  for (int32_t i = 0; i < numArgs; ++i)
    if (static_cast<DescriptorHead *>(args[i])->allocated == allocation)
      return true;
  for (int32_t i = 0; i < numEarlier; ++i)
    if (earlier[i] == allocation)
      return true;
  return false;
}

} // namespace

extern "C" MXRT_API int32_t mxrtInvoke(void *function, void *stream,
                                       int32_t numArgs, void *const *args,
                                       void *results, int32_t numResults,
                                       const mxrtResultLayout *layouts,
                                       void **exported, int32_t *owned) {
  if (!function || numArgs < 0 || numArgs > kMaxArguments || numResults < 0 ||
      numResults > kMaxArguments || (numResults && (!results || !layouts)))
    return mxrt::fail(MXRT_ERROR_INVALID_ARGUMENT,
                      mxrt::format("mxrtInvoke: bad call (%d arguments, %d "
                                   "results; at most %d each)",
                                   numArgs, numResults, kMaxArguments));
  for (int32_t i = 0; i < numArgs; ++i)
    mxrt::noteExportRead(static_cast<DescriptorHead *>(args[i])->aligned,
                         static_cast<CUstream>(stream));
  if (int32_t status = mxrtSetCallStream(stream, 1))
    return status;
  mxrtGetLastError(); // Errors from before this call are not its own.
  mxrt::takeLastCallStatus();
  kCallers[numArgs](function, numResults ? results : nullptr, args);
  mxrtSetCallStream(nullptr, 0);

  DescriptorHead *heads[kMaxArguments];
  void *allocations[kMaxArguments];
  auto *cursor = static_cast<char *>(results);
  for (int32_t i = 0; i < numResults; ++i) {
    heads[i] = reinterpret_cast<DescriptorHead *>(cursor);
    cursor += sizeof(DescriptorHead) + 2 * sizeof(int64_t) * layouts[i].rank;
    allocations[i] = heads[i]->allocated;
    owned[i] = !isAliased(heads[i]->allocated, numArgs, args, allocations, i);
  }
  // A failed call exports nothing and frees what it allocated; its error,
  // left for mxrtGetLastError(), is what the caller reports.
  if (mxrt::hasPendingError()) {
    int32_t status = mxrt::takeLastCallStatus();
    for (int32_t i = 0; i < numResults; ++i)
      if (owned[i])
        mxrtFreeAsync(allocations[i], stream);
    return status ? status : MXRT_ERROR_CUDA;
  }
  for (int32_t i = 0; i < numResults; ++i) {
    const mxrtResultLayout &layout = layouts[i];
    exported[i] = mxrtExportDLPack(
        heads[i]->aligned + heads[i]->offset * layout.itemBytes,
        owned[i] ? heads[i]->allocated : nullptr, layout.storedRank,
        layout.storedShape, layout.code, layout.bits,
        mxrt::getDefaultDevice(), stream);
    if (!exported[i])
      return MXRT_ERROR_INVALID_ARGUMENT;
  }
  return MXRT_SUCCESS;
}
