//===- Numerics.cpp - Scalar builders for the mx numerics -----------------===//
//
// Each builder works on IEEE bit patterns with integer arith ops only (plus
// the correctly rounded f32 divisions of the exact and NVFP4 scales), which
// lowers to any target and makes every special case explicit: NaN and Inf
// blocks, zero blocks, subnormal quotients and subnormal FP8 encodings. The
// power-of-two `ceil` exponent, which the spec defines through a division,
// is computed from amax's bits (CeilScaleExponent.h).
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/Utils/Numerics.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Dialect/MX/Utils/CeilScaleExponent.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mx;

namespace {

/// Small helper to keep the bit manipulation readable.
/// Its values are scalars, or vectors of `shape` (the builders that say so
/// take vectors, elementwise). It is also the word arithmetic `Ops` of
/// CeilScaleExponent.h on scalars.
struct BitBuilder {
  using Word = Value;
  using Bool = Value;

  OpBuilder &b;
  Location loc;
  VectorType shape = {};

  /// `type`, or the vector of it of `shape`.
  Type shaped(Type type) { return shape ? shape.clone(type) : type; }
  Value constant(TypedAttr scalar) {
    if (!shape)
      return arith::ConstantOp::create(b, loc, scalar);
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(shape.clone(scalar.getType()), scalar));
  }
  Value i32(int64_t v) {
    if (!shape)
      return arith::ConstantIntOp::create(b, loc, v, 32);
    return constant(b.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  Value f32(float v) { return constant(b.getF32FloatAttr(v)); }
  Value bitsToF32(Value v) {
    return arith::BitcastOp::create(b, loc, shaped(b.getF32Type()), v);
  }
  Value f32ToBits(Value v) {
    return arith::BitcastOp::create(b, loc, shaped(b.getI32Type()), v);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value band(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value bor(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(b, loc, x, y); }
  Value shr(Value x, Value y) { return arith::ShRUIOp::create(b, loc, x, y); }
  Value shr(Value x, unsigned amount) { return shr(x, i32(amount)); }
  Value constant(uint32_t v) { return i32(static_cast<int32_t>(v)); }
  Value ule(Value x, Value y) { return cmp(arith::CmpIPredicate::ule, x, y); }
  Value smin(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value t, Value f) {
    return arith::SelectOp::create(b, loc, c, t, f);
  }
  Value isNaN(Value f) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, f, f);
  }
  Value isInf(Value nonNegative) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                 nonNegative,
                                 f32(std::numeric_limits<float>::infinity()));
  }
};

constexpr int64_t kF32Pow2Minus127 = 0x00400000; // 2^-127, an f32 subnormal
constexpr int64_t kF32QuietNaN = 0x7FC00000;

} // namespace

CeilScaleConstants mx::getCeilScaleConstants(float maxFinite) {
  // A format outside this range would need another argument, not a wrong
  // exponent (every mx format is inside: 127/64 to 57344).
  if (!(maxFinite >= 1.0f && maxFinite < 0x1p126f))
    llvm::report_fatal_error("the ceil scale exponent needs maxfinite in "
                             "[1, 2^126) (CeilScaleExponent.h)");
  uint32_t maxBits = llvm::bit_cast<uint32_t>(maxFinite);
  // Bisection over amax's bits (non-negative floats order as their bits):
  // `low` always rounds to at most 2^-127 (0 / M = 0), `high` never (M / M).
  APFloat divisor(maxFinite), limit(std::ldexp(1.0f, -127));
  auto roundsToZeroExponent = [&](uint32_t bits) {
    APFloat quotient(APFloat::IEEEsingle(), APInt(32, bits));
    quotient.divide(divisor, APFloat::rmNearestTiesToEven);
    return quotient.compare(limit) != APFloat::cmpGreaterThan;
  };
  uint32_t low = 0, high = maxBits;
  while (high - low > 1) {
    uint32_t middle = low + (high - low) / 2;
    (roundsToZeroExponent(middle) ? low : high) = middle;
  }
  return {(128u << 23) - maxBits - 1, low};
}

