//===- CeilScaleExponent.h - The ceil exponent from amax's bits -*- C++ -*-===//
//
// The contract (spec section 3) defines the `ceil` scale exponent of a block
// through the correctly rounded f32 quotient q = amax / maxfinite: b = the
// biased exponent of q, plus one when q's mantissa bits are non-zero; for
// subnormal q, 0 when q <= 2^-127, else 1; clamped to 254, 254 for +Inf and
// 255 for NaN. That is the least b >= 0 with q <= 2^(b-127), so b counts the
// powers of two 2^j, j >= -127, that q exceeds. This recipe computes the same
// b from amax's bits with an add, a shift and one compare; on the GPU the
// division alone was a dozen instructions and a slow-path branch.
//
// Why it is equal, for finite amax a >= 0 and maxfinite M in [1, 2^126)
// (every mx element format: 1.98 for MXINT8 to 57344 for E5M2):
// * q > 2^j implies a / M > 2^j (RN is monotonic and 2^j is an f32). The
//   converse fails only where a / M rounds down onto 2^j. For j >= -126
//   (2^j normal) that needs a / M in (2^j, 2^j (1 + 2^-24)], so a is normal
//   and the ratio of the significands m_a / m_M (both in [1, 2)) would lie in
//   (1, 1 + 2^-24] or (1/2, 1/2 + 2^-25]; but m_a > m_M means
//   m_a >= m_M + 2^-23, so m_a / m_M > 1 + 2^-24, and m_a / m_M >= 1 / m_M >
//   1/2 + 2^-25. So for j >= -126, q > 2^j exactly when a > M 2^j, that is
//   (non-negative floats order as their bits, and M 2^j is normal) when
//   bits(a) > bits(M) + j 2^23.
// * Counting those j: floor((bits(a) - bits(M) - 1) / 2^23) + 127 of them
//   where that is positive, that is (bits(a) + offset) >> 23 - 1 with
//   offset = 128 2^23 - bits(M) - 1.
// * j = -127, q > 2^-127, is decided by its own threshold: `zeroLimit`, the
//   largest amax bits whose quotient rounds to at most 2^-127, found with the
//   division itself (getCeilScaleConstants). It differs from the count's
//   bits(M) - 127 2^23: a / M just above 2^-127 rounds down onto it in the
//   subnormal range (one amax for FP8, FP6 and FP4; MXINT8's M 2^-127 is
//   itself subnormal).
// * Above zeroLimit a also exceeds bits(M) - 127 2^23, so the shift's
//   operand is at least 2^23: b = (bits(a) + offset) >> 23 there, 0 at or
//   below it. +Inf gives 255 - exponent(M), so it is set to 254 as the
//   contract's q = +Inf would be, and NaN to 255.
// CeilScaleExponentTest.cpp runs the recipe on host words against the
// division for every element format, on every amax that decides the result.
//
// The recipe is written once over a word arithmetic `Ops` (as
// EmbeddedFP6Packing.h is), so that buildScaleExponent runs it on i32 IR
// values and the unit test on host integers: the test checks the steps the
// kernels and the CPU lowering run, not a copy of them.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_UTILS_CEILSCALEEXPONENT_H
#define MX_DIALECT_MX_UTILS_CEILSCALEEXPONENT_H

#include <cstdint>

namespace mx {

/// The E8M0 byte of a NaN block and the largest finite scale exponent.
constexpr uint32_t kNaNScaleExponent = 255, kMaxScaleExponent = 254;

/// The constants of ceilScaleExponent for one max finite value.
struct CeilScaleConstants {
  /// Added to amax's bits before the shift by 23: 128 2^23 - bits(M) - 1.
  uint32_t offset;
  /// The largest amax bits whose quotient rounds to at most 2^-127.
  uint32_t zeroLimit;
};

/// The constants for `maxFinite` (an element format's, in [1, 2^126)),
/// zeroLimit by bisection on the correctly rounded f32 division (APFloat).
CeilScaleConstants getCeilScaleConstants(float maxFinite);

/// The `ceil` E8M0 exponent of a block, unclamped (0..255 for a finite
/// amax; what +Inf and NaN give, clampScaleExponent replaces), from the bits
/// `bits` of its amax, which is not negative. `Ops` provides `Word`, `Bool`,
/// `constant(uint32_t)`, `add` (wrapping), `shr(Word, unsigned)` (logical),
/// `ule` and `select(Bool, Word, Word)`.
template <typename Ops>
typename Ops::Word ceilScaleExponent(Ops &ops, typename Ops::Word bits,
                                     const CeilScaleConstants &constants) {
  typename Ops::Word above =
      ops.shr(ops.add(bits, ops.constant(constants.offset)), 23);
  typename Ops::Bool zero = ops.ule(bits, ops.constant(constants.zeroLimit));
  return ops.select(zero, ops.constant(0), above);
}

/// The contract's clamps of a power-of-two scale exponent `exponent`
/// (signed, at least 0): at most 254, 254 for an infinite amax and 255 for a
/// NaN one. `Ops` adds `smin` (signed) to ceilScaleExponent's.
template <typename Ops>
typename Ops::Word clampScaleExponent(Ops &ops, typename Ops::Word exponent,
                                      typename Ops::Bool isInf,
                                      typename Ops::Bool isNaN) {
  exponent = ops.smin(exponent, ops.constant(kMaxScaleExponent));
  exponent = ops.select(isInf, ops.constant(kMaxScaleExponent), exponent);
  return ops.select(isNaN, ops.constant(kNaNScaleExponent), exponent);
}

} // namespace mx

#endif // MX_DIALECT_MX_UTILS_CEILSCALEEXPONENT_H
