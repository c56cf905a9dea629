//===- NcclMemory.cpp - Registered buffers of the collectives -------------===//
//
// NCCL moves a buffer registered with its communicator (ncclCommRegister,
// NCCL 2.19 and later) without its staging copies: over NVLink the peers
// write straight into it. On two H100s an in-place all-gather of 33 MiB
// gathered took 70 us registered against 91 us unregistered, 120 against
// 155 us for 64 MiB (bench/RESULTS.md, bench/collectives). Registration
// needs memory from ncclMemAlloc (cuMem, exportable to the peers) and is
// too costly for every call, so the buffers that compiled code gathers into
// (mxrtCollectiveAlloc) come from a cache of registered blocks: a block
// freed by any of the runtime's frees comes back here and is reused, for
// the same rounded size, once the work enqueued before its free is done (an
// event; the next user's stream waits for it).
//
// Registration is each process's own (NCCL's local registration). NCCL's
// symmetric windows were faster still in the same measurement (60 us for
// 33 MiB, copy engines), but a window is registered by every rank together
// and each rank must pass its buffers at the same offset in it, which the
// processes' own allocations -- freed whenever each caller drops its
// results -- cannot promise. NCCL requires that all ranks pass registered
// buffers to a collective or none do: every rank runs the same program, and
// whether a buffer is registered depends only on its size and the library,
// the same on every rank.
//
// A registration belongs to one communicator: mxrtCommDestroy deregisters
// the blocks (dropRegistrations), an abort forgets them, and a block is
// registered again with the next communicator when it is next used.
//
//===----------------------------------------------------------------------===//

#include "NcclInternal.h"
#include "RuntimeInternal.h"

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

using namespace mxrt;
using namespace mxrt::nccl;

