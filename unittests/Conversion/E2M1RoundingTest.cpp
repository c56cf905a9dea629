//===- E2M1RoundingTest.cpp - The sm_90a E2M1 rounding, bit for bit -------===//
//
// The FP4 kernels on sm_90a round to E2M1 with float min/max on magic sums
// (buildE2M1Codes in Fp4Kernels.cpp) instead of the CPU lowering's integer
// conversion (buildTruncToElementBits in Numerics.cpp). Both are written out
// here in plain C++, op for op, and compared: on every f32 pattern whose low
// 16 mantissa bits are near a rounding boundary (2^17 patterns per such
// low part, so every tie, its neighbours and every exponent), and, in the
// disabled test, on all 2^32 patterns (about ten minutes:
// `mx-unittests --gtest_also_run_disabled_tests --gtest_filter='E2M1*'`).
// NVFP4's E4M3 block scale is fused with its decoding the same way
// (buildNVFP4Scale), checked on every f32 in its range [2^-6, 448]. The
// rowwise kernels round in bf16x2 arithmetic (packBF16Codes): MXFP4's bf16
// blocks times their power-of-two factor, checked on every bf16 element under
// every factor, and other blocks' f32 products rounded to bf16 to odd first
// (roundToOddBF16), checked like the magic sums.
//
//===----------------------------------------------------------------------===//

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

float fromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

uint32_t toBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

/// buildTruncToElementBits for f4E2M1FN (bitWidth 4, 1 mantissa bit, bias 1).
uint32_t integerCode(uint32_t bits) {
  uint32_t sign = (bits >> 28) & 8;
  uint32_t magnitude = bits & 0x7FFFFFFF;
  uint32_t keptLsb = (magnitude >> 22) & 1;
  uint32_t rounded = magnitude + keptLsb + ((1u << 21) - 1);
  uint32_t normalCode = (rounded >> 22) - (126u << 1);
  uint32_t exponent = magnitude >> 23;
  uint32_t significand = (magnitude & 0x7FFFFF) | 0x800000;
  uint32_t rshift = std::min<uint32_t>(149 - exponent, 25);
  uint32_t truncated = significand >> rshift;
  uint32_t remainder = significand & ((1u << rshift) - 1);
  uint32_t half = 1u << (rshift - 1);
  bool roundUp =
      remainder > half || (remainder == half && (truncated & 1) != 0);
  uint32_t code = magnitude < (127u << 23) ? truncated + roundUp : normalCode;
  code = magnitude > 0x40C00000 ? 7 : code;
  code |= sign;
  return magnitude > 0x7F800000 ? 0 : code & 0xF;
}

/// buildE2M1Codes and packCodesInSoftware for one element.
uint32_t magicCode(uint32_t bits) {
  const float magic = 12582912.0f; // 1.5 * 2^23
  float m = fromBits(bits & 0x7FFFFFFF);
  float t = std::fmin(std::fmin(std::fma(m, 2.0f, magic), m + (magic + 2.0f)),
                      std::fma(m, 0.5f, magic + 4.0f));
  t = std::fmin(std::fmax(t, magic), magic + 7.0f);
  uint32_t sign = static_cast<int32_t>(bits) <= -0x800000 ? 8 : 0;
  return (toBits(t) + sign - toBits(magic)) & 0xF;
}

TEST(E2M1Rounding, BoundaryPatterns) {
  const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000,
                           0x8001, 0xFFFE, 0xFFFF};
  for (uint32_t high = 0; high < (1u << 16); ++high)
    for (uint32_t low : lows) {
      uint32_t bits = (high << 16) | low;
      ASSERT_EQ(integerCode(bits), magicCode(bits)) << std::hex << bits;
    }
}

TEST(E2M1Rounding, Specials) {
  for (float x : {0.0f, -0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                  6.0f, -5.0f, INFINITY, -INFINITY, NAN, -NAN})
    EXPECT_EQ(integerCode(toBits(x)), magicCode(toBits(x))) << x;
  EXPECT_EQ(magicCode(toBits(-0.0f)), 8u);
  EXPECT_EQ(magicCode(0xFFC00000), 0u);
  EXPECT_EQ(magicCode(toBits(-INFINITY)), 15u);
}

/// `v` (exact in a double) rounded to bf16, to nearest even, as the bf16x2
/// instructions round: subnormals kept, Inf past the largest finite value.
double roundToBF16(double v) {
  int exponent;
  std::frexp(v, &exponent);
  double quantum = std::ldexp(1.0, std::max(exponent, -125) - 8);
  double rounded = std::nearbyint(v / quantum) * quantum;
  return std::fabs(rounded) >= 0x1p128 ? std::copysign(INFINITY, v) : rounded;
}

