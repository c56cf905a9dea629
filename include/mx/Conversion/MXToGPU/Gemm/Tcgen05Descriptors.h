//===- Tcgen05Descriptors.h - Encoders of tcgen05 descriptors ---*- C++ -*-===//
//
// Pure bit-level encoders of what SM100's `tcgen05` instructions read besides
// their operands: the 64-bit shared-memory matrix descriptor (PTX ISA
// "Shared memory descriptor", tcgen05 version) of `tcgen05.mma` operands and
// of `tcgen05.cp` sources, and the 32-bit instruction descriptor of the
// block-scaled `tcgen05.mma` (PTX ISA "Instruction descriptor" tables for
// `.kind::mxf8f6f4` and for `.kind::mxf4` / `.kind::mxf4nvf4`). MLIR 22.1 has no
// op for the instruction descriptor, and `nvvm.tcgen05.mma_smem_desc` only
// masks its inputs, so the generator encodes both here, folded to
// constants, and unit tests check every field.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_GEMM_TCGEN05DESCRIPTORS_H
#define MX_CONVERSION_MXTOGPU_GEMM_TCGEN05DESCRIPTORS_H

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"

#include <cstdint>

namespace mx::gemm {

//===----------------------------------------------------------------------===//
// Shared-memory matrix descriptor
//===----------------------------------------------------------------------===//

/// The swizzle of a shared-memory operand: the encoding of descriptor bits
/// 61-63. Unlike wgmma's two-bit field, 128B swizzle is 2 here, and 1 is the
/// 128B swizzle of 32-byte atoms.
enum class Tcgen05Swizzle : uint64_t {
  none = 0,
  bytes128Atom32 = 1,
  bytes128 = 2,
  bytes64 = 4,
  bytes32 = 6,
};

/// Fields of a tcgen05 shared-memory descriptor, offsets in bytes.
struct Tcgen05SmemDescriptorFields {
  /// Shared::cta address of the first core matrix.
  uint32_t startAddress = 0;
  /// Leading dimension byte offset (between core matrices along the
  /// leading dimension; unused by swizzled K-major tiles).
  uint32_t leadingByteOffset = 0;
  /// Stride dimension byte offset: between groups of 8 rows.
  uint32_t strideByteOffset = 0;
  /// Bits 7-9 of the address where the swizzle pattern starts (0 for a tile
  /// aligned to its swizzle's repeat).
  uint32_t baseOffset = 0;
  /// Bit 52: the leading byte offset is an absolute address, not a distance.
  bool absoluteLeadingOffset = false;
  Tcgen05Swizzle swizzle = Tcgen05Swizzle::none;
};

/// Bits 46-48 hold the fixed value 0b001 that marks the SM100 format.
constexpr uint64_t kTcgen05DescriptorVersion = 1;

/// Encodes a descriptor: start address in bits 0-13, LBO in 16-29, SBO in
/// 32-45, the version in 46-48, base offset in 49-51, LBO mode in bit 52 and
/// the swizzle in 61-63. Addresses and offsets are encoded as in wgmma's
/// descriptor: bytes >> 4 in 14 bits.
constexpr uint64_t
encodeTcgen05SmemDescriptor(const Tcgen05SmemDescriptorFields &f) {
  auto field = [](uint64_t bytes) {
    return (bytes >> kWgmmaFieldShift) & kWgmmaFieldMask;
  };
  return field(f.startAddress) | (field(f.leadingByteOffset) << 16) |
         (field(f.strideByteOffset) << 32) | (kTcgen05DescriptorVersion << 46) |
         ((uint64_t(f.baseOffset) & 0x7) << 49) |
         (uint64_t(f.absoluteLeadingOffset) << 52) |
         (uint64_t(f.swizzle) << 61);
}

/// A K-major operand tile of `rowBytes`-byte rows (128 or 64) as TMA writes
/// it with the swizzle of the row's width: 8-row groups of 8 rows (SBO), one
/// core matrix along K per swizzled row (LBO unused, conventionally 16
/// bytes). 128-byte rows hold 128 FP8 (or unpacked FP6/FP4) elements of
/// `.kind::mxf8f6f4`; 64-byte rows 128 packed E2M1 elements of
/// `.kind::mxf4*`. An `mma` of K = 32 bytes (32 unpacked or 64 packed
/// elements) starts `32 * k` bytes into the row: the start address moves,
/// the swizzle phase comes from the address bits, as with wgmma.
constexpr Tcgen05SmemDescriptorFields
getTcgen05KMajorSwizzledTile(uint32_t startAddress, uint32_t rowBytes = 128) {
  Tcgen05SmemDescriptorFields f;
  f.startAddress = startAddress;
  f.leadingByteOffset = 16;
  f.strideByteOffset = 8 * rowBytes;
  f.swizzle =
      rowBytes == 64 ? Tcgen05Swizzle::bytes64 : Tcgen05Swizzle::bytes128;
  return f;
}

/// The source of `tcgen05.cp .32x128b`: 32 rows of 16 bytes, unswizzled and
/// contiguous, i.e. four 8x16-byte core matrices 128 bytes apart (SBO) and
/// one along the row (LBO unused). A 128x4 E8M0 scale chunk of
/// `mx.swizzle` is exactly this: row r holds the 4 K-block scales of rows
/// r, r + 32, r + 64 and r + 96.
constexpr Tcgen05SmemDescriptorFields
getTcgen05ScaleChunk(uint32_t startAddress) {
  Tcgen05SmemDescriptorFields f;
  f.startAddress = startAddress;
  f.strideByteOffset = 128;
  return f;
}

//===----------------------------------------------------------------------===//
// Instruction descriptor of block-scaled MMA
//===----------------------------------------------------------------------===//

/// The block-scaled MMA kinds. `.kind::mxf8f6f4` takes FP8, FP6 and FP4
/// operands in any mix with UE8M0 scales per 32 elements (K = 32 per MMA);
/// `.kind::mxf4` E2M1 operands with UE8M0 scales per 32 and
/// `.kind::mxf4nvf4` E2M1 operands with UE8M0 per 32 or UE4M3 per 16 (K =
/// 64 per dense MMA).
enum class Tcgen05BlockScaledKind { mxf8f6f4, mxf4, mxf4nvf4 };

/// The kind as PTX spells it.
constexpr const char *
stringifyTcgen05BlockScaledKind(Tcgen05BlockScaledKind kind) {
  switch (kind) {
  case Tcgen05BlockScaledKind::mxf8f6f4:
    return "mxf8f6f4";
  case Tcgen05BlockScaledKind::mxf4:
    return "mxf4";
  case Tcgen05BlockScaledKind::mxf4nvf4:
    return "mxf4nvf4";
  }
  return "";
}

/// Operand formats of `.kind::mxf8f6f4` (bits 7-9 for A, 10-12 for B, these
/// codes). `.kind::mxf4` and `.kind::mxf4nvf4` take e2m1 only, whose code in
/// their table is 1 (A: bits 7-9, B: bits 10-11).
enum class Tcgen05OperandFormat : uint32_t {
  e4m3 = 0,
  e5m2 = 1,
  e2m3 = 3,
  e3m2 = 4,
  e2m1 = 5,
};

/// The scale factors' format (bit 23).
enum class Tcgen05ScaleFormat : uint32_t {
  ue4m3 = 0, // NVFP4's E4M3 scales of 16-element blocks
  ue8m0 = 1, // MX: E8M0 scales of 32-element blocks
};

struct BlockScaledInstructionFields {
  Tcgen05BlockScaledKind kind = Tcgen05BlockScaledKind::mxf8f6f4;
  Tcgen05OperandFormat a = Tcgen05OperandFormat::e4m3;
  Tcgen05OperandFormat b = Tcgen05OperandFormat::e4m3;
  Tcgen05ScaleFormat scaleFormat = Tcgen05ScaleFormat::ue8m0;
  /// The MMA shape: M = 128 (one CTA; 256 with two), N a multiple of 16 up
  /// to 256. The block-scaled kinds have no M = 64.
  uint32_t m = 128, n = 256;
  /// Which byte of each 32-bit scale-factor element in tensor memory this
  /// MMA reads (0-3): the K block of 32 within the 128-K group that one
  /// `tcgen05.cp` column holds. `.kind::mxf4*` with two scales per MMA
  /// (32-element blocks) take 0 or 2, with four (16-element blocks) 0.
  uint32_t aScaleId = 0, bScaleId = 0;
  bool negateA = false, negateB = false;
  /// false: K-major (K contiguous, the TN form the scales are blocked along).
  bool transposeA = false, transposeB = false;
  /// `.kind::mxf4*` only, bit 31: dense K = 96 instead of 64.
  bool denseK96 = false;
};

/// The code of `format` in the instruction descriptor of `kind`.
constexpr uint32_t getOperandFormatCode(Tcgen05BlockScaledKind kind,
                                        Tcgen05OperandFormat format) {
  return kind == Tcgen05BlockScaledKind::mxf8f6f4 ? uint32_t(format) : 1;
}

/// Whether the PTX ISA allows the fields' combination: `.kind::mxf4*` on
/// E2M1 operands with the scale ids their scale vector has, UE4M3 scales
/// for `.kind::mxf4nvf4` only, bit 31 for `.kind::mxf4*` only.
constexpr bool isValidBlockScaledInstruction(
    const BlockScaledInstructionFields &f) {
  if (f.kind == Tcgen05BlockScaledKind::mxf8f6f4)
    return f.scaleFormat == Tcgen05ScaleFormat::ue8m0 && !f.denseK96 &&
           f.aScaleId < 4 && f.bScaleId < 4;
  bool scales32 = f.scaleFormat == Tcgen05ScaleFormat::ue8m0;
  auto validId = [&](uint32_t id) {
    return scales32 ? id == 0 || id == 2 : id == 0;
  };
  return f.a == Tcgen05OperandFormat::e2m1 &&
         f.b == Tcgen05OperandFormat::e2m1 && validId(f.aScaleId) &&
         validId(f.bScaleId) &&
         (scales32 || f.kind == Tcgen05BlockScaledKind::mxf4nvf4);
}

/// Encodes the descriptor (PTX ISA "Instruction descriptor format for
/// .kind::mxf8f6f4" and "... for .kind::mxf4 and .kind::mxf4nvf4"): B scale
/// id in bits 4-5, A and B formats in 7-9 and 10-12 (10-11 for mxf4*),
/// negation in 13-14, majorness in 15-16, N >> 3 in 17-22, the scale format
/// in 23, M >> 7 in 27-28 (24-26 reserved; CUTLASS's M >> 4 in 24-28 is the
/// same for the M = 128 and 256 that block scaling has), A scale id in
/// 29-30, and for mxf4* the K dimension in 31. Dense MMA, so the sparsity
/// bits 0-2 are zero.
constexpr uint32_t
encodeBlockScaledInstruction(const BlockScaledInstructionFields &f) {
  bool mxf4 = f.kind != Tcgen05BlockScaledKind::mxf8f6f4;
  uint32_t bMask = mxf4 ? 0x3 : 0x7;
  return ((f.bScaleId & 0x3) << 4) |
         ((getOperandFormatCode(f.kind, f.a) & 0x7) << 7) |
         ((getOperandFormatCode(f.kind, f.b) & bMask) << 10) |
         (uint32_t(f.negateA) << 13) | (uint32_t(f.negateB) << 14) |
         (uint32_t(f.transposeA) << 15) | (uint32_t(f.transposeB) << 16) |
         (((f.n >> 3) & 0x3F) << 17) | (uint32_t(f.scaleFormat) << 23) |
         (((f.m >> 7) & 0x3) << 27) | ((f.aScaleId & 0x3) << 29) |
         (uint32_t(mxf4 && f.denseK96) << 31);
}

} // namespace mx::gemm

#endif // MX_CONVERSION_MXTOGPU_GEMM_TCGEN05DESCRIPTORS_H
