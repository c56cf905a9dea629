//===- RowwiseQuantize.cpp - The rowwise quantize kernel ------------------===//
//
// `[1, w]` blocks, MX (w = 32) and FP8 blockwise 1-D (w = 128) alike: the
// quantize kernel that matters most for speed. It is shaped for the memory
// system: w / 16 lanes share a block, each lane moves its 16 elements with
// 16-byte vector loads (two for bf16) and one 16-byte vector store (both
// coalesced across the warp), the block's amax is combined with
// log2(w / 16) xor-shuffles, elements are converted two at a time by the
// hardware `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`, and a swizzle that consumes
// the scales is fused: the kernel then writes the 128x4-tiled layout
// directly, padding included. Batch dimensions are more rows (a
// collapse_shape, no copy); with tiled scales each batch slice's rows are
// padded to whole tiles in the grid. The scale math is the same builder
// code as the CPU lowering (Numerics.h), which is why the two agree bit for
// bit.
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

int64_t gpu_kernels::getRowwiseLanesPerBlock(int64_t width) {
  int64_t lanes = width / kElementsPerLane;
  bool covered = width % kElementsPerLane == 0 && llvm::isPowerOf2_64(lanes) &&
                 lanes <= kWarpSize;
  return covered ? lanes : 0;
}

namespace {

/// The data row of grid row `gridRow` when the grid gives each of `slices`
/// slices of `rows` rows `gridRows` >= rows rows (the tiles' padding), and
/// whether it is a row of data.
std::pair<Value, Value> getSliceRow(OpBuilder &b, Location loc, Value gridRow,
                                    int64_t slices, int64_t rows,
                                    int64_t gridRows) {
  if (gridRows == rows)
    return {gridRow, cmpLT(b, loc, gridRow, cIndex(b, loc, slices * rows))};
  Value slice =
      arith::DivUIOp::create(b, loc, gridRow, cIndex(b, loc, gridRows));
  Value r = arith::RemUIOp::create(b, loc, gridRow, cIndex(b, loc, gridRows));
  Value row = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, slice, cIndex(b, loc, rows)), r);
  return {row, andI(b, loc, cmpLT(b, loc, r, cIndex(b, loc, rows)),
                    cmpLT(b, loc, slice, cIndex(b, loc, slices)))};
}

struct RowwiseQuantizeToGPU : PlannedQuantizePattern {
  RowwiseQuantizeToGPU(MLIRContext *context, Chip chip,
                       const QuantizeFusionPlan &plan)
      : PlannedQuantizePattern(context, plan, QuantizeKernel::rowwise, chip) {}

  LogicalResult rewritePlanned(QuantizeOp op, const QuantizePlan &planned,
                               PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SwizzleOp swizzle = planned.swizzle;
    RankedTensorType inputType = op.getInput().getType();
    RankedTensorType scalesType =
        swizzle ? swizzle.getResult().getType() : op.getScales().getType();
    int64_t rank = inputType.getRank();
    int64_t slices = getNumSlices(inputType, 2);
    int64_t rows = inputType.getDimSize(rank - 2);
    int64_t cols = inputType.getDimSize(rank - 1);
    int64_t lanesPerBlock = getRowwiseLanesPerBlock(op.getBlock().back());
    int64_t blocksPerRow = op.getScales().getType().getDimSize(rank - 1);
    // With swizzled scales the grid also covers the zero padding of the
    // tiles: each slice's rows up to R' and block columns up to C'.
    int64_t gridRows =
        swizzle ? llvm::alignTo(rows, SwizzleTiles::kRows) : rows;
    int64_t gridBlocks = swizzle
                             ? llvm::alignTo(blocksPerRow, SwizzleTiles::kCols)
                             : blocksPerRow;

    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 2);
    DataBuffer data(rewriter, loc, op.getData().getType(), 2);
    Value scales = allocFolded(rewriter, loc, scalesType, swizzle ? 5 : 2);
    ElementConversion conversion = getConversion(op);
    ScaleRounding rounding = op.getRounding();
    auto laneType =
        VectorType::get({kElementsPerLane}, inputType.getElementType());

    buildLaunch(
        rewriter, loc, slices * gridRows * gridBlocks * lanesPerBlock,
        [&](OpBuilder &b, Location l, Value thread) {
          Value lanesPerRow = cIndex(b, l, gridBlocks * lanesPerBlock);
          Value gridRow = arith::DivUIOp::create(b, l, thread, lanesPerRow);
          Value laneInRow = arith::RemUIOp::create(b, l, thread, lanesPerRow);
          Value block = arith::DivUIOp::create(b, l, laneInRow,
                                               cIndex(b, l, lanesPerBlock));
          Value col = arith::MulIOp::create(b, l, laneInRow,
                                            cIndex(b, l, kElementsPerLane));
          auto [row, rowValid] =
              getSliceRow(b, l, gridRow, slices, rows, gridRows);
          Value colValid = cmpLT(b, l, col, cIndex(b, l, cols));

          // Every lane loads (clamped in bounds) so that all 32 lanes of the
          // warp take part in the shuffles below; only the stores are
          // predicated.
          Value loadRow = arith::MinUIOp::create(
              b, l, row, cIndex(b, l, slices * rows - 1));
          Value loadCol = arith::MinUIOp::create(
              b, l, col, cIndex(b, l, cols - kElementsPerLane));
          Value values = extendToF32(
              b, l, loadVector(b, l, laneType, input, {loadRow, loadCol}));
          Value zero =
              arith::ConstantOp::create(b, l, b.getZeroAttr(values.getType()));
          Value magnitudes = arith::SelectOp::create(
              b, l, colValid, magnitude(b, l, values), zero);
          Value amax = vector::ReductionOp::create(
              b, l, vector::CombiningKind::MAXIMUMF, magnitudes);
          amax = buildGroupMax(b, l, amax, lanesPerBlock);

          BlockScale scale = buildBlockScale(b, l, amax, rounding, conversion,
                                             scalesType.getElementType());
          storeQuantized(b, l, data, andI(b, l, rowValid, colValid), values,
                         scale, rounding, conversion, {row, col});
          Value firstLane =
              isZeroIndex(b, l,
                          arith::RemUIOp::create(b, l, laneInRow,
                                                 cIndex(b, l, lanesPerBlock)));
          Value blockValid = andI(
              b, l, rowValid, cmpLT(b, l, block, cIndex(b, l, blocksPerRow)));
          // Tiled, the grid row is the tiled row, padding included.
          SmallVector<Value, 2> guards = {firstLane};
          if (swizzle)
            guards.push_back(
                cmpLT(b, l, gridRow, cIndex(b, l, slices * gridRows)));
          storeBlockScale(
              b, l, scales, bool(swizzle), scale.stored, blockValid, guards,
              [&](OpBuilder &, Location) { return swizzle ? gridRow : row; },
              block);
        });

    replaceQuantize(rewriter, op, swizzle, data.toTensor(rewriter, loc),
                    toUnfoldedTensor(rewriter, loc, scales, scalesType));
    return success();
  }
};

} // namespace

void gpu_kernels::populateRowwiseQuantizePatterns(
    RewritePatternSet &patterns, Chip chip, const QuantizeFusionPlan &plan) {
  patterns.add<RowwiseQuantizeToGPU>(patterns.getContext(), chip, plan);
}
