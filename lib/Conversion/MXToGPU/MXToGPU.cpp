//===- MXToGPU.cpp - Lower mx to GPU kernels ------------------------------===//
//
// Each mx op becomes `gpu.launch` kernels on device buffers (`gpu.alloc` for
// the results, `bufferization.to_buffer` / `to_tensor` at the seams), which
// the NVVM pipeline outlines and compiles: one launch for most ops, two for
// the per-tensor ones that need a whole-tensor amax first. This file holds
// the pass, which explains every op it cannot lower, and the rowwise
// quantize kernel, the one that matters most for speed: `[1, w]` blocks, MX
// (w = 32) and FP8 blockwise 1-D (w = 128) alike. It is shaped for the
// memory system: w / 16 lanes share a block, each lane moves its 16
// elements with 16-byte vector loads (two for bf16) and one 16-byte vector
// store (both coalesced across the warp), the block's amax is combined with
// log2(w / 16) xor-shuffles, elements are converted two at a time by the
// hardware `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`, and a swizzle that consumes
// the scales is fused: the kernel then writes the 128x4-tiled layout
// directly, padding included. Batch dimensions are more rows (a
// collapse_shape, no copy); with tiled scales each batch slice's rows are
// padded to whole tiles in the grid. The scale math is the same builder
// code as the CPU lowering (Numerics.h), which is why the two agree bit for
// bit. Which kernel computes each quantize, and which swizzles it writes,
// the pass decides once (FusionPlan.cpp). Columnwise and fused rowwise +
// columnwise kernels are in QuantizeStrips.cpp, `[128, 128]` blocks in
// BlockwiseQuantize.cpp, per-tensor scaling in PerTensorScaling.cpp, the
// one-thread-per-element kernels in ElementwiseKernels.cpp, the FP4 kernels
// in Fp4Kernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Conversion/Passes.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTMXTOGPU
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

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

/// Writes the scale of `block` of a grid row, from the block's first lane:
/// linear at (row, block), or tiled at the grid row, where the padding of the
/// tiles gets zero bits.
void storeRowwiseScale(OpBuilder &b, Location loc, Value scales, Value scale,
                       Value firstLane, Value blockValid, Value row,
                       Value gridRow, Value block, int64_t gridRowCount,
                       bool tiled) {
  if (!tiled) {
    buildIf(b, loc, andI(b, loc, firstLane, blockValid),
            [&](OpBuilder &nb, Location nl) {
              memref::StoreOp::create(nb, nl, scale, scales,
                                      ValueRange{row, block});
            });
    return;
  }
  Value inTiles = cmpLT(b, loc, gridRow, cIndex(b, loc, gridRowCount));
  Value stored = arith::SelectOp::create(
      b, loc, blockValid, scale, buildZeroBits(b, loc, scale.getType()));
  buildIf(b, loc, andI(b, loc, firstLane, inTiles),
          [&](OpBuilder &nb, Location nl) {
            memref::StoreOp::create(nb, nl, stored, scales,
                                    swizzledIndices(nb, nl, gridRow, block));
          });
}

struct RowwiseQuantizeToGPU : PlannedQuantizePattern {
  RowwiseQuantizeToGPU(MLIRContext *context, const QuantizeFusionPlan &plan)
      : PlannedQuantizePattern(context, plan, QuantizeKernel::rowwise) {}

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
    int64_t gridRows = swizzle ? llvm::alignTo(rows, kSwizzleTileRows) : rows;
    int64_t gridBlocks =
        swizzle ? llvm::alignTo(blocksPerRow, kSwizzleTileCols) : blocksPerRow;

    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 2);
    Value data = allocFolded(rewriter, loc, op.getData().getType(), 2);
    Value scales = allocFolded(rewriter, loc, scalesType, swizzle ? 5 : 2);
    Type elementType = op.getData().getType().getElementType();
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

          BlockScale scale = buildBlockScale(b, l, amax, rounding, elementType,
                                             scalesType.getElementType());
          storeVectorIf(
              b, l, andI(b, l, rowValid, colValid),
              quantizeVector(b, l, values, scale, rounding, elementType), data,
              {row, col});
          Value firstLane =
              isZeroIndex(b, l,
                          arith::RemUIOp::create(b, l, laneInRow,
                                                 cIndex(b, l, lanesPerBlock)));
          Value blockValid = andI(
              b, l, rowValid, cmpLT(b, l, block, cIndex(b, l, blocksPerRow)));
          storeRowwiseScale(b, l, scales, scale.stored, firstLane, blockValid,
                            row, gridRow, block, slices * gridRows,
                            bool(swizzle));
        });

    replaceQuantize(
        rewriter, op, swizzle,
        toUnfoldedTensor(rewriter, loc, data, op.getData().getType()),
        toUnfoldedTensor(rewriter, loc, scales, scalesType));
    return success();
  }
};

struct ConvertMXToGPUPass : mx::impl::ConvertMXToGPUBase<ConvertMXToGPUPass> {
  using ConvertMXToGPUBase::ConvertMXToGPUBase;

  void runOnOperation() override {
    swizzleGemmScales(getOperation(), chip);
    // The plan refers to ops by address: fold (unswizzle(swizzle(x)) -> x)
    // and erase dead ops first, so that the driver below erases none of them.
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet());
    QuantizeFusionPlan plan(getOperation());
    RewritePatternSet patterns(&getContext());
    populateMXToGPUConversionPatterns(patterns, chip, plan);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has no kernel: say which op and why.
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (!isa<MXDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError("has no GPU lowering: ")
          << getMissingKernelReason(op, plan);
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// Why no pattern lowered `op`. Dequantize (but FP4), swizzle, unswizzle
  /// and update_amax_history always have a kernel; a scaled_matmul has one
  /// where the GEMM generator plans one for the chip.
  std::string getMissingKernelReason(Operation *op,
                                     const QuantizeFusionPlan &plan) const {
    if (auto quantize = dyn_cast<QuantizeOp>(op))
      return plan.getUnsupportedReason(quantize).str();
    if (auto matmul = dyn_cast<ScaledMatmulOp>(op)) {
      std::string reason, cublasReason;
      (void)checkGemmKernelSupport(matmul, chip, reason);
      for (Value operand : {matmul.getLhs(), matmul.getRhs()})
        if (failed(checkCublasElementType(
                getElementTypeOrSelf(operand.getType()), cublasReason)))
          return reason + "; nor does cuBLASLt: " + cublasReason;
      return reason + "; cuBLASLt may run it instead (mx-lower-to-nvvm "
                      "gemm=cublas)";
    }
    if (std::string reason = getPerTensorUnsupportedReason(op); !reason.empty())
      return reason;
    return "no GPU kernel exists for this op; use the CPU pipeline";
  }
};

} // namespace

void gpu_kernels::populateRowwiseQuantizePatterns(
    RewritePatternSet &patterns, const QuantizeFusionPlan &plan) {
  patterns.add<RowwiseQuantizeToGPU>(patterns.getContext(), plan);
}

void mx::populateMXToGPUConversionPatterns(RewritePatternSet &patterns,
                                           Chip chip,
                                           const QuantizeFusionPlan &plan) {
  populateRowwiseQuantizePatterns(patterns, plan);
  populateColumnwiseQuantizePatterns(patterns, plan);
  populateBlockwiseQuantizePatterns(patterns, plan);
  populatePerTensorScalingPatterns(patterns, plan);
  populateElementwisePatterns(patterns, plan);
  populateFP4Patterns(patterns, chip, plan);
  populateMXToGPUGemmPatterns(patterns, chip);
}
