//===- ElementwiseKernels.cpp - Dequantize and (un)swizzle kernels --------===//
//
// The mx ops whose GPU kernels need no cooperation between threads. They
// are bound by memory, so each has a vector kernel that moves 16 elements
// per thread, and a one-thread-per-element kernel for the shapes the vector
// one cannot take.
//
// Dequantize: a thread converts chunks of consecutive elements of a row (as
// many as one 16-byte store of results holds; FP6's from the two 32-bit words
// that hold them; all loads first): decoded exactly (ElementConversion.h: two per
// `cvt.rn.f16x2` of the format, or of the FP8 format that embeds FP6;
// MXINT8 by sitofp), multiplied in f32 by their block's scale (one load when
// the block spans the chunk, a vector of scales for [32, 1] blocks), rounded
// once to the output type (two per `cvt.rn.{bf16x2,f16x2}.f32`) and stored
// at once. That is the CPU lowering's arithmetic, so the two agree bit for
// bit, NaN canonicalization included. The scalar kernels decode with the CPU
// lowering's builders instead, for rows that are not whole chunks and blocks
// narrower than a chunk but wider than 1: one thread per element, or per
// packed group (FP4 always, with NVFP4's tensor scale; FP6 there), which reads
// its bytes from global memory through the buffer's address.
//
// Swizzle: in the tiled layout a 128x4 tile is 32 rows of 16 elements, row
// i holding compact rows i, i + 32, i + 64, i + 96 of the tile, 4 columns
// each. A thread builds row i of up to four consecutive tiles from four
// loads of up to 16 bytes (one per compact row), a 4x4 transpose of 4-element
// words in registers, and one store per tile, zeros in the padding rows;
// unswizzle does the reverse. Lanes are laid out so that both the compact
// and the tiled accesses of a warp are runs of 64 bytes or more.
// Scales tiled along their second-to-last dimension with whole 4-column
// groups take that path; the rest (the blockwise layout, tiles along the
// last dimension, partial column groups) gather one element per thread,
// batch slice by batch slice.
//
//===----------------------------------------------------------------------===//

#include "ElementConversion.h"
#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <numeric>

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

Value minIndex(OpBuilder &b, Location loc, Value x, int64_t bound) {
  return arith::MinUIOp::create(b, loc, x, cIndex(b, loc, bound));
}

/// The widest access of a thread.
constexpr int64_t kMaxAccessBytes = 16;

