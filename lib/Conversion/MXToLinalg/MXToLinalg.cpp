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
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

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

/// What a max reduction over blocks reads from each element.
enum class BlockMax {
  /// max |x|, NaN when any element is NaN (the amax of the spec).
  magnitude,
  /// max |x| over the finite elements only (NVFP4's tensor amax).
  finiteMagnitude,
  /// max x, NaN ignored, from 0 (the amax history, as Transformer Engine).
  valueIgnoringNaN,
};

/// The f32 max of every block of `input`: `[ceil(s0/b0), ...]`.
Value buildBlockMax(OpBuilder &b, Location loc, Value input,
                    ArrayRef<int64_t> block, BlockMax kind) {
  auto type = cast<RankedTensorType>(input.getType());
  // A block longer than its dimension is one partial block: pad to the
  // dimension, not to the block.
  SmallVector<int64_t> extents = llvm::map_to_vector(
      llvm::zip_equal(block, type.getShape()),
      [](auto pair) { return std::min(std::get<0>(pair), std::get<1>(pair)); });
  SmallVector<int64_t> scalesShape = getScalesShape(type.getShape(), extents);
  SmallVector<int64_t> paddedShape, blockedShape, blockDims;
  SmallVector<ReassociationIndices> reassociation;
  for (auto [index, count, size] : llvm::enumerate(scalesShape, extents)) {
    paddedShape.push_back(count * size);
    blockedShape.append({count, size});
    blockDims.push_back(2 * index + 1);
    reassociation.push_back(
        {static_cast<int64_t>(2 * index), static_cast<int64_t>(2 * index + 1)});
  }
  // Zero padding never raises any of these maxima, which all start from 0.
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
      [kind](OpBuilder &nb, Location nloc, ValueRange args) {
        Value value = extendToF32(nb, nloc, args[0]);
        if (kind == BlockMax::valueIgnoringNaN) {
          linalg::YieldOp::create(
              nb, nloc,
              arith::MaxNumFOp::create(nb, nloc, value, args[1]).getResult());
          return;
        }
        value = math::AbsFOp::create(nb, nloc, value);
        if (kind == BlockMax::finiteMagnitude) {
          Value infinity =
              arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(INFINITY));
          Value finite = arith::CmpFOp::create(
              nb, nloc, arith::CmpFPredicate::OLT, value, infinity);
          value = arith::SelectOp::create(
              nb, nloc, finite, value,
              arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(0.0f)));
        }
        // maximumf propagates NaN, which marks the whole block NaN.
        linalg::YieldOp::create(
            nb, nloc,
            arith::MaximumFOp::create(nb, nloc, value, args[1]).getResult());
      });
  return reduce.getResult(0);
}

/// The f32 max |x| of every block of `input`.
Value buildBlockAmax(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> block) {
  return buildBlockMax(b, loc, input, block, BlockMax::magnitude);
}

/// The max of a whole tensor, as an f32 scalar.
Value buildTensorMax(OpBuilder &b, Location loc, Value input, BlockMax kind) {
  auto type = cast<RankedTensorType>(input.getType());
  Value max = buildBlockMax(b, loc, input, type.getShape(), kind);
  SmallVector<Value> zeros(
      type.getRank(), arith::ConstantIndexOp::create(b, loc, 0).getResult());
  return tensor::ExtractOp::create(b, loc, max, zeros);
}

