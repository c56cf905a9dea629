//===- Tcgen05DescriptorTest.cpp - tcgen05 descriptors --------------------===//
//
// Each field of the 64-bit tcgen05 shared-memory descriptor checked against
// the PTX ISA table ("Shared memory descriptor", tcgen05 version: start
// address bits 0-13, leading byte offset 16-29, stride byte offset 32-45, the
// fixed 0b001 in 46-48, base offset 49-51, LBO mode 52, swizzle mode 61-63,
// every offset encoded >> 4, reserved bits zero), one field set at a time,
// then the K-major 128B-swizzled tile and the `tcgen05.cp` scale chunk the
// SM100 GEMM kernel uses and its K step. Then each field of the 32-bit
// instruction descriptor of the block-scaled MMA against the PTX ISA table
// "Instruction descriptor format for .kind::mxf8f6f4" (B scale id 4-5, A and
// B formats 7-9 and 10-12, negation 13-14, transpose 15-16, N >> 3 in 17-22,
// scale format 23, M >> 7 in 27-28, A scale id 29-30, sparsity 0-2 and
// reserved bits zero), the values cross-checked against CUTLASS's
// `InstrDescriptorBlockScaled`, and the four descriptors of the kernel's K
// steps, worked out by hand from the table; then the table of `.kind::mxf4`
// and `.kind::mxf4nvf4` (E2M1 = 1 in A's bits 7-9 and B's 10-11, dense K in
// bit 31, the other fields as above), NVFP4's descriptor by hand, and which
// kind, format, scale format and scale id combinations the ISA allows.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/Gemm/Tcgen05Descriptors.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace mx::gemm;

namespace {

/// Bit 46: the fixed 0b001 of bits 46-48, set in every descriptor.
constexpr uint64_t kVersionBit = uint64_t(1) << 46;

/// The encoders are constexpr: the generator folds them to constants.
static_assert(encodeTcgen05SmemDescriptor(
                  getTcgen05KMajorSwizzledTile(0x2400)) == 0x4000404000010240u);
static_assert(encodeTcgen05SmemDescriptor(getTcgen05ScaleChunk(0x3000)) ==
              0x0000400800000300u);

constexpr BlockScaledInstructionFields
getInstruction(uint32_t n, uint32_t aScaleId, uint32_t bScaleId) {
  BlockScaledInstructionFields f;
  f.n = n;
  f.aScaleId = aScaleId;
  f.bScaleId = bScaleId;
  return f;
}
static_assert(encodeBlockScaledInstruction(getInstruction(256, 0, 0)) ==
              0x08C00000u);
static_assert(encodeBlockScaledInstruction(getInstruction(256, 3, 3)) ==
              0x68C00030u);

/// A descriptor with every field zero except the one a test sets.
Tcgen05SmemDescriptorFields zeroFields() {
  Tcgen05SmemDescriptorFields f;
  f.startAddress = 0;
  f.leadingByteOffset = 0;
  f.strideByteOffset = 0;
  f.baseOffset = 0;
  f.absoluteLeadingOffset = false;
  f.swizzle = Tcgen05Swizzle::none;
  return f;
}

/// An instruction descriptor whose every field encodes to zero (E4M3
/// operands, UE4M3 scales, M = N = 0), for tests that set one field.
BlockScaledInstructionFields zeroInstruction() {
  BlockScaledInstructionFields f;
  f.a = Tcgen05OperandFormat::e4m3;
  f.b = Tcgen05OperandFormat::e4m3;
  f.scaleFormat = Tcgen05ScaleFormat::ue4m3;
  f.m = 0;
  f.n = 0;
  f.aScaleId = 0;
  f.bScaleId = 0;
  f.negateA = f.negateB = false;
  f.transposeA = f.transposeB = false;
  return f;
}

uint64_t bits(uint64_t value, int low, int high) {
  return (value >> low) & ((uint64_t(1) << (high - low + 1)) - 1);
}

//===----------------------------------------------------------------------===//
// Shared-memory descriptor
//===----------------------------------------------------------------------===//

TEST(Tcgen05SmemDescriptor, AllZeroIsTheVersionOnly) {
  uint64_t desc = encodeTcgen05SmemDescriptor(zeroFields());
  EXPECT_EQ(desc, kVersionBit);
  EXPECT_EQ(bits(desc, 46, 48), 1u); // 0b001: bit 46 set, 47 and 48 clear
}

TEST(Tcgen05SmemDescriptor, StartAddressIsBits0To13InUnitsOf16Bytes) {
  Tcgen05SmemDescriptorFields f = zeroFields();
  f.startAddress = 0x3FFF0; // the largest encodable address
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | 0x3FFFu);
  f.startAddress = 0x1230;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | 0x123u);
  f.startAddress = 0x123F; // the low 4 bits are dropped
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | 0x123u);
  // Bits above the 18-bit shared window do not leak into other fields.
  f.startAddress = 0x40010;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | 0x1u);
  f.startAddress = 0xFFFFFFF0;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | 0x3FFFu);
}

