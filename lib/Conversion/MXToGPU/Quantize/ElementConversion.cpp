//===- ElementConversion.cpp - Element codes in the mx GPU kernels --------===//
//
// See ElementConversion.h. The hardware conversions round to nearest even
// and saturate as the CPU lowering's integer builders do; where another
// format's `cvt` rounds (an embedded FP6), the values are first clamped to
// the format's max finite, which `satfinite` at the wider max would not do,
// and its codes are the wider codes with the sign moved down: the exponent
// field fits the narrower one, since the values do.
//
//===----------------------------------------------------------------------===//

#include "ElementConversion.h"
#include "KernelBuilder.h"

#include "mx/Conversion/MXToGPU/Quantize/EmbeddedFP6Packing.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

std::optional<ElementConversion> ElementConversion::get(Type elementType,
                                                        Chip chip) {
  ElementConversion conversion{getVerifiedElementFormat(elementType)};
  const ElementFormat &format = conversion.format;
  if (format.isInteger)
    return conversion;
  if (hasHardwareConversion(chip, elementType)) {
    conversion.hardware = format;
    return conversion;
  }
  for (Type wider : getElementTypes(elementType.getContext())) {
    ElementFormat widerFormat = getVerifiedElementFormat(wider);
    if (hasHardwareConversion(chip, wider) && format.embedsIn(widerFormat)) {
      conversion.hardware = widerFormat;
      conversion.shift = format.bias - widerFormat.bias;
      return conversion;
    }
  }
  return std::nullopt;
}

ElementConversion ElementConversion::forQuantize(QuantizeOp op, Chip chip) {
  ElementConversion conversion =
      *get(op.getData().getType().getElementType(), chip);
  conversion.scaledFitF16 =
      op.getInput().getType().getElementTypeBitWidth() <= 16 &&
      op.getRounding() != ScaleRounding::exact &&
      isa<Float8E8M0FNUType>(op.getScales().getType().getElementType());
  return conversion;
}

//===----------------------------------------------------------------------===//
// Scales
//===----------------------------------------------------------------------===//

BlockScale gpu_kernels::buildBlockScale(OpBuilder &b, Location loc, Value amax,
                                        ScaleRounding rounding,
                                        const ElementConversion &conversion,
                                        Type scaleType) {
  Type elementType = conversion.format.type;
  Value isNaN =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, amax, amax);
  if (rounding == ScaleRounding::exact) {
    Value scale = buildExactScale(b, loc, amax, elementType);
    return {scale, scale, isNaN};
  }
  Value exponent = buildScaleExponent(b, loc, amax, rounding, elementType);
  Value stored = buildStoredScale(b, loc, exponent, scaleType);
  Value factor = buildInverseScaleValue(b, loc, exponent);
  // 2^(127 - b + shift) is exact for every b (2^-139 at least, an f32
  // subnormal), and so is the product of an element with it wherever the
  // rounding into the wider format can see the difference.
  if (conversion.shift)
    factor = arith::MulFOp::create(
        b, loc, factor,
        arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(std::ldexp(1.0f, conversion.shift))));
  return {stored, factor, isNaN};
}

Value gpu_kernels::applyScaleFactors(OpBuilder &b, Location loc, Value values,
                                     Value factors, ScaleRounding rounding) {
  if (rounding == ScaleRounding::exact)
    return arith::DivFOp::create(b, loc, values, factors);
  return arith::MulFOp::create(b, loc, values, factors);
}

//===----------------------------------------------------------------------===//
// Codes
//===----------------------------------------------------------------------===//

/// A splat of the integer `value` of `type` (an integer vector).
static Value splatInteger(OpBuilder &b, Location loc, Value like,
                          const APInt &value) {
  auto type = cast<VectorType>(like.getType());
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(type,
                             b.getIntegerAttr(type.getElementType(), value)));
}

