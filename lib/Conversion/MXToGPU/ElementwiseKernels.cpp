//===- ElementwiseKernels.cpp - Dequantize and (un)swizzle kernels --------===//
//
// The mx ops whose GPU kernels need no cooperation between threads. They
// are bound by memory, so each has a vector kernel that moves 16 elements
// per thread, and a one-thread-per-element kernel for the shapes the vector
// one cannot take.
//
// Dequantize: a thread converts 16 consecutive FP8 elements of a row (one
// 16-byte load), two per hardware `cvt.rn.f16x2.{e4m3,e5m2}x2` (exact: every
// E4M3 and E5M2 value is an f16), multiplies them in f32 by their block's
// scale (one load when the block spans the 16, a vector of 16 scales for
// [32, 1] blocks), rounds once to the output type and stores the 16 results
// at once. That is the CPU lowering's arithmetic, so the two agree bit for
// bit, NaN canonicalization included; the scalar kernel decodes with the
// CPU lowering's integer builders instead, for rows that are not whole
// 16-element chunks and blocks narrower than 16 but wider than 1.
//
// Swizzle: in the tiled layout a 128x4 tile is 32 rows of 16 elements, row
// i holding compact rows i, i + 32, i + 64, i + 96 of the tile, 4 columns
// each. A thread builds one such row from four 4-element loads and writes it
// with one store, zeros in the padding rows; unswizzle does the reverse.
// Scales tiled along their second-to-last dimension with whole 4-column
// groups take that path; the rest (the blockwise layout, tiles along the
// last dimension, partial column groups) gather one element per thread,
// batch slice by batch slice.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

Value minIndex(OpBuilder &b, Location loc, Value x, int64_t bound) {
  return arith::MinUIOp::create(b, loc, x, cIndex(b, loc, bound));
}

/// Elements a thread of the vector kernels moves: one 16-byte load of FP8
/// data, and one 128x4 tile row of scales.
constexpr int64_t kVectorElements = kElementsPerLane;

/// Runs `body` in one thread for each of `count` items, with the item's index.
void buildThreadPerItem(
    OpBuilder &rewriter, Location loc, int64_t count,
    function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
  buildLaunch(rewriter, loc, count,
              [&](OpBuilder &launchBuilder, Location l, Value thread) {
                buildIf(launchBuilder, l,
                        cmpLT(launchBuilder, l, thread,
                              cIndex(launchBuilder, l, count)),
                        [&](OpBuilder &nb, Location nl) {
                          ImplicitLocOpBuilder b(nl, nb);
                          body(b, thread);
                        });
              });
}

/// Whether the vector dequantize covers `op` (FP8 data): rows of whole
/// 16-element chunks, each inside one block along the row (block width a
/// multiple of 16) or with a scale per element (width 1).
bool isVectorDequantize(DequantizeOp op) {
  int64_t cols = op.getData().getType().getShape().back();
  int64_t width = op.getBlock().back();
  return cols % kVectorElements == 0 &&
         (width == 1 || width % kVectorElements == 0);
}

/// The f32 values of an FP8 vector, two elements per hardware
/// `cvt.rn.f16x2.{e4m3,e5m2}x2`. Every E4M3 and E5M2 value is an f16, so
/// this is the exact decode of the CPU lowering (a NaN for a NaN).
Value buildDecodedF32(ImplicitLocOpBuilder &b, Value elements) {
  auto type = cast<VectorType>(elements.getType());
  Value bytes =
      arith::BitcastOp::create(b, type.clone(b.getI8Type()), elements);
  auto pairType = VectorType::get({2}, b.getF16Type());
  SmallVector<Value> halves;
  for (int64_t i = 0; i < type.getNumElements(); i += 2) {
    Value pair =
        vector::ShuffleOp::create(b, bytes, bytes, ArrayRef<int64_t>{i, i + 1});
    // The low byte (the lower address) becomes element 0.
    Value converted = NVVM::ConvertF8x2ToF16x2Op::create(
        b, pairType, pair, /*relu=*/false, type.getElementType());
    halves.push_back(vector::ExtractOp::create(b, converted, 0));
    halves.push_back(vector::ExtractOp::create(b, converted, 1));
  }
  Value f16 =
      vector::FromElementsOp::create(b, type.clone(b.getF16Type()), halves);
  return arith::ExtFOp::create(b, type.clone(b.getF32Type()), f16);
}