/// Swaps the last two dimensions of `source` (batch dimensions stay).
Value transposeLastTwo(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(permutation[rank - 2], permutation[rank - 1]);
  return linalg::TransposeOp::create(
             b, loc, source,
             createEmpty(b, loc, applyPermutation(type.getShape(), permutation),
                         type.getElementType()),
             permutation)
      .getResult()[0];
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
    // A transposed quantize is the quantize of the transposed input.
    Value input = op.getTransposed()
                      ? transposeLastTwo(rewriter, loc, adaptor.getInput())
                      : adaptor.getInput();

    bool nvfp4 = isNVFP4Scale(scaleType);
    // A given amax is the whole tensor's: the one block's (per-tensor) or
    // the finite one NVFP4's tensor scale derives from.
    Value givenAmax = adaptor.getAmax()
                          ? tensor::ExtractOp::create(
                                rewriter, loc, adaptor.getAmax(), ValueRange{})
                                .getResult()
                          : Value();
    Value amax = givenAmax && !nvfp4
                     ? tensor::FromElementsOp::create(
                           rewriter, loc,
                           RankedTensorType::get(scalesType.getShape(),
                                                 rewriter.getF32Type()),
                           givenAmax)
                           .getResult()
                     : buildBlockAmax(rewriter, loc, input, block);
    // NVFP4's tensor scale, given or from the amax of the finite elements.
    Value tensorScale;
    if (nvfp4 && adaptor.getTensorScale())
      tensorScale = tensor::ExtractOp::create(
          rewriter, loc, adaptor.getTensorScale(), ValueRange{});
    else if (nvfp4)
      tensorScale = buildNVFP4TensorScale(
          rewriter, loc,
          givenAmax ? givenAmax
                    : buildTensorMax(rewriter, loc, input,
                                     BlockMax::finiteMagnitude));

    // Per block: the stored scale and the f32 factor applied to elements (the
    // inverse power of two, the exact scale itself for `exact`, NVFP4's
    // (1 / t) / s).
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    auto scalesOp = linalg::GenericOp::create(
        rewriter, loc, TypeRange{scalesType, amax.getType()}, ValueRange{amax},
        ValueRange{createEmpty(rewriter, loc, scalesType.getShape(), scaleType),
                   createEmpty(rewriter, loc, scalesType.getShape(),
                               rewriter.getF32Type())},
        SmallVector<AffineMap>(3, identity), parallelIterators(rank),
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          if (tensorScale) {
            Value scale = buildNVFP4BlockScale(b, nloc, args[0], tensorScale);
            Value factor = buildNVFP4Factor(b, nloc, tensorScale, scale);
            linalg::YieldOp::create(b, nloc, ValueRange{scale, factor});
            return;
          }
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
        ValueRange{input, scalesOp.getResult(1)},
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

    SmallVector<Value> results = {dataOp.getResult(0), scalesOp.getResult(0)};
    if (op.getComputedTensorScale())
      results.push_back(tensor::FromElementsOp::create(
          rewriter, loc, op.getComputedTensorScale().getType(), tensorScale));
    rewriter.replaceOp(op, results);
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
    Value tensorScale;
    if (adaptor.getTensorScale())
      tensorScale = tensor::ExtractOp::create(
          rewriter, loc, adaptor.getTensorScale(), ValueRange{});
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{resultType},
        ValueRange{adaptor.getData(), adaptor.getScales()},
        ValueRange{createEmpty(rewriter, loc, resultType.getShape(),
                               resultType.getElementType())},
        SmallVector<AffineMap>{
            identity, getBlockMap(op.getContext(), op.getBlock()), identity},
        parallelIterators(rank),
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          linalg::YieldOp::create(b, nloc,
                                  buildDequantized(b, nloc, args[0], args[1],
                                                   tensorScale,
                                                   args[2].getType()));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// Tiling a padded `[..., R', C']` matrix is one transpose of its view as
/// `[..., R'/128, 4, 32, C'/4, 4]` that swaps the 4 and the C'/4; it is its
/// own inverse, so swizzle and unswizzle share it.
Value transposeTiles(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  int64_t batch = type.getRank() - 5;
  SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  std::swap(permutation[batch + 1], permutation[batch + 3]);
  Value init =
      createEmpty(b, loc, applyPermutation(type.getShape(), permutation),
                  type.getElementType());
  return linalg::TransposeOp::create(b, loc, source, init, permutation)
      .getResult()[0];
}

/// Reassociation between `[..., R', C']` (`batch` leading dimensions) and its
/// grouped view: `[..., R'/128, 4, 32, C'/4, 4]` for tiles, `[..., C, R'/4, 4]`
/// (from `[..., C, R']`) for blockwise.
SmallVector<ReassociationIndices>
getGroupingReassociation(int64_t batch, SwizzleLayout layout) {
  SmallVector<ReassociationIndices> reassociation;
  for (int64_t dim = 0; dim < batch; ++dim)
    reassociation.push_back({dim});
  if (layout == SwizzleLayout::tiles)
    reassociation.append(
        {{batch, batch + 1, batch + 2}, {batch + 3, batch + 4}});
  else
    reassociation.append({{batch}, {batch + 1, batch + 2}});
  return reassociation;
}

/// The compact scales as the matrix the layout pads: `[..., R, C]` for tiles,
/// `[..., C, R]` for blockwise (R = the unscaled dimension), or back.
Value orientForLayout(OpBuilder &b, Location loc, Value scales,
                      int64_t unscaledDim, SwizzleLayout layout) {
  int64_t rank = cast<RankedTensorType>(scales.getType()).getRank();
  bool unscaledLast = unscaledDim == rank - 1;
  bool wantUnscaledLast = layout == SwizzleLayout::blockwise;
  return unscaledLast == wantUnscaledLast ? scales
                                          : transposeLastTwo(b, loc, scales);
}

/// The padded, oriented matrix shape of a swizzled `type`: `[..., R', C']`
/// (tiles) or `[..., C, R']` (blockwise).
SmallVector<int64_t> getPaddedShape(RankedTensorType swizzled,
                                    SwizzleLayout layout) {
  ArrayRef<int64_t> shape = swizzled.getShape();
  if (layout == SwizzleLayout::tiles) {
    SmallVector<int64_t> result(shape.drop_back(5));
    int64_t batch = result.size();
    result.append({shape[batch] * SwizzleTiles::kRows,
                   shape[batch + 1] * SwizzleTiles::kCols});
    return result;
  }
  SmallVector<int64_t> result(shape.drop_back(2));
  result.push_back(shape.back() * shape[shape.size() - 2]);
  return result;
}

struct SwizzleOpLowering : OpConversionPattern<SwizzleOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SwizzleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SwizzleLayout layout = op.getLayout();
    RankedTensorType resultType = op.getResult().getType();
    Value oriented = orientForLayout(rewriter, loc, adaptor.getInput(),
                                     op.getUnscaledDim(), layout);
    Value padded =
        padHigh(rewriter, loc, oriented, getPaddedShape(resultType, layout));
    int64_t batch = op.getInput().getType().getRank() - 2;
    if (layout == SwizzleLayout::blockwise) {
      rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
          op, resultType, padded, getGroupingReassociation(batch, layout));
      return success();
    }
    SmallVector<int64_t> grouped(resultType.getShape().drop_back(5));
    ArrayRef<int64_t> tiles = resultType.getShape().drop_front(batch);
    grouped.append({tiles[0], SwizzleTiles::kRowGroups,
                    SwizzleTiles::kRowStride, tiles[1], SwizzleTiles::kCols});
    Value groupedTiles = tensor::ExpandShapeOp::create(
        rewriter, loc,
        RankedTensorType::get(grouped, resultType.getElementType()), padded,
        getGroupingReassociation(batch, layout));
    rewriter.replaceOp(op, transposeTiles(rewriter, loc, groupedTiles));
    return success();
  }
};

