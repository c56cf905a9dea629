//===- MXToLinalg.cpp - Lower mx to linalg --------------------------------===//
//
// The portable reference lowering of the mx dialect. Blocks become explicit
// tensor dimensions (pad to whole blocks, then expand `[n*b]` into `[n, b]`),
// so each block's amax is a plain `linalg.reduce`; elements then read their
// block's factor through a `floordiv` indexing map. All FP8/E8M0 numerics come
// from mx/Dialect/MX/Utils/Numerics.h, shared with the GPU lowering.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToLinalg/MXToLinalg.h"
#include "mx/Conversion/Passes.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTMXTOLINALG
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

/// Maps an element of a tensor of `shape` to its block's scale:
/// (d0, d1, ...) -> (d0 floordiv b0, d1 floordiv b1, ...).
AffineMap getBlockMap(MLIRContext *ctx, ArrayRef<int64_t> block) {
  SmallVector<AffineExpr> exprs;
  for (auto [dim, size] : llvm::enumerate(block))
    exprs.push_back(getAffineDimExpr(dim, ctx).floorDiv(size));
  return AffineMap::get(block.size(), 0, exprs, ctx);
}

SmallVector<utils::IteratorType> parallelIterators(int64_t rank) {
  return SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel);
}

Value createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value extendToF32(OpBuilder &b, Location loc, Value value) {
  if (value.getType().isF32())
    return value;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}

/// Pads `source` at the high end with zero bits up to `shape`.
Value padHigh(OpBuilder &b, Location loc, Value source,
              ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(source.getType());
  if (type.getShape() == shape)
    return source;
  auto paddedType = RankedTensorType::get(shape, type.getElementType());
  Value zero = buildZeroBits(b, loc, type.getElementType());
  return tensor::createPadHighOp(paddedType, source, zero, /*nofold=*/false,
                                 loc, b);
}

/// The f32 max |x| of every block of `input`: `[ceil(s0/b0), ...]`.
Value buildBlockAmax(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> block) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> scalesShape = getScalesShape(type.getShape(), block);
  SmallVector<int64_t> paddedShape, blockedShape, blockDims;
  SmallVector<ReassociationIndices> reassociation;
  for (auto [index, count, size] : llvm::enumerate(scalesShape, block)) {
    paddedShape.push_back(count * size);
    blockedShape.append({count, size});
    blockDims.push_back(2 * index + 1);
    reassociation.push_back(
        {static_cast<int64_t>(2 * index), static_cast<int64_t>(2 * index + 1)});
  }
  // Zero padding never raises max |x|, and a NaN still propagates.
  Value padded = padHigh(b, loc, input, paddedShape);
  Value blocked = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(blockedShape, type.getElementType()),
      padded, reassociation);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value init = linalg::FillOp::create(
                   b, loc, zero, createEmpty(b, loc, scalesShape, b.getF32Type()))
                   .getResult(0);
  auto reduce = linalg::ReduceOp::create(
      b, loc, ValueRange{blocked}, ValueRange{init}, blockDims,
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        Value magnitude = math::AbsFOp::create(nb, nloc, extendToF32(nb, nloc, args[0]));
        // maximumf propagates NaN, which marks the whole block NaN.
        Value max = arith::MaximumFOp::create(nb, nloc, magnitude, args[1]);
        linalg::YieldOp::create(nb, nloc, max);
      });
  return reduce.getResult(0);
}