/// The f32 scale of each element of the chunk of kVectorElements elements at
/// data `indices` (along the last dimension): one scale for the whole chunk
/// when its block spans it, else (block width 1) a vector load of the row of
/// scales that lies over the chunk.
Value loadScaleFactors(ImplicitLocOpBuilder &b, Value scales,
                       ArrayRef<Value> indices, ArrayRef<int64_t> block) {
  SmallVector<Value> scaleIndices;
  for (auto [index, size] : llvm::zip_equal(indices, block))
    scaleIndices.push_back(
        size == 1
            ? index
            : arith::DivUIOp::create(b, index, cIndex(b, b.getLoc(), size))
                  .getResult());
  auto factorsType = VectorType::get({kVectorElements}, b.getF32Type());
  if (block.back() != 1) {
    Value scale = memref::LoadOp::create(b, scales, scaleIndices);
    return vector::BroadcastOp::create(b, factorsType,
                                       buildScaleToF32(b, b.getLoc(), scale));
  }
  Type scaleType = cast<MemRefType>(scales.getType()).getElementType();
  Value loaded =
      loadVector(b, b.getLoc(), VectorType::get({kVectorElements}, scaleType),
                 scales, scaleIndices);
  SmallVector<Value> factors;
  for (int64_t i = 0; i < kVectorElements; ++i)
    factors.push_back(buildScaleToF32(b, b.getLoc(),
                                      vector::ExtractOp::create(b, loaded, i)));
  return vector::FromElementsOp::create(b, factorsType, factors);
}

/// buildDequantized on vectors: one f32 multiply, one rounding to
/// `resultType`, and the contract's quiet NaN where the product is NaN (the
/// GPU's own NaN differs).
Value buildDequantizedVector(ImplicitLocOpBuilder &b, Value values,
                             Value factors, Type resultType) {
  Value product = arith::MulFOp::create(b, values, factors);
  auto type = cast<VectorType>(product.getType()).clone(resultType);
  Value isNaN =
      arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, product, product);
  if (!resultType.isF32())
    product = arith::TruncFOp::create(b, type, product);
  Value quietNaN = arith::ConstantOp::create(
      b, DenseElementsAttr::get(
             type, b.getFloatAttr(
                       resultType,
                       APFloat::getQNaN(
                           cast<FloatType>(resultType).getFloatSemantics()))));
  return arith::SelectOp::create(b, isNaN, quietNaN, product);
}

/// One thread per 16-element chunk of a row: a 16-byte load, the chunk's
/// scale factors, one store of the 16 results.
void buildVectorDequantize(OpBuilder &rewriter, Location loc, DequantizeOp op,
                           Value data, Value scales, Value result) {
  RankedTensorType resultType = op.getResult().getType();
  SmallVector<int64_t> chunks(resultType.getShape());
  chunks.back() /= kVectorElements;
  auto dataType = VectorType::get({kVectorElements},
                                  op.getData().getType().getElementType());
  buildThreadPerItem(
      rewriter, loc, computeProduct(chunks),
      [&](ImplicitLocOpBuilder &b, Value thread) {
        SmallVector<Value> indices = delinearize(b, b.getLoc(), thread, chunks);
        indices.back() = arith::MulIOp::create(
            b, indices.back(), cIndex(b, b.getLoc(), kVectorElements));
        Value values = buildDecodedF32(
            b, loadVector(b, b.getLoc(), dataType, data, indices));
        Value factors = loadScaleFactors(b, scales, indices, op.getBlock());
        storeVector(b, b.getLoc(),
                    buildDequantizedVector(b, values, factors,
                                           resultType.getElementType()),
                    result, indices);
      });
}

