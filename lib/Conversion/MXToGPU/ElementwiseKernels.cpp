//===- ElementwiseKernels.cpp - Dequantize and (un)swizzle kernels --------===//
//
// The mx ops whose GPU kernels need no cooperation between threads: one
// thread per output element. Dequantize decodes FP8 with the same integer
// builders as the CPU lowering and rounds like it, so the two agree bit for
// bit, NaN canonicalization included. Swizzle gathers each byte (or f32) of
// either GEMM-ready layout (tiles, blockwise) from the compact scales, writing
// zeros into the padding, batch slice by batch slice; unswizzle gathers the
// other way.
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

Value minIndex(OpBuilder &b, Location loc, Value x, int64_t bound) {
  return arith::MinUIOp::create(b, loc, x, cIndex(b, loc, bound));
}

struct DequantizeToGPU : OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rewriter) const override {
    if (isa<Float4E2M1FNType>(op.getData().getType().getElementType()))
      return rewriter.notifyMatchFailure(op, "FP4 data (Fp4Kernels.cpp)");
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
            /*tensorScale=*/Value(), resultType.getElementType());
        memref::StoreOp::create(nb, nl, product, result, indices);
      });
    });
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }
};

/// The compact scale indices of matrix position (r, c) of a batch slice, r
/// along the unscaled dimension.
SmallVector<Value> getCompactIndices(ValueRange batch, Value r, Value c,
                                     int64_t unscaledDim) {
  SmallVector<Value> indices(batch);
  bool unscaledFirst = unscaledDim == static_cast<int64_t>(batch.size());
  indices.append(unscaledFirst ? SmallVector<Value>{r, c}
                               : SmallVector<Value>{c, r});
  return indices;
}

/// Where compact position (r, c) of a batch slice sits in `layout`.
SmallVector<Value> getSwizzledIndices(OpBuilder &b, Location loc,
                                      ValueRange batch, Value r, Value c,
                                      SwizzleLayout layout) {
  SmallVector<Value> indices(batch);
  if (layout == SwizzleLayout::tiles) {
    llvm::append_range(indices, swizzledIndices(b, loc, r, c));
    return indices;
  }
  Value padding = cIndex(b, loc, kBlockwisePadding);
  indices.append({c, arith::DivUIOp::create(b, loc, r, padding),
                  arith::RemUIOp::create(b, loc, r, padding)});
  return indices;
}

/// The compact position (r, c) that swizzled `indices` (batch dimensions
/// first) hold in `layout`: the inverse of getSwizzledIndices.
std::pair<Value, Value> getCompactPosition(OpBuilder &b, Location loc,
                                           ArrayRef<Value> indices,
                                           SwizzleLayout layout) {
  auto fma = [&](Value x, int64_t scale, Value y) {
    Value scaled = arith::MulIOp::create(b, loc, x, cIndex(b, loc, scale));
    return arith::AddIOp::create(b, loc, scaled, y).getResult();
  };
  if (layout == SwizzleLayout::blockwise) {
    ArrayRef<Value> tail = indices.take_back(3);
    return {fma(tail[1], kBlockwisePadding, tail[2]), tail[0]};
  }
  // [r/128, c/4, r%32, (r%128)/32, c%4]
  ArrayRef<Value> tile = indices.take_back(5);
  Value r = fma(fma(tile[0], 4, tile[3]), 32, tile[2]);
  return {r, fma(tile[1], kSwizzleTileCols, tile[4])};
}

/// One thread per swizzled element: it gathers its compact scale, or writes
/// zero bits into the padding.
struct SwizzleToGPU : OpRewritePattern<SwizzleOp> {
  SwizzleToGPU(MLIRContext *context, const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), plan(plan) {}

  LogicalResult matchAndRewrite(SwizzleOp op,
                                PatternRewriter &rewriter) const override {
    if (plan.getFusedInto(op))
      return rewriter.notifyMatchFailure(op, "written by its quantize kernel");
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    RankedTensorType resultType = op.getResult().getType();
    int64_t unscaled = op.getUnscaledDim(), batch = inputType.getRank() - 2;
    int64_t rows = inputType.getDimSize(unscaled);
    int64_t cols = inputType.getDimSize(2 * batch + 1 - unscaled);
    Value input = toBuffer(rewriter, loc, op.getInput());
    Value result = allocDevice(rewriter, loc, resultType);
    int64_t count = resultType.getNumElements();
    buildLaunch(
        rewriter, loc, count, [&](OpBuilder &b, Location l, Value thread) {
          buildIf(b, l, cmpLT(b, l, thread, cIndex(b, l, count)),
                  [&](OpBuilder &nb, Location nl) {
                    SmallVector<Value> indices =
                        delinearize(nb, nl, thread, resultType.getShape());
                    auto [r, c] =
                        getCompactPosition(nb, nl, indices, op.getLayout());
                    Value valid =
                        andI(nb, nl, cmpLT(nb, nl, r, cIndex(nb, nl, rows)),
                             cmpLT(nb, nl, c, cIndex(nb, nl, cols)));
                    Value scale = memref::LoadOp::create(
                        nb, nl, input,
                        getCompactIndices(
                            ArrayRef<Value>(indices).take_front(batch),
                            minIndex(nb, nl, r, rows - 1),
                            minIndex(nb, nl, c, cols - 1), unscaled));
                    Value stored = arith::SelectOp::create(
                        nb, nl, valid, scale,
                        buildZeroBits(nb, nl, inputType.getElementType()));
                    memref::StoreOp::create(nb, nl, stored, result, indices);
                  });
        });
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }

private:
  const QuantizeFusionPlan &plan;
};

/// One thread per compact scale: it reads its place in the swizzled layout.
struct UnswizzleToGPU : OpRewritePattern<UnswizzleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnswizzleOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    int64_t unscaled = op.getUnscaledDim(), batch = resultType.getRank() - 2;
    Value input = toBuffer(rewriter, loc, op.getInput());
    Value result = allocDevice(rewriter, loc, resultType);
    int64_t count = resultType.getNumElements();
    buildLaunch(rewriter, loc, count, [&](OpBuilder &b, Location l, Value thread) {
      buildIf(b, l, cmpLT(b, l, thread, cIndex(b, l, count)),
              [&](OpBuilder &nb, Location nl) {
        SmallVector<Value> indices =
            delinearize(nb, nl, thread, resultType.getShape());
        Value r = indices[unscaled], c = indices[2 * batch + 1 - unscaled];
        Value scale = memref::LoadOp::create(
            nb, nl, input,
            getSwizzledIndices(nb, nl,
                               ArrayRef<Value>(indices).take_front(batch), r, c,
                               op.getLayout()));
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