/// The bytes of NaN elements in each packed word of `length` one-byte codes:
/// per word, 0xFF in the bytes whose `nanMask` bit is set. A mask that is
/// one bit broadcast (a row's block) folds to one select per word, and the
/// masks of a strip's columns are the same for all its rows.
static SmallVector<Value> buildNaNByteMasks(OpBuilder &b, Location loc,
                                            Value nanMask, int64_t length,
                                            IntegerType wordType) {
  unsigned width = wordType.getWidth();
  auto word = [&](const APInt &v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(wordType, v))
        .getResult();
  };
  Value zero = word(APInt::getZero(width));
  SmallVector<Value> masks;
  for (int64_t first = 0; first < length; first += width / 8) {
    Value mask = zero;
    for (unsigned j = 0; j < width / 8; ++j) {
      Value isNaN = vector::ExtractOp::create(b, loc, nanMask, first + j);
      Value byte = word(APInt::getBitsSet(width, 8 * j, 8 * j + 8));
      mask = arith::OrIOp::create(
          b, loc, mask, arith::SelectOp::create(b, loc, isNaN, byte, zero));
    }
    masks.push_back(mask);
  }
  return masks;
}

/// The codes of the `hardware` format of an even-length f32 vector, two
/// elements per `cvt.rn.satfinite`, as bytes: the first operand of a pair
/// lands in the high byte, i.e. at the higher address.
static Value convertPairs(OpBuilder &b, Location loc, Value scaled,
                          const ElementFormat &hardware) {
  int64_t length = cast<VectorType>(scaled.getType()).getNumElements();
  SmallVector<Value> pairs;
  for (int64_t i = 0; i < length; i += 2) {
    Value lo = vector::ExtractOp::create(b, loc, scaled, i);
    Value hi = vector::ExtractOp::create(b, loc, scaled, i + 1);
    if (hardware.bitWidth == 8)
      pairs.push_back(NVVM::ConvertF32x2ToF8x2Op::create(
          b, loc, b.getI16Type(), hi, lo, NVVM::FPRoundingMode::RN,
          NVVM::SaturationMode::SATFINITE, /*relu=*/false, hardware.type));
    else
      pairs.push_back(NVVM::ConvertF32x2ToF6x2Op::create(
          b, loc, b.getI16Type(), hi, lo, /*relu=*/false, hardware.type));
  }
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({length / 2}, b.getI16Type()), pairs);
}

/// `scaled` clamped to the embedded format's +-maxFinite (scaled by 2^shift
/// too), which is exact and keeps `cvt` from saturating at the wider max.
static Value clampToFormat(OpBuilder &b, Location loc, Value scaled,
                           const ElementConversion &conversion) {
  auto type = cast<VectorType>(scaled.getType());
  float limit = std::ldexp(static_cast<float>(conversion.format.maxFinite),
                           conversion.shift);
  auto splat = [&](float v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
  };
  return arith::MinNumFOp::create(
      b, loc, arith::MaxNumFOp::create(b, loc, scaled, splat(-limit)),
      splat(limit));
}

/// The embedded format's codes in the words of its wider format's, from
/// values clamped to the narrower range: the exponent and mantissa bits
/// stay, the sign moves down to the narrower sign bit.
static Value narrowCodes(OpBuilder &b, Location loc, Value words,
                         const ElementConversion &conversion) {
  unsigned width = cast<IntegerType>(getElementTypeOrSelf(words)).getWidth();
  unsigned bits = conversion.format.bitWidth;
  auto byteSplat = [&](uint64_t byte) {
    return splatInteger(b, loc, words, APInt::getSplat(width, APInt(8, byte)));
  };
  auto shr = [&](Value v, unsigned amount) -> Value {
    return arith::ShRUIOp::create(
        b, loc, v, splatInteger(b, loc, words, APInt(width, amount)));
  };
  Value kept =
      arith::AndIOp::create(b, loc, words, byteSplat((1u << (bits - 1)) - 1));
  Value sign = arith::AndIOp::create(b, loc, shr(words, 8 - bits),
                                     byteSplat(1u << (bits - 1)));
  return arith::OrIOp::create(b, loc, kept, sign);
}