/// One thread per element, for the shapes the vector kernel cannot take:
/// the CPU lowering's integer decode and rounding (buildDequantized).
void buildScalarDequantize(OpBuilder &rewriter, Location loc, DequantizeOp op,
                           Value data, Value scales, Value result) {
  RankedTensorType resultType = op.getResult().getType();
  ArrayRef<int64_t> shape = resultType.getShape();
  buildThreadPerItem(
      rewriter, loc, resultType.getNumElements(),
      [&](ImplicitLocOpBuilder &b, Value thread) {
        SmallVector<Value> indices = delinearize(b, b.getLoc(), thread, shape);
        SmallVector<Value> blockIndices;
        for (auto [index, size] : llvm::zip_equal(indices, op.getBlock()))
          blockIndices.push_back(
              arith::DivUIOp::create(b, index, cIndex(b, b.getLoc(), size)));
        Value product = buildDequantized(
            b, b.getLoc(), memref::LoadOp::create(b, data, indices),
            memref::LoadOp::create(b, scales, blockIndices),
            /*tensorScale=*/Value(), resultType.getElementType());
        memref::StoreOp::create(b, product, result, indices);
      });
}

struct DequantizeToGPU : OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rewriter) const override {
    if (isa<Float4E2M1FNType>(op.getData().getType().getElementType()))
      return rewriter.notifyMatchFailure(op, "FP4 data (Fp4Kernels.cpp)");
    Location loc = op.getLoc();
    Value data = toBuffer(rewriter, loc, op.getData());
    Value scales = toBuffer(rewriter, loc, op.getScales());
    Value result = allocDevice(rewriter, loc, op.getResult().getType());
    if (isVectorDequantize(op))
      buildVectorDequantize(rewriter, loc, op, data, scales, result);
    else
      buildScalarDequantize(rewriter, loc, op, data, scales, result);
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

/// Whether the vector (un)swizzle covers compact scales of `compactType`
/// tiled along `unscaledDim` in `layout`: 128x4 tiles of the matrix's rows
/// (the unscaled dimension second-to-last) whose columns are whole groups of
/// 4, so that the 4 elements of a compact row in a tile row are 4
/// consecutive elements of that row.
bool isVectorSwizzle(RankedTensorType compactType, int64_t unscaledDim,
                     SwizzleLayout layout) {
  return layout == SwizzleLayout::tiles &&
         unscaledDim == compactType.getRank() - 2 &&
         compactType.getShape().back() % kSwizzleTileCols == 0;
}

/// A tile row (16 elements) holds compact rows i + kTileRowStride * k of its
/// tile, k < kGroupsPerTileRow, 4 columns each.
constexpr int64_t kTileRowStride = 32;
constexpr int64_t kGroupsPerTileRow = kSwizzleTileRows / kTileRowStride;

/// One thread per tile row of `tilesType` ([..., R/128, C/4, 32, 4, 4]):
/// `body` gets the tiled indices of the row's first element and that
/// element's compact (row, column). Consecutive threads take the same row of
/// consecutive tiles, so their compact accesses are consecutive and their
/// tiled ones 16 of each 512 bytes: faster both ways than consecutive rows of
/// one tile, whose compact accesses are 4 bytes of rows 32 apart (H200,
/// [8192, 256]: swizzle 3.5 -> 3.1 us, unswizzle 9.1 -> 2.0 us).
void buildThreadPerTileRow(
    OpBuilder &rewriter, Location loc, RankedTensorType tilesType,
    function_ref<void(ImplicitLocOpBuilder &, ArrayRef<Value>, Value, Value)>
        body) {
  SmallVector<int64_t> threads(tilesType.getShape().drop_back(2));
  int64_t rank = threads.size();
  std::swap(threads[rank - 1], threads[rank - 2]);
  buildThreadPerItem(rewriter, loc, computeProduct(threads),
                     [&](ImplicitLocOpBuilder &b, Value thread) {
                       SmallVector<Value> indices =
                           delinearize(b, b.getLoc(), thread, threads);
                       std::swap(indices[rank - 1], indices[rank - 2]);
                       Value zero = cIndex(b, b.getLoc(), 0);
                       indices.append({zero, zero});
                       auto [r, c] = getCompactPosition(b, b.getLoc(), indices,
                                                        SwizzleLayout::tiles);
                       body(b, indices, r, c);
                     });
}

/// The concatenation of equally long 1-D vectors, by a tree of shuffles
/// (which the NVVM pipeline lowers directly, unlike strided slices).
Value concatenate(ImplicitLocOpBuilder &b, SmallVector<Value> parts) {
  while (parts.size() > 1) {
    SmallVector<Value> joined;
    for (size_t i = 0; i < parts.size(); i += 2) {
      int64_t length = cast<VectorType>(parts[i].getType()).getNumElements();
      joined.push_back(vector::ShuffleOp::create(
          b, parts[i], parts[i + 1],
          llvm::to_vector(llvm::seq<int64_t>(0, 2 * length))));
    }
    parts = std::move(joined);
  }
  return parts.front();
}

/// Elements [start, start + length) of a 1-D vector.
Value extractSlice(ImplicitLocOpBuilder &b, Value vector, int64_t start,
                   int64_t length) {
  return vector::ShuffleOp::create(
      b, vector, vector,
      llvm::to_vector(llvm::seq<int64_t>(start, start + length)));
}

/// The types of a tile row and of its groups of 4 elements of one row.
std::pair<VectorType, VectorType> getTileRowTypes(Type elementType) {
  return {VectorType::get({kGroupsPerTileRow * kSwizzleTileCols}, elementType),
          VectorType::get({kSwizzleTileCols}, elementType)};
}

/// One thread per tile row (isVectorSwizzle): four loads of 4 compact
/// elements, zeros for the rows past the matrix, one store.
void buildVectorSwizzle(OpBuilder &rewriter, Location loc, Value input,
                        Value result, RankedTensorType inputType,
                        RankedTensorType tilesType) {
  int64_t batch = inputType.getRank() - 2;
  int64_t rows = inputType.getDimSize(batch);
  VectorType groupType = getTileRowTypes(inputType.getElementType()).second;
  buildThreadPerTileRow(
      rewriter, loc, tilesType,
      [&](ImplicitLocOpBuilder &b, ArrayRef<Value> tiled, Value r, Value c) {
        Value zeros = vector::BroadcastOp::create(
            b, groupType,
            buildZeroBits(b, b.getLoc(), groupType.getElementType()));
        SmallVector<Value> groups;
        for (int64_t k = 0; k < kGroupsPerTileRow; ++k) {
          Value row = arith::AddIOp::create(
              b, r, cIndex(b, b.getLoc(), k * kTileRowStride));
          // Padding rows read the last row (always there) and store zeros.
          SmallVector<Value> indices(tiled.take_front(batch));
          indices.append({minIndex(b, b.getLoc(), row, rows - 1), c});
          Value group = loadVector(b, b.getLoc(), groupType, input, indices);
          group = arith::SelectOp::create(
              b, cmpLT(b, b.getLoc(), row, cIndex(b, b.getLoc(), rows)), group,
              zeros);
          groups.push_back(group);
        }
        storeVector(b, b.getLoc(), concatenate(b, groups), result, tiled);
      });
}

/// One thread per swizzled element: it gathers its compact scale, or writes
/// zero bits into the padding.
void buildScalarSwizzle(OpBuilder &rewriter, Location loc, SwizzleOp op,
                        Value input, Value result) {
  RankedTensorType inputType = op.getInput().getType();
  RankedTensorType resultType = op.getResult().getType();
  int64_t unscaled = op.getUnscaledDim(), batch = inputType.getRank() - 2;
  int64_t rows = inputType.getDimSize(unscaled);
  int64_t cols = inputType.getDimSize(2 * batch + 1 - unscaled);
  buildThreadPerItem(
      rewriter, loc, resultType.getNumElements(),
      [&](ImplicitLocOpBuilder &b, Value thread) {
        Location l = b.getLoc();
        SmallVector<Value> indices =
            delinearize(b, l, thread, resultType.getShape());
        auto [r, c] = getCompactPosition(b, l, indices, op.getLayout());
        Value valid = andI(b, l, cmpLT(b, l, r, cIndex(b, l, rows)),
                           cmpLT(b, l, c, cIndex(b, l, cols)));
        Value scale = memref::LoadOp::create(
            b, input,
            getCompactIndices(ArrayRef<Value>(indices).take_front(batch),
                              minIndex(b, l, r, rows - 1),
                              minIndex(b, l, c, cols - 1), unscaled));
        Value stored = arith::SelectOp::create(
            b, valid, scale, buildZeroBits(b, l, inputType.getElementType()));
        memref::StoreOp::create(b, stored, result, indices);
      });
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
    RankedTensorType resultType = op.getResult().getType();
    Value input = toBuffer(rewriter, loc, op.getInput());
    Value result = allocDevice(rewriter, loc, resultType);
    if (isVectorSwizzle(inputType, op.getUnscaledDim(), op.getLayout()))
      buildVectorSwizzle(rewriter, loc, input, result, inputType, resultType);
    else
      buildScalarSwizzle(rewriter, loc, op, input, result);
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }

private:
  const QuantizeFusionPlan &plan;
};