Value mx::buildScaleExponent(OpBuilder &b, Location loc, Value amax,
                             ScaleRounding rounding, Type elementType) {
  assert(rounding != ScaleRounding::exact && "exact scales are not E8M0");
  BitBuilder bb{b, loc};
  Value exponent;
  if (rounding == ScaleRounding::ceil) {
    // The contract's exponent of q = amax / maxfinite (a correctly rounded
    // f32 division), from amax's bits: CeilScaleExponent.h says why the two
    // are equal, and CeilScaleExponentTest.cpp checks it.
    exponent = ceilScaleExponent(
        bb, bb.f32ToBits(amax),
        getCeilScaleConstants(static_cast<float>(getMaxFinite(elementType))));
  } else {
    // OCP MX: exponent(amax) - emax; amax is never negative here.
    Value biased = bb.shr(bb.f32ToBits(amax), bb.i32(23));
    exponent = bb.sub(biased, bb.i32(getEmax(elementType)));
    exponent = arith::MaxSIOp::create(b, loc, exponent, bb.i32(0));
  }
  return clampScaleExponent(bb, exponent, bb.isInf(amax), bb.isNaN(amax));
}

Value mx::buildExactScale(OpBuilder &b, Location loc, Value amax,
                          Type elementType) {
  BitBuilder bb{b, loc};
  Value quotient = arith::DivFOp::create(
      b, loc, amax, bb.f32(static_cast<float>(getMaxFinite(elementType))));
  // A zero quotient (an all-zero block, or an amax so small that the division
  // underflows) would turn every element into 0/0.
  Value isZero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                       quotient, bb.f32(0.0f));
  quotient =
      bb.select(isZero, bb.bitsToF32(bb.i32(kF32Pow2Minus127)), quotient);
  quotient = bb.select(bb.isInf(amax),
                       bb.f32(std::numeric_limits<float>::max()), quotient);
  // A NaN's sign and payload after the division are the target's (x86 keeps
  // the input's, NVIDIA GPUs give 0x7FFFFFFF); the contract's is 0x7FC00000.
  return bb.select(bb.isNaN(amax), bb.bitsToF32(bb.i32(kF32QuietNaN)),
                   quotient);
}

Value mx::buildScaleValue(OpBuilder &b, Location loc, Value exponent) {
  BitBuilder bb{b, loc};
  using P = arith::CmpIPredicate;
  Value bits = bb.shl(exponent, bb.i32(23));
  bits = bb.select(bb.cmp(P::eq, exponent, bb.i32(0)),
                   bb.i32(kF32Pow2Minus127), bits);
  bits = bb.select(bb.cmp(P::eq, exponent, bb.i32(kNaNScaleExponent)),
                   bb.i32(kF32QuietNaN), bits);
  return bb.bitsToF32(bits);
}

Value mx::buildInverseScaleValue(OpBuilder &b, Location loc, Value exponent) {
  BitBuilder bb{b, loc};
  using P = arith::CmpIPredicate;
  // 2^(127 - e) has the biased f32 exponent 254 - e.
  Value bits = bb.shl(bb.sub(bb.i32(2 * 127), exponent), bb.i32(23));
  bits = bb.select(bb.cmp(P::eq, exponent, bb.i32(kMaxScaleExponent)),
                   bb.i32(kF32Pow2Minus127), bits);
  bits = bb.select(bb.cmp(P::eq, exponent, bb.i32(kNaNScaleExponent)),
                   bb.i32(kF32QuietNaN), bits);
  return bb.bitsToF32(bits);
}

/// MXINT8's code of f32 `value`: clamp(rne(value * 2^fraction), -max, max),
/// the rounding done by adding 1.5 * 2^23, whose f32 neighbours are 1 apart,
/// so that the code is the sum's bits minus the constant's. NaN gives 0.
static Value buildTruncToIntegerCode(BitBuilder &bb, Value value,
                                     const ElementFormat &fmt) {
  // Elementwise on vectors: the GPU kernels convert MXINT8 with this.
  OpBuilder &b = bb.b;
  Location loc = bb.loc;
  float limit = static_cast<float>(fmt.maxFiniteCode);
  Value scaled = arith::MulFOp::create(
      b, loc, value, bb.f32(std::ldexp(1.0f, fmt.mantissaBits)));
  Value clamped = arith::MinimumFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, scaled, bb.f32(-limit)),
      bb.f32(limit));
  constexpr float kMagic = 0x1.8p23f;
  Value code = bb.sub(
      bb.f32ToBits(arith::AddFOp::create(b, loc, clamped, bb.f32(kMagic))),
      bb.f32ToBits(bb.f32(kMagic)));
  code = bb.select(bb.isNaN(value), bb.i32(fmt.getNaNBlockCode()), code);
  return arith::TruncIOp::create(
      b, loc, bb.shaped(b.getIntegerType(fmt.bitWidth)), code);
}

