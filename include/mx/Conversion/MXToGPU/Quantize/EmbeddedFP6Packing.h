//===- EmbeddedFP6Packing.h - FP6 codes packed from FP8 codes ---*- C++ -*-===//
//
// On sm_90a an FP6 element is rounded by the `cvt.rn.satfinite` of the FP8
// format that embeds it (E3M2 in E5M2 times 2^-12, E2M3 in E4M3 times 2^-6;
// ElementConversion.h). A word of four such FP8 codes, element 0 in the low
// byte, holds per byte the FP6 magnitude in bits 0-4, two exponent bits above
// FP6's range in bits 5-6 (set only where the value passed +-maxFinite, which
// then saturates: FP6 has no Inf or NaN) and the sign in bit 7.
//
// packEmbeddedFP6 turns that word into the four FP6 codes packed in 24 bits
// (element 0 lowest, as the data is stored), saturated, with NaN-block
// elements 0, in ten word operations that ptxas issues as shifts and LOP3s:
// the staged fused quantize kernel's recipe, where narrowing the bytes, then
// packing them, took fifteen. It is written once over a word arithmetic
// `Ops`, so that the kernel builder runs it on i32 IR values and the unit
// test (FP6SaturationTest.cpp) on host integers: the test checks the recipe
// the kernel runs, not a copy of it.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_QUANTIZE_EMBEDDEDFP6PACKING_H
#define MX_CONVERSION_MXTOGPU_QUANTIZE_EMBEDDEDFP6PACKING_H

#include <cstdint>

namespace mx {

/// The four FP6 codes of `wide` (four embedding FP8 codes) packed into bits
/// 0-23, element 0 lowest; bits 24-31 are unspecified. Bytes of `keep` that
/// are 0 give code 0 (NaN blocks), bytes 0xFF the code. `Ops` provides
/// `Word`, `constant(uint32_t)`, `bitAnd`, `bitOr`, `sub`,
/// `shr(Word, unsigned)` (logical) and `mux(a, b, uint32_t fromA)`, the bits
/// of `a` where `fromA` is set and of `b` elsewhere (one LOP3: written as
/// ANDs and ORs, LLVM narrows the masks to the bits it knows and ptxas then
/// needs two).
template <typename Ops>
typename Ops::Word packEmbeddedFP6(Ops &ops, typename Ops::Word wide,
                                   typename Ops::Word keep) {
  using Word = typename Ops::Word;
  auto mux = [&](Word a, Word b, uint32_t fromA) {
    return ops.mux(a, b, fromA);
  };
  // 0x20 in each byte with an overflow bit, then 0x1F there: the saturated
  // magnitude ORed over the byte's own, minus itself shifted to bit 0 (no
  // borrow leaves a byte). `cvt` rounds a value above +-maxFinite to a wider
  // value above it or to it, and one at most +-maxFinite to one at most it,
  // so this equals clamping the values to +-maxFinite first.
  Word over = ops.bitAnd(ops.bitOr(wide, ops.shr(wide, 1)),
                         ops.constant(0x20202020u));
  Word fill = ops.sub(over, ops.shr(over, 5));
  // Each byte's magnitude, and its sign moved from bit 7 to bit 5; bits 6
  // and 7 are left as they fall, since the packing below drops them.
  Word codes = mux(wide, ops.shr(wide, 2), 0x1F1F1F1Fu);
  codes = ops.bitAnd(ops.bitOr(codes, fill), keep);
  // Codes 0-1 and 2-3 joined into 12 bits in each half word, then the two
  // halves into 24 bits.
  Word pairs = mux(codes, ops.shr(codes, 2), 0x003F003Fu);
  return mux(pairs, ops.shr(pairs, 4), 0x00000FFFu);
}

} // namespace mx

#endif // MX_CONVERSION_MXTOGPU_QUANTIZE_EMBEDDEDFP6PACKING_H