/// One thread per tile row (isVectorSwizzle): one load, four stores of 4
/// compact elements, none for the padding rows.
void buildVectorUnswizzle(OpBuilder &rewriter, Location loc, Value input,
                          Value result, RankedTensorType tilesType,
                          RankedTensorType resultType) {
  int64_t batch = resultType.getRank() - 2;
  int64_t rows = resultType.getDimSize(batch);
  auto [tileRowType, groupType] = getTileRowTypes(resultType.getElementType());
  buildThreadPerTileRow(
      rewriter, loc, tilesType,
      [&](ImplicitLocOpBuilder &b, ArrayRef<Value> tiled, Value r, Value c) {
        Value tileRow = loadVector(b, b.getLoc(), tileRowType, input, tiled);
        for (int64_t k = 0; k < kGroupsPerTileRow; ++k) {
          Value row = arith::AddIOp::create(
              b, r, cIndex(b, b.getLoc(), k * kTileRowStride));
          Value group =
              extractSlice(b, tileRow, k * kSwizzleTileCols, kSwizzleTileCols);
          SmallVector<Value> indices(tiled.take_front(batch));
          indices.append({row, c});
          storeVectorIf(b, b.getLoc(),
                        cmpLT(b, b.getLoc(), row, cIndex(b, b.getLoc(), rows)),
                        group, result, indices);
        }
      });
}