TEST(Tcgen05SmemDescriptor, ByteOffsetsAreBits16To29And32To45) {
  // Leading and stride byte offsets, each on its own: 14 bits >> 4, no
  // other bit set but the version.
  const std::tuple<uint32_t Tcgen05SmemDescriptorFields::*, int, int> table[] =
      {{&Tcgen05SmemDescriptorFields::leadingByteOffset, 16, 29},
       {&Tcgen05SmemDescriptorFields::strideByteOffset, 32, 45}};
  for (auto [field, low, high] : table) {
    Tcgen05SmemDescriptorFields f = zeroFields();
    f.*field = 1024;
    EXPECT_EQ(encodeTcgen05SmemDescriptor(f),
              kVersionBit | (uint64_t(64) << low));
    f.*field = 16;
    EXPECT_EQ(encodeTcgen05SmemDescriptor(f),
              kVersionBit | (uint64_t(1) << low));
    f.*field = 0x3FFF0;
    uint64_t desc = encodeTcgen05SmemDescriptor(f);
    EXPECT_EQ(bits(desc, low, high), 0x3FFFu);
    EXPECT_EQ(desc & ~(uint64_t(0x3FFF) << low), kVersionBit);
    f.*field = 0x40010; // above the 18-bit window: masked
    EXPECT_EQ(encodeTcgen05SmemDescriptor(f),
              kVersionBit | (uint64_t(1) << low));
  }
}

TEST(Tcgen05SmemDescriptor, BaseOffsetIsBits49To51) {
  Tcgen05SmemDescriptorFields f = zeroFields();
  f.baseOffset = 1;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | (uint64_t(1) << 49));
  f.baseOffset = 7;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | (uint64_t(7) << 49));
  f.baseOffset = 8; // three bits only
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit);
  f.baseOffset = 0xF;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | (uint64_t(7) << 49));
}

TEST(Tcgen05SmemDescriptor, LeadingOffsetModeIsBit52) {
  Tcgen05SmemDescriptorFields f = zeroFields();
  f.absoluteLeadingOffset = true;
  EXPECT_EQ(encodeTcgen05SmemDescriptor(f), kVersionBit | (uint64_t(1) << 52));
}

TEST(Tcgen05SmemDescriptor, SwizzleModeIsBits61To63) {
  Tcgen05SmemDescriptorFields f = zeroFields();
  const std::pair<Tcgen05Swizzle, uint64_t> table[] = {
      {Tcgen05Swizzle::none, 0},
      {Tcgen05Swizzle::bytes128Atom32, 1},
      {Tcgen05Swizzle::bytes128, 2},
      {Tcgen05Swizzle::bytes64, 4},
      {Tcgen05Swizzle::bytes32, 6}};
  for (auto [swizzle, code] : table) {
    f.swizzle = swizzle;
    uint64_t desc = encodeTcgen05SmemDescriptor(f);
    EXPECT_EQ(desc, kVersionBit | (code << 61));
    EXPECT_EQ(bits(desc, 61, 63), code);
  }
}