/// The integer format's codes (an i8 vector) of an f32 vector already
/// multiplied by its factor, as the CPU lowering's buildTruncToElementBits
/// rounds them (clamp to +-maxFiniteCode after scaling by 2^mantissaBits,
/// then round to nearest even by adding 1.5 * 2^23) in fewer steps: the
/// clamp comes first, at +-maxFiniteCode / 2^mantissaBits (the scaling is
/// exact, so both clamps agree), the scaling and the rounding are one FMA
/// (its product is exact, so it rounds once, as the sum does), and the code
/// is the low byte of the sum's bits, since the constant's low bits are
/// zero. Where the values are exact in f16 (`fitF16`), all of it runs on
/// pairs in f16x2 after one `cvt` a pair, the rounding constant 1.5 * 2^10
/// (whose neighbours are 1 apart up to 2^11 > 2 * 127). NaN elements are
/// left to the NaN-block mask: an element is NaN only in a block whose amax
/// is NaN. Per element: two FMNMX, one FFMA and a byte permute, or in f16x2
/// half of that and a `cvt`, where the CPU builder's form takes eight.
static Value convertToIntegerCodes(OpBuilder &b, Location loc, Value scaled,
                                   const ElementFormat &format, bool fitF16) {
  auto type = cast<VectorType>(scaled.getType());
  int64_t length = type.getNumElements();
  Type floatType = b.getF32Type();
  double magic = 0x1.8p23;
  if (fitF16 && length % 2 == 0) {
    floatType = b.getF16Type();
    magic = 0x1.8p10;
    auto pairType = VectorType::get({2}, floatType);
    SmallVector<Value> halves;
    for (int64_t i = 0; i < length; i += 2) {
      Value pair = NVVM::ConvertF32x2ToF16x2Op::create(
          b, loc, pairType, vector::ExtractOp::create(b, loc, scaled, i + 1),
          vector::ExtractOp::create(b, loc, scaled, i),
          /*random_bits=*/Value(), NVVM::FPRoundingMode::RN);
      halves.push_back(vector::ExtractOp::create(b, loc, pair, 0));
      halves.push_back(vector::ExtractOp::create(b, loc, pair, 1));
    }
    scaled =
        vector::FromElementsOp::create(b, loc, type.clone(floatType), halves);
  }
  auto valuesType = type.clone(floatType);
  auto splat = [&](double v) {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(valuesType, b.getFloatAttr(floatType, v)));
  };
  double unit = std::ldexp(1.0, format.mantissaBits);
  double limit = format.maxFiniteCode / unit;
  Value clamped = arith::MinNumFOp::create(
      b, loc, arith::MaxNumFOp::create(b, loc, scaled, splat(-limit)),
      splat(limit));
  Value sum = LLVM::FMAOp::create(b, loc, clamped, splat(unit), splat(magic));
  if (floatType.isF16() && length % 4 == 0) {
    // The low bytes of each 4 halves, one byte permute from two f16x2
    // registers (LLVM would mask and shift each one out).
    auto i32 = b.getI32Type();
    Value pairs = vector::BitCastOp::create(
        b, loc, VectorType::get({length / 2}, i32), sum);
    SmallVector<Value> words;
    for (int64_t i = 0; i < length / 2; i += 2)
      words.push_back(
          NVVM::InlinePtxOp::create(
              b, loc, i32,
              ValueRange{vector::ExtractOp::create(b, loc, pairs, i),
                         vector::ExtractOp::create(b, loc, pairs, i + 1)},
              ValueRange{}, "prmt.b32 $0, $1, $2, 0x6420;", Value())
              .getResult(0));
    return vector::BitCastOp::create(
        b, loc, type.clone(b.getI8Type()),
        vector::FromElementsOp::create(
            b, loc, VectorType::get({length / 4}, i32), words));
  }
  return arith::TruncIOp::create(
      b, loc, type.clone(b.getI8Type()),
      arith::BitcastOp::create(
          b, loc,
          type.clone(b.getIntegerType(floatType.getIntOrFloatBitWidth())),
          sum));
}

