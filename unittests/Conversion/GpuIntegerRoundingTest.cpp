//===- GpuIntegerRoundingTest.cpp - MXINT8 and FP6 steps of the GPU kernels
//===//
//
// The quantize and dequantize kernels of `sm_90a` spell two of the CPU
// lowering's rules in fewer steps (ElementConversion.cpp); the steps are
// replayed here on the host, with the same constants, against the rules:
//
// * MXINT8's code of a scaled value y is clamp(rne(y * 64), -127, 127)
//   (Numerics.cpp: the clamp after the exact scaling, then the f32 addition
//   of 1.5 * 2^23). The kernels clamp y to +-127/64 first and take the low
//   byte of fma(y, 64, 1.5 * 2^23); for a 16-bit input they do it in f16
//   after rounding y to f16, with 1.5 * 2^10. Checked on y = x * 2^k for
//   every bf16 and f16 pattern x and every k that keeps |y| at most 2 (what
//   a block's power-of-two factor gives), Inf included; NaN is the NaN
//   block's (the kernels' mask), not these steps'.
// * The FP6 dequantize spreads the four codes of 24 packed bits into the
//   bytes of the FP8 format that embeds them (widenPackedFP6): checked on
//   every 24-bit pattern against the code-by-code widening.
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/bit.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>

namespace {

using llvm::bit_cast;

uint32_t toBits(float x) { return bit_cast<uint32_t>(x); }

/// The rule: clamp(rne(y * 64), -127, 127) as the CPU lowering computes it.
int8_t referenceCode(float y) {
  float scaled = std::fmin(std::fmax(y * 64.0f, -127.0f), 127.0f);
  return static_cast<int8_t>(toBits(scaled + 0x1.8p23f) - toBits(0x1.8p23f));
}

/// The f32 steps of the kernels: clamp first, one FMA, the low byte.
int8_t f32Code(float y) {
  float clamped = std::fmin(std::fmax(y, -127.0f / 64), 127.0f / 64);
  return static_cast<int8_t>(toBits(std::fma(clamped, 64.0f, 0x1.8p23f)));
}

/// The f16x2 steps: y rounded to f16, clamped, one FMA with 1.5 * 2^10
/// rounded once to f16 (the product and the sum are exact in double), the
/// low byte of the half's bits.
int8_t f16Code(float y) {
  _Float16 half = static_cast<_Float16>(y);
  _Float16 limit = static_cast<_Float16>(127.0f / 64);
  _Float16 clamped = half > limit ? limit : half < -limit ? -limit : half;
  _Float16 sum =
      static_cast<_Float16>(static_cast<double>(clamped) * 64.0 + 1536.0);
  return static_cast<int8_t>(bit_cast<uint16_t>(sum) & 0xFF);
}

float bf16Value(uint32_t pattern) { return bit_cast<float>(pattern << 16); }

float f16Value(uint32_t pattern) {
  return static_cast<float>(bit_cast<_Float16>(static_cast<uint16_t>(pattern)));
}

/// The y = x * 2^k, among every 16-bit pattern x of a format (its value
/// `valueOf`) and every power of two that f32 holds (a block's factor is at
/// least 2^-127), with |y| at most 2 or infinite (what a block's factor
/// gives), whose `codeOf` differs from the rule's; the first few are
/// reported.
template <typename ValueOf, typename CodeOf>
int64_t countMismatches(const char *format, ValueOf valueOf, CodeOf codeOf) {
  int64_t mismatches = 0;
  for (uint32_t pattern = 0; pattern < 0x10000; ++pattern) {
    float x = valueOf(pattern);
    if (std::isnan(x))
      continue;
    for (int k = -149; k <= 150; ++k) {
      float y = x * std::ldexp(1.0f, k);
      if ((std::fabs(y) <= 2.0f || std::isinf(x)) &&
          codeOf(y) != referenceCode(y) && ++mismatches < 5)
        ADD_FAILURE() << format << " 0x" << std::hex << pattern << std::dec
                      << " * 2^" << k;
    }
  }
  return mismatches;
}

TEST(GpuIntegerRounding, F32StepsMatchTheRuleOnBF16Inputs) {
  EXPECT_EQ(countMismatches("bf16", bf16Value, f32Code), 0);
}

TEST(GpuIntegerRounding, F16StepsMatchTheRuleOnBF16Inputs) {
  EXPECT_EQ(countMismatches("bf16", bf16Value, f16Code), 0);
}

TEST(GpuIntegerRounding, F16StepsMatchTheRuleOnF16Inputs) {
  EXPECT_EQ(countMismatches("f16", f16Value, f16Code), 0);
}

/// An f32 value with 24 significant bits is not exact in f16: the f16 steps
/// round twice, which is why only 16-bit inputs take them (the test can
/// fail: this is the case it would catch).
TEST(GpuIntegerRounding, F16StepsNeedSixteenBitInputs) {
  float y = (0.5f + 0x1p-20f) / 64; // just above a tie once scaled by 64
  EXPECT_EQ(referenceCode(y), 1);
  EXPECT_EQ(f32Code(y), 1);
  EXPECT_EQ(f16Code(y), 0);
}

/// widenPackedFP6's steps on host words.
uint32_t widenPackedFP6(uint32_t group) {
  auto spread = [](uint32_t x, uint32_t keep, unsigned shift, uint32_t moved) {
    return (x & keep) | ((x << shift) & moved);
  };
  uint32_t halves = spread(group, 0xFFF, 4, 0x0FFF0000);
  uint32_t bytes = spread(halves, 0x003F003F, 2, 0x3F003F00);
  return bytes + (bytes & 0x20202020) * 3;
}

TEST(GpuIntegerRounding, WidenPackedFP6MatchesCodeByCode) {
  for (uint32_t group = 0; group < (1u << 24); ++group) {
    uint32_t expected = 0;
    for (unsigned i = 0; i < 4; ++i) {
      uint32_t code = (group >> (6 * i)) & 0x3F;
      expected |= ((code & 0x1F) | ((code & 0x20) << 2)) << (8 * i);
    }
    // Bits 24-31 of the loaded window belong to the next codes.
    uint32_t withNext = group | 0xA5000000u;
    ASSERT_EQ(widenPackedFP6(withNext), expected) << std::hex << group;
  }
}

} // namespace