TEST(Tcgen05SmemDescriptor, ReservedBitsStayZero) {
  // Every field at its largest value: bits 14-15, 30-31, 47-48 and 53-60
  // stay clear.
  Tcgen05SmemDescriptorFields f;
  f.startAddress = 0xFFFFFFFF;
  f.leadingByteOffset = 0xFFFFFFFF;
  f.strideByteOffset = 0xFFFFFFFF;
  f.baseOffset = 0xFFFFFFFF;
  f.absoluteLeadingOffset = true;
  f.swizzle = Tcgen05Swizzle::bytes32; // 0b110
  uint64_t desc = encodeTcgen05SmemDescriptor(f);
  const std::pair<int, int> reserved[] = {
      {14, 15}, {30, 31}, {47, 48}, {53, 60}};
  for (auto [low, high] : reserved)
    EXPECT_EQ(bits(desc, low, high), 0u) << "bits " << low << "-" << high;
  EXPECT_EQ(desc, 0xC01E7FFF3FFF3FFFu);
  f.swizzle = Tcgen05Swizzle::bytes128Atom32; // 0b001
  desc = encodeTcgen05SmemDescriptor(f);
  for (auto [low, high] : reserved)
    EXPECT_EQ(bits(desc, low, high), 0u) << "bits " << low << "-" << high;
  EXPECT_EQ(desc, 0x201E7FFF3FFF3FFFu);
}

/// The encoded fields of a canned layout: start address, LBO and SBO (all
/// >> 4) and swizzle code; the version is 1, base offset and LBO mode 0.
struct EncodedSmemFields {
  uint64_t address, leadingOffset, strideOffset, swizzle;
};

void expectSmemFields(uint64_t desc, const EncodedSmemFields &expected) {
  EXPECT_EQ(bits(desc, 0, 13), expected.address);
  EXPECT_EQ(bits(desc, 16, 29), expected.leadingOffset);
  EXPECT_EQ(bits(desc, 32, 45), expected.strideOffset);
  EXPECT_EQ(bits(desc, 46, 48), 1u);
  EXPECT_EQ(bits(desc, 49, 51), 0u);
  EXPECT_EQ(bits(desc, 52, 52), 0u);
  EXPECT_EQ(bits(desc, 61, 63), expected.swizzle);
}

TEST(Tcgen05SmemDescriptor, KMajor128BTile) {
  // The tile TMA writes with SWIZZLE_128B: 128-byte rows in 8-row groups of
  // 1 KiB, so SBO = 1024; LBO is unused (16 bytes, encoded 1); base offset 0
  // for a 1 KiB-aligned tile; swizzle code 2.
  uint64_t desc =
      encodeTcgen05SmemDescriptor(getTcgen05KMajorSwizzledTile(0x2400));
  expectSmemFields(desc, {0x240, 1, 64, 2});
  // 2 << 61 | 1 << 46 | 64 << 32 | 1 << 16 | 0x240.
  EXPECT_EQ(desc, 0x4000404000010240u);
}

TEST(Tcgen05SmemDescriptor, KMajor64BTile) {
  // The packed E2M1 tile of `.kind::mxf4*` that TMA writes with
  // SWIZZLE_64B: 64-byte rows (128 elements) in 8-row groups of 512 bytes,
  // so SBO = 512 (field 32); LBO unused; swizzle code 4.
  uint64_t desc = encodeTcgen05SmemDescriptor(
      getTcgen05KMajorSwizzledTile(0x2400, /*rowBytes=*/64));
  expectSmemFields(desc, {0x240, 1, 32, 4});
  // 4 << 61 | 1 << 46 | 32 << 32 | 1 << 16 | 0x240.
  EXPECT_EQ(desc, 0x8000402000010240u);
}