/// One thread per compact scale: it reads its place in the swizzled layout.
void buildScalarUnswizzle(OpBuilder &rewriter, Location loc, UnswizzleOp op,
                          Value input, Value result) {
  RankedTensorType resultType = op.getResult().getType();
  int64_t unscaled = op.getUnscaledDim(), batch = resultType.getRank() - 2;
  buildThreadPerItem(
      rewriter, loc, resultType.getNumElements(),
      [&](ImplicitLocOpBuilder &b, Value thread) {
        SmallVector<Value> indices =
            delinearize(b, b.getLoc(), thread, resultType.getShape());
        Value r = indices[unscaled], c = indices[2 * batch + 1 - unscaled];
        Value scale = memref::LoadOp::create(
            b, input,
            getSwizzledIndices(b, b.getLoc(),
                               ArrayRef<Value>(indices).take_front(batch), r, c,
                               op.getLayout()));
        memref::StoreOp::create(b, scale, result, indices);
      });
}

struct UnswizzleToGPU : OpRewritePattern<UnswizzleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnswizzleOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    Value input = toBuffer(rewriter, loc, op.getInput());
    Value result = allocDevice(rewriter, loc, resultType);
    if (isVectorSwizzle(resultType, op.getUnscaledDim(), op.getLayout()))
      buildVectorUnswizzle(rewriter, loc, input, result,
                           op.getInput().getType(), resultType);
    else
      buildScalarUnswizzle(rewriter, loc, op, input, result);
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
