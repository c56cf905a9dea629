//===- AmaxRecording.cpp - Delayed scaling's amax, recorded in place ------===//
//
// The recording of a delayed cast's amax in its history entry; see
// AmaxRecording.h.
//
//===----------------------------------------------------------------------===//

#include "AmaxRecording.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

/// A poll's back-off while the reducers wait for the count.
constexpr int32_t kPollSleepNs = 100;

/// The history entry as an unsigned word, and the partials.
struct AmaxEntry {
  Value words, partials;
  SmallVector<Value, 2> indices;

  Value i32(OpBuilder &b, Location l, uint32_t v) const {
    return arith::ConstantIntOp::create(b, l, v, 32);
  }
  void atomic(OpBuilder &b, Location l, arith::AtomicRMWKind kind,
              uint32_t v) const {
    memref::AtomicRMWOp::create(b, l, kind, i32(b, l, v), words, indices);
  }

  /// Thread code: `value` into partials[slot], then the count. The release
  /// fence waits for this warp's stores only (`membar.gl`, a fence.sc, would
  /// order more and invalidate L1); the atomics return nothing to wait for.
  void publish(OpBuilder &b, Location l, Value value, Value slot) const {
    memref::StoreOp::create(b, l, value, partials, slot);
    LLVM::FenceOp::create(b, l, LLVM::AtomicOrdering::release, "device");
    atomic(b, l, arith::AtomicRMWKind::maxu, kCountBase);
    atomic(b, l, arith::AtomicRMWKind::addi, 1);
  }

  /// Thread code: waits until `count` CTAs have published (an atomic read,
  /// then a sleep, until the count is reached), then an acquire fence, so
  /// that the CTA reads their partials after a barrier.
  void await(OpBuilder &b, Location l, int64_t count) const {
    atomic(b, l, arith::AtomicRMWKind::maxu, kCountBase);
    scf::WhileOp::create(
        b, l, TypeRange(), ValueRange(),
        [&](OpBuilder &wb, Location wl, ValueRange) {
          Value seen =
              memref::AtomicRMWOp::create(wb, wl, arith::AtomicRMWKind::ori,
                                          i32(wb, wl, 0), words, indices);
          scf::ConditionOp::create(
              wb, wl,
              arith::CmpIOp::create(wb, wl, arith::CmpIPredicate::ult, seen,
                                    i32(wb, wl, kCountBase + count)),
              ValueRange());
        },
        [&](OpBuilder &wb, Location wl, ValueRange) {
          NVVM::NanosleepOp::create(wb, wl, i32(wb, wl, kPollSleepNs));
          scf::YieldOp::create(wb, wl);
        });
    LLVM::FenceOp::create(b, l, LLVM::AtomicOrdering::acquire, "device");
  }

  /// Thread code: the max over the count, NaN as the reference's bits.
  void store(OpBuilder &b, Location l, Value total) const {
    memref::StoreOp::create(b, l, buildAmaxBits(b, l, total), words, indices);
  }
};

/// The max of partials[first, end) (+0 if empty; `first` a multiple of 4)
/// in `rounds` rounds, which every thread of the CTA takes a share of: in
/// round i thread t loads the 16-byte groups first / 4 + 2048 i + t + 256 u,
/// u < kRecordLoads, all in flight, clamped into the buffer; values from
/// `end` on are dropped (+0 is below any amax).
Value reduceSlice(OpBuilder &b, Location l, Value thread, Value partials,
                  Value first, int64_t end, int64_t rounds) {
  IndexArith ia{b, l};
  auto type = VectorType::get({kPartialsPerLoad}, b.getF32Type());
  auto indexType = VectorType::get({kPartialsPerLoad}, b.getIndexType());
  int64_t lastGroup =
      cast<MemRefType>(partials.getType()).getNumElements() / kPartialsPerLoad -
      1;
  Value lanes =
      arith::ConstantOp::create(b, l, b.getIndexVectorAttr({0, 1, 2, 3}));
  Value bound = vector::BroadcastOp::create(b, l, indexType, cIndex(b, l, end));
  Value zero = splat(b, l, lanes, b.getF32FloatAttr(0.0f));
  Value firstGroup =
      arith::AddIOp::create(b, l, ia.div(first, kPartialsPerLoad), thread);
  int64_t groupsPerRound = kPartialsPerRound / kPartialsPerLoad;
  auto round = scf::ForOp::create(
      b, l, cIndex(b, l, 0), cIndex(b, l, rounds), cIndex(b, l, 1), zero,
      [&](OpBuilder &fb, Location fl, Value i, ValueRange maxima) {
        IndexArith fa{fb, fl};
        Value max = maxima.front();
        Value roundGroup = fa.fma(i, groupsPerRound, firstGroup);
        for (int64_t u = 0; u < kRecordLoads; ++u) {
          Value group = arith::AddIOp::create(
              fb, fl, roundGroup, cIndex(fb, fl, u * kThreadsPerBlock));
          Value clamped =
              arith::MinUIOp::create(fb, fl, group, cIndex(fb, fl, lastGroup));
          Value values = loadVector(
              fb, fl, type, partials,
              {fa.fma(clamped, kPartialsPerLoad, cIndex(fb, fl, 0))});
          Value elements = arith::AddIOp::create(
              fb, fl,
              vector::BroadcastOp::create(
                  fb, fl, indexType,
                  fa.fma(group, kPartialsPerLoad, cIndex(fb, fl, 0))),
              lanes);
          Value inside = arith::CmpIOp::create(
              fb, fl, arith::CmpIPredicate::ult, elements, bound);
          max = arith::MaximumFOp::create(
              fb, fl, max,
              arith::SelectOp::create(fb, fl, inside, values, zero));
        }
        scf::YieldOp::create(fb, fl, max);
      });
  return vector::ReductionOp::create(b, l, vector::CombiningKind::MAXIMUMF,
                                     round.getResult(0));
}

} // namespace