struct UnswizzleOpLowering : OpConversionPattern<UnswizzleOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UnswizzleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SwizzleLayout layout = op.getLayout();
    RankedTensorType resultType = op.getResult().getType();
    RankedTensorType swizzledType = op.getInput().getType();
    Type elementType = resultType.getElementType();
    int64_t rank = resultType.getRank();
    Value grouped = adaptor.getInput();
    if (layout == SwizzleLayout::tiles)
      grouped = transposeTiles(rewriter, loc, grouped);
    Value padded = tensor::CollapseShapeOp::create(
        rewriter, loc,
        RankedTensorType::get(getPaddedShape(swizzledType, layout),
                              elementType),
        grouped, getGroupingReassociation(rank - 2, layout));
    // The oriented compact shape: the result's, with the last two swapped
    // where orientForLayout transposed.
    SmallVector<int64_t> oriented(resultType.getShape());
    bool unscaledLast = int64_t(op.getUnscaledDim()) == rank - 1;
    if (unscaledLast != (layout == SwizzleLayout::blockwise))
      std::swap(oriented[rank - 2], oriented[rank - 1]);
    SmallVector<OpFoldResult> zeros(rank, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> ones(rank, rewriter.getIndexAttr(1));
    Value scales = tensor::ExtractSliceOp::create(
        rewriter, loc, RankedTensorType::get(oriented, elementType), padded,
        zeros, getAsIndexOpFoldResult(op.getContext(), oriented), ones);
    rewriter.replaceOp(op, orientForLayout(rewriter, loc, scales,
                                           op.getUnscaledDim(), layout));
    return success();
  }
};

