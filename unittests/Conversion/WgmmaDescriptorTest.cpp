//===- WgmmaDescriptorTest.cpp - wgmma shared-memory descriptors ----------===//
//
// Each field of the 64-bit wgmma matrix descriptor checked against the PTX ISA
// table ("Matrix Descriptor Format": start address bits 0-13, leading byte
// offset 16-29, stride byte offset 32-45, base offset 49-51, swizzle mode
// 62-63, every offset encoded >> 4), one field set at a time, then the
// K-major 128B-swizzled tile the SM90 GEMM kernels use and the K step.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace mx::gemm;

namespace {

/// A descriptor with every field zero except the one a test sets.
WgmmaDescriptorFields zeroFields() {
  WgmmaDescriptorFields f;
  f.leadingByteOffset = 0;
  f.swizzle = WgmmaSwizzle::none;
  return f;
}

uint64_t bits(uint64_t value, int low, int high) {
  return (value >> low) & ((uint64_t(1) << (high - low + 1)) - 1);
}

TEST(WgmmaDescriptor, AllZero) {
  EXPECT_EQ(encodeWgmmaDescriptor(zeroFields()), 0u);
}

TEST(WgmmaDescriptor, StartAddressIsBits0To13InUnitsOf16Bytes) {
  WgmmaDescriptorFields f = zeroFields();
  f.startAddress = 0x3FFF0; // the largest encodable address
  EXPECT_EQ(encodeWgmmaDescriptor(f), 0x3FFFu);
  f.startAddress = 0x1230;
  EXPECT_EQ(encodeWgmmaDescriptor(f), 0x123u);
  // Bits above the 18-bit shared window do not leak into other fields.
  f.startAddress = 0x40010;
  EXPECT_EQ(encodeWgmmaDescriptor(f), 0x1u);
}

TEST(WgmmaDescriptor, ByteOffsetsAreBits16To29And32To45) {
  // Leading and stride byte offsets, each on its own: 14 bits >> 4, no
  // other bit set.
  const std::tuple<uint32_t WgmmaDescriptorFields::*, int, int> table[] = {
      {&WgmmaDescriptorFields::leadingByteOffset, 16, 29},
      {&WgmmaDescriptorFields::strideByteOffset, 32, 45}};
  for (auto [field, low, high] : table) {
    WgmmaDescriptorFields f = zeroFields();
    f.*field = 1024;
    EXPECT_EQ(encodeWgmmaDescriptor(f), uint64_t(64) << low);
    f.*field = 0x3FFF0;
    uint64_t desc = encodeWgmmaDescriptor(f);
    EXPECT_EQ(bits(desc, low, high), 0x3FFFu);
    EXPECT_EQ(desc & ~(uint64_t(0x3FFF) << low), 0u);
  }
}

TEST(WgmmaDescriptor, BaseOffsetIsBits49To51) {
  WgmmaDescriptorFields f = zeroFields();
  f.baseOffset = 7;
  EXPECT_EQ(encodeWgmmaDescriptor(f), uint64_t(7) << 49);
  f.baseOffset = 8; // three bits only
  EXPECT_EQ(encodeWgmmaDescriptor(f), 0u);
}

TEST(WgmmaDescriptor, SwizzleModeIsBits62To63) {
  WgmmaDescriptorFields f = zeroFields();
  const std::pair<WgmmaSwizzle, uint64_t> table[] = {
      {WgmmaSwizzle::none, 0},
      {WgmmaSwizzle::bytes128, 1},
      {WgmmaSwizzle::bytes64, 2},
      {WgmmaSwizzle::bytes32, 3}};
  for (auto [swizzle, code] : table) {
    f.swizzle = swizzle;
    EXPECT_EQ(encodeWgmmaDescriptor(f), code << 62);
  }
}

TEST(WgmmaDescriptor, SwizzleSpans) {
  EXPECT_EQ(getSwizzleBytes(WgmmaSwizzle::bytes128), 128);
  EXPECT_EQ(getSwizzleBytes(WgmmaSwizzle::bytes64), 64);
  EXPECT_EQ(getSwizzleBytes(WgmmaSwizzle::bytes32), 32);
  EXPECT_EQ(getSwizzleBytes(WgmmaSwizzle::none), 16);
}

TEST(WgmmaDescriptor, KMajor128BTile) {
  // The tile TMA writes with SWIZZLE_128B: 128-byte rows in 8-row groups of
  // 1 KiB, so SBO = 1024; LBO is unused (encoded 1); base offset 0 for a
  // 1 KiB-aligned tile.
  uint64_t desc = encodeWgmmaDescriptor(
      getKMajorSwizzledTile(0x2400, WgmmaSwizzle::bytes128));
  EXPECT_EQ(bits(desc, 0, 13), 0x240u);
  EXPECT_EQ(bits(desc, 16, 29), 1u);
  EXPECT_EQ(bits(desc, 32, 45), 64u);
  EXPECT_EQ(bits(desc, 49, 51), 0u);
  EXPECT_EQ(bits(desc, 62, 63), 1u);
  EXPECT_EQ(desc, 0x4000004000010240u);
}

TEST(WgmmaDescriptor, KMajorInterleavedTile) {
  // The scale products' tf32 operands: 16-byte rows, 8-row core matrices of
  // 128 contiguous bytes (SBO = 128), the second K chunk 0x6000 bytes away
  // (LBO), no swizzle (mode 0).
  uint64_t desc =
      encodeWgmmaDescriptor(getKMajorInterleavedTile(0x1a40, 0x6000));
  EXPECT_EQ(bits(desc, 0, 13), 0x1a4u);
  EXPECT_EQ(bits(desc, 16, 29), 0x600u);
  EXPECT_EQ(bits(desc, 32, 45), 8u);
  EXPECT_EQ(bits(desc, 49, 51), 0u);
  EXPECT_EQ(bits(desc, 62, 63), 0u);
  EXPECT_EQ(desc, 0x00000008060001a4u);
}

TEST(WgmmaDescriptor, KStepAddsToTheAddressFieldOnly) {
  // One k32 FP8 (or k16 bf16) step is 32 bytes of a 128-byte row.
  uint64_t desc = encodeWgmmaDescriptor(
      getKMajorSwizzledTile(0x2400, WgmmaSwizzle::bytes128));
  for (uint32_t step = 0; step < 4; ++step)
    EXPECT_EQ(desc + getWgmmaAddressStep(32 * step),
              encodeWgmmaDescriptor(getKMajorSwizzledTile(
                  0x2400 + 32 * step, WgmmaSwizzle::bytes128)));
}

} // namespace