struct QuantizeOpLowering : OpConversionPattern<QuantizeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(QuantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    RankedTensorType dataType = op.getData().getType();
    RankedTensorType scalesType = op.getScales().getType();
    Type elementType = dataType.getElementType();
    Type scaleType = scalesType.getElementType();
    ArrayRef<int64_t> block = op.getBlock();
    ScaleRounding rounding = op.getRounding();
    int64_t rank = dataType.getRank();

    Value amax = buildBlockAmax(rewriter, loc, adaptor.getInput(), block);

    // Per block: the stored scale and the f32 factor applied to elements (the
    // inverse power of two, or the exact scale itself for `exact`).
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    auto scalesOp = linalg::GenericOp::create(
        rewriter, loc, TypeRange{scalesType, amax.getType()}, ValueRange{amax},
        ValueRange{createEmpty(rewriter, loc, scalesType.getShape(), scaleType),
                   createEmpty(rewriter, loc, scalesType.getShape(),
                               rewriter.getF32Type())},
        SmallVector<AffineMap>(3, identity), parallelIterators(rank),
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          if (rounding == ScaleRounding::exact) {
            Value scale = buildExactScale(b, nloc, args[0], elementType);
            linalg::YieldOp::create(b, nloc, ValueRange{scale, scale});
            return;
          }
          Value exponent =
              buildScaleExponent(b, nloc, args[0], rounding, elementType);
          Value scale = buildStoredScale(b, nloc, exponent, scaleType);
          Value factor = buildInverseScaleValue(b, nloc, exponent);
          linalg::YieldOp::create(b, nloc, ValueRange{scale, factor});
        });

    auto dataOp = linalg::GenericOp::create(
        rewriter, loc, TypeRange{dataType},
        ValueRange{adaptor.getInput(), scalesOp.getResult(1)},
        ValueRange{createEmpty(rewriter, loc, dataType.getShape(), elementType)},
        SmallVector<AffineMap>{identity, getBlockMap(ctx, block), identity},
        parallelIterators(rank),
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          Value x = extendToF32(b, nloc, args[0]);
          Value scaled =
              rounding == ScaleRounding::exact
                  ? arith::DivFOp::create(b, nloc, x, args[1]).getResult()
                  : arith::MulFOp::create(b, nloc, x, args[1]).getResult();
          Value bits = buildTruncToElementBits(b, nloc, scaled, elementType);
          linalg::YieldOp::create(
              b, nloc,
              arith::BitcastOp::create(b, nloc, elementType, bits).getResult());
        });

    rewriter.replaceOp(op, {dataOp.getResult(0), scalesOp.getResult(0)});
    return success();
  }
};

struct DequantizeOpLowering : OpConversionPattern<DequantizeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(DequantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    int64_t rank = resultType.getRank();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{resultType},
        ValueRange{adaptor.getData(), adaptor.getScales()},
        ValueRange{createEmpty(rewriter, loc, resultType.getShape(),
                               resultType.getElementType())},
        SmallVector<AffineMap>{identity,
                               getBlockMap(op.getContext(), op.getBlock()),
                               identity},
        parallelIterators(rank),
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          linalg::YieldOp::create(b, nloc,
                                  buildDequantized(b, nloc, args[0], args[1],
                                                   args[2].getType()));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// Swizzle and unswizzle are the same transpose of the padded `[R', C']` matrix
/// viewed as `[R'/128, 4, 32, C'/4, 4]`; it swaps dims 1 and 3 and is its own
/// inverse.
constexpr int64_t kTilePermutation[] = {0, 3, 2, 1, 4};
const SmallVector<ReassociationIndices> kTileReassociation = {{0, 1, 2},
                                                              {3, 4}};

Value transpose2D(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  Value init = createEmpty(b, loc, {type.getDimSize(1), type.getDimSize(0)},
                           type.getElementType());
  return linalg::TransposeOp::create(b, loc, source, init,
                                     ArrayRef<int64_t>{1, 0})
      .getResult()[0];
}

Value transposeTiles(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  SmallVector<int64_t> shape = llvm::map_to_vector(
      kTilePermutation, [&](int64_t dim) { return type.getDimSize(dim); });
  Value init = createEmpty(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, source, init, kTilePermutation)
      .getResult()[0];
}

struct SwizzleOpLowering : OpConversionPattern<SwizzleOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SwizzleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value scales = adaptor.getInput();
    if (op.getUnscaledDim() == 1)
      scales = transpose2D(rewriter, loc, scales);
    ArrayRef<int64_t> tiles = op.getResult().getType().getShape();
    Value padded = padHigh(rewriter, loc, scales,
                           {tiles[0] * kSwizzleTileRows,
                            tiles[1] * kSwizzleTileCols});
    Type elementType = op.getResult().getType().getElementType();
    Value grouped = tensor::ExpandShapeOp::create(
        rewriter, loc,
        RankedTensorType::get({tiles[0], 4, 32, tiles[1], 4}, elementType),
        padded, kTileReassociation);
    rewriter.replaceOp(op, transposeTiles(rewriter, loc, grouped));
    return success();
  }
};