Value gpu_kernels::convertToElements(OpBuilder &b, Location loc, Value scaled,
                                     const ElementConversion &conversion,
                                     Value nanMask) {
  const ElementFormat &format = conversion.format;
  int64_t length = cast<VectorType>(scaled.getType()).getNumElements();
  auto bytesType = VectorType::get({length}, b.getI8Type());
  auto wordType = b.getIntegerType(length % 4 == 0 ? 32 : 16);
  auto wordsType =
      VectorType::get({length * 8 / wordType.getWidth()}, wordType);
  Value words;
  if (!conversion.hardware) {
    words = vector::BitCastOp::create(
        b, loc, wordsType,
        convertToIntegerCodes(b, loc, scaled, format, conversion.scaledFitF16));
  } else {
    if (conversion.isEmbedded())
      scaled = clampToFormat(b, loc, scaled, conversion);
    words = vector::BitCastOp::create(
        b, loc, wordsType, convertPairs(b, loc, scaled, *conversion.hardware));
    if (conversion.isEmbedded())
      words = narrowCodes(b, loc, words, conversion);
  }
  // NaN blocks get the NaN-block code whatever the conversion makes of a NaN:
  // one bitwise select per word of 4 bytes (`lop3`), not one per element.
  auto constant = [&](const APInt &v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(wordType, v));
  };
  Value nanBytes = constant(
      APInt::getSplat(wordType.getWidth(), APInt(8, format.getNaNBlockCode())));
  Value allOnes = constant(APInt::getAllOnes(wordType.getWidth()));
  SmallVector<Value> fixed;
  for (auto [w, mask] :
       llvm::enumerate(buildNaNByteMasks(b, loc, nanMask, length, wordType))) {
    Value word = vector::ExtractOp::create(b, loc, words, w);
    Value kept = arith::AndIOp::create(
        b, loc, word, arith::XOrIOp::create(b, loc, mask, allOnes));
    fixed.push_back(arith::OrIOp::create(
        b, loc, kept, arith::AndIOp::create(b, loc, mask, nanBytes)));
  }
  return vector::BitCastOp::create(
      b, loc, bytesType,
      vector::FromElementsOp::create(b, loc, wordsType, fixed));
}

Value gpu_kernels::castWithScale(OpBuilder &b, Location l, Value values,
                                 Value scale,
                                 const ElementConversion &conversion) {
  Value factor = vector::BroadcastOp::create(b, l, values.getType(), scale);
  Value scaled = arith::MulFOp::create(b, l, values, factor);
  Value isNaN =
      arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, scaled, scaled);
  return convertToElements(b, l, scaled, conversion, isNaN);
}

namespace {
/// EmbeddedFP6Packing.h's word arithmetic on i32 IR values.
struct IRWordOps {
  using Word = Value;
  OpBuilder &b;
  Location loc;