TEST(Tcgen05SmemDescriptor, ScaleChunk) {
  // The source of `tcgen05.cp .32x128b`: unswizzled 16-byte rows, core
  // matrices 128 bytes apart (SBO field 8), LBO 0.
  uint64_t desc = encodeTcgen05SmemDescriptor(getTcgen05ScaleChunk(0x3000));
  expectSmemFields(desc, {0x300, 0, 8, 0});
  // 1 << 46 | 8 << 32 | 0x300.
  EXPECT_EQ(desc, 0x0000400800000300u);
}

TEST(Tcgen05SmemDescriptor, KStepAddsToTheAddressFieldOnly) {
  // One k32 FP8 MMA step is 32 bytes of a 128-byte row: +2 in the start
  // address field, nothing else changes.
  uint64_t desc =
      encodeTcgen05SmemDescriptor(getTcgen05KMajorSwizzledTile(0x2400));
  for (uint32_t k = 0; k < 4; ++k) {
    uint64_t stepped = desc + getWgmmaAddressStep(32 * k);
    EXPECT_EQ(stepped, encodeTcgen05SmemDescriptor(
                           getTcgen05KMajorSwizzledTile(0x2400 + 32 * k)));
    EXPECT_EQ(bits(stepped, 0, 13), 0x240u + 2 * k);
    EXPECT_EQ(stepped & ~uint64_t(0x3FFF), desc & ~uint64_t(0x3FFF));
  }
}

//===----------------------------------------------------------------------===//
// Instruction descriptor of block-scaled MMA
//===----------------------------------------------------------------------===//

TEST(Tcgen05InstructionDescriptor, AllZero) {
  EXPECT_EQ(encodeBlockScaledInstruction(zeroInstruction()), 0u);
}

TEST(Tcgen05InstructionDescriptor, ScaleIdsAreBits4To5And29To30) {
  // B's scale id, then A's: two bits each, masked.
  const std::tuple<uint32_t BlockScaledInstructionFields::*, int, int> table[] =
      {{&BlockScaledInstructionFields::bScaleId, 4, 5},
       {&BlockScaledInstructionFields::aScaleId, 29, 30}};
  for (auto [field, low, high] : table) {
    BlockScaledInstructionFields f = zeroInstruction();
    for (uint32_t id = 0; id < 4; ++id) {
      f.*field = id;
      uint32_t desc = encodeBlockScaledInstruction(f);
      EXPECT_EQ(desc, id << low);
      EXPECT_EQ(bits(desc, low, high), id);
    }
    f.*field = 4; // two bits only
    EXPECT_EQ(encodeBlockScaledInstruction(f), 0u);
  }
}

TEST(Tcgen05InstructionDescriptor, OperandFormatsAreBits7To9And10To12) {
  const std::pair<Tcgen05OperandFormat, uint32_t> formats[] = {
      {Tcgen05OperandFormat::e4m3, 0},
      {Tcgen05OperandFormat::e5m2, 1},
      {Tcgen05OperandFormat::e2m3, 3},
      {Tcgen05OperandFormat::e3m2, 4},
      {Tcgen05OperandFormat::e2m1, 5}};
  const std::tuple<Tcgen05OperandFormat BlockScaledInstructionFields::*, int,
                   int>
      table[] = {{&BlockScaledInstructionFields::a, 7, 9},
                 {&BlockScaledInstructionFields::b, 10, 12}};
  for (auto [field, low, high] : table) {
    for (auto [format, code] : formats) {
      BlockScaledInstructionFields f = zeroInstruction();
      f.*field = format;
      uint32_t desc = encodeBlockScaledInstruction(f);
      EXPECT_EQ(desc, code << low);
      EXPECT_EQ(bits(desc, low, high), code);
    }
  }
}

