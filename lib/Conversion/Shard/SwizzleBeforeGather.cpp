//===- SwizzleBeforeGather.cpp - Gather a shard's scale tiles -------------===//
//
// mx-partition follows the spec's section 12: the compact scales cross the
// wire and every device swizzles the gathered ones. Where each device's
// scales fill whole 128-row tiles, the 128x4 tiles of the gathered scales
// are exactly each device's tiles one after the other, so swizzling before
// the gather moves the same bytes and gives the same result, and on the GPU
// the swizzle then happens inside the quantize kernel (its fusion with the
// swizzle) instead of as a kernel after the gather, on the call's critical
// path. mx-lower-to-nvvm runs this pass (mx-swizzle-before-gather,
// Passes.td; docs/distributed.md).
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_SWIZZLEBEFOREGATHER
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

/// swizzle(all_gather(s, axis 0)) -> all_gather(swizzle(s), axis 0), for
/// 2-D rowwise scales whose shard rows are a multiple of the tile rows.
struct SwizzleShardTiles : OpRewritePattern<SwizzleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SwizzleOp swizzle,
                                PatternRewriter &rewriter) const override {
    auto gather = swizzle.getInput().getDefiningOp<shard::AllGatherOp>();
    if (!gather || gather.getGatherAxis() != 0)
      return rewriter.notifyMatchFailure(swizzle, "not of a row gather");
    if (!gather->hasOneUse())
      return rewriter.notifyMatchFailure(swizzle, "gathered scales are used");
    if (swizzle.getLayout() != SwizzleLayout::tiles ||
        swizzle.getUnscaledDim() != 0)
      return rewriter.notifyMatchFailure(swizzle, "not tiles of rows");
    auto shardType = cast<RankedTensorType>(gather.getInput().getType());
    auto tilesType = cast<RankedTensorType>(swizzle.getType());
    if (shardType.getRank() != 2 || !shardType.hasStaticShape() ||
        shardType.getDimSize(0) % SwizzleTiles::kRows != 0)
      return rewriter.notifyMatchFailure(swizzle, "rows not in whole tiles");
    // The shard's tiles: the whole's with the shard's share of tile rows.
    int64_t devices = cast<RankedTensorType>(gather.getType()).getDimSize(0) /
                      shardType.getDimSize(0);
    SmallVector<int64_t> shardTiles(tilesType.getShape());
    shardTiles.front() /= devices;
    auto shardTilesType = tilesType.clone(shardTiles);

    // Both where the gather was: a swizzle that its quantize kernel does not
    // absorb (FP4's) runs before the other gathers of that quantize, which
    // then still run as one NCCL group with the tiles' gather.
    rewriter.setInsertionPoint(gather);
    Value tiles = SwizzleOp::create(rewriter, swizzle.getLoc(), shardTilesType,
                                    gather.getInput(), swizzle.getUnscaledDim(),
                                    swizzle.getLayout());
    Value gathered = shard::AllGatherOp::create(
        rewriter, gather.getLoc(), tilesType, gather.getGridAttr(),
        gather.getGridAxesAttr(), tiles, gather.getGatherAxisAttr());
    rewriter.replaceOp(swizzle, gathered);
    rewriter.eraseOp(gather);
    return success();
  }
};

struct SwizzleBeforeGatherPass
    : mx::impl::SwizzleBeforeGatherBase<SwizzleBeforeGatherPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SwizzleShardTiles>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
