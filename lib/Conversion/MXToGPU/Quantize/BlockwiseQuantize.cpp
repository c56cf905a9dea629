//===- BlockwiseQuantize.cpp - FP8 blockwise [128, 128] quantize kernel ---===//
//
// FP8 blockwise 2-D quantization (Transformer Engine's weight recipe): one f32
// scale per 128 x 128 block, computed by one CTA of 256 threads. Thread t
// covers columns 16 (t % 8) .. 16 (t % 8) + 15 of the block's rows t / 8 +
// 32 p, p = 0..3: 8 lanes per 128-column row and 4 passes of 32 rows, so each
// load is a 16-byte vector, 8 lanes reading one contiguous row segment, and
// the 64 values of a thread stay in registers from the amax to the cast (the
// input is read once). The block's amax is the CTA max (buildCTAMax: xor
// shuffles, then the 8 warp maxima through shared memory). Partial blocks at
// the bottom and right edges cover the elements that exist. Batch slices are
// more block rows of the folded input; no block spans two slices.
//
//===----------------------------------------------------------------------===//

#include "ElementConversion.h"
#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

constexpr int64_t kLanesPerRow = kBlockwiseExtent / kElementsPerLane;
constexpr int64_t kRowsPerPass = kThreadsPerBlock / kLanesPerRow;
constexpr int64_t kPasses = kBlockwiseExtent / kRowsPerPass;

/// A block row of the folded scales (slice-major) per batch slice, and the
/// block columns: the grid, one CTA per block.
struct BlockGrid {
  int64_t slices, rows, cols, blockRows, blockCols;
};

/// One thread's share of its CTA's block: per pass, the row in the folded
/// input, whether the lane's 16 elements exist, and their f32 values; the
/// column; and the place of the block's scale.
struct TileLanes {
  SmallVector<Value> row, valid, values;
  Value col, scaleRow, blockCol;
};

/// Loads the thread's 4 passes (clamped in bounds: every thread must reach
/// the barrier of the CTA max) and returns the max |x| of those that exist.
Value loadTile(OpBuilder &b, Location l, const KernelIds &ids,
               const BlockGrid &grid, Value input, VectorType laneType,
               TileLanes &lanes) {
  IndexArith index{b, l};
  lanes.scaleRow = index.div(ids.block, grid.blockCols);
  lanes.blockCol = index.rem(ids.block, grid.blockCols);
  Value slice = index.div(lanes.scaleRow, grid.blockRows);
  Value firstRow =
      index.fma(index.rem(lanes.scaleRow, grid.blockRows), kBlockwiseExtent,
                index.div(ids.thread, kLanesPerRow));
  lanes.col =
      index.fma(lanes.blockCol, kBlockwiseExtent,
                arith::MulIOp::create(b, l, index.rem(ids.thread, kLanesPerRow),
                                      cIndex(b, l, kElementsPerLane)));
  Value colValid = cmpLT(b, l, lanes.col, cIndex(b, l, grid.cols));
  Value loadCol = arith::MinUIOp::create(
      b, l, lanes.col, cIndex(b, l, grid.cols - kElementsPerLane));
  Value zero = arith::ConstantOp::create(b, l, b.getF32FloatAttr(0.0f));
  Value amax = zero;
  for (int64_t p = 0; p < kPasses; ++p) {
    Value local =
        arith::AddIOp::create(b, l, firstRow, cIndex(b, l, p * kRowsPerPass));
    lanes.row.push_back(index.fma(slice, grid.rows, local));
    lanes.valid.push_back(
        andI(b, l, colValid, cmpLT(b, l, local, cIndex(b, l, grid.rows))));
    Value loadRow = arith::MinUIOp::create(
        b, l, lanes.row.back(), cIndex(b, l, grid.slices * grid.rows - 1));
    lanes.values.push_back(extendToF32(
        b, l, loadVector(b, l, laneType, input, {loadRow, loadCol})));
    Value passMax =
        vector::ReductionOp::create(b, l, vector::CombiningKind::MAXIMUMF,
                                    magnitude(b, l, lanes.values.back()));
    passMax = arith::SelectOp::create(b, l, lanes.valid.back(), passMax, zero);
    amax = arith::MaximumFOp::create(b, l, amax, passMax);
  }
  return amax;
}

struct Blockwise2DQuantizeToGPU : PlannedQuantizePattern {
  Blockwise2DQuantizeToGPU(MLIRContext *context, Chip chip,
                           const QuantizeFusionPlan &plan)
      : PlannedQuantizePattern(context, plan, QuantizeKernel::blockwise2D,
                               chip) {}

  LogicalResult rewritePlanned(QuantizeOp op, const QuantizePlan &,
                               PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    RankedTensorType scalesType = op.getScales().getType();
    int64_t rank = inputType.getRank();
    BlockGrid grid{getNumSlices(inputType, 2), inputType.getDimSize(rank - 2),
                   inputType.getDimSize(rank - 1),
                   scalesType.getDimSize(rank - 2),
                   scalesType.getDimSize(rank - 1)};
    ElementConversion conversion = getConversion(op);
    ScaleRounding rounding = op.getRounding();

    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 2);
    DataBuffer data(rewriter, loc, op.getData().getType(), 2);
    Value scales = allocFolded(rewriter, loc, scalesType, 2);
    auto laneType =
        VectorType::get({kElementsPerLane}, inputType.getElementType());
    buildBlockLaunch(
        rewriter, loc, grid.slices * grid.blockRows * grid.blockCols,
        getCTAMaxBufferType(getContext()),
        [&](OpBuilder &b, Location l, const KernelIds &ids) {
          TileLanes lanes;
          Value amax = loadTile(b, l, ids, grid, input, laneType, lanes);
          amax = buildCTAMax(b, l, amax, ids.thread, ids.workgroup.front());
          BlockScale scale = buildBlockScale(b, l, amax, rounding, conversion,
                                             scalesType.getElementType());
          for (int64_t p = 0; p < kPasses; ++p)
            data.store(b, l, lanes.valid[p],
                       quantizeVector(b, l, lanes.values[p], scale, rounding,
                                      conversion),
                       {lanes.row[p], lanes.col});
          buildIf(b, l, isZeroIndex(b, l, ids.thread),
                  [&](OpBuilder &nb, Location nl) {
                    memref::StoreOp::create(
                        nb, nl, scale.stored, scales,
                        ValueRange{lanes.scaleRow, lanes.blockCol});
                  });
        });

    rewriter.replaceOp(op,
                       {data.toTensor(rewriter, loc),
                        toUnfoldedTensor(rewriter, loc, scales, scalesType)});
    return success();
  }
};

} // namespace

void gpu_kernels::populateBlockwiseQuantizePatterns(
    RewritePatternSet &patterns, Chip chip, const QuantizeFusionPlan &plan) {
  patterns.add<Blockwise2DQuantizeToGPU>(patterns.getContext(), chip, plan);
}
