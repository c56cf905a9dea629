//===- MXToGPU.cpp - Lower mx to GPU kernels ------------------------------===//
//
// Each mx op becomes one `gpu.launch` on device buffers (`gpu.alloc` for the
// results, `bufferization.to_buffer` / `to_tensor` at the seams), which the
// NVVM pipeline outlines and compiles. This file holds the pass, which
// explains every op it cannot lower, and the rowwise quantize
// kernel, the one that matters most for speed. It is shaped for the memory
// system: two lanes share a 32-element block, each lane moves its 16 elements
// with 16-byte vector loads (two for bf16) and one 16-byte vector store (both
// coalesced across the warp), the block's amax is combined with one
// xor-shuffle, elements are
// converted two at a time by the hardware `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`,
// and a swizzle that consumes the scales is fused: the kernel then writes the
// 128x4-tiled layout directly, padding included. The scale exponent math is
// the same builder code as the CPU lowering (Numerics.h), which is why the
// two agree bit for bit. Which kernel computes each quantize, and which
// swizzles it writes, the pass decides once (FusionPlan.cpp). Columnwise and
// fused rowwise + columnwise kernels are in QuantizeStrips.cpp, the
// one-thread-per-element kernels in ElementwiseKernels.cpp, the FP4 kernels in
// Fp4Kernels.cpp.
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