TEST(Tcgen05InstructionDescriptor, NegateAndTransposeAreBits13To16) {
  // Negate A, negate B, then transpose (MN-major) A and B: one bit each.
  const std::pair<bool BlockScaledInstructionFields::*, int> table[] = {
      {&BlockScaledInstructionFields::negateA, 13},
      {&BlockScaledInstructionFields::negateB, 14},
      {&BlockScaledInstructionFields::transposeA, 15},
      {&BlockScaledInstructionFields::transposeB, 16}};
  for (auto [field, bit] : table) {
    BlockScaledInstructionFields f = zeroInstruction();
    f.*field = true;
    EXPECT_EQ(encodeBlockScaledInstruction(f), uint32_t(1) << bit);
  }
}

TEST(Tcgen05InstructionDescriptor, NIsBits17To22InUnitsOf8) {
  BlockScaledInstructionFields f = zeroInstruction();
  const std::pair<uint32_t, uint32_t> table[] = {
      {8, 1}, {128, 16}, {256, 32}, {504, 63}};
  for (auto [n, code] : table) {
    f.n = n;
    uint32_t desc = encodeBlockScaledInstruction(f);
    EXPECT_EQ(desc, code << 17);
    EXPECT_EQ(bits(desc, 17, 22), code);
  }
  f.n = 512; // six bits only: does not leak into the scale format bit
  EXPECT_EQ(encodeBlockScaledInstruction(f), 0u);
}

TEST(Tcgen05InstructionDescriptor, ScaleFormatIsBit23) {
  BlockScaledInstructionFields f = zeroInstruction();
  f.scaleFormat = Tcgen05ScaleFormat::ue8m0;
  EXPECT_EQ(encodeBlockScaledInstruction(f), uint32_t(1) << 23);
  f.scaleFormat = Tcgen05ScaleFormat::ue4m3;
  EXPECT_EQ(encodeBlockScaledInstruction(f), 0u);
}

TEST(Tcgen05InstructionDescriptor, MIsBits27To28InUnitsOf128) {
  // PTX's block-scaled M >> 7 at bits 27-28 with 24-26 reserved, which is
  // CUTLASS's M >> 4 at bits 24-28 for the M that block scaling allows.
  BlockScaledInstructionFields f = zeroInstruction();
  const std::pair<uint32_t, uint32_t> table[] = {{128, 27}, {256, 28}};
  for (auto [m, bit] : table) {
    f.m = m;
    uint32_t desc = encodeBlockScaledInstruction(f);
    EXPECT_EQ(desc, uint32_t(1) << bit);
    EXPECT_EQ(bits(desc, 24, 28), m >> 4);
    EXPECT_EQ(bits(desc, 27, 28), m >> 7);
    EXPECT_EQ(bits(desc, 24, 26), 0u);
  }
  f.m = 512; // two bits only: does not leak into A's scale id
  EXPECT_EQ(encodeBlockScaledInstruction(f), 0u);
  f.m = 64; // below the field: reserved bits 24-26 stay clear
  EXPECT_EQ(encodeBlockScaledInstruction(f), 0u);
}

/// `zeroInstruction` of a `.kind::mxf4*` kind: its E2M1 operands encode to
/// 1 in both format fields.
BlockScaledInstructionFields zeroMxf4Instruction(Tcgen05BlockScaledKind kind) {
  BlockScaledInstructionFields f = zeroInstruction();
  f.kind = kind;
  f.a = f.b = Tcgen05OperandFormat::e2m1;
  return f;
}
constexpr uint32_t kMxf4Formats = (1u << 7) | (1u << 10);

TEST(Tcgen05InstructionDescriptor, Mxf4FormatsAreE2M1CodeOne) {
  // The mxf4 table's A type (bits 7-9) and B type (bits 10-11): E2M1 = 1.
  for (auto kind :
       {Tcgen05BlockScaledKind::mxf4, Tcgen05BlockScaledKind::mxf4nvf4}) {
    uint32_t desc = encodeBlockScaledInstruction(zeroMxf4Instruction(kind));
    EXPECT_EQ(desc, kMxf4Formats);
    EXPECT_EQ(bits(desc, 7, 9), 1u);
    EXPECT_EQ(bits(desc, 10, 11), 1u);
    EXPECT_EQ(bits(desc, 12, 12), 0u);
  }
  // mxf8f6f4's E2M1 is 5 in both fields.
  BlockScaledInstructionFields f = zeroInstruction();
  f.a = f.b = Tcgen05OperandFormat::e2m1;
  EXPECT_EQ(encodeBlockScaledInstruction(f), (5u << 7) | (5u << 10));
}