struct ScaledMatmulOpLowering : OpConversionPattern<ScaledMatmulOp> {
  using OpConversionPattern::OpConversionPattern;

  /// Dequantizes one operand to f32 in its stored layout, bringing swizzled
  /// scales (tiles or blockwise GEMM-ready, told apart by rank) back to
  /// their compact form first.
  static Value dequantizeOperand(OpBuilder &b, Location loc, Value data,
                                 Value scales, Value tensorScale,
                                 ArrayRef<int64_t> block,
                                 const MatmulOperandShape &view) {
    auto dataType = cast<RankedTensorType>(data.getType());
    auto scalesType = cast<RankedTensorType>(scales.getType());
    int64_t rank = dataType.getRank();
    if (scalesType.getRank() != rank) {
      SwizzleLayout layout = scalesType.getRank() == rank + 3
                                 ? SwizzleLayout::tiles
                                 : SwizzleLayout::blockwise;
      scales = UnswizzleOp::create(
          b, loc,
          RankedTensorType::get(getScalesShape(dataType.getShape(), block),
                                scalesType.getElementType()),
          scales, b.getI64IntegerAttr(view.rowsDim),
          SwizzleLayoutAttr::get(b.getContext(), layout));
    }
    return DequantizeOp::create(
        b, loc, RankedTensorType::get(dataType.getShape(), b.getF32Type()),
        data, scales, tensorScale, block);
  }

  /// The indexing map of an operand over the iteration space
  /// `(batch..., m, n, k)`: its stored dimensions, rows being `rows`.
  static AffineMap getOperandMap(MLIRContext *ctx, int64_t batch,
                                 AffineExpr rows, AffineExpr k,
                                 OperandLayout layout) {
    SmallVector<AffineExpr> exprs;
    for (int64_t dim = 0; dim < batch; ++dim)
      exprs.push_back(getAffineDimExpr(dim, ctx));
    if (layout == OperandLayout::k_contiguous)
      exprs.append({rows, k});
    else
      exprs.append({k, rows});
    return AffineMap::get(batch + 3, 0, exprs, ctx);
  }

  LogicalResult
  matchAndRewrite(ScaledMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    RankedTensorType resultType = op.getResult().getType();
    int64_t rank = resultType.getRank(), batch = rank - 2;
    // Only NVFP4 operands take their tensor scale; an MX operand's is 1.
    auto tensorScale = [&](Value scales, unsigned index) -> Value {
      if (!isNVFP4Scale(getElementTypeOrSelf(scales.getType())))
        return {};
      return adaptor.getTensorScales()[index];
    };
    Value lhs = dequantizeOperand(rewriter, loc, adaptor.getLhs(),
                                  adaptor.getLhsScales(),
                                  tensorScale(adaptor.getLhsScales(), 0),
                                  op.getLhsBlock(), op.getLhsShape());
    Value rhs = dequantizeOperand(rewriter, loc, adaptor.getRhs(),
                                  adaptor.getRhsScales(),
                                  tensorScale(adaptor.getRhsScales(), 1),
                                  op.getRhsBlock(), op.getRhsShape());

    AffineExpr m = getAffineDimExpr(batch, ctx),
               n = getAffineDimExpr(batch + 1, ctx),
               k = getAffineDimExpr(batch + 2, ctx);
    SmallVector<AffineMap> maps = {
        getOperandMap(ctx, batch, m, k, op.getLhsLayout()),
        getOperandMap(ctx, batch, n, k, op.getRhsLayout()),
        AffineMap::getMultiDimIdentityMap(rank + 1, ctx).getMajorSubMap(rank)};
    SmallVector<utils::IteratorType> iterators = parallelIterators(rank);
    iterators.push_back(utils::IteratorType::reduction);
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
            ValueRange{init}, maps, iterators,
            [](OpBuilder &b, Location nloc, ValueRange args) {
              Value mul = arith::MulFOp::create(b, nloc, args[0], args[1]);
              Value sum = arith::AddFOp::create(b, nloc, args[2], mul);
              linalg::YieldOp::create(b, nloc, sum);
            })
            .getResult(0);