void gpu_kernels::buildRecordAmax(OpBuilder &b, Location l,
                                  const KernelIds &ids, Value amax,
                                  Value partials, Value history, int64_t index,
                                  const AmaxRecordPlan &plan, Value buffer) {
  auto historyType = cast<MemRefType>(history.getType());
  AmaxEntry entry{arith::BitcastOp::create(
                      b, l, historyType.clone(b.getI32Type()), history),
                  partials,
                  {cIndex(b, l, 0), cIndex(b, l, index)}};
  int64_t firstReducer = plan.getFirstReducer();
  int64_t level2 = plan.getLevel2Start();
  auto onThread0 = [&](OpBuilder &nb, Location nl,
                       function_ref<void(OpBuilder &, Location)> then) {
    buildIf(nb, nl, isZeroIndex(nb, nl, ids.thread), then);
  };
  // Every thread's max of `value` and partials[first, end), over the CTA.
  auto reduce = [&](OpBuilder &nb, Location nl, Value value, Value first,
                    int64_t end, int64_t rounds) {
    gpu::BarrierOp::create(nb, nl); // thread 0 has waited; `buffer` is free
    Value slice = reduceSlice(nb, nl, ids.thread, partials, first, end, rounds);
    return buildCTAMax(nb, nl, arith::MaximumFOp::create(nb, nl, value, slice),
                       ids.thread, buffer);
  };
  // Block-uniform branches: their barriers stay in step.
  buildIf(
      b, l, cmpLT(b, l, ids.block, cIndex(b, l, firstReducer)),
      [&](OpBuilder &nb, Location nl) {
        onThread0(nb, nl, [&](OpBuilder &tb, Location tl) {
          entry.publish(tb, tl, amax, ids.block);
        });
      },
      [&](OpBuilder &rb, Location rl) {
        Value reducer = arith::SubIOp::create(rb, rl, ids.block,
                                              cIndex(rb, rl, firstReducer));
        onThread0(rb, rl, [&](OpBuilder &tb, Location tl) {
          entry.await(tb, tl, firstReducer);
        });
        Value first = IndexArith{rb, rl}.fma(
            reducer, plan.rounds * kPartialsPerRound, cIndex(rb, rl, 0));
        Value slice = reduce(rb, rl, amax, first, firstReducer, plan.rounds);
        auto last = [&](OpBuilder &nb, Location nl) {
          Value total = slice;
          if (plan.reducers > 1) {
            onThread0(nb, nl, [&](OpBuilder &tb, Location tl) {
              entry.await(tb, tl, plan.numBlocks - 1);
            });
            total = reduce(nb, nl, slice, cIndex(nb, nl, level2),
                           level2 + plan.reducers - 1, 1);
          }
          onThread0(nb, nl, [&](OpBuilder &tb, Location tl) {
            entry.store(tb, tl, total);
          });
        };
        if (plan.reducers == 1)
          return last(rb, rl);
        buildIf(rb, rl,
                arith::CmpIOp::create(rb, rl, arith::CmpIPredicate::eq, reducer,
                                      cIndex(rb, rl, plan.reducers - 1)),
                last, [&](OpBuilder &nb, Location nl) {
                  onThread0(nb, nl, [&](OpBuilder &tb, Location tl) {
                    entry.publish(tb, tl, slice,
                                  arith::AddIOp::create(
                                      tb, tl, reducer, cIndex(tb, tl, level2)));
                  });
                });
      });
}