  Value constant(uint32_t v) {
    return arith::ConstantIntOp::create(b, loc, static_cast<int32_t>(v), 32);
  }
  Value bitAnd(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value bitOr(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value shr(Value x, unsigned amount) {
    return arith::ShRUIOp::create(b, loc, x, constant(amount));
  }
  /// `lop3` with the select table of (a & c) | (b & ~c), which LLVM cannot
  /// split.
  Value mux(Value x, Value y, uint32_t fromX) {
    return NVVM::InlinePtxOp::create(b, loc, b.getI32Type(),
                                     ValueRange{x, y, constant(fromX)},
                                     ValueRange{},
                                     "lop3.b32 $0, $1, $2, $3, 0xE4;", Value())
        .getResult(0);
  }
};
} // namespace

Value gpu_kernels::convertToPackedFP6(OpBuilder &b, Location loc, Value scaled,
                                      const ElementConversion &conversion,
                                      Value nanMask) {
  assert(conversion.isEmbedded() && conversion.format.bitWidth == 6 &&
         conversion.format.getNaNBlockCode() == 0 &&
         cast<VectorType>(scaled.getType()).getNumElements() == 4 &&
         "four FP6 codes of a saturating embedded conversion");
  Type i32 = b.getI32Type();
  Value wide = vector::ExtractOp::create(
      b, loc,
      vector::BitCastOp::create(
          b, loc, VectorType::get({1}, i32),
          convertPairs(b, loc, scaled, *conversion.hardware)),
      0);
  Value nanBytes =
      buildNaNByteMasks(b, loc, nanMask, 4, b.getI32Type()).front();
  IRWordOps ops{b, loc};
  return packEmbeddedFP6(
      ops, wide, arith::XOrIOp::create(b, loc, nanBytes, ops.constant(~0u)));
}

Value gpu_kernels::quantizeVector(OpBuilder &b, Location loc, Value values,
                                  const BlockScale &scale,
                                  ScaleRounding rounding,
                                  const ElementConversion &conversion) {
  auto type = cast<VectorType>(values.getType());
  Value factors = vector::BroadcastOp::create(b, loc, type, scale.factor);
  Value nanMask = vector::BroadcastOp::create(b, loc, type.clone(b.getI1Type()),
                                              scale.isNaN);
  return convertToElements(b, loc,
                           applyScaleFactors(b, loc, values, factors, rounding),
                           conversion, nanMask);
}

/// The words of `groups`, each the packed codes of 4 elements in its low
/// 4 x bits (the bits above may be anything), joined from element 0 up: word
/// w is a funnel shift of the two groups it spans, the lower one shifted
/// up first so that its unspecified high bits drop out.
static SmallVector<Value> joinPackedGroups(OpBuilder &b, Location loc,
                                           ArrayRef<Value> groups,
                                           int64_t bits) {
  int64_t groupBits = 4 * bits;
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  SmallVector<Value> words;
  for (int64_t w = 0; w < int64_t(groups.size()) * groupBits / 32; ++w) {
    // Bits [32w, 32w + 32) start `offset` bits into group g, whose
    // groupBits - offset bits above it fill the word's low end, and end in
    // g + 1: fshl(next, low, s) = next << s | low >> (32 - s).
    int64_t g = 32 * w / groupBits, offset = 32 * w % groupBits;
    Value low =
        arith::ShLIOp::create(b, loc, groups[g], constant(32 - groupBits));
    words.push_back(LLVM::FshlOp::create(b, loc, groups[g + 1], low,
                                         constant(groupBits - offset)));
  }
  return words;
}

void gpu_kernels::storeQuantized(OpBuilder &b, Location loc,
                                 const DataBuffer &data, Value condition,
                                 Value values, const BlockScale &scale,
                                 ScaleRounding rounding,
                                 const ElementConversion &conversion,
                                 ValueRange indices,
                                 llvm::Align packedAlignment) {
  auto type = cast<VectorType>(values.getType());
  int64_t length = type.getNumElements();
  if (!conversion.isEmbedded() || length % 16 != 0)
    return data.store(
        b, loc, condition,
        quantizeVector(b, loc, values, scale, rounding, conversion), indices);
  Value scaled = applyScaleFactors(
      b, loc, values, vector::BroadcastOp::create(b, loc, type, scale.factor),
      rounding);
  auto groupType = VectorType::get({4}, b.getF32Type());
  Value nanMask = vector::BroadcastOp::create(
      b, loc, groupType.clone(b.getI1Type()), scale.isNaN);
  SmallVector<Value> groups;
  for (int64_t first = 0; first < length; first += 4)
    groups.push_back(convertToPackedFP6(
        b, loc,
        vector::ShuffleOp::create(
            b, loc, scaled, scaled,
            llvm::to_vector(llvm::seq<int64_t>(first, first + 4))),
        conversion, nanMask));
  SmallVector<Value> words =
      joinPackedGroups(b, loc, groups, conversion.format.bitWidth);
  data.storePacked(b, loc, condition,
                   vector::FromElementsOp::create(
                       b, loc,
                       VectorType::get({int64_t(words.size())}, b.getI32Type()),
                       words),
                   indices, packedAlignment);
}

Value gpu_kernels::widenPackedFP6(OpBuilder &b, Location loc, Value group) {
  auto constant = [&](uint32_t v) {
    return arith::ConstantIntOp::create(b, loc, static_cast<int32_t>(v), 32);
  };
  auto spread = [&](Value x, uint32_t keep, unsigned shift, uint32_t moved) {
    Value up = arith::ShLIOp::create(b, loc, x, constant(shift));
    return arith::OrIOp::create(
        b, loc, arith::AndIOp::create(b, loc, x, constant(keep)),
        arith::AndIOp::create(b, loc, up, constant(moved)));
  };
  // Codes 6 bits apart to bytes: the two halves of 12 bits 16 bits apart,
  // then the two codes of each half 8 bits apart.
  Value halves = spread(group, 0xFFF, 4, 0x0FFF0000);
  Value bytes = spread(halves, 0x003F003F, 2, 0x3F003F00);
  // Each sign (bit 5 of its byte) moves to bit 7, over the wider exponent's
  // two high bits, which the embedded values leave clear: adding 96 to a
  // byte with bit 5 set does it without a carry out of the byte.
  Value signs = arith::AndIOp::create(b, loc, bytes, constant(0x20202020));
  return arith::AddIOp::create(
      b, loc, bytes, arith::MulIOp::create(b, loc, signs, constant(3)));
}

Value gpu_kernels::decodeElements(OpBuilder &b, Location loc, Value codes,
                                  const ElementConversion &conversion) {
  auto type = cast<VectorType>(codes.getType());
  if (!conversion.hardware)
    return buildExtFromElementBits(b, loc, codes, conversion.format.type);
  const ElementFormat &hardware = *conversion.hardware;
  auto pairType = VectorType::get({2}, b.getF16Type());
  SmallVector<Value> halves;
  for (int64_t i = 0; i < type.getNumElements(); i += 2) {
    Value pair = vector::ShuffleOp::create(b, loc, codes, codes,
                                           ArrayRef<int64_t>{i, i + 1});
    // The low byte (the lower address) becomes element 0. Every FP8 and FP6
    // value is an f16, so this is exact.
    Value converted =
        hardware.bitWidth == 8
            ? NVVM::ConvertF8x2ToF16x2Op::create(b, loc, pairType, pair,
                                                 /*relu=*/false, hardware.type)
                  .getResult()
            : NVVM::ConvertF6x2ToF16x2Op::create(b, loc, pairType, pair,
                                                 /*relu=*/false, hardware.type)
                  .getResult();
    halves.push_back(vector::ExtractOp::create(b, loc, converted, 0));
    halves.push_back(vector::ExtractOp::create(b, loc, converted, 1));
  }
  auto halvesType = type.clone(b.getF16Type());
  Value f16 = vector::FromElementsOp::create(b, loc, halvesType, halves);
  // An embedded code's wider value times 2^-shift is its own value, which
  // f16 holds too: one f16x2 multiply a pair, exact.
  if (conversion.shift)
    f16 = arith::MulFOp::create(
        b, loc, f16,
        arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(halvesType, b.getF16FloatAttr(std::ldexp(
                                                   1.0f, -conversion.shift)))));
  return arith::ExtFOp::create(b, loc, type.clone(b.getF32Type()), f16);
}

//===----------------------------------------------------------------------===//
// DataBuffer
//===----------------------------------------------------------------------===//

DataBuffer::DataBuffer(OpBuilder &b, Location loc, RankedTensorType type,
                       int64_t inner)
    : type(type), format(getVerifiedElementFormat(type.getElementType())) {
  if (!format.isPacked()) {
    elements = allocFolded(b, loc, type, inner);
    return;
  }
  int64_t cols = format.getStoredBytes(type.getShape().back()) / 4;
  bytes = allocDevice(
      b, loc,
      RankedTensorType::get({format.getStoredBytes(type.getNumElements())},
                            b.getI8Type()));
  words = memref::ViewOp::create(
      b, loc,
      MemRefType::get({type.getNumElements() / type.getShape().back(), cols},
                      b.getI32Type()),
      bytes, cIndex(b, loc, 0), ValueRange{});
}

/// The codes (an i8 vector of a multiple of 4, `bits` significant bits each)
/// packed from bit 0 into 32-bit words, element 0 lowest; the last word may
/// be partial. A word of four codes is packed in place first (code i moves
/// down by (8 - bits) * i bits: 4 shifts and masks a word, not 4 extracts),
/// then the groups are joined.
static SmallVector<Value> packCodeBits(OpBuilder &b, Location loc, Value codes,
                                       int64_t bits) {
  int64_t count = cast<VectorType>(codes.getType()).getNumElements();
  int64_t groupBits = 4 * bits;
  Value words = vector::BitCastOp::create(
      b, loc, VectorType::get({count / 4}, b.getI32Type()), codes);
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  SmallVector<Value> packed(llvm::divideCeil(count * bits, 32));
  auto place = [&](int64_t word, Value part) {
    packed[word] =
        packed[word]
            ? arith::OrIOp::create(b, loc, packed[word], part).getResult()
            : part;
  };
  for (int64_t g = 0; g < count / 4; ++g) {
    Value word = vector::ExtractOp::create(b, loc, words, g);
    Value group;
    for (int64_t i = 0; i < 4; ++i) {
      Value moved =
          i ? arith::ShRUIOp::create(b, loc, word, constant((8 - bits) * i))
                  .getResult()
            : word;
      Value part = arith::AndIOp::create(
          b, loc, moved, constant(((int64_t(1) << bits) - 1) << (bits * i)));
      group =
          group ? arith::OrIOp::create(b, loc, group, part).getResult() : part;
    }
    int64_t first = g * groupBits / 32, offset = g * groupBits % 32;
    place(
        first,
        offset
            ? arith::ShLIOp::create(b, loc, group, constant(offset)).getResult()
            : group);
    if (offset + groupBits > 32)
      place(first + 1,
            arith::ShRUIOp::create(b, loc, group, constant(32 - offset)));
  }
  return packed;
}

Value DataBuffer::packWords(OpBuilder &b, Location loc, Value codes) const {
  SmallVector<Value> packed = packCodeBits(b, loc, codes, format.bitWidth);
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({int64_t(packed.size())}, b.getI32Type()),
      packed);
}