    // The epilogue, in f32: + bias[n], + D[..., m, n], one rounding.
    if (!resultType.getElementType().isF32() || adaptor.getBias() ||
        adaptor.getAccumulator()) {
      AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
      SmallVector<Value> inputs = {product};
      SmallVector<AffineMap> epilogueMaps = {identity};
      if (Value bias = adaptor.getBias()) {
        inputs.push_back(bias);
        epilogueMaps.push_back(AffineMap::get(rank, 0, n, ctx));
      }
      if (Value accumulator = adaptor.getAccumulator()) {
        inputs.push_back(accumulator);
        epilogueMaps.push_back(identity);
      }
      epilogueMaps.push_back(identity);
      product =
          linalg::GenericOp::create(
              rewriter, loc, TypeRange{resultType}, inputs,
              ValueRange{createEmpty(rewriter, loc, resultType.getShape(),
                                     resultType.getElementType())},
              epilogueMaps, parallelIterators(rank),
              [&](OpBuilder &b, Location nloc, ValueRange args) {
                Value sum = args[0];
                for (Value term : args.drop_front().drop_back()) {
                  if (!term.getType().isF32())
                    term = arith::ExtFOp::create(b, nloc, b.getF32Type(), term);
                  sum = arith::AddFOp::create(b, nloc, sum, term);
                }
                Type out = args.back().getType();
                if (!out.isF32())
                  sum = arith::TruncFOp::create(b, nloc, out, sum);
                linalg::YieldOp::create(b, nloc, sum);
              })
              .getResult(0);
    }
    rewriter.replaceOp(op, product);
    return success();
  }
};

struct AmaxOpLowering : OpConversionPattern<AmaxOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value amax = buildTensorMax(rewriter, op.getLoc(), adaptor.getInput(),
                                op.getFinite() ? BlockMax::finiteMagnitude
                                               : BlockMax::magnitude);
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(op, op.getType(), amax);
    return success();
  }
};

/// A linalg reduction over the rows in f32, from -0 (the identity of f32
/// addition, so that a column of -0 sums to -0), in row order.
struct ColumnSumOpLowering : OpConversionPattern<ColumnSumOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ColumnSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value negativeZero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(-0.0f));
    Value init = linalg::FillOp::create(
                     rewriter, loc, negativeZero,
                     createEmpty(rewriter, loc, op.getType().getShape(),
                                 rewriter.getF32Type()))
                     .getResult(0);
    auto reduce = linalg::ReduceOp::create(
        rewriter, loc, ValueRange{adaptor.getInput()}, ValueRange{init},
        ArrayRef<int64_t>{0}, [](OpBuilder &b, Location l, ValueRange args) {
          Value sum =
              arith::AddFOp::create(b, l, extendToF32(b, l, args[0]), args[1]);
          linalg::YieldOp::create(b, l, sum);
        });
    rewriter.replaceOp(op, reduce.getResult(0));
    return success();
  }
};

struct QuantizeDelayedOpLowering : OpConversionPattern<QuantizeDelayedOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(QuantizeDelayedOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType dataType = op.getData().getType();
    Type elementType = dataType.getElementType();
    int64_t rank = dataType.getRank();
    auto index = [&](int64_t value) {
      return arith::ConstantIndexOp::create(rewriter, loc, value).getResult();
    };
    Value scale = tensor::ExtractOp::create(rewriter, loc, adaptor.getScales(),
                                            ValueRange{index(op.getIndex())});
    Value input = op.getTransposed()
                      ? transposeLastTwo(rewriter, loc, adaptor.getInput())
                      : adaptor.getInput();

    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    Value data =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{dataType}, ValueRange{input},
            ValueRange{
                createEmpty(rewriter, loc, dataType.getShape(), elementType)},
            SmallVector<AffineMap>(2, identity), parallelIterators(rank),
            [&](OpBuilder &b, Location nloc, ValueRange args) {
              Value scaled = arith::MulFOp::create(
                  b, nloc, extendToF32(b, nloc, args[0]), scale);
              Value bits =
                  buildTruncToElementBits(b, nloc, scaled, elementType);
              linalg::YieldOp::create(
                  b, nloc,
                  arith::BitcastOp::create(b, nloc, elementType, bits)
                      .getResult());
            })
            .getResult(0);

    Value scaleInv =
        tensor::SplatOp::create(rewriter, loc, op.getScaleInv().getType(),
                                buildDelayedScaleInverse(rewriter, loc, scale));

    Value amax =
        buildTensorMax(rewriter, loc, adaptor.getInput(), BlockMax::magnitude);
    Value history =
        tensor::InsertOp::create(rewriter, loc, amax, adaptor.getHistory(),
                                 ValueRange{index(0), index(op.getIndex())});
    rewriter.replaceOp(op, {data, scaleInv, history});
    return success();
  }
};