namespace {

// Below this, a collective is latency-bound and registration saves little:
// the buffer comes from the stream-ordered pool, as every other one does.
constexpr uint64_t kRegisteredMinBytes = 1 << 20;
// Blocks are cached by size rounded to this (cuMem's usual granularity), so
// that nearby sizes share them.
constexpr uint64_t kBlockGranularity = 2 << 20;

struct Block {
  void *ptr = nullptr;
  uint64_t bytes = 0;
  // Recorded where the block was last released: its next user waits for it.
  CUevent released = nullptr;
  // NCCL's registration handle and the communicator generation it belongs
  // to; null / 0 when the block is not registered.
  void *registration = nullptr;
  uint64_t generation = 0;
};

struct Pool {
  std::mutex mutex;
  std::unordered_map<void *, Block> live; // Handed out, by pointer.
  std::multimap<uint64_t, Block> idle;    // Released, by bytes.
  std::atomic<bool> any{false};           // Whether a block ever existed.
};

Pool &getPool() {
  static Pool pool;
  return pool;
}

// An idle block of `bytes`, moved out of the pool; null ptr if none.
Block takeIdle(uint64_t bytes) {
  Pool &pool = getPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto it = pool.idle.find(bytes);
  if (it == pool.idle.end())
    return Block();
  Block block = it->second;
  pool.idle.erase(it);
  return block;
}

// Frees a block that nothing references any more (not registered).
void destroyBlock(Block &block) {
  if (block.released)
    cuEventDestroy(block.released);
  if (block.ptr)
    getLibrary().memFree(block.ptr);
  block = Block();
}

// A new block of `bytes` from ncclMemAlloc, with its event.
int32_t createBlock(uint64_t bytes, Block &block) {
  block.bytes = bytes;
  if (Result result = getLibrary().memAlloc(&block.ptr, bytes)) {
    block.ptr = nullptr;
    return fail(MXRT_ERROR_NCCL,
                describeFailure(format("ncclMemAlloc(%llu bytes)",
                                       static_cast<unsigned long long>(bytes))
                                    .c_str(),
                                result, nullptr));
  }
  int32_t status = checkCu(
      cuEventCreate(&block.released, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  if (status)
    destroyBlock(block);
  else
    getPool().any = true;
  return status;
}

// Registers `block` with the communicator `c` unless it already is.
int32_t ensureRegistered(CommHandle c, Block &block) {
  if (block.registration && block.generation == c.generation)
    return MXRT_SUCCESS;
  block.registration = nullptr;
  if (Result result = getLibrary().commRegister(c.comm, block.ptr, block.bytes,
                                                &block.registration))
    return fail(MXRT_ERROR_NCCL,
                describeFailure("ncclCommRegister", result, c.comm));
  block.generation = c.generation;
  return MXRT_SUCCESS;
}

// The stream of mxrtCollectiveAlloc/Free's `stream`: NULL is the call
// stream in call-stream mode, else the legacy default stream (NULL).
CUstream resolveStream(void *stream) {
  auto resolved = static_cast<CUstream>(stream);
  if (!resolved)
    getCallStream(&resolved);
  return resolved;
}

// Puts `block` back among the idle ones.
void keepIdle(Block block) {
  Pool &pool = getPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.idle.emplace(block.bytes, block);
}

} // namespace

namespace mxrt::nccl {

void *allocateRegistered(uint64_t bytes, CUstream stream) {
  uint64_t rounded =
      (bytes + kBlockGranularity - 1) / kBlockGranularity * kBlockGranularity;
  void *ptr = nullptr;
  // Under the communicator's locks, the context current: without a usable
  // communicator the collective that the buffer is for fails too, so this
  // fails before any memory is taken, and registering needs it. The pool's
  // lock is taken inside them only, the order dropRegistrations takes both.
  withCommunicator("mxrtCollectiveAlloc", [&](CommHandle c) {
    Block block = takeIdle(rounded);
    int32_t status = block.ptr
                         ? checkCu(cuStreamWaitEvent(stream, block.released, 0),
                                   "cuStreamWaitEvent")
                         : createBlock(rounded, block);
    if (!status)
      status = ensureRegistered(c, block);
    if (status) {
      if (block.ptr)
        keepIdle(block);
      return status;
    }
    Pool &pool = getPool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    pool.live.emplace(block.ptr, block);
    ptr = block.ptr;
    return int32_t(MXRT_SUCCESS);
  });
  return ptr;
}

bool releaseRegistered(void *ptr, CUstream stream, bool synchronous) {
  Pool &pool = getPool();
  if (!ptr || !pool.any)
    return false;
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto it = pool.live.find(ptr);
  if (it == pool.live.end())
    return false;
  Block block = it->second;
  pool.live.erase(it);
  // Where the context cannot be synchronized or the event recorded (a failed
  // context), the block is not reused: it stays allocated rather than be
  // handed out while in use.
  DeviceScope scope;
  if (!scope ||
      (synchronous && checkCu(cuCtxSynchronize(), "cuCtxSynchronize")) ||
      checkCu(cuEventRecord(block.released, stream), "cuEventRecord"))
    return true;
  pool.idle.emplace(block.bytes, block);
  return true;
}

void dropRegistrations(Comm comm, uint64_t generation) {
  Pool &pool = getPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto drop = [&](Block &block) {
    if (!block.registration || block.generation != generation)
      return;
    if (comm)
      getLibrary().commDeregister(comm, block.registration);
    block.registration = nullptr;
    block.generation = 0;
  };
  for (auto &entry : pool.live)
    drop(entry.second);
  for (auto &entry : pool.idle)
    drop(entry.second);
}

int32_t trimRegistered() {
  Pool &pool = getPool();
  if (!pool.any)
    return MXRT_SUCCESS;
  std::multimap<uint64_t, Block> idle;
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    idle.swap(pool.idle);
  }
  int32_t status = MXRT_SUCCESS;
  for (auto &entry : idle) {
    Block &block = entry.second;
    if (int32_t synced =
            checkCu(cuEventSynchronize(block.released), "cuEventSynchronize")) {
      status = synced; // Still in use as far as we know: keep it.
      keepIdle(block);
      continue;
    }
    if (block.registration)
      withCommunicator("mxrtEmptyCache", [&](CommHandle c) {
        if (block.generation == c.generation)
          getLibrary().commDeregister(c.comm, block.registration);
        return int32_t(MXRT_SUCCESS);
      });
    destroyBlock(block);
  }
  return status;
}

} // namespace mxrt::nccl

extern "C" {

MXRT_API void *mxrtCollectiveAlloc(uint64_t bytes, void *stream) {
  CUstream cuStream = resolveStream(stream);
  if (bytes >= kRegisteredMinBytes && getLibrary().canRegister())
    return allocateRegistered(bytes, cuStream);
  return mgpuMemAlloc(bytes, cuStream, /*isHostShared=*/false);
}

MXRT_API void mxrtCollectiveFree(void *ptr, void *stream) {
  mgpuMemFree(ptr, resolveStream(stream));
}

} // extern "C"
