//===- CombineCollectives.cpp - All-reduce + all-slice to reduce-scatter --===//
//
// shard-partition emits what each op asks for, one op at a time: a K-split
// product all-reduces its partial sums, and a consumer that wants the sum
// split along M slices it again (`shard.all_slice`). Together that is a
// reduce-scatter, which moves half the bytes; upstream has no such
// combination, so this pass makes it (mx-combine-collectives, Passes.td).
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_COMBINECOLLECTIVES
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

/// all_slice(all_reduce(x)) -> reduce_scatter(x), and with an arith.truncf
/// between them, truncf(reduce_scatter(x)).
struct SliceOfAllReduce : OpRewritePattern<shard::AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(shard::AllSliceOp slice,
                                PatternRewriter &rewriter) const override {
    Value sliced = slice.getInput();
    auto truncf = sliced.getDefiningOp<arith::TruncFOp>();
    if (truncf)
      sliced = truncf.getIn();
    auto allReduce = sliced.getDefiningOp<shard::AllReduceOp>();
    if (!allReduce)
      return rewriter.notifyMatchFailure(slice, "not a slice of an all-reduce");
    if (allReduce.getGrid() != slice.getGrid() ||
        allReduce.getGridAxes() != slice.getGridAxes())
      return rewriter.notifyMatchFailure(slice, "other grid axes");
    if (!allReduce->hasOneUse() || (truncf && !truncf->hasOneUse()))
      return rewriter.notifyMatchFailure(slice, "the sum has other users");
    auto input = cast<RankedTensorType>(allReduce.getInput().getType());
    auto sum = cast<RankedTensorType>(allReduce.getResult().getType());
    if (input.getElementType() != sum.getElementType())
      return rewriter.notifyMatchFailure(slice, "the all-reduce converts");

    auto sliceType = cast<RankedTensorType>(slice.getResult().getType());
    Value scattered = shard::ReduceScatterOp::create(
        rewriter, slice.getLoc(), sliceType.clone(sum.getElementType()),
        allReduce.getGrid(), allReduce.getGridAxes(), allReduce.getInput(),
        allReduce.getReduction(), slice.getSliceAxis());
    if (truncf)
      scattered = arith::TruncFOp::create(rewriter, truncf.getLoc(), sliceType,
                                          scattered);
    rewriter.replaceOp(slice, scattered);
    return success();
  }
};

struct CombineCollectivesPass
    : mx::impl::CombineCollectivesBase<CombineCollectivesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SliceOfAllReduce>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