struct UpdateAmaxHistoryOpLowering : OpConversionPattern<UpdateAmaxHistoryOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UpdateAmaxHistoryOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType historyType = op.getHistory().getType();
    RankedTensorType scalesType = op.getScales().getType();
    int64_t rows = historyType.getDimSize(0), count = scalesType.getDimSize(0);
    Value history = adaptor.getHistory();

    // The amax each scale is computed from: a column max (maximumf keeps a
    // NaN, which leaves the scale unchanged) or row 0.
    Value amax = op.getAlgorithm() == AmaxAlgorithm::most_recent
                     ? extractRows(rewriter, loc, history, 0, 1, scalesType)
                     : tensor::CollapseShapeOp::create(
                           rewriter, loc, scalesType,
                           buildBlockMax(rewriter, loc, history, {rows, 1},
                                         BlockMax::valueIgnoringNaN),
                           ArrayRef<ReassociationIndices>{{0, 1}})
                           .getResult();

    Type elementType = op.getElement();
    auto margin = static_cast<int64_t>(op.getMargin());
    AffineMap identity = rewriter.getMultiDimIdentityMap(1);
    Value scales =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{scalesType},
            ValueRange{amax, adaptor.getScales()},
            ValueRange{
                createEmpty(rewriter, loc, {count}, rewriter.getF32Type())},
            SmallVector<AffineMap>(3, identity), parallelIterators(1),
            [&](OpBuilder &b, Location nloc, ValueRange args) {
              linalg::YieldOp::create(b, nloc,
                                      buildDelayedScale(b, nloc, args[0],
                                                        args[1], elementType,
                                                        margin));
            })
            .getResult(0);

    rewriter.replaceOp(op, {rotateHistory(rewriter, loc, history), scales});
    return success();
  }

  /// Rows `[first, first + size)` of `history`, as `type`.
  static Value extractRows(OpBuilder &b, Location loc, Value history,
                           int64_t first, int64_t size, RankedTensorType type) {
    int64_t count = cast<RankedTensorType>(history.getType()).getDimSize(1);
    return tensor::ExtractSliceOp::create(
        b, loc, type, history,
        ArrayRef<OpFoldResult>{b.getIndexAttr(first), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(size), b.getIndexAttr(count)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  }

  /// `[c, a_1, ..., a_{L-1}]` -> `[0, a_2, ..., a_{L-1}, c]`: a zero history
  /// with rows 2.. moved up by one and the current row 0 placed last.
  static Value rotateHistory(OpBuilder &b, Location loc, Value history) {
    auto type = cast<RankedTensorType>(history.getType());
    int64_t rows = type.getDimSize(0), count = type.getDimSize(1);
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    Value result =
        linalg::FillOp::create(
            b, loc, zero, createEmpty(b, loc, type.getShape(), b.getF32Type()))
            .getResult(0);
    if (rows == 1)
      return result;
    auto place = [&](Value source, int64_t sourceRow, int64_t size,
                     int64_t destRow) {
      auto sliceType = RankedTensorType::get({size, count}, b.getF32Type());
      Value slice = extractRows(b, loc, source, sourceRow, size, sliceType);
      result = tensor::InsertSliceOp::create(
          b, loc, slice, result,
          ArrayRef<OpFoldResult>{b.getIndexAttr(destRow), b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(size), b.getIndexAttr(count)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    };
    if (rows > 2)
      place(history, 2, rows - 2, 1);
    place(history, 0, 1, rows - 1);
    return result;
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
               UnswizzleOpLowering, ScaledMatmulOpLowering, AmaxOpLowering,
               ColumnSumOpLowering, QuantizeDelayedOpLowering,
               UpdateAmaxHistoryOpLowering>(
      patterns.getContext());
}