TEST(Tcgen05InstructionDescriptor, Mxf4FieldsShareTheMxf8f6f4Bits) {
  // Scale ids, negation, transpose, N, scale format and M sit where they sit
  // for mxf8f6f4; bit 31 is the mxf4 kinds' K dimension (dense K = 96).
  for (auto kind :
       {Tcgen05BlockScaledKind::mxf4, Tcgen05BlockScaledKind::mxf4nvf4}) {
    BlockScaledInstructionFields f = zeroMxf4Instruction(kind);
    f.aScaleId = f.bScaleId = 2;
    f.negateA = f.transposeB = true;
    f.n = 256;
    f.m = 128;
    f.scaleFormat = Tcgen05ScaleFormat::ue8m0;
    uint32_t expected = kMxf4Formats | (2u << 4) | (2u << 29) | (1u << 13) |
                        (1u << 16) | (32u << 17) | (1u << 27) | (1u << 23);
    EXPECT_EQ(encodeBlockScaledInstruction(f), expected);
    f.denseK96 = true;
    EXPECT_EQ(encodeBlockScaledInstruction(f), expected | (1u << 31));
  }
  // mxf8f6f4 keeps bit 31 reserved.
  BlockScaledInstructionFields f = zeroInstruction();
  f.denseK96 = true;
  EXPECT_EQ(encodeBlockScaledInstruction(f), 0u);
}

TEST(Tcgen05InstructionDescriptor, Nvfp4Descriptor) {
  // NVFP4: .kind::mxf4nvf4, E2M1 x E2M1, UE4M3 scales per 16 (scale id 0),
  // M = 128, N = 256, K-major, dense K = 64. By hand: 1 << 27 (M) | 32 << 17
  // (N) | 1 << 10 | 1 << 7 = 0x08400480.
  BlockScaledInstructionFields f = zeroMxf4Instruction(
      Tcgen05BlockScaledKind::mxf4nvf4);
  f.m = 128;
  f.n = 256;
  f.scaleFormat = Tcgen05ScaleFormat::ue4m3;
  EXPECT_EQ(encodeBlockScaledInstruction(f), 0x08400480u);
  EXPECT_TRUE(isValidBlockScaledInstruction(f));
}

TEST(Tcgen05InstructionDescriptor, ValidCombinations) {
  BlockScaledInstructionFields f = zeroInstruction();
  f.scaleFormat = Tcgen05ScaleFormat::ue8m0;
  EXPECT_TRUE(isValidBlockScaledInstruction(f)); // mxf8f6f4, UE8M0
  f.aScaleId = 3;
  EXPECT_TRUE(isValidBlockScaledInstruction(f));
  f.scaleFormat = Tcgen05ScaleFormat::ue4m3; // mxf8f6f4 has UE8M0 only
  EXPECT_FALSE(isValidBlockScaledInstruction(f));
  for (auto kind :
       {Tcgen05BlockScaledKind::mxf4, Tcgen05BlockScaledKind::mxf4nvf4}) {
    f = zeroMxf4Instruction(kind);
    f.scaleFormat = Tcgen05ScaleFormat::ue8m0; // 2 scales per K = 64
    for (uint32_t id = 0; id < 4; ++id) {
      f.aScaleId = f.bScaleId = id;
      EXPECT_EQ(isValidBlockScaledInstruction(f), id == 0 || id == 2);
    }
    f.aScaleId = f.bScaleId = 0;
    f.a = Tcgen05OperandFormat::e4m3; // E2M1 only
    EXPECT_FALSE(isValidBlockScaledInstruction(f));
    f.a = Tcgen05OperandFormat::e2m1;
    f.scaleFormat = Tcgen05ScaleFormat::ue4m3; // NVFP4's scales
    EXPECT_EQ(isValidBlockScaledInstruction(f),
              kind == Tcgen05BlockScaledKind::mxf4nvf4);
    f.aScaleId = 2; // 4 scales per K = 64: id 0 only
    EXPECT_FALSE(isValidBlockScaledInstruction(f));
  }
}