Value mx::buildTruncToElementBits(OpBuilder &b, Location loc, Value value,
                                  Type elementType) {
  ElementFormat fmt = getVerifiedElementFormat(elementType);
  BitBuilder bb{b, loc, dyn_cast<VectorType>(value.getType())};
  if (fmt.isInteger)
    return buildTruncToIntegerCode(bb, value, fmt);
  assert(!bb.shape && "float formats convert scalars");
  using P = arith::CmpIPredicate;
  Value bits = bb.f32ToBits(value);
  int signShift = 32 - fmt.bitWidth;
  Value sign =
      bb.band(bb.shr(bits, bb.i32(signShift)), bb.i32(1 << (fmt.bitWidth - 1)));
  Value magnitude = bb.band(bits, bb.i32(0x7FFFFFFF));

  // Normal results: round the f32 mantissa to `mantissaBits` to nearest even
  // by adding half an ulp minus one plus the kept lsb, then rebias. A carry
  // into the exponent is the correct rounding to the next binade.
  int shift = 23 - fmt.mantissaBits;
  Value keptLsb = bb.band(bb.shr(magnitude, bb.i32(shift)), bb.i32(1));
  Value rounded = bb.add(magnitude, bb.add(keptLsb, bb.i32((1 << (shift - 1)) - 1)));
  Value normalCode =
      bb.sub(bb.shr(rounded, bb.i32(shift)),
             bb.i32(int64_t(127 - fmt.bias) << fmt.mantissaBits));

  // Subnormal results: the significand (implicit bit made explicit) shifted
  // right so that one unit is the smallest subnormal, rounded to nearest even.
  // Shifts past 25 round to zero for every f32 significand, so they clamp.
  Value exponent = bb.shr(magnitude, bb.i32(23));
  Value significand =
      bb.bor(bb.band(magnitude, bb.i32(0x7FFFFF)), bb.i32(0x800000));
  Value rshift = bb.sub(bb.i32(151 - fmt.bias - fmt.mantissaBits), exponent);
  rshift = arith::MinUIOp::create(b, loc, rshift, bb.i32(25));
  Value truncated = bb.shr(significand, rshift);
  Value remainder =
      bb.band(significand, bb.sub(bb.shl(bb.i32(1), rshift), bb.i32(1)));
  Value half = bb.shl(bb.i32(1), bb.sub(rshift, bb.i32(1)));
  Value tieToOdd = arith::AndIOp::create(
      b, loc, bb.cmp(P::eq, remainder, half),
      bb.cmp(P::ne, bb.band(truncated, bb.i32(1)), bb.i32(0)));
  Value roundUp = arith::OrIOp::create(b, loc, bb.cmp(P::ugt, remainder, half),
                                       tieToOdd);
  Value subnormalCode = bb.add(
      truncated, arith::ExtUIOp::create(b, loc, b.getI32Type(), roundUp));

  int64_t minNormalBits = int64_t(127 - fmt.bias + 1) << 23;
  uint32_t maxFiniteBits =
      llvm::bit_cast<uint32_t>(static_cast<float>(fmt.maxFinite));
  Value code = bb.select(bb.cmp(P::ult, magnitude, bb.i32(minNormalBits)),
                         subnormalCode, normalCode);
  code = bb.select(bb.cmp(P::ugt, magnitude, bb.i32(maxFiniteBits)),
                   bb.i32(fmt.maxFiniteCode), code);
  code = bb.bor(code, sign);
  code = bb.select(bb.cmp(P::ugt, magnitude, bb.i32(0x7F800000)),
                   bb.i32(fmt.getNaNBlockCode()), code);
  return arith::TruncIOp::create(b, loc, b.getIntegerType(fmt.bitWidth), code);
}

