//===- AmaxHistoryUpdate.cpp - Delayed scaling's once-a-step update -------===//
//
// `mx.update_amax_history` on the GPU: the once-a-step update of delayed
// scaling, every state of a training step in one launch. The ops of a block
// whose operands are all defined before the first one form a group
// (getUpdateGroup) and share one kernel, a CTA per history column: its
// threads stride over the rows, write them rotated and reduce their max
// (ignoring NaN, from 0, as Transformer Engine); thread 0 derives the
// column's next scale with the CPU lowering's builder (buildDelayedScale,
// Numerics.h). The casts of PerTensorScaling.cpp record the amaxes it reads.
//
//===----------------------------------------------------------------------===//

#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

/// The updates that one launch computes with `op`: `op` and the later
/// `mx.update_amax_history` ops of its block whose operands are all defined
/// before `op` (a training step's update of every state, of any element,
/// algorithm, margin or history length).
SmallVector<UpdateAmaxHistoryOp> getUpdateGroup(UpdateAmaxHistoryOp op) {
  auto definedBefore = [&](Value value) {
    Operation *def = value.getDefiningOp();
    return value.getParentBlock() != op->getBlock() || !def ||
           def->isBeforeInBlock(op);
  };
  SmallVector<UpdateAmaxHistoryOp> group;
  for (Operation &other :
       llvm::make_range(op->getIterator(), op->getBlock()->end())) {
    auto update = dyn_cast<UpdateAmaxHistoryOp>(&other);
    if (update &&
        (update == op || llvm::all_of(update->getOperands(), definedBefore)))
      group.push_back(update);
  }
  return group;
}

/// The buffers of one update in its launch: the CTAs from `firstBlock` on
/// update its columns.
struct UpdateBuffers {
  UpdateAmaxHistoryOp op;
  Value history, scales, newHistory, newScales;
  int64_t rows, columns, firstBlock;
};

/// CTA code for column `column` of `u`: its threads stride over the rows,
/// writing them rotated and reducing their max; thread 0 derives the scale.
void buildColumnUpdate(OpBuilder &b, Location l, const KernelIds &ids,
                       const UpdateBuffers &u, Value column) {
  int64_t rows = u.rows;
  UpdateAmaxHistoryOp op = u.op;
  // Row i moves to row i - 1 (row 0 to the last); the new row 0, where
  // the oldest entry (row 1) lands, is zero.
  auto loop = scf::ForOp::create(
      b, l, ids.thread, cIndex(b, l, rows), cIndex(b, l, kThreadsPerBlock),
      ValueRange{zeroF32(b, l)},
      [&](OpBuilder &nb, Location nl, Value row, ValueRange max) {
        Value value =
            memref::LoadOp::create(nb, nl, u.history, ValueRange{row, column});
        Value dest = arith::RemUIOp::create(
            nb, nl,
            arith::AddIOp::create(nb, nl, row, cIndex(nb, nl, rows - 1)),
            cIndex(nb, nl, rows));
        Value stored = arith::SelectOp::create(
            nb, nl, isZeroIndex(nb, nl, dest), zeroF32(nb, nl), value);
        memref::StoreOp::create(nb, nl, stored, u.newHistory,
                                ValueRange{dest, column});
        scf::YieldOp::create(
            nb, nl,
            arith::MaxNumFOp::create(nb, nl, max.front(), value).getResult());
      });
  // `max` ignores NaN and starts from 0, as Transformer Engine's fmaxf.
  Value amax =
      op.getAlgorithm() == AmaxAlgorithm::most_recent
          ? memref::LoadOp::create(b, l, u.history,
                                   ValueRange{cIndex(b, l, 0), column})
                .getResult()
          : buildCTAMax(b, l, loop.getResult(0), ids.thread,
                        ids.workgroup.front(), vector::CombiningKind::MAXNUMF);
  buildIf(b, l, isZeroIndex(b, l, ids.thread), [&](OpBuilder &nb, Location nl) {
    Value scale = buildDelayedScale(
        nb, nl, amax, memref::LoadOp::create(nb, nl, u.scales, column),
        op.getElement(), op.getMargin());
    memref::StoreOp::create(nb, nl, scale, u.newScales, column);
  });
}

/// One launch for all columns of every update of the group (getUpdateGroup):
/// CTA j rotates one column and derives its scale. A step's updates of
/// several states thus take one launch, as Transformer Engine's fused
/// amax-and-scale update does.
struct UpdateAmaxHistoryToGPU : OpRewritePattern<UpdateAmaxHistoryOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UpdateAmaxHistoryOp op,
                                PatternRewriter &rewriter) const override {
    for (Operation *other = op->getPrevNode(); other;
         other = other->getPrevNode())
      if (auto earlier = dyn_cast<UpdateAmaxHistoryOp>(other))
        if (llvm::is_contained(getUpdateGroup(earlier), op))
          return rewriter.notifyMatchFailure(op,
                                             "in an earlier update's launch");
    Location loc = op.getLoc();
    SmallVector<UpdateBuffers> updates;
    int64_t blocks = 0;
    for (UpdateAmaxHistoryOp update : getUpdateGroup(op)) {
      RankedTensorType historyType = update.getHistory().getType();
      updates.push_back(
          {update, toBuffer(rewriter, loc, update.getHistory()),
           toBuffer(rewriter, loc, update.getScales()),
           allocDevice(rewriter, loc, historyType),
           allocDevice(rewriter, loc, update.getScales().getType()),
           historyType.getDimSize(0), historyType.getDimSize(1), blocks});
      blocks += historyType.getDimSize(1);
    }
    buildBlockLaunch(
        rewriter, loc, blocks, getCTAMaxBufferType(getContext()),
        [&](OpBuilder &b, Location l, const KernelIds &ids) {
          // The CTA's update: the one whose blocks hold its index (a branch
          // uniform over the CTA, so that its barriers stay in step).
          for (const UpdateBuffers &u : updates) {
            int64_t end = u.firstBlock + u.columns;
            Value mine = andI(
                b, l, cmpLT(b, l, ids.block, cIndex(b, l, end)),
                arith::CmpIOp::create(b, l, arith::CmpIPredicate::uge,
                                      ids.block, cIndex(b, l, u.firstBlock)));
            buildIf(b, l, mine, [&](OpBuilder &nb, Location nl) {
              Value column = arith::SubIOp::create(
                  nb, nl, ids.block, cIndex(nb, nl, u.firstBlock));
              buildColumnUpdate(nb, nl, ids, u, column);
            });
          }
        });
    for (UpdateBuffers &u : updates)
      rewriter.replaceOp(u.op, {toTensor(rewriter, loc, u.newHistory),
                                toTensor(rewriter, loc, u.newScales)});
    return success();
  }
};

} // namespace

void gpu_kernels::populateAmaxHistoryUpdatePatterns(
    RewritePatternSet &patterns) {
  patterns.add<UpdateAmaxHistoryToGPU>(patterns.getContext());
}
