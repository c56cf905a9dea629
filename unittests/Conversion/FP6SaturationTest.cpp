//===- FP6SaturationTest.cpp - Saturated FP6 codes from FP8's cvt ---------===//
//
// On sm_90a the quantize kernels round FP6 with the `cvt` of the FP8 format
// that embeds it (E3M2 in E5M2 times 2^-12, E2M3 in E4M3 times 2^-6) and
// either clamp the values to +-maxFinite before it or, in the staged fused
// kernel, saturate the wider codes after it, narrowed and packed in one
// recipe (EmbeddedFP6Packing.h). That recipe is instantiated here on host
// words and compared with the format's own round-to-nearest-even of the
// clamped value (APFloat) on every bf16 pattern and f32 patterns just beside
// each, which holds every rounding tie, with the code in each byte of the
// word and all-ones codes around it; and with a byte-wise saturating
// narrowing (saturateNarrow) on every byte value in every position,
// NaN-block bytes included.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/Quantize/EmbeddedFP6Packing.h"

#include "llvm/ADT/APFloat.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using llvm::APFloat;
using llvm::APInt;

float fromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// `cvt.rn.satfinite` of `wide` (E5M2 or E4M3): round to nearest even,
/// saturating finite overflow (and Inf) at the max finite value.
uint32_t convertSatfinite(float x, const llvm::fltSemantics &wide) {
  APFloat value(x);
  bool lost;
  value.convert(wide, APFloat::rmNearestTiesToEven, &lost);
  if (!std::isnan(x) && (value.isInfinity() || value.isNaN()))
    value = APFloat::getLargest(wide, std::signbit(x));
  return value.bitcastToAPInt().getZExtValue();
}

/// The saturated narrowing of a word of four wide codes of a 6-bit format,
/// byte by byte: the exponent and mantissa bits stay, the sign moves down,
/// and a code with an exponent bit above the narrow format's becomes 0x1F.
uint32_t saturateNarrow(uint32_t words) {
  constexpr unsigned bits = 6;
  auto splat = [](uint32_t byte) { return byte * 0x01010101u; };
  uint32_t kept = words & splat((1u << (bits - 1)) - 1);
  uint32_t sign = (words >> (8 - bits)) & splat(1u << (bits - 1));
  uint32_t any = words;
  for (unsigned k = 1; k < 8 - bits; ++k)
    any |= words >> k;
  uint32_t over = any & splat(1u << (bits - 1));
  return kept | (over - (over >> (bits - 1))) | sign;
}

/// The narrow format's code of `x` clamped to +-maxFinite, rounded to
/// nearest even: what clamping before `cvt` computes.
uint32_t clampedCode(float x, const llvm::fltSemantics &narrow) {
  float limit = APFloat::getLargest(narrow).convertToFloat();
  APFloat value(std::fmin(std::fmax(x, -limit), limit));
  bool lost;
  value.convert(narrow, APFloat::rmNearestTiesToEven, &lost);
  return value.bitcastToAPInt().getZExtValue();
}

/// EmbeddedFP6Packing.h's word arithmetic on host words.
struct HostWordOps {
  using Word = uint32_t;
  Word constant(uint32_t v) { return v; }
  Word bitAnd(Word x, Word y) { return x & y; }
  Word bitOr(Word x, Word y) { return x | y; }
  Word sub(Word x, Word y) { return x - y; }
  Word shr(Word x, unsigned amount) { return x >> amount; }
  Word mux(Word x, Word y, uint32_t fromX) {
    return (x & fromX) | (y & ~fromX);
  }
};

/// Code `index` (6 bits) of a packed word.
uint32_t packedCode(uint32_t packed, unsigned index) {
  return (packed >> (6 * index)) & 0x3F;
}

/// The staged kernel's recipe on the word of four wide codes `word`, with
/// the NaN-block bytes of `keep` 0.
uint32_t packRecipe(uint32_t word, uint32_t keep) {
  HostWordOps ops;
  return mx::packEmbeddedFP6(ops, word, keep);
}

void checkFormat(const llvm::fltSemantics &narrow,
                 const llvm::fltSemantics &wide, int shift) {
  float factor = std::ldexp(1.0f, shift);
  int64_t mismatches = 0;
  auto check = [&](uint32_t bits) {
    float x = fromBits(bits);
    if (std::isnan(x))
      return;
    uint32_t code = convertSatfinite(x * factor, wide);
    uint32_t want = clampedCode(x, narrow);
    for (unsigned byte = 0; byte < 4; ++byte) {
      // The other bytes: codes with every overflow and sign bit set.
      uint32_t word = (0xFFFFFFFFu & ~(0xFFu << (8 * byte))) | code << (8 * byte);
      if (((saturateNarrow(word) >> (8 * byte)) & 0xFF) != want &&
          ++mismatches < 10)
        ADD_FAILURE() << "x = " << x << " (0x" << std::hex << bits
                      << "): wide code 0x" << code << ", byte " << byte;
      if (packedCode(packRecipe(word, 0xFFFFFFFFu), byte) != want &&
          ++mismatches < 10)
        ADD_FAILURE() << "packed: x = " << x << " (0x" << std::hex << bits
                      << "): wide code 0x" << code << ", byte " << byte;
    }
  };
  // Every bf16 pattern (every exponent, and the ties of the 2- or 3-bit
  // mantissa), and each with low f32 bits just above and below it.
  for (uint32_t high = 0; high < (1u << 16); ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0xFFFFu})
      check(high << 16 | low);
  EXPECT_EQ(mismatches, 0);
}

// Every wide byte in every position of the word, beside neighbours of every
// kind, gives saturateNarrow's code (bit 6 and 7 of the narrowed byte are
// zero, so it is the packed code), and 0 where its NaN-block byte is clear;
// the neighbours' codes are not disturbed.
TEST(FP6SaturationTest, PackedRecipeMatchesNarrowing) {
  const uint32_t neighbours[] = {0x00000000u, 0xFFFFFFFFu, 0x7F7F7F7Fu,
                                 0x80808080u, 0x9F603F20u, 0x5AA51E61u};
  int64_t mismatches = 0;
  for (uint32_t around : neighbours)
    for (unsigned byte = 0; byte < 4; ++byte)
      for (uint32_t code = 0; code < 256; ++code)
        for (bool nanBlock : {false, true}) {
          uint32_t word = (around & ~(0xFFu << (8 * byte))) | code << (8 * byte);
          uint32_t keep = nanBlock ? ~(0xFFu << (8 * byte)) : 0xFFFFFFFFu;
          uint32_t packed = packRecipe(word, keep);
          uint32_t narrowed = saturateNarrow(word);
          for (unsigned i = 0; i < 4; ++i) {
            uint32_t want = (nanBlock && i == byte)
                                ? 0
                                : (narrowed >> (8 * i)) & 0xFF;
            if (packedCode(packed, i) != want && ++mismatches < 10)
              ADD_FAILURE() << "word 0x" << std::hex << word << ", keep 0x"
                            << keep << ": code " << i << " is 0x"
                            << packedCode(packed, i) << ", want 0x" << want;
          }
        }
  EXPECT_EQ(mismatches, 0);
}

TEST(FP6SaturationTest, E3M2ThroughE5M2) {
  checkFormat(APFloat::Float6E3M2FN(), APFloat::Float8E5M2(), -12);
}

TEST(FP6SaturationTest, E2M3ThroughE4M3) {
  checkFormat(APFloat::Float6E2M3FN(), APFloat::Float8E4M3FN(), -6);
}

} // namespace