struct UnswizzleOpLowering : OpConversionPattern<UnswizzleOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UnswizzleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    ArrayRef<int64_t> tiles = op.getInput().getType().getShape();
    Value grouped = transposeTiles(rewriter, loc, adaptor.getInput());
    Value padded = tensor::CollapseShapeOp::create(
        rewriter, loc,
        RankedTensorType::get(
            {tiles[0] * kSwizzleTileRows, tiles[1] * kSwizzleTileCols},
            resultType.getElementType()),
        grouped, kTileReassociation);
    int64_t unscaled = op.getUnscaledDim();
    SmallVector<int64_t> rowMajor = {resultType.getDimSize(unscaled),
                                     resultType.getDimSize(1 - unscaled)};
    Value scales = tensor::ExtractSliceOp::create(
        rewriter, loc,
        RankedTensorType::get(rowMajor, resultType.getElementType()), padded,
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0), rewriter.getIndexAttr(0)},
        getAsIndexOpFoldResult(op.getContext(), rowMajor),
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1), rewriter.getIndexAttr(1)});
    if (unscaled == 1)
      scales = transpose2D(rewriter, loc, scales);
    rewriter.replaceOp(op, scales);
    return success();
  }
};

struct ScaledMatmulOpLowering : OpConversionPattern<ScaledMatmulOp> {
  using OpConversionPattern::OpConversionPattern;

  /// Dequantizes one `[rows, K]` operand to f32, unswizzling its scales first.
  static Value dequantizeOperand(OpBuilder &b, Location loc, Value data,
                                 Value scales, ArrayRef<int64_t> block) {
    auto dataType = cast<RankedTensorType>(data.getType());
    auto scalesType = cast<RankedTensorType>(scales.getType());
    if (scalesType.getRank() == 5)
      scales = UnswizzleOp::create(
          b, loc,
          RankedTensorType::get(getScalesShape(dataType.getShape(), block),
                                scalesType.getElementType()),
          scales, b.getI64IntegerAttr(0));
    return DequantizeOp::create(
        b, loc, RankedTensorType::get(dataType.getShape(), b.getF32Type()),
        data, scales, block);
  }

  LogicalResult
  matchAndRewrite(ScaledMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    RankedTensorType resultType = op.getResult().getType();
    Value lhs = dequantizeOperand(rewriter, loc, adaptor.getLhs(),
                                  adaptor.getLhsScales(), op.getLhsBlock());
    Value rhs = dequantizeOperand(rewriter, loc, adaptor.getRhs(),
                                  adaptor.getRhsScales(), op.getRhsBlock());

    AffineExpr m, n, k;
    bindDims(ctx, m, n, k);
    SmallVector<AffineMap> maps = AffineMap::inferFromExprList(
        ArrayRef<ArrayRef<AffineExpr>>{{m, k}, {n, k}, {m, n}}, ctx);
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getF32FloatAttr(0.0f));
    Value init =
        linalg::FillOp::create(rewriter, loc, zero,
                               createEmpty(rewriter, loc, resultType.getShape(),
                                           rewriter.getF32Type()))
            .getResult(0);
    Value product =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{init.getType()}, ValueRange{lhs, rhs},
            ValueRange{init}, maps,
            {utils::IteratorType::parallel, utils::IteratorType::parallel,
             utils::IteratorType::reduction},
            [](OpBuilder &b, Location nloc, ValueRange args) {
              Value mul = arith::MulFOp::create(b, nloc, args[0], args[1]);
              Value sum = arith::AddFOp::create(b, nloc, args[2], mul);
              linalg::YieldOp::create(b, nloc, sum);
            })
            .getResult(0);

    if (!resultType.getElementType().isF32()) {
      AffineMap identity = rewriter.getMultiDimIdentityMap(2);
      product =
          linalg::GenericOp::create(
              rewriter, loc, TypeRange{resultType}, ValueRange{product},
              ValueRange{createEmpty(rewriter, loc, resultType.getShape(),
                                     resultType.getElementType())},
              SmallVector<AffineMap>(2, identity), parallelIterators(2),
              [&](OpBuilder &b, Location nloc, ValueRange args) {
                linalg::YieldOp::create(
                    b, nloc,
                    arith::TruncFOp::create(b, nloc, args[1].getType(), args[0])
                        .getResult());
              })
              .getResult(0);
    }
    rewriter.replaceOp(op, product);
    return success();
  }
};

struct ConvertMXToLinalgPass
    : mx::impl::ConvertMXToLinalgBase<ConvertMXToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<MXDialect>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, tensor::TensorDialect>();
    RewritePatternSet patterns(ctx);
    populateMXToLinalgConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mx::populateMXToLinalgConversionPatterns(RewritePatternSet &patterns) {
  patterns.add<QuantizeOpLowering, DequantizeOpLowering, SwizzleOpLowering,
               UnswizzleOpLowering, ScaledMatmulOpLowering>(
      patterns.getContext());
}