struct RowwiseQuantizeToGPU : OpRewritePattern<QuantizeOp> {
  RowwiseQuantizeToGPU(MLIRContext *context, const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), plan(plan) {}

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rewriter) const override {
    const QuantizePlan *planned = plan.lookup(op);
    if (!planned || planned->kernel != QuantizeKernel::rowwise)
      return rewriter.notifyMatchFailure(op, "not planned as rowwise alone");
    Location loc = op.getLoc();
    SwizzleOp swizzle = planned->swizzle;
    RankedTensorType inputType = op.getInput().getType();
    Type elementType = op.getData().getType().getElementType();
    Type scaleType = op.getScales().getType().getElementType();
    ScaleRounding rounding = op.getRounding();
    int64_t rows = inputType.getDimSize(0), cols = inputType.getDimSize(1);
    int64_t blocksPerRow = op.getScales().getType().getDimSize(1);
    // With swizzled scales the kernel also covers the zero padding of the
    // tiles: rows up to R' and block columns up to C'.
    int64_t paddedRows = swizzle ? llvm::alignTo(rows, kSwizzleTileRows) : rows;
    int64_t paddedBlocks =
        swizzle ? llvm::alignTo(blocksPerRow, kSwizzleTileCols) : blocksPerRow;

    Value input = toBuffer(rewriter, loc, op.getInput());
    Value data = allocDevice(rewriter, loc, op.getData().getType());
    Value scales = allocDevice(
        rewriter, loc,
        swizzle ? swizzle.getResult().getType() : op.getScales().getType());
    auto laneType =
        VectorType::get({kElementsPerLane}, inputType.getElementType());

    buildLaunch(rewriter, loc, paddedRows * paddedBlocks * kLanesPerBlock,
                [&](OpBuilder &b, Location l, Value thread) {
      Value lanesPerRow = cIndex(b, l, paddedBlocks * kLanesPerBlock);
      Value row = arith::DivUIOp::create(b, l, thread, lanesPerRow);
      Value laneInRow = arith::RemUIOp::create(b, l, thread, lanesPerRow);
      Value block =
          arith::DivUIOp::create(b, l, laneInRow, cIndex(b, l, kLanesPerBlock));
      Value col =
          arith::MulIOp::create(b, l, laneInRow, cIndex(b, l, kElementsPerLane));
      Value rowValid = cmpLT(b, l, row, cIndex(b, l, rows));
      Value colValid = cmpLT(b, l, col, cIndex(b, l, cols));
      Value blockValid =
          andI(b, l, rowValid, cmpLT(b, l, block, cIndex(b, l, blocksPerRow)));

      // Every lane loads (clamped in bounds) so that all 32 lanes of the warp
      // take part in the shuffles below; only the stores are predicated.
      Value loadRow = arith::MinUIOp::create(b, l, row, cIndex(b, l, rows - 1));
      Value loadCol = arith::MinUIOp::create(
          b, l, col, cIndex(b, l, cols - kElementsPerLane));
      Value values = extendToF32(
          b, l, loadVector(b, l, laneType, input, loadRow, loadCol));
      auto f32Lane = cast<VectorType>(values.getType());
      Value zero = arith::ConstantOp::create(
          b, l, DenseElementsAttr::get(f32Lane, b.getF32FloatAttr(0.0f)));
      Value magnitudes = arith::SelectOp::create(
          b, l, colValid, magnitude(b, l, values), zero);
      Value amax = vector::ReductionOp::create(
          b, l, vector::CombiningKind::MAXIMUMF, magnitudes);
      amax = buildGroupMax(b, l, amax, kLanesPerBlock);

      Value exponent = buildScaleExponent(b, l, amax, rounding, elementType);
      Value factor = buildInverseScaleValue(b, l, exponent);
      Value scaled = arith::MulFOp::create(
          b, l, values, vector::BroadcastOp::create(b, l, f32Lane, factor));
      Value nanMask = vector::BroadcastOp::create(
          b, l, f32Lane.clone(b.getI1Type()), isNaNExponent(b, l, exponent));
      Value bytes = convertToElements(b, l, scaled, elementType, nanMask);
      buildIf(b, l, andI(b, l, rowValid, colValid),
              [&](OpBuilder &nb, Location nl) {
        vector::StoreOp::create(nb, nl, bytes, data, ValueRange{row, col},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      });

      // One lane per block writes its scale; padding gets zero bytes.
      Value scale = buildStoredScale(b, l, exponent, scaleType);
      Value firstLane = arith::CmpIOp::create(
          b, l, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(b, l, laneInRow, cIndex(b, l, kLanesPerBlock)),
          cIndex(b, l, 0));
      if (swizzle) {
        Value inTiles = cmpLT(b, l, row, cIndex(b, l, paddedRows));
        Value stored = arith::SelectOp::create(
            b, l, blockValid, scale, buildZeroBits(b, l, scaleType));
        buildIf(b, l, andI(b, l, firstLane, inTiles),
                [&](OpBuilder &nb, Location nl) {
          memref::StoreOp::create(nb, nl, stored, scales,
                                  swizzledIndices(nb, nl, row, block));
        });
      } else {
        buildIf(b, l, andI(b, l, firstLane, blockValid),
                [&](OpBuilder &nb, Location nl) {
          memref::StoreOp::create(nb, nl, scale, scales, ValueRange{row, block});
        });
      }
    });

    replaceQuantize(rewriter, op, swizzle, toTensor(rewriter, loc, data),
                    toTensor(rewriter, loc, scales));
    return success();
  }

private:
  const QuantizeFusionPlan &plan;
};

struct ConvertMXToGPUPass : mx::impl::ConvertMXToGPUBase<ConvertMXToGPUPass> {
  using ConvertMXToGPUBase::ConvertMXToGPUBase;

  void runOnOperation() override {
    swizzleGemmScales(getOperation(), chip);
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

  /// Why no pattern lowered `op`. Dequantize, swizzle and unswizzle always
  /// have a kernel; a scaled_matmul has one where the GEMM generator plans
  /// one for the chip.
  std::string getMissingKernelReason(Operation *op,
                                     const QuantizeFusionPlan &plan) const {
    if (auto quantize = dyn_cast<QuantizeOp>(op))
      return plan.getUnsupportedReason(quantize).str();
    if (auto matmul = dyn_cast<ScaledMatmulOp>(op)) {
      std::string reason;
      (void)checkGemmKernelSupport(matmul, chip, reason);
      return reason + "; cuBLASLt may run it instead (mx-lower-to-nvvm "
                      "gemm=cublas)";
    }
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
  populateElementwisePatterns(patterns, plan);
  populateFP4Patterns(patterns, chip, plan);
  populateMXToGPUGemmPatterns(patterns, chip);
}