/// Runs `body` in one thread for each of `count` items, with the item's index
/// (a grid of whole CTAs needs no bounds check).
void buildThreadPerItem(
    OpBuilder &rewriter, Location loc, int64_t count,
    function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
  buildLaunch(rewriter, loc, count,
              [&](OpBuilder &launchBuilder, Location l, Value thread) {
                auto buildBody = [&](OpBuilder &nb, Location nl) {
                  ImplicitLocOpBuilder b(nl, nb);
                  body(b, thread);
                };
                if (count % kThreadsPerBlock == 0)
                  return buildBody(launchBuilder, l);
                buildIf(launchBuilder, l,
                        cmpLT(launchBuilder, l, thread,
                              cIndex(launchBuilder, l, count)),
                        buildBody);
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

/// Elements of a chunk of the vector dequantize of `op`: one 16-byte store
/// of results (8 bf16 or f16, 4 f32), so that a warp's stores fill whole
/// sectors. With 16 elements a thread (two 16-byte stores 32 bytes apart,
/// each warp store filling half of 32 sectors) L2 throughput bound the kernel
/// on the H200: 73% of a copy's bandwidth for FP8, ncu showing L2 91% busy
/// and DRAM 54%; FP6 took such chunks to fill whole words and measured 66%.
int64_t getDequantizeChunk(DequantizeOp op) {
  return kMaxAccessBytes * 8 /
         op.getResult().getType().getElementTypeBitWidth();
}

/// Whether the vector dequantize covers `op`: rows of whole chunks, each
/// inside one block along the row (block width a multiple of the chunk) or
/// with a scale per element (width 1); a packed format's rows also fill
/// whole 32-bit words, which loadCodes reads.
bool isVectorDequantize(DequantizeOp op, const ElementFormat &format) {
  int64_t cols = op.getData().getType().getShape().back();
  int64_t width = op.getBlock().back();
  int64_t chunk = getDequantizeChunk(op);
  return cols % chunk == 0 && (width == 1 || width % chunk == 0) &&
         (!format.isPacked() || cols * format.bitWidth % 32 == 0);
}

/// A load of `type` at byte `offset` from device address `base` (an index:
/// no memref op addresses part of a byte), aligned to `alignment` bytes.
Value loadAtByte(OpBuilder &b, Location loc, Type type, Value base,
                 Value offset, int64_t alignment) {
  Value pointer =
      getGlobalPointer(b, loc, arith::AddIOp::create(b, loc, base, offset));
  return LLVM::LoadOp::create(b, loc, type, pointer, alignment);
}

/// The codes (an i8 vector, one per element) of the `count` elements of
/// `data` that start at `indices`, element `linear` of the tensor, which
/// holds `numElements`, as decodeElements takes them: one vector load of the
/// elements, or for a packed format (`data` its base address, whole 32-bit
/// words) the words that hold them, unpacked (an embedded FP6 straight to
/// its wider format's codes, four at a time). A packed chunk need not start
/// at a word: its bits are shifted out of the words from the one holding its
/// first bit, moved back where those would pass the tensor's last word.
Value loadCodes(ImplicitLocOpBuilder &b, const ElementConversion &conversion,
                Value data, ArrayRef<Value> indices, Value linear,
                int64_t count, int64_t numElements) {
  Location l = b.getLoc();
  const ElementFormat &format = conversion.format;
  auto codesType = VectorType::get({count}, b.getI8Type());
  if (!format.isPacked()) {
    Value elements =
        loadVector(b, l, VectorType::get({count}, format.type), data, indices);
    if (format.type == b.getI8Type())
      return elements;
    return arith::BitcastOp::create(b, codesType, elements);
  }
  // Chunks start at multiples of `count` elements, so at most `32 - step`
  // bits into a word.
  int64_t bits = format.bitWidth, chunkBits = count * bits;
  int64_t step = std::gcd<int64_t>(chunkBits, 32);
  int64_t wordCount = llvm::divideCeil(chunkBits + 32 - step, 32);
  int64_t lastWord = std::max<int64_t>(numElements * bits / 32 - wordCount, 0);
  Value start = arith::MulIOp::create(b, linear, cIndex(b, l, bits));
  Value word =
      minIndex(b, l, arith::DivUIOp::create(b, start, cIndex(b, l, 32)),
               lastWord);
  Value words = loadAtByte(
      b, l, VectorType::get({wordCount}, b.getI32Type()), data,
      arith::MulIOp::create(b, word, cIndex(b, l, 4)), /*alignment=*/4);
  auto windowType = b.getIntegerType(32 * wordCount);
  Value window = vector::ExtractOp::create(
      b,
      vector::BitCastOp::create(b, VectorType::get({1}, windowType), words),
      0);
  Value shift = arith::SubIOp::create(
      b, start, arith::MulIOp::create(b, word, cIndex(b, l, 32)));
  window = arith::ShRUIOp::create(
      b, window, arith::IndexCastOp::create(b, windowType, shift));
  if (conversion.isEmbedded()) {
    // decodeElements takes an embedded format's codes widened: every chunk
    // (8 or 4 results of a 16-byte store) is whole groups of 4 FP6 codes.
    assert(bits == 6 && count % 4 == 0 && "whole groups of 4 FP6 codes");
    SmallVector<Value> wide;
    for (int64_t group = 0; group < count / 4; ++group)
      wide.push_back(widenPackedFP6(
          b, l,
          arith::TruncIOp::create(
              b, b.getI32Type(),
              arith::ShRUIOp::create(b, window,
                                     arith::ConstantIntOp::create(
                                         b, windowType, 4 * bits * group)))));
    return vector::BitCastOp::create(
        b, codesType,
        vector::FromElementsOp::create(
            b, VectorType::get({count / 4}, b.getI32Type()), wide));
  }
  SmallVector<Value> codes;
  for (int64_t e = 0; e < count; ++e) {
    Value code = arith::ShRUIOp::create(
        b, window, arith::ConstantIntOp::create(b, windowType, e * bits));
    codes.push_back(arith::TruncIOp::create(
        b, b.getI8Type(),
        arith::AndIOp::create(
            b, code,
            arith::ConstantIntOp::create(b, windowType, (1 << bits) - 1))));
  }
  return vector::FromElementsOp::create(b, codesType, codes);
}

/// The f32 scale of each element of the chunk of `length` elements at data
/// `indices` (along the last dimension): one scale for the whole chunk when
/// its block spans it, else (block width 1) a vector load of the row of
/// scales that lies over the chunk.
Value loadScaleFactors(ImplicitLocOpBuilder &b, Value scales,
                       ArrayRef<Value> indices, ArrayRef<int64_t> block,
                       int64_t length) {
  SmallVector<Value> scaleIndices;
  for (auto [index, size] : llvm::zip_equal(indices, block))
    scaleIndices.push_back(
        size == 1
            ? index
            : arith::DivUIOp::create(b, index, cIndex(b, b.getLoc(), size))
                  .getResult());
  auto factorsType = VectorType::get({length}, b.getF32Type());
  if (block.back() != 1) {
    Value scale = memref::LoadOp::create(b, scales, scaleIndices);
    return vector::BroadcastOp::create(b, factorsType,
                                       buildScaleToF32(b, b.getLoc(), scale));
  }
  Type scaleType = cast<MemRefType>(scales.getType()).getElementType();
  Value loaded = loadVector(b, b.getLoc(), VectorType::get({length}, scaleType),
                            scales, scaleIndices);
  SmallVector<Value> factors;
  for (int64_t i = 0; i < length; ++i)
    factors.push_back(buildScaleToF32(b, b.getLoc(),
                                      vector::ExtractOp::create(b, loaded, i)));
  return vector::FromElementsOp::create(b, factorsType, factors);
}

/// The contract's quiet NaN of `type` (a vector type), splatted.
Value buildQuietNaN(ImplicitLocOpBuilder &b, VectorType type) {
  auto elementType = cast<FloatType>(type.getElementType());
  return arith::ConstantOp::create(
      b, DenseElementsAttr::get(
             type, b.getFloatAttr(
                       elementType,
                       APFloat::getQNaN(elementType.getFloatSemantics()))));
}

/// `product` (an even-length f32 vector) rounded to nearest even as 16-bit
/// `resultType`, two elements per hardware `cvt.rn.{bf16x2,f16x2}.f32`
/// (LLVM would round them one by one), and the contract's quiet NaN where
/// the product is NaN (`productIsNaN`, one i1 for the whole vector, where
/// the caller knows it; else each element's): the hardware gives the
/// canonical NaN 0x7FFF.
Value buildRoundedPairs(ImplicitLocOpBuilder &b, Value product, Type resultType,
                        Value productIsNaN) {
  int64_t length = cast<VectorType>(product.getType()).getNumElements();
  auto pairType = VectorType::get({2}, resultType);
  Value quietNaN = buildQuietNaN(b, pairType);
  SmallVector<Value> pairs;
  for (int64_t i = 0; i < length; i += 2) {
    Value lo = vector::ExtractOp::create(b, product, i);
    Value hi = vector::ExtractOp::create(b, product, i + 1);
    Value pair =
        resultType.isBF16()
            ? NVVM::ConvertF32x2ToBF16x2Op::create(b, pairType, hi, lo,
                                                   /*random_bits=*/Value(),
                                                   NVVM::FPRoundingMode::RN)
                  .getResult()
            : NVVM::ConvertF32x2ToF16x2Op::create(b, pairType, hi, lo,
                                                  /*random_bits=*/Value(),
                                                  NVVM::FPRoundingMode::RN)
                  .getResult();
    Value isNaN =
        productIsNaN
            ? productIsNaN
            : vector::FromElementsOp::create(
                  b, VectorType::get({2}, b.getI1Type()),
                  ValueRange{arith::CmpFOp::create(b, arith::CmpFPredicate::UNO,
                                                   lo, lo),
                             arith::CmpFOp::create(b, arith::CmpFPredicate::UNO,
                                                   hi, hi)})
                  .getResult();
    pairs.push_back(arith::SelectOp::create(b, isNaN, quietNaN, pair));
  }
  return concatenate(b, pairs);
}

/// buildDequantized on vectors: one f32 multiply, one rounding to
/// `resultType`, and the contract's quiet NaN where the product is NaN (the
/// GPU's own NaN differs): where `factorIsNaN` is given (codes with no NaN or
/// Inf, times one power-of-two or NaN factor), that is the whole vector's.
Value buildDequantizedVector(ImplicitLocOpBuilder &b, Value values,
                             Value factors, Type resultType,
                             Value factorIsNaN) {
  Value product = arith::MulFOp::create(b, values, factors);
  if (!resultType.isF32())
    return buildRoundedPairs(b, product, resultType, factorIsNaN);
  Value isNaN = factorIsNaN
                    ? factorIsNaN
                    : arith::CmpFOp::create(b, arith::CmpFPredicate::UNO,
                                            product, product)
                          .getResult();
  return arith::SelectOp::create(
      b, isNaN, buildQuietNaN(b, cast<VectorType>(product.getType())), product);
}

/// Chunks that a thread of the vector dequantize converts, loaded before
/// the first is converted, so that enough bytes are in flight.
constexpr int64_t kDequantizeChunksPerThread = 2;

/// A chunk of the vector dequantize, loaded: its first element's indices,
/// its f32 values and their scale factors, and where every product is NaN
/// exactly when the chunk's one factor is, that (else null).
struct LoadedChunk {
  SmallVector<Value> indices;
  Value values, factors, factorIsNaN;
};

/// kDequantizeChunksPerThread chunks per thread, a CTA's accesses to one
/// chunk contiguous; each chunk one load (two words for FP6), its scale
/// factors and one 16-byte store of its results.
void buildVectorDequantize(OpBuilder &rewriter, Location loc, DequantizeOp op,
                           const ElementConversion &conversion, Value data,
                           Value scales, Value result) {
  RankedTensorType resultType = op.getResult().getType();
  SmallVector<int64_t> chunks(resultType.getShape());
  int64_t chunk = getDequantizeChunk(op);
  chunks.back() /= chunk;
  int64_t numChunks = computeProduct(chunks);
  int64_t perCTA = kThreadsPerBlock * kDequantizeChunksPerThread;
  // A chunk's products are NaN together, with its factor, where the codes
  // are finite (no NaN or Inf code) and the chunk has one E8M0 scale, whose
  // factor is a power of two or NaN: one check a chunk, not one an element.
  const ElementFormat &format = conversion.format;
  bool oneFiniteFactor =
      op.getBlock().back() != 1 && !format.nanCode && !format.hasInfinity &&
      isa<Float8E8M0FNUType>(op.getScales().getType().getElementType());
  buildBlockLaunch(
      rewriter, loc, llvm::divideCeil(numChunks, perCTA), TypeRange(),
      [&](OpBuilder &nb, Location l, const KernelIds &ids) {
        ImplicitLocOpBuilder b(l, nb);
        Value first = arith::AddIOp::create(
            b, arith::MulIOp::create(b, ids.block, cIndex(b, l, perCTA)),
            ids.thread);
        SmallVector<Value> chunkIds;
        SmallVector<LoadedChunk> loaded;
        for (int64_t k = 0; k < kDequantizeChunksPerThread; ++k) {
          chunkIds.push_back(arith::AddIOp::create(
              b, first, cIndex(b, l, k * kThreadsPerBlock)));
          // Threads past the end load the last chunk and store nothing.
          Value chunkId = minIndex(b, l, chunkIds.back(), numChunks - 1);
          SmallVector<Value> indices = delinearize(b, l, chunkId, chunks);
          indices.back() =
              arith::MulIOp::create(b, indices.back(), cIndex(b, l, chunk));
          Value linear =
              conversion.format.isPacked()
                  ? arith::MulIOp::create(b, chunkId, cIndex(b, l, chunk))
                        .getResult()
                  : Value();
          Value values =
              decodeElements(b, l,
                             loadCodes(b, conversion, data, indices, linear,
                                       chunk, resultType.getNumElements()),
                             conversion);
          Value factors =
              loadScaleFactors(b, scales, indices, op.getBlock(), chunk);
          Value factorIsNaN;
          if (oneFiniteFactor) {
            Value factor = vector::ExtractOp::create(b, factors, 0);
            factorIsNaN = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO,
                                                factor, factor);
          }
          loaded.push_back({std::move(indices), values, factors, factorIsNaN});
        }
        for (auto [chunkId, loadedChunk] : llvm::zip_equal(chunkIds, loaded)) {
          Value dequantized = buildDequantizedVector(
              b, loadedChunk.values, loadedChunk.factors,
              resultType.getElementType(), loadedChunk.factorIsNaN);
          Value valid = numChunks % perCTA
                            ? cmpLT(b, l, chunkId, cIndex(b, l, numChunks))
                            : Value();
          storeVectorIf(b, l, valid, dequantized, result, loadedChunk.indices);
        }
      });
}

/// The scale of data element `indices` of `op`, as loaded.
Value loadBlockScale(OpBuilder &b, Location loc, DequantizeOp op, Value scales,
                     ArrayRef<Value> indices) {
  SmallVector<Value> blockIndices;
  for (auto [index, size] : llvm::zip_equal(indices, op.getBlock()))
    blockIndices.push_back(
        arith::DivUIOp::create(b, loc, index, cIndex(b, loc, size)));
  return memref::LoadOp::create(b, loc, scales, blockIndices);
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

/// A packed format's dequantize of any rank, block and tensor scale (FP4 and
/// NVFP4 always, FP6 where the vector kernel does not fit): one thread per
/// packed group (FP4 one byte of 2 elements, FP6 3 bytes of 4), which loads
/// its bytes and decodes each element with the CPU lowering's builders and
/// its own block's scale.
void buildPackedDequantize(OpBuilder &rewriter, Location loc, DequantizeOp op,
                           Value data, Value scales, Value tensorScale,
                           Value result) {
  RankedTensorType resultType = op.getResult().getType();
  Type elementType = op.getData().getType().getElementType();
  ElementFormat format = getVerifiedElementFormat(elementType);
  int64_t groupElements = format.packedElements;
  auto groupType = rewriter.getIntegerType(8 * format.packedBytes);
  SmallVector<int64_t> groupShape(resultType.getShape());
  groupShape.back() /= groupElements;
  int64_t count = resultType.getNumElements() / groupElements;
  buildLaunch(
      rewriter, loc, count, [&](OpBuilder &b, Location l, Value thread) {
        buildIf(
            b, l, cmpLT(b, l, thread, cIndex(b, l, count)),
            [&](OpBuilder &nb, Location nl) {
              // The group's bytes as one little-endian integer.
              Value group;
              if (format.packedBytes == 1) {
                group = loadAtByte(nb, nl, groupType, data, thread, 1);
              } else {
                Value first = arith::MulIOp::create(
                    nb, nl, thread, cIndex(nb, nl, format.packedBytes));
                for (int64_t k = 0; k < format.packedBytes; ++k) {
                  Value byte = loadAtByte(
                      nb, nl, nb.getI8Type(), data,
                      arith::AddIOp::create(nb, nl, first, cIndex(nb, nl, k)),
                      1);
                  Value part = arith::ShLIOp::create(
                      nb, nl, arith::ExtUIOp::create(nb, nl, groupType, byte),
                      arith::ConstantIntOp::create(nb, nl, groupType, 8 * k));
                  group = group ? arith::OrIOp::create(nb, nl, group, part)
                                      .getResult()
                                : part;
                }
              }
              Value t = tensorScale ? memref::LoadOp::create(
                                          nb, nl, tensorScale, ValueRange{})
                                    : Value();
              SmallVector<Value> indices =
                  delinearize(nb, nl, thread, groupShape);
              Value groupStart = arith::MulIOp::create(
                  nb, nl, indices.back(), cIndex(nb, nl, groupElements));
              for (int64_t e = 0; e < groupElements; ++e) {
                indices.back() = arith::AddIOp::create(nb, nl, groupStart,
                                                       cIndex(nb, nl, e));
                Value code = arith::TruncIOp::create(
                    nb, nl, nb.getIntegerType(format.bitWidth),
                    arith::ShRUIOp::create(
                        nb, nl, group,
                        arith::ConstantIntOp::create(nb, nl, groupType,
                                                     format.bitWidth * e)));
                Value value = buildDequantized(
                    nb, nl, arith::BitcastOp::create(nb, nl, elementType, code),
                    loadBlockScale(nb, nl, op, scales, indices), t,
                    resultType.getElementType());
                memref::StoreOp::create(nb, nl, value, result, indices);
              }
            });
      });
}

/// Every dequantize: the vector kernel where it fits a format the chip
/// converts (not FP4, whose NVFP4 form has its tensor scale), else the packed
/// or the scalar kernel.
struct DequantizeToGPU : OpRewritePattern<DequantizeOp> {
  DequantizeToGPU(MLIRContext *context, Chip chip)
      : OpRewritePattern(context), chip(chip) {}

  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rewriter) const override {
    Type elementType = op.getData().getType().getElementType();
    ElementFormat format = getVerifiedElementFormat(elementType);
    std::optional<ElementConversion> conversion =
        ElementConversion::get(elementType, chip);
    Location loc = op.getLoc();
    Value data = toBuffer(rewriter, loc, op.getData());
    if (format.isPacked())
      data =
          memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, data);
    Value scales = toBuffer(rewriter, loc, op.getScales());
    Value result = allocDevice(rewriter, loc, op.getResult().getType());
    if (conversion && !format.takesNVFP4Scales() &&
        isVectorDequantize(op, format))
      buildVectorDequantize(rewriter, loc, op, *conversion, data, scales,
                            result);
    else if (format.isPacked())
      buildPackedDequantize(rewriter, loc, op, data, scales,
                            op.getTensorScale()
                                ? toBuffer(rewriter, loc, op.getTensorScale())
                                : Value(),
                            result);
    else
      buildScalarDequantize(rewriter, loc, op, data, scales, result);
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }

private:
  Chip chip;
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
  IndexArith index{b, loc};
  if (layout == SwizzleLayout::blockwise) {
    ArrayRef<Value> tail = indices.take_back(3);
    return {index.fma(tail[1], kBlockwisePadding, tail[2]), tail[0]};
  }
  return SwizzleTiles::getCompactIndex(indices.take_back(5), index);
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
         compactType.getShape().back() % SwizzleTiles::kCols == 0;
}

/// Contiguous bytes of a compact row that the lanes of a warp access
/// together. Measured on the H200 at [8192, 256] (swizzle, unswizzle): 32
/// bytes (whole sectors, 16 rows a warp) 1.8, 1.8 us; 64 bytes (8 rows) 1.7,
/// 1.7 us; 128 bytes (4 rows, 8 tiles apart on the tiled side) 1.9, 1.8 us.
/// One tile per thread with a warp across 32 tiles took 3.2 and 2.0 us.
constexpr int64_t kCompactRunBytes = 64;

/// How the vector (un)swizzle spreads the tiles of compact scales
/// `[..., R, C]` over threads. A thread moves row i of `tilesPerThread`
/// consecutive tiles of one row of tiles (a group): four compact accesses of
/// 4 * tilesPerThread elements (rows i + 32k, up to 16 bytes) and
/// tilesPerThread tiled accesses of a tile row, transposed in registers. In
/// a warp, `sharingLanes` consecutive lanes take consecutive groups, so that
/// together they cover kCompactRunBytes of a compact row, and the rest of
/// the warp takes the next tile rows, whose tiled accesses are contiguous.
struct TileGroups {
  TileGroups(RankedTensorType compactType) {
    int64_t batch = compactType.getRank() - 2;
    int64_t elementBytes =
        llvm::divideCeil(compactType.getElementTypeBitWidth(), 8);
    rows = compactType.getDimSize(batch);
    int64_t tiles = compactType.getDimSize(batch + 1) / SwizzleTiles::kCols;
    tilesPerThread = std::max<int64_t>(
        1, kMaxAccessBytes / (SwizzleTiles::kCols * elementBytes));
    while (tiles % tilesPerThread != 0)
      tilesPerThread /= 2;
    groups = tiles / tilesPerThread;
    int64_t groupBytes = SwizzleTiles::kCols * tilesPerThread * elementBytes;
    // Lanes beyond the groups of a row of tiles would idle.
    sharingLanes =
        std::min<int64_t>(std::max<int64_t>(1, kCompactRunBytes / groupBytes),
                          llvm::PowerOf2Ceil(groups));
    rowType = VectorType::get({SwizzleTiles::kCols * tilesPerThread},
                              compactType.getElementType());
    tileRowType =
        VectorType::get({SwizzleTiles::kRowGroups * SwizzleTiles::kCols},
                        compactType.getElementType());
  }

  /// Lanes past the last group of a row of tiles must not store.
  bool hasIdleLanes() const { return groups % sharingLanes != 0; }
  /// The last row of tiles has rows past the matrix.
  bool hasPaddingRows() const { return rows % SwizzleTiles::kRows != 0; }

  int64_t rows, tilesPerThread, groups, sharingLanes;
  /// A thread's part of one compact row, and a tile row.
  VectorType rowType, tileRowType;
};

/// A thread of the vector (un)swizzle: the batch indices, row tile and first
/// tile column of its group, its tile row i, its first compact (row, column),
/// and whether its group exists (threads past the last group of a row of
/// tiles address the last one and must not store).
struct TileGroupThread {
  SmallVector<Value> batch;
  Value rowTile, firstTile, tileRow, row, column, valid;

  /// The tiled indices of tile row `tileRow` of the group's tile `t`.
  SmallVector<Value> getTiledIndices(ImplicitLocOpBuilder &b, int64_t t) const {
    SmallVector<Value> indices(batch);
    Value zero = cIndex(b, b.getLoc(), 0);
    indices.append(
        {rowTile, arith::AddIOp::create(b, firstTile, cIndex(b, b.getLoc(), t)),
         tileRow, zero, zero});
    return indices;
  }

  /// Compact row `row + 32k` and its indices at the group's first column.
  std::pair<Value, SmallVector<Value>>
  getCompactRow(ImplicitLocOpBuilder &b, int64_t k, int64_t rows) const {
    Value compactRow = arith::AddIOp::create(
        b, row, cIndex(b, b.getLoc(), k * SwizzleTiles::kRowStride));
    SmallVector<Value> indices(batch);
    indices.append({minIndex(b, b.getLoc(), compactRow, rows - 1), column});
    return {compactRow, indices};
  }
};

/// Launches one thread per (group, tile row) of the TileGroups of compact
/// scales `compactType` over their tiles `tilesType` ([..., R/128, C/4, 32,
/// 4, 4]) and builds `body` for each.
void buildThreadPerTileGroupRow(
    OpBuilder &rewriter, Location loc, RankedTensorType compactType,
    RankedTensorType tilesType,
    function_ref<void(ImplicitLocOpBuilder &, const TileGroups &,
                      const TileGroupThread &)>
        body) {
  TileGroups groups(compactType);
  int64_t lanes = groups.sharingLanes;
  // [..., R/128, group blocks, tile row high, tile row low, group low].
  SmallVector<int64_t> threads(tilesType.getShape().drop_back(4));
  threads.append({llvm::divideCeilSigned(groups.groups, lanes), lanes,
                  SwizzleTiles::kRowStride / lanes, lanes});
  int64_t rank = threads.size();
  buildThreadPerItem(
      rewriter, loc, computeProduct(threads),
      [&](ImplicitLocOpBuilder &b, Value thread) {
        Location l = b.getLoc();
        SmallVector<Value> ids = delinearize(b, l, thread, threads);
        IndexArith index{b, l};
        TileGroupThread t;
        t.batch.assign(ids.begin(), ids.begin() + rank - 5);
        t.rowTile = ids[rank - 5];
        Value group = index.fma(ids[rank - 4], lanes, ids[rank - 1]);
        t.valid = cmpLT(b, l, group, cIndex(b, l, groups.groups));
        group = minIndex(b, l, group, groups.groups - 1);
        t.firstTile = arith::MulIOp::create(
            b, group, cIndex(b, l, groups.tilesPerThread));
        t.tileRow = index.fma(ids[rank - 3], SwizzleTiles::kRowStride / lanes,
                              ids[rank - 2]);
        t.row = index.fma(t.rowTile, SwizzleTiles::kRows, t.tileRow);
        t.column = arith::MulIOp::create(b, t.firstTile,
                                         cIndex(b, l, SwizzleTiles::kCols));
        body(b, groups, t);
      });
}

/// The concatenation of the `part`-th SwizzleTiles::kCols elements of each of
/// `vectors`: the 4 x 4 transposes between compact rows and tile rows.
Value gatherColumns(ImplicitLocOpBuilder &b, ArrayRef<Value> vectors,
                    int64_t part) {
  SmallVector<Value> columns;
  for (Value vector : vectors)
    columns.push_back(extractSlice(b, vector, part * SwizzleTiles::kCols,
                                   SwizzleTiles::kCols));
  return concatenate(b, columns);
}

/// One thread per group row (isVectorSwizzle): four compact loads (zeros for
/// the rows past the matrix), one store per tile of the group.
void buildVectorSwizzle(OpBuilder &rewriter, Location loc, Value input,
                        Value result, RankedTensorType inputType,
                        RankedTensorType tilesType) {
  buildThreadPerTileGroupRow(
      rewriter, loc, inputType, tilesType,
      [&](ImplicitLocOpBuilder &b, const TileGroups &groups,
          const TileGroupThread &thread) {
        Location l = b.getLoc();
        Value zeros = vector::BroadcastOp::create(
            b, groups.rowType,
            buildZeroBits(b, l, groups.rowType.getElementType()));
        SmallVector<Value> compactRows;
        for (int64_t k = 0; k < SwizzleTiles::kRowGroups; ++k) {
          // Padding rows read the last row (always there) and store zeros.
          auto [row, indices] = thread.getCompactRow(b, k, groups.rows);
          Value loaded = loadVector(b, l, groups.rowType, input, indices);
          compactRows.push_back(
              groups.hasPaddingRows()
                  ? arith::SelectOp::create(
                        b, cmpLT(b, l, row, cIndex(b, l, groups.rows)), loaded,
                        zeros)
                        .getResult()
                  : loaded);
        }
        Value valid = groups.hasIdleLanes() ? thread.valid : Value();
        for (int64_t t = 0; t < groups.tilesPerThread; ++t)
          storeVectorIf(b, l, valid, gatherColumns(b, compactRows, t), result,
                        thread.getTiledIndices(b, t));
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

/// One thread per group row (isVectorSwizzle): one load per tile of the
/// group, four compact stores, none for the padding rows.
void buildVectorUnswizzle(OpBuilder &rewriter, Location loc, Value input,
                          Value result, RankedTensorType tilesType,
                          RankedTensorType resultType) {
  buildThreadPerTileGroupRow(
      rewriter, loc, resultType, tilesType,
      [&](ImplicitLocOpBuilder &b, const TileGroups &groups,
          const TileGroupThread &thread) {
        Location l = b.getLoc();
        SmallVector<Value> tileRows;
        for (int64_t t = 0; t < groups.tilesPerThread; ++t)
          tileRows.push_back(loadVector(b, l, groups.tileRowType, input,
                                        thread.getTiledIndices(b, t)));
        for (int64_t k = 0; k < SwizzleTiles::kRowGroups; ++k) {
          auto [row, indices] = thread.getCompactRow(b, k, groups.rows);
          Value valid = groups.hasIdleLanes() ? thread.valid : Value();
          if (groups.hasPaddingRows()) {
            Value rowValid = cmpLT(b, l, row, cIndex(b, l, groups.rows));
            valid = valid ? andI(b, l, valid, rowValid) : rowValid;
          }
          storeVectorIf(b, l, valid, gatherColumns(b, tileRows, k), result,
                        indices);
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
                                              Chip chip,
                                              const QuantizeFusionPlan &plan) {
  patterns.add<DequantizeToGPU>(patterns.getContext(), chip);
  patterns.add<UnswizzleToGPU>(patterns.getContext());
  patterns.add<SwizzleToGPU>(patterns.getContext(), plan);
}