/// packBF16Codes for one non-NaN bf16 element `x` (bits) under a
/// power-of-two `factor`: the product and the pieces rounded to bf16, the
/// magic 192 = 1.5 * 2^7, and the product's sign.
uint32_t bf16MagicCode(uint16_t x, float factor) {
  double s = roundToBF16(double(fromBits(uint32_t(x) << 16)) *
                         double(roundToBF16(factor)));
  double m = std::fabs(s);
  double t =
      std::fmin(std::fmin(roundToBF16(m * 2 + 192), roundToBF16(m + 194)),
                roundToBF16(m * 0.5 + 196));
  t = std::fmin(t, 199);
  return uint32_t(t - 192) | (std::signbit(s) ? 8 : 0);
}

TEST(E2M1Rounding, BF16EveryElementAndFactor) {
  // The factors 2^(127 - e) of MXFP4's E8M0 scales e = 0..254 (255 is NaN).
  for (int e = 0; e < 255; ++e) {
    float factor = std::ldexp(1.0f, 127 - e);
    for (uint32_t x = 0; x < (1u << 16); ++x) {
      float value = fromBits(x << 16);
      if (std::isnan(value))
        continue;
      ASSERT_EQ(integerCode(toBits(value * factor)),
                bf16MagicCode(uint16_t(x), factor))
          << std::hex << x << " e " << std::dec << e;
    }
  }
}

/// roundToOddBF16 for one f32 pattern: its high half, with the last bit set
/// where the low half is not zero.
uint16_t roundToOdd(uint32_t bits) {
  return uint16_t((bits >> 16) | ((bits & 0xFFFF) != 0));
}

/// An NVFP4 (or non-bf16 MXFP4) product on sm_90a: rounded to bf16 to odd,
/// then packBF16Codes (bf16MagicCode under factor 1).
uint32_t roundedToOddCode(uint32_t bits) {
  return bf16MagicCode(roundToOdd(bits), 1.0f);
}

TEST(E2M1Rounding, RoundedToOddBoundaryPatterns) {
  // Besides the boundary patterns, low halves near bf16's own midpoint.
  const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001,
                           0xFFFE, 0xFFFF, 0x4000, 0xC000};
  for (uint32_t high = 0; high < (1u << 16); ++high)
    for (uint32_t low : lows) {
      uint32_t bits = (high << 16) | low;
      if (std::isnan(fromBits(bits)))
        continue;
      ASSERT_EQ(integerCode(bits), roundedToOddCode(bits)) << std::hex << bits;
    }
}

/// buildTruncToElementBits for f8E4M3FN on a positive normal f32 (the
/// clamped NVFP4 ratio), and buildExtFromElementBits of that code.
std::pair<uint32_t, float> integerE4M3(uint32_t magnitude) {
  uint32_t keptLsb = (magnitude >> 20) & 1;
  uint32_t code =
      ((magnitude + keptLsb + ((1u << 19) - 1)) >> 20) - (120u << 3);
  uint32_t exponent = (code >> 3) & 0xF, mantissa = code & 7;
  return {code, fromBits(((exponent + 120) << 23) | (mantissa << 20))};
}

/// buildNVFP4Scale's rounding: the rounded f32 is the value.
std::pair<uint32_t, float> fusedE4M3(uint32_t bits) {
  uint32_t rounded = (bits + (((bits >> 20) & 1) + 0x7FFFF)) & 0xFFF00000;
  return {(rounded >> 20) - ((127 - 7) << 3), fromBits(rounded)};
}

TEST(E2M1Rounding, NVFP4ScaleEveryClampedRatio) {
  for (uint32_t bits = toBits(0x1p-6f); bits <= toBits(448.0f); ++bits) {
    auto [code, value] = integerE4M3(bits);
    auto [fusedCode, fusedValue] = fusedE4M3(bits);
    ASSERT_EQ(code, fusedCode) << std::hex << bits;
    ASSERT_EQ(toBits(value), toBits(fusedValue)) << std::hex << bits;
  }
}

TEST(E2M1Rounding, DISABLED_AllPatterns) {
  uint64_t mismatches = 0, roundedToOddMismatches = 0;
  for (uint64_t i = 0; i < (uint64_t(1) << 32); ++i) {
    uint32_t bits = uint32_t(i);
    mismatches += integerCode(bits) != magicCode(bits);
    roundedToOddMismatches += !std::isnan(fromBits(bits)) &&
                              integerCode(bits) != roundedToOddCode(bits);
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(roundedToOddMismatches, 0u);
}

} // namespace
