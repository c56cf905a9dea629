//===- CeilScaleExponentTest.cpp - The ceil exponent against the division -===//
//
// buildScaleExponent computes the `ceil` E8M0 exponent from amax's bits
// (CeilScaleExponent.h) where the spec defines it through the correctly
// rounded f32 quotient amax / maxfinite. The recipe is instantiated here on
// host words, with the constants buildScaleExponent uses, and compared with
// that definition, the division done in host f32 (IEEE round to nearest
// even), for every mx element format (getElementTypes, maxfinite from
// ElementFormat).
//
// Every f32 pattern (2^31 a format, six formats) takes about 30 s of one core
// of the build host, so the amaxes are those that decide the result:
// * every amax whose biased exponent is at most exponent(maxfinite) + 4: the
//   subnormal amaxes, every amax whose quotient is subnormal or zero, and the
//   first binades where the quotient is normal;
// * every amax whose biased exponent is at least 250: where the exponent
//   meets the 254 clamp (MXINT8's largest amaxes give 255 before it), +Inf
//   and every NaN, and every NaN with the sign bit set;
// * between them, every biased exponent with a few thousand mantissas: those
//   around maxfinite's mantissa (where `ceil` steps), the smallest and the
//   largest, and a stride over the rest.
// The first two sets cover the rest: between them both sides go up by
// exactly one when amax doubles. The quotient doubles exactly (it stays
// normal and finite), so its biased exponent grows by one and its mantissa
// stays; amax's bits grow by 2^23, so the recipe's shifted sum grows by one;
// and neither reaches a clamp (the exponent is at most 251 there). So from
// agreement on every mantissa at exponent(maxfinite) + 4 follows agreement
// on every mantissa at every exponent up to 249; the third set checks that
// step anyway where the comparison of the mantissas turns.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/Utils/CeilScaleExponent.h"
#include "mx/Dialect/MX/IR/ElementFormat.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/bit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

using namespace mx;

namespace {

float fromBits(uint32_t bits) { return llvm::bit_cast<float>(bits); }

/// The spec's `ceil` exponent (section 3): q = amax / maxFinite correctly
/// rounded; its biased exponent, plus one where its mantissa bits are not
/// zero; for subnormal q, 0 when q <= 2^-127, else 1; clamped to 254 (a +Inf
/// amax has q = +Inf, biased exponent 255); 255 for NaN.
uint32_t definedExponent(float amax, float maxFinite) {
  uint32_t q = llvm::bit_cast<uint32_t>(amax / maxFinite);
  uint32_t biased = q >> 23;
  uint32_t exponent = biased == 0 ? (q > 0x00400000u ? 1 : 0)
                                  : biased + ((q & 0x7FFFFFu) != 0 ? 1 : 0);
  exponent = std::min(exponent, kMaxScaleExponent);
  // Without an early return, so that the checking loop vectorizes.
  return std::isnan(amax) ? kNaNScaleExponent : exponent;
}

/// CeilScaleExponent.h's word arithmetic on host words, as BitBuilder
/// (Numerics.cpp) builds it in IR: arith.addi (wrapping), arith.shrui,
/// arith.cmpi ule, arith.select, arith.minsi.
struct HostWordOps {
  using Word = uint32_t;
  using Bool = bool;
  Word constant(uint32_t v) { return v; }
  Word add(Word x, Word y) { return x + y; }
  Word shr(Word x, unsigned amount) { return x >> amount; }
  Bool ule(Word x, Word y) { return x <= y; }
  Word select(Bool c, Word x, Word y) { return c ? x : y; }
  Word smin(Word x, Word y) {
    return static_cast<int32_t>(x) < static_cast<int32_t>(y) ? x : y;
  }
};

/// buildScaleExponent's `ceil` on host words: the recipe, then the clamps,
/// with its Inf test (cmpf oeq +Inf) and NaN test (cmpf uno).
uint32_t recipeExponent(uint32_t bits, const CeilScaleConstants &constants) {
  HostWordOps ops;
  float amax = fromBits(bits);
  return clampScaleExponent(ops, ceilScaleExponent(ops, bits, constants),
                            amax == std::numeric_limits<float>::infinity(),
                            std::isnan(amax));
}

/// One format's comparison: maxfinite, the recipe's constants and the
/// mismatches found so far (the first few are reported).
struct FormatCheck {
  float maxFinite;
  CeilScaleConstants constants;
  int64_t mismatches = 0;

