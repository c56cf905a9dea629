//===- AmaxRecording.h - A delayed cast's amax, in place --------*- C++ -*-===//
//
// Private to the quantize kernels of the MXToGPU conversion: how the kernel
// of an `mx.quantize_delayed` (PerTensorScaling.cpp) records its amax in
// history[0, index] in place, with nothing zeroed before it. The entry
// itself counts: an amax (>= 0, -0 or NaN, as every history the ops write)
// is at most 2^31 as an unsigned word, so an atomic unsigned max with 2^31
// makes it a count of 0 whatever it held, and atomic adds of 1 count. The
// last few CTAs reduce. Every other CTA's thread 0 stores the CTA's amax to
// a partial, fences (release) and counts the CTA: no returning atomic and no
// barrier, so the CTA ends as soon as its stores are out. The reducers wait
// (thread 0 polls the count) until all of those have counted, each takes the
// max of its slice of the partials (one round of loads up to 262144 CTAs),
// and all but the last store theirs as level-2 partials and count again; the
// last waits for those and stores the max of them over the count. Waiting
// CTAs cannot starve the ones they wait for: the hardware starts a grid's
// CTAs in index order, so the reducers start last, and there are at most
// kMaxReducers of them, fewer than the CTAs of this kernel that any GPU holds
// at once. docs/gpu.md has the SASS and the alternatives.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_AMAXRECORDING_H
#define MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_AMAXRECORDING_H

#include "KernelBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

namespace mx::gpu_kernels {

/// Partials a thread loads at once (16-byte loads, all in flight), and so
/// the partials a CTA covers in one round.
constexpr int64_t kPartialsPerLoad = 4;
constexpr int64_t kRecordLoads = 8;
constexpr int64_t kPartialsPerRound =
    kRecordLoads * kPartialsPerLoad * kThreadsPerBlock;
constexpr int64_t kMaxReducers = 32;
/// The sign bit, which marks the entry as a count.
constexpr uint32_t kCountBase = 0x80000000u;

/// How the `numBlocks` CTAs of a delayed cast's kernel share the recording:
/// the last `reducers` CTAs reduce slices of `rounds` rounds each, one
/// reducer per kPartialsPerRound CTAs while that keeps them at most
/// kMaxReducers. Where there are several, their level-2 partials follow the
/// others' partials (aligned to a 16-byte load).
struct AmaxRecordPlan {
  int64_t numBlocks, reducers, rounds;

  explicit AmaxRecordPlan(int64_t numBlocks)
      : numBlocks(numBlocks),
        reducers(std::min<int64_t>(
            llvm::divideCeil(numBlocks, kPartialsPerRound), kMaxReducers)),
        rounds(llvm::divideCeil(numBlocks, reducers * kPartialsPerRound)) {}
  /// Whether the count fits the entry's 31 bits.
  static bool fits(int64_t numBlocks) { return numBlocks <= kCountBase; }
  int64_t getFirstReducer() const { return numBlocks - reducers; }
  int64_t getLevel2Start() const {
    return llvm::alignTo(numBlocks, kPartialsPerLoad);
  }
  mlir::RankedTensorType getPartialsType(mlir::Builder &b) const {
    int64_t level2 =
        reducers > 1 ? llvm::alignTo(reducers, kPartialsPerLoad) : 0;
    return mlir::RankedTensorType::get({getLevel2Start() + level2},
                                       b.getF32Type());
  }
};

/// CTA code that records the cast's amax (every thread holds the CTA's
/// `amax`) in history[0, index], as the file comment says, with `partials`
/// of plan.getPartialsType(). `buffer` is the CTA's max buffer
/// (getCTAMaxBufferType), free for reuse after a barrier.
void buildRecordAmax(mlir::OpBuilder &b, mlir::Location l, const KernelIds &ids,
                     mlir::Value amax, mlir::Value partials,
                     mlir::Value history, int64_t index,
                     const AmaxRecordPlan &plan, mlir::Value buffer);

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_AMAXRECORDING_H