Value DataBuffer::packBits(OpBuilder &b, Location loc, Value codes) const {
  SmallVector<Value> packed = packCodeBits(b, loc, codes, format.bitWidth);
  assert(packed.size() == 1 && "more than 32 bits of codes");
  return packed.front();
}

void DataBuffer::storeWords(OpBuilder &b, Location loc, Value condition,
                            Value wordValues, Value row, Value word,
                            llvm::Align alignment) const {
  auto store = [&](OpBuilder &nb, Location nl) {
    // Words of a row start 4-byte aligned (whole words per row); more only
    // where the caller knows it.
    vector::StoreOp::create(nb, nl, wordValues, words, ValueRange{row, word},
                            /*nontemporal=*/false, alignment);
  };
  if (!condition)
    return store(b, loc);
  buildIf(b, loc, condition, store);
}

void DataBuffer::storePacked(OpBuilder &b, Location loc, Value condition,
                             Value wordValues, ValueRange indices,
                             llvm::Align alignment) const {
  Value word = arith::DivUIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, indices.back(),
                            cIndex(b, loc, format.bitWidth)),
      cIndex(b, loc, 32));
  storeWords(b, loc, condition, wordValues, indices.front(), word, alignment);
}

void DataBuffer::store(OpBuilder &b, Location loc, Value condition, Value codes,
                       ValueRange indices) const {
  if (format.isPacked())
    return storePacked(b, loc, condition, packWords(b, loc, codes), indices);
  Value values = codes;
  if (!format.type.isInteger(8))
    values = arith::BitcastOp::create(
        b, loc, cast<VectorType>(codes.getType()).clone(format.type), codes);
  storeVectorIf(b, loc, condition, values, elements, indices);
}