Value mx::buildExtFromElementBits(OpBuilder &b, Location loc, Value bits,
                                  Type elementType) {
  ElementFormat fmt = getVerifiedElementFormat(elementType);
  BitBuilder bb{b, loc, dyn_cast<VectorType>(bits.getType())};
  using P = arith::CmpIPredicate;
  if (fmt.isInteger) {
    // c * 2^-fraction: both factors and the product are exact in f32. Also
    // elementwise on vectors, for the GPU kernels.
    return arith::MulFOp::create(
        b, loc,
        arith::SIToFPOp::create(b, loc, bb.shaped(b.getF32Type()), bits),
        bb.f32(std::ldexp(1.0f, -static_cast<int>(fmt.mantissaBits))));
  }
  assert(!bb.shape && "float formats decode scalars");
  Value byte = arith::ExtUIOp::create(b, loc, b.getI32Type(), bits);
  Value sign = bb.shl(bb.band(byte, bb.i32(1 << (fmt.bitWidth - 1))),
                      bb.i32(32 - fmt.bitWidth));
  int64_t exponentMask = (1 << fmt.exponentBits) - 1;
  Value exponent = bb.band(bb.shr(byte, bb.i32(fmt.mantissaBits)),
                           bb.i32(exponentMask));
  Value mantissa = bb.band(byte, bb.i32((1 << fmt.mantissaBits) - 1));

  Value normal = bb.bor(
      bb.shl(bb.add(exponent, bb.i32(127 - fmt.bias)), bb.i32(23)),
      bb.shl(mantissa, bb.i32(23 - fmt.mantissaBits)));
  // A subnormal is mantissa * 2^(1 - bias - mantissaBits), exact in f32.
  Value subnormal = arith::MulFOp::create(
      b, loc, arith::UIToFPOp::create(b, loc, b.getF32Type(), mantissa),
      bb.f32(std::ldexp(1.0f, 1 - fmt.bias - fmt.mantissaBits)));
  Value magnitude = bb.select(bb.cmp(P::eq, exponent, bb.i32(0)),
                              bb.f32ToBits(subnormal), normal);

  if (!fmt.nanCode)
    return bb.bitsToF32(bb.bor(magnitude, sign));
  Value allOnes = bb.cmp(P::eq, exponent, bb.i32(exponentMask));
  Value isNaN;
  if (!fmt.hasInfinity) {
    // Like E4M3FN: no infinities; only S.1...1 is NaN.
    isNaN = arith::AndIOp::create(
        b, loc, allOnes,
        bb.cmp(P::eq, mantissa, bb.i32((1 << fmt.mantissaBits) - 1)));
  } else {
    Value zeroMantissa = bb.cmp(P::eq, mantissa, bb.i32(0));
    isNaN = arith::AndIOp::create(
        b, loc, allOnes,
        arith::XOrIOp::create(b, loc, zeroMantissa,
                              arith::ConstantIntOp::create(b, loc, 1, 1)));
    magnitude = bb.select(arith::AndIOp::create(b, loc, allOnes, zeroMantissa),
                          bb.i32(0x7F800000), magnitude);
  }
  Value result = bb.select(isNaN, bb.i32(kF32QuietNaN), bb.bor(magnitude, sign));
  return bb.bitsToF32(result);
}

Value mx::buildStoredScale(OpBuilder &b, Location loc, Value exponent,
                           Type scaleType) {
  if (scaleType.isF32())
    return buildScaleValue(b, loc, exponent);
  Value byte = arith::TruncIOp::create(b, loc, b.getI8Type(), exponent);
  return arith::BitcastOp::create(b, loc, scaleType, byte);
}

Value mx::buildZeroBits(OpBuilder &b, Location loc, Type type) {
  unsigned width = type.getIntOrFloatBitWidth();
  Value zero = arith::ConstantIntOp::create(b, loc, 0, width);
  if (type.isInteger(width))
    return zero;
  return arith::BitcastOp::create(b, loc, type, zero);
}

/// The bits of a float of any width, as the integer of that width (an
/// integer as it is).
static Value bitcastToInteger(OpBuilder &b, Location loc, Value value) {
  if (isa<IntegerType>(value.getType()))
    return value;
  return arith::BitcastOp::create(
      b, loc, b.getIntegerType(value.getType().getIntOrFloatBitWidth()), value);
}

Value mx::buildScaleToF32(OpBuilder &b, Location loc, Value scale) {
  Type type = scale.getType();
  if (type.isF32())
    return scale;
  Value bits = bitcastToInteger(b, loc, scale);
  if (isNVFP4Scale(type))
    return buildExtFromElementBits(b, loc, bits, type);
  return buildScaleValue(b, loc,
                         arith::ExtUIOp::create(b, loc, b.getI32Type(), bits));
}