  bool differs(uint32_t bits) const {
    return recipeExponent(bits, constants) !=
           definedExponent(fromBits(bits), maxFinite);
  }

  /// Compares `count` consecutive amax bits from `first`: counted in a loop
  /// that the compiler vectorizes, then, where any differ, reported.
  void range(uint32_t first, uint32_t count) {
    int64_t found = 0;
    for (uint32_t i = 0; i < count; ++i)
      found += differs(first + i) ? 1 : 0;
    for (uint32_t i = 0; found != 0 && i < count && mismatches < 10; ++i)
      if (differs(first + i))
        report(first + i);
    mismatches += found;
  }

  /// Compares the amax bits `bits`.
  void one(uint32_t bits) {
    if (!differs(bits))
      return;
    report(bits);
    ++mismatches;
  }

  void report(uint32_t bits) const {
    if (mismatches < 10)
      ADD_FAILURE() << "maxfinite " << maxFinite << ", amax bits 0x" << std::hex
                    << bits << ": recipe " << std::dec
                    << recipeExponent(bits, constants) << ", division "
                    << definedExponent(fromBits(bits), maxFinite);
  }
};

constexpr uint32_t kMantissas = 1u << 23;

TEST(CeilScaleExponent, MatchesTheDivisionForEveryFormat) {
  mlir::MLIRContext context;
  for (mlir::Type type : getElementTypes(&context)) {
    float maxFinite =
        static_cast<float>(getVerifiedElementFormat(type).maxFinite);
    FormatCheck check{maxFinite, getCeilScaleConstants(maxFinite)};
    uint32_t maxBits = llvm::bit_cast<uint32_t>(maxFinite);
    uint32_t maxExponent = maxBits >> 23, maxMantissa = maxBits & 0x7FFFFFu;
    uint32_t low = maxExponent - 127 + 4, high = 250;
    // Every amax from 0 through biased exponent `low`; from `high` through
    // the NaNs; the NaNs with the sign bit set.
    check.range(0, (low + 1) * kMantissas);
    check.range(high * kMantissas, (256 - high) * kMantissas);
    check.range(0xFF800001u, kMantissas - 1);
    // Between them, at every biased exponent: the mantissas around
    // maxfinite's, the ends, and every 4093rd.
    for (uint32_t exponent = low + 1; exponent < high; ++exponent) {
      uint32_t base = exponent << 23;
      for (int64_t delta = -2; delta <= 2; ++delta)
        check.one(base + static_cast<uint32_t>(maxMantissa + delta));
      for (uint32_t mantissa : {0u, 1u, 2u, kMantissas - 2, kMantissas - 1})
        check.one(base + mantissa);
      for (uint32_t mantissa = 7; mantissa < kMantissas; mantissa += 4093)
        check.one(base + mantissa);
    }
    EXPECT_EQ(check.mismatches, 0) << "maxfinite " << maxFinite;
  }
}

// The zero exponent's threshold is not the one the count of binades gives
// (bits(M) - 127 2^23): for E4M3 (M = 448) the amax one ulp above M 2^-127
// has a quotient that rounds down onto 2^-127, so its exponent is 0; for
// MXINT8 (M = 127/64) M 2^-127 is itself subnormal and the threshold is
// M (2^-127 + 2^-150) = (127 2^16 + 0.99) 2^-149, so the largest amax at or
// below it is 127 2^16 units of 2^-149 where the count says 0x7E0000.
TEST(CeilScaleExponent, ZeroLimitIsTheDivisions) {
  CeilScaleConstants e4m3 = getCeilScaleConstants(448.0f);
  uint32_t atLimit = llvm::bit_cast<uint32_t>(std::ldexp(448.0f, -127));
  EXPECT_EQ(e4m3.zeroLimit, atLimit + 1);
  EXPECT_EQ(definedExponent(fromBits(atLimit + 1), 448.0f), 0u);
  EXPECT_EQ(definedExponent(fromBits(atLimit + 2), 448.0f), 1u);
  EXPECT_EQ(e4m3.offset, (128u << 23) - llvm::bit_cast<uint32_t>(448.0f) - 1);
  EXPECT_EQ(getCeilScaleConstants(127.0f / 64.0f).zeroLimit, 127u << 16);
}

} // namespace