TEST(Tcgen05InstructionDescriptor, SparsityAndReservedBitsStayZero) {
  // Every field at its largest value: sparsity bits 0-2 (dense MMA) and
  // reserved bits 3, 6, 24-26 and 31 stay clear.
  BlockScaledInstructionFields f;
  f.a = Tcgen05OperandFormat::e2m1;
  f.b = Tcgen05OperandFormat::e2m1;
  f.scaleFormat = Tcgen05ScaleFormat::ue8m0;
  f.m = 0xFFFFFFFF;
  f.n = 0xFFFFFFFF;
  f.aScaleId = f.bScaleId = 0xFFFFFFFF;
  f.negateA = f.negateB = true;
  f.transposeA = f.transposeB = true;
  uint32_t desc = encodeBlockScaledInstruction(f);
  EXPECT_EQ(bits(desc, 0, 2), 0u);
  EXPECT_EQ(bits(desc, 3, 3), 0u);
  EXPECT_EQ(bits(desc, 6, 6), 0u);
  EXPECT_EQ(bits(desc, 24, 26), 0u);
  EXPECT_EQ(bits(desc, 31, 31), 0u);
  // 3 << 29 | 3 << 27 | 1 << 23 | 63 << 17 | 0xF << 13 | 5 << 10 | 5 << 7
  // | 3 << 4.
  EXPECT_EQ(desc, 0x78FFF6B0u);
}

TEST(Tcgen05InstructionDescriptor, CutlassValues) {
  // E4M3 x E4M3, UE8M0 scales, M = 128, K-major, the values of CUTLASS's
  // `InstrDescriptorBlockScaled` for the same fields.
  const std::tuple<uint32_t, uint32_t, uint32_t> table[] = {
      {256, 0, 0x08C00000}, {128, 0, 0x08A00000}, {256, 3, 0x68C00030}};
  for (auto [n, id, expected] : table) {
    BlockScaledInstructionFields f;
    f.a = f.b = Tcgen05OperandFormat::e4m3;
    f.scaleFormat = Tcgen05ScaleFormat::ue8m0;
    f.m = 128;
    f.n = n;
    f.aScaleId = f.bScaleId = id;
    EXPECT_EQ(encodeBlockScaledInstruction(f), expected) << "N = " << n;
  }
}

TEST(Tcgen05InstructionDescriptor, KernelKSteps) {
  // The four MMAs of a K = 128 stage: E4M3 A, E5M2 B, UE8M0 scales,
  // M = 128, N = 256, both scale ids k. By hand: 1 << 27 (M) | 1 << 23
  // (UE8M0) | 32 << 17 (N) | 1 << 10 (E5M2) = 0x08C00400, plus k << 29 and
  // k << 4.
  const uint32_t expected[] = {0x08C00400, 0x28C00410, 0x48C00420, 0x68C00430};
  for (uint32_t k = 0; k < 4; ++k) {
    BlockScaledInstructionFields f;
    f.a = Tcgen05OperandFormat::e4m3;
    f.b = Tcgen05OperandFormat::e5m2;
    f.scaleFormat = Tcgen05ScaleFormat::ue8m0;
    f.m = 128;
    f.n = 256;
    f.aScaleId = f.bScaleId = k;
    EXPECT_EQ(encodeBlockScaledInstruction(f), expected[k]) << "k = " << k;
  }
}

} // namespace