Value DataBuffer::getWordAddress(OpBuilder &b, Location loc, Value row,
                                 Value word) const {
  IndexArith index{b, loc};
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, words);
  Value linear = index.fma(row, getRowBytes() / 4, word);
  return arith::AddIOp::create(
      b, loc, base,
      arith::MulIOp::create(b, loc, linear, cIndex(b, loc, 4)));
}

int64_t DataBuffer::getRowBytes() const {
  return cast<MemRefType>(words.getType()).getDimSize(1) * 4;
}

void DataBuffer::storeWordAt(OpBuilder &b, Location loc, Value condition,
                             Value word, Value address, int64_t offset) const {
  buildIf(b, loc, condition, [&](OpBuilder &nb, Location nl) {
    Value pointer = getGlobalPointer(
        nb, nl, arith::AddIOp::create(nb, nl, address, cIndex(nb, nl, offset)));
    LLVM::StoreOp::create(nb, nl, word, pointer, /*alignment=*/4);
  });
}

Value DataBuffer::toTensor(OpBuilder &b, Location loc) const {
  if (!format.isPacked())
    return toUnfoldedTensor(b, loc, elements, type);
  Value view = memref::ViewOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), bytes,
      cIndex(b, loc, 0), ValueRange{});
  return mx::toTensor(b, loc, view);
}