Value mx::buildDequantized(OpBuilder &b, Location loc, Value element,
                           Value scale, Value tensorScale, Type resultType) {
  Value value = buildExtFromElementBits(
      b, loc, bitcastToInteger(b, loc, element), element.getType());
  Value product =
      arith::MulFOp::create(b, loc, value, buildScaleToF32(b, loc, scale));
  if (tensorScale)
    product = arith::MulFOp::create(b, loc, product, tensorScale);
  Value isNaN = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO,
                                      product, product);
  if (resultType != product.getType())
    product = arith::TruncFOp::create(b, loc, resultType, product);
  Value quietNaN = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(resultType, APFloat::getQNaN(cast<FloatType>(resultType)
                                                      .getFloatSemantics())));
  return arith::SelectOp::create(b, loc, isNaN, quietNaN, product);
}

//===----------------------------------------------------------------------===//
// NVFP4 (two-level scaling)
//===----------------------------------------------------------------------===//

/// 448 * 6: the largest magnitude an E4M3 scale times an E2M1 element holds.
constexpr float kNVFP4Range = 448.0f * 6.0f;

Value mx::buildNVFP4TensorScale(OpBuilder &b, Location loc, Value finiteAmax) {
  BitBuilder bb{b, loc};
  Value scale = arith::DivFOp::create(b, loc, finiteAmax, bb.f32(kNVFP4Range));
  // Zero, or so small that 1/t overflows: t = 1 (docs/numerics.md).
  Value normal =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, scale,
                            bb.f32(std::numeric_limits<float>::min()));
  return bb.select(normal, scale, bb.f32(1.0f));
}

Value mx::buildNVFP4BlockScale(OpBuilder &b, Location loc, Value amax,
                               Value tensorScale) {
  BitBuilder bb{b, loc};
  Type e4m3 = b.getType<Float8E4M3FNType>();
  Value perElement = arith::DivFOp::create(
      b, loc, amax,
      bb.f32(static_cast<float>(getMaxFinite(b.getType<Float4E2M1FNType>()))));
  Value ratio = arith::DivFOp::create(b, loc, perElement, tensorScale);
  // minimumf/maximumf keep a NaN block's NaN, which encodes as 0x7F.
  Value clamped = arith::MinimumFOp::create(
      b, loc,
      arith::MaximumFOp::create(b, loc, ratio, bb.f32(std::ldexp(1.0f, -6))),
      bb.f32(static_cast<float>(getMaxFinite(e4m3))));
  Value bits = buildTruncToElementBits(b, loc, clamped, e4m3);
  return arith::BitcastOp::create(b, loc, e4m3, bits);
}

Value mx::buildNVFP4Factor(OpBuilder &b, Location loc, Value tensorScale,
                           Value blockScale) {
  BitBuilder bb{b, loc};
  Value inverse = arith::DivFOp::create(b, loc, bb.f32(1.0f), tensorScale);
  return arith::DivFOp::create(b, loc, inverse,
                               buildScaleToF32(b, loc, blockScale));
}

//===----------------------------------------------------------------------===//
// Delayed per-tensor scaling
//===----------------------------------------------------------------------===//

Value mx::buildDelayedScaleInverse(OpBuilder &b, Location loc, Value scale) {
  BitBuilder bb{b, loc};
  Value inverse = arith::DivFOp::create(b, loc, bb.f32(1.0f), scale);
  // As for exact scales: the NaN of the contract, not the target's.
  return bb.select(bb.isNaN(inverse), bb.bitsToF32(bb.i32(kF32QuietNaN)),
                   inverse);
}

Value mx::buildDelayedScale(OpBuilder &b, Location loc, Value a, Value scale,
                            Type elementType, int64_t margin) {
  BitBuilder bb{b, loc};
  Value quotient = arith::DivFOp::create(
      b, loc, bb.f32(static_cast<float>(getMaxFinite(elementType))), a);
  Value next = arith::DivFOp::create(
      b, loc, quotient, bb.f32(std::ldexp(1.0f, static_cast<int>(margin))));
  Value largest = bb.f32(std::numeric_limits<float>::max());
  next = bb.select(bb.isInf(next), largest, next);
  Value positive =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, a, bb.f32(0.0f));
  Value finite =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, a,
                            bb.f32(std::numeric_limits<float>::infinity()));
  Value usable = arith::AndIOp::create(b, loc, positive, finite);
  return bb.select(usable, next, scale);
}
