//===- WgmmaDescriptors.h - Encoders of wgmma descriptors -------*- C++ -*-===//
//
// Pure bit-level encoders of the 64-bit shared-memory matrix descriptors that
// `wgmma.mma_async` (SM90) reads, with the field layout of the PTX ISA
// ("Matrix Descriptor Format", section 9.7.15.5.1). They are plain C++ with no
// MLIR dependency so that unit tests can check every field, and so that the
// kernel generator folds them to constants: a descriptor is built once per
// shared-memory tile and advanced along K by adding to its address field.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_GEMM_WGMMADESCRIPTORS_H
#define MX_CONVERSION_MXTOGPU_GEMM_WGMMADESCRIPTORS_H

#include <cassert>
#include <cstdint>

namespace mx::gemm {

/// How rows of a shared-memory operand tile are swizzled: the encoding of
/// descriptor bits 62-63 (PTX ISA table "Swizzling mode").
enum class WgmmaSwizzle : uint64_t {
  none = 0,
  bytes128 = 1,
  bytes64 = 2,
  bytes32 = 3,
};

/// The span in bytes of one swizzled row (the TMA box's inner extent).
constexpr int64_t getSwizzleBytes(WgmmaSwizzle swizzle) {
  switch (swizzle) {
  case WgmmaSwizzle::none:
    return 16;
  case WgmmaSwizzle::bytes128:
    return 128;
  case WgmmaSwizzle::bytes64:
    return 64;
  case WgmmaSwizzle::bytes32:
    return 32;
  }
  return 0;
}

/// Fields of a wgmma shared-memory matrix descriptor, all in bytes.
struct WgmmaDescriptorFields {
  /// Shared-memory (shared::cta window) address of the tile's first row.
  uint32_t startAddress = 0;
  /// Leading dimension byte offset: unused by swizzled K-major layouts,
  /// where it is conventionally 16 (encoded 1).
  uint32_t leadingByteOffset = 16;
  /// Stride dimension byte offset: the distance between groups of 8 rows.
  uint32_t strideByteOffset = 0;
  /// Bits 7-9 of the address where the swizzle pattern starts (0 when the
  /// tile is aligned to the swizzle's repeat, 1024 bytes for 128B).
  uint32_t baseOffset = 0;
  WgmmaSwizzle swizzle = WgmmaSwizzle::bytes128;
};

/// Address and offset fields hold bytes >> 4 in 14 bits.
constexpr uint64_t kWgmmaFieldShift = 4;
constexpr uint64_t kWgmmaFieldMask = 0x3FFF;

/// Encodes a descriptor: start address >> 4 in bits 0-13, LBO >> 4 in bits
/// 16-29, SBO >> 4 in bits 32-45, base offset in bits 49-51, swizzle mode in
/// bits 62-63. Addresses and offsets are multiples of 16 below 2^18.
constexpr uint64_t encodeWgmmaDescriptor(const WgmmaDescriptorFields &f) {
  auto field = [](uint64_t bytes) {
    return (bytes >> kWgmmaFieldShift) & kWgmmaFieldMask;
  };
  return field(f.startAddress) | (field(f.leadingByteOffset) << 16) |
         (field(f.strideByteOffset) << 32) |
         ((uint64_t(f.baseOffset) & 0x7) << 49) | (uint64_t(f.swizzle) << 62);
}

/// The descriptor of a K-major tile whose rows are `swizzleBytes` long and
/// swizzled in 8-row groups (TMA's layout for the same swizzle), starting at
/// a shared address aligned to the group size: SBO is 8 rows.
constexpr WgmmaDescriptorFields getKMajorSwizzledTile(uint32_t startAddress,
                                                      WgmmaSwizzle swizzle) {
  WgmmaDescriptorFields f;
  f.startAddress = startAddress;
  f.strideByteOffset = uint32_t(8 * getSwizzleBytes(swizzle));
  f.swizzle = swizzle;
  return f;
}

/// One row of an interleaved (unswizzled) K-major tile's core matrix: 16
/// bytes, and 8 rows a core matrix.
constexpr uint32_t kInterleavedRowBytes = 16;

/// The descriptor of an unswizzled K-major tile whose 16-byte K chunks are
/// separate blocks of rows: chunk c of row r at `startAddress` + c x
/// `chunkStride` + 16 r. Core matrices (8 rows of one chunk, 128 contiguous
/// bytes) are then 128 bytes apart along M/N (SBO) and `chunkStride` bytes
/// apart along K (LBO).
constexpr WgmmaDescriptorFields getKMajorInterleavedTile(uint32_t startAddress,
                                                         uint32_t chunkStride) {
  WgmmaDescriptorFields f;
  f.startAddress = startAddress;
  f.leadingByteOffset = chunkStride;
  f.strideByteOffset = 8 * kInterleavedRowBytes;
  f.swizzle = WgmmaSwizzle::none;
  return f;
}

/// The value added to an encoded descriptor to step its start address by
/// `bytes` (a multiple of 16): how a K-major tile advances by one wgmma K
/// step inside a swizzled row. The caller keeps the address below 2^18, so
/// the sum does not carry out of the address field.
constexpr uint64_t getWgmmaAddressStep(uint32_t bytes) {
  return bytes >> kWgmmaFieldShift;
}

} // namespace mx::gemm

#endif // MX_CONVERSION_MXTOGPU_GEMM_WGMMADESCRIPTORS_H
