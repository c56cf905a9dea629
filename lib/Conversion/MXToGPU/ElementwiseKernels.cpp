//===- ElementwiseKernels.cpp - Dequantize and (un)swizzle kernels --------===//
//
// The mx ops whose GPU kernels need no cooperation between threads: one
// thread per output element. Dequantize decodes FP8 with the same integer
// builders as the CPU lowering and rounds like it, so the two agree bit for
// bit, NaN canonicalization included. Swizzle gathers each tiled byte (or f32)
// from the linear scales, writing zeros into the padding; unswizzle gathers
// the other way.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

/// The row-major multi-index of linear element `index` of `shape`.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value index,
                               ArrayRef<int64_t> shape) {
  SmallVector<Value> indices(shape.size());
  for (int64_t dim = shape.size() - 1; dim >= 0; --dim) {
    indices[dim] =
        arith::RemUIOp::create(b, loc, index, cIndex(b, loc, shape[dim]));
    index = arith::DivUIOp::create(b, loc, index, cIndex(b, loc, shape[dim]));
  }
  return indices;
}

Value minIndex(OpBuilder &b, Location loc, Value x, int64_t bound) {
  return arith::MinUIOp::create(b, loc, x, cIndex(b, loc, bound));
}

struct DequantizeToGPU : OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    Value data = toBuffer(rewriter, loc, op.getData());
    Value scales = toBuffer(rewriter, loc, op.getScales());
    Value result = allocDevice(rewriter, loc, resultType);
    ArrayRef<int64_t> shape = resultType.getShape();
    ArrayRef<int64_t> block = op.getBlock();
    buildLaunch(rewriter, loc, resultType.getNumElements(),
                [&](OpBuilder &b, Location l, Value thread) {
      buildIf(b, l, cmpLT(b, l, thread, cIndex(b, l, resultType.getNumElements())),
              [&](OpBuilder &nb, Location nl) {
        SmallVector<Value> indices = delinearize(nb, nl, thread, shape);
        SmallVector<Value> blockIndices;
        for (auto [index, size] : llvm::zip_equal(indices, block))
          blockIndices.push_back(
              arith::DivUIOp::create(nb, nl, index, cIndex(nb, nl, size)));
        // GPU arithmetic and cvt return their own canonical NaN (0x7FFFFFFF,
        // bf16 0x7FFF); buildDequantized gives the contract's quiet NaN.
        Value product = buildDequantized(
            nb, nl, memref::LoadOp::create(nb, nl, data, indices),
            memref::LoadOp::create(nb, nl, scales, blockIndices),
            resultType.getElementType());
        memref::StoreOp::create(nb, nl, product, result, indices);
      });
    });
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }
};

/// The linear scale (r, c) of a tile position, r along the unscaled dimension.
SmallVector<Value> linearIndices(Value r, Value c, int64_t unscaledDim) {
  return unscaledDim == 0 ? SmallVector<Value>{r, c} : SmallVector<Value>{c, r};
}

struct SwizzleToGPU : OpRewritePattern<SwizzleOp> {
  SwizzleToGPU(MLIRContext *context, const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), plan(plan) {}

  LogicalResult matchAndRewrite(SwizzleOp op,
                                PatternRewriter &rewriter) const override {
    if (plan.getFusedInto(op))
      return rewriter.notifyMatchFailure(op, "written by its quantize kernel");
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    int64_t unscaled = op.getUnscaledDim();
    int64_t rows = inputType.getDimSize(unscaled);
    int64_t cols = inputType.getDimSize(1 - unscaled);
    ArrayRef<int64_t> tiles = op.getResult().getType().getShape();
    int64_t paddedCols = tiles[1] * kSwizzleTileCols;
    Value input = toBuffer(rewriter, loc, op.getInput());
    Value result = allocDevice(rewriter, loc, op.getResult().getType());
    int64_t count = tiles[0] * kSwizzleTileRows * paddedCols;
    buildLaunch(rewriter, loc, count, [&](OpBuilder &b, Location l, Value thread) {
      buildIf(b, l, cmpLT(b, l, thread, cIndex(b, l, count)),
              [&](OpBuilder &nb, Location nl) {
        Value r = arith::DivUIOp::create(nb, nl, thread, cIndex(nb, nl, paddedCols));
        Value c = arith::RemUIOp::create(nb, nl, thread, cIndex(nb, nl, paddedCols));
        Value valid = andI(nb, nl, cmpLT(nb, nl, r, cIndex(nb, nl, rows)),
                           cmpLT(nb, nl, c, cIndex(nb, nl, cols)));
        Value scale = memref::LoadOp::create(
            nb, nl, input,
            linearIndices(minIndex(nb, nl, r, rows - 1),
                          minIndex(nb, nl, c, cols - 1), unscaled));
        Value stored = arith::SelectOp::create(
            nb, nl, valid, scale,
            buildZeroBits(nb, nl, inputType.getElementType()));
        memref::StoreOp::create(nb, nl, stored, result,
                                swizzledIndices(nb, nl, r, c));
      });
    });
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }

private:
  const QuantizeFusionPlan &plan;
};

struct UnswizzleToGPU : OpRewritePattern<UnswizzleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnswizzleOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    int64_t unscaled = op.getUnscaledDim();
    Value input = toBuffer(rewriter, loc, op.getInput());
    Value result = allocDevice(rewriter, loc, resultType);
    int64_t count = resultType.getNumElements();
    buildLaunch(rewriter, loc, count, [&](OpBuilder &b, Location l, Value thread) {
      buildIf(b, l, cmpLT(b, l, thread, cIndex(b, l, count)),
              [&](OpBuilder &nb, Location nl) {
        SmallVector<Value> indices =
            delinearize(nb, nl, thread, resultType.getShape());
        Value r = indices[unscaled], c = indices[1 - unscaled];
        Value scale = memref::LoadOp::create(nb, nl, input,
                                             swizzledIndices(nb, nl, r, c));
        memref::StoreOp::create(nb, nl, scale, result, indices);
      });
    });
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }
};

} // namespace

void gpu_kernels::populateElementwisePatterns(RewritePatternSet &patterns,
                                              const QuantizeFusionPlan &plan) {
  patterns.add<DequantizeToGPU, UnswizzleToGPU>(patterns.getContext());
  patterns.add<SwizzleToGPU>(patterns.getContext(), plan);
}
