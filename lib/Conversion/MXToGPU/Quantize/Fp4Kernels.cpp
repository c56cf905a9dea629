//===- Fp4Kernels.cpp - MXFP4 and NVFP4 quantize --------------------------===//
//
// The quantize kernels of f4E2M1FN data (their dequantize is the packed one
// of ElementwiseKernels.cpp). Device memory holds FP4 packed, two elements
// to a byte with element 2i in the low nibble, and no memref op addresses
// half bytes: a quantize result is an i8 buffer of half the elements,
// written by the kernel and exposed as the f4 memref through `memref.view`.
// One thread quantizes 32 elements of a row, one MXFP4
// block or two NVFP4 blocks (one where the row does not split into such
// groups; batch dimensions fold into rows): it loads them, takes each
// block's amax, and writes their packed bytes with one store and their
// scales. A columnwise block is quantized together with the next column's,
// so that every byte a thread writes is whole. The scale and factor come
// from the same Numerics.h builders as the CPU lowering. sm_90a has no FP4
// instruction: it rounds to E2M1 with float min/max on magic sums
// (buildE2M1Magnitudes), which gives the bits of the CPU lowering's integer
// conversion in a third of its instructions. The rowwise kernel does that in
// bf16x2 arithmetic, two elements an instruction (packBF16Codes): MXFP4's
// bf16 blocks times their power-of-two factor, other blocks' f32 products
// rounded to bf16 to odd first, which keeps their E2M1 rounding. The
// columnwise kernel, and NVFP4 under a tensor scale so extreme that a
// product of a block without NaN may be NaN, use f32 and test every element
// for NaN (buildE2M1Codes). sm_100a converts with
// `cvt.rn.satfinite.e2m1x2.f32`, the same rounding (nearest even) and
// saturation, with NaN inputs given the contract's code 0. So the kernels
// agree with the CPU lowering bit for bit. A computed NVFP4
// tensor scale needs the whole tensor's finite amax before any block: a first
// kernel reduces it into a device word, one atomic max per CTA.
//
//===----------------------------------------------------------------------===//

#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>
#include <numeric>

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

Value cI8(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 8);
}

Value isNaN(OpBuilder &b, Location loc, Value x) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
}

/// The magic of a float type with `p` stored mantissa bits, 1.5 * 2^p, whose
/// neighbours are 1 apart: adding it to a small non-negative value rounds
/// that value to an integer, to nearest even, and the integer is the sum's
/// bits minus the magic's. For f32 and bf16 (p = 23, 7), with their bits.
float getIntegerMagic(FloatType type) {
  return std::ldexp(1.5f, type.getFPMantissaWidth() - 1);
}
constexpr uint32_t kF32MagicBits = 0x4B400000, kBF16MagicBits = 0x4340;

/// Per element of a float vector `m` of magnitudes (f32 or bf16), its E2M1
/// code plus the magic of its type, as that type. This is the rounding of
/// buildTruncToElementBits in a third of the instructions: the code is
/// rint(g(m)) with g(m) = min(2m, m + 2, m / 2 + 4), which maps the E2M1
/// grid {0, 0.5, 1, 1.5, 2, 3, 4, 6} to 0..7 piecewise linearly, so ties go
/// to the even code; each piece is rounded once, exactly, by the magic add,
/// and rint is monotone, so the min may follow it. The clamp to 7 saturates
/// Inf; with `nanToZero`, maxnumf turns a NaN into code 0 first (else a NaN
/// gives 7).
Value buildE2M1Magnitudes(OpBuilder &b, Location loc, Value m, bool nanToZero) {
  auto type = cast<FloatType>(getElementTypeOrSelf(m));
  float magic = getIntegerMagic(type);
  auto constant = [&](float v) {
    return splat(b, loc, m, b.getFloatAttr(type, v));
  };
  // One fma a piece, which rounds once as the exact product allows anyway.
  auto piece = [&](float slope, float offset) -> Value {
    if (slope == 1)
      return arith::AddFOp::create(b, loc, m, constant(magic + offset));
    return LLVM::FMAOp::create(b, loc, m, constant(slope),
                               constant(magic + offset));
  };
  Value t = arith::MinNumFOp::create(
      b, loc, arith::MinNumFOp::create(b, loc, piece(2, 0), piece(1, 2)),
      piece(0.5f, 4));
  if (nanToZero)
    t = arith::MaxNumFOp::create(b, loc, t, constant(magic));
  return arith::MinNumFOp::create(b, loc, t, constant(magic + 7));
}

/// Per element of an f32 vector `x`, its E2M1 code plus kF32MagicBits
/// (mod 2^32), as i32: buildE2M1Magnitudes of |x| with the sign added, which
/// is dropped for NaN (code 0), whose bits as a signed integer exceed those
/// of -Inf. unittests/Conversion/E2M1RoundingTest.cpp compares this with
/// buildTruncToElementBits on all 2^32 f32 patterns.
Value buildE2M1Codes(OpBuilder &b, Location loc, Value x) {
  auto i32 = [&](int64_t v) {
    return splat(b, loc, x, b.getI32IntegerAttr(static_cast<int32_t>(v)));
  };
  Type bitsType = cast<VectorType>(x.getType()).clone(b.getI32Type());
  Value t = buildE2M1Magnitudes(b, loc, magnitude(b, loc, x),
                                /*nanToZero=*/true);
  Value negative = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::sle,
      arith::BitcastOp::create(b, loc, bitsType, x), i32(int32_t(0xFF800000u)));
  Value sign = arith::SelectOp::create(b, loc, negative, i32(8), i32(0));
  return arith::AddIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, bitsType, t), sign);
}

/// Packs an i32 vector of words, each holding `codesPerWord` E2M1 codes (one,
/// or two in the low bits of its halves) plus `magicWord`, into bytes,
/// element 2i in the low nibble: a packed word of up to eight codes is the
/// sum of up to 8 / codesPerWord words shifted by 4 bits each, and the magic
/// comes off once per packed word. With one code a word, word i of a group
/// holds element i; with two, a half is four nibbles, so word j of a group of
/// four holds elements j and j + 4 (getNibblePairOrder).
Value packCodesInSoftware(OpBuilder &b, Location loc, Value words,
                          int64_t codesPerWord, uint32_t magicWord) {
  int64_t count = cast<VectorType>(words.getType()).getNumElements();
  int64_t group = std::min<int64_t>(count, 8 / codesPerWord);
  Type packedType = b.getIntegerType(4 * codesPerWord * group);
  SmallVector<Value> packedWords;
  for (int64_t first = 0; first < count; first += group) {
    Value packed;
    uint32_t magic = 0;
    for (int64_t i = 0; i < group; ++i) {
      Value word = vector::ExtractOp::create(b, loc, words, first + i);
      if (i)
        word = arith::ShLIOp::create(
            b, loc, word, arith::ConstantIntOp::create(b, loc, 4 * i, 32));
      packed = packed ? arith::AddIOp::create(b, loc, packed, word).getResult()
                      : word;
      magic += magicWord << (4 * i);
    }
    packed = arith::SubIOp::create(
        b, loc, packed,
        arith::ConstantIntOp::create(b, loc, static_cast<int32_t>(magic), 32));
    packedWords.push_back(arith::TruncIOp::create(b, loc, packedType, packed));
  }
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({count / group}, packedType), packedWords);
  auto bytesType = VectorType::get({count * codesPerWord / 2}, b.getI8Type());
  if (packed.getType() == bytesType)
    return packed;
  return vector::BitCastOp::create(b, loc, bytesType, packed);
}

/// The element order of a block of `length` (a multiple of 8) in which
/// packBF16Codes pairs elements into bf16x2 words: elements j and j + 4 of
/// each run of eight share a word, as packCodesInSoftware wants with two
/// codes a word.
SmallVector<int64_t> getNibblePairOrder(int64_t length) {
  SmallVector<int64_t> order;
  for (int64_t run = 0; run < length; run += 8)
    for (int64_t j = 0; j < 4; ++j)
      order.append({run + j, run + j + 4});
  return order;
}

/// The packed E2M1 bytes of a block's scaled values as bf16, in
/// getNibblePairOrder, in bf16x2 arithmetic (two elements an instruction):
/// buildE2M1Magnitudes with bf16's magic, and each element's sign moved from
/// bit 15 of its half to the code's bit 3. `signWords` are i32 words whose
/// halves have the signs of the values' pairs (the values' own bits, or
/// others that share their signs). The callers' values are NaN only in a
/// block with a NaN `amax`, which is all code 0, so the elements need no NaN
/// test of their own.
Value packBF16Codes(OpBuilder &b, Location loc, Value scaled, Value signWords,
                    Value amax) {
  Value t = buildE2M1Magnitudes(b, loc, magnitude(b, loc, scaled),
                                /*nanToZero=*/false);
  auto wordsType = cast<VectorType>(signWords.getType());
  auto wordConstant = [&](uint32_t v) {
    return splat(b, loc, signWords,
                 b.getI32IntegerAttr(static_cast<int32_t>(v)));
  };
  Value signs = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, signWords, wordConstant(12)),
      wordConstant(0x00080008));
  Value words = arith::OrIOp::create(
      b, loc, vector::BitCastOp::create(b, loc, wordsType, t), signs);
  Value bytes = packCodesInSoftware(b, loc, words, /*codesPerWord=*/2,
                                    kBF16MagicBits * 0x10001u);
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(bytes.getType()));
  return arith::SelectOp::create(b, loc, isNaN(b, loc, amax), zero, bytes);
}

/// An f32 vector (of even length) rounded to bf16 to odd: truncated, with
/// the last bit set where that dropped a nonzero bit. Rounding that once
/// more to E2M1 gives the E2M1 rounding of the f32 values themselves: every
/// E2M1 value and midpoint is a bf16 with an even last bit, truncation keeps
/// each value on its side of them, and the odd bit marks a value strictly
/// past one. NaN stays NaN and Inf Inf. The halves of two elements share a
/// word, and their sticky bits are one `min.u16x2` with 1 (inline, since LLVM
/// rewrites an unsigned min with 1 into a compare per element). Also returns
/// the truncated halves as i32 words, which have the signs of the result.
std::pair<Value, Value> roundToOddBF16(OpBuilder &b, Location loc, Value x) {
  auto type = cast<VectorType>(x.getType());
  int64_t length = type.getNumElements();
  auto halvesType = type.clone(b.getI16Type());
  auto wordsType = VectorType::get({length / 2}, b.getI32Type());
  Value bits = arith::BitcastOp::create(b, loc, type.clone(b.getI32Type()), x);
  auto words = [&](Value halves) {
    return vector::BitCastOp::create(
        b, loc, wordsType, arith::TruncIOp::create(b, loc, halvesType, halves));
  };
  Value high = words(arith::ShRUIOp::create(
      b, loc, bits, splat(b, loc, bits, b.getI32IntegerAttr(16))));
  Value low = words(bits);
  Value ones = arith::ConstantIntOp::create(b, loc, 0x00010001, 32);
  SmallVector<Value> sticky;
  for (int64_t i = 0; i < length / 2; ++i)
    sticky.push_back(
        NVVM::InlinePtxOp::create(
            b, loc, b.getI32Type(),
            ValueRange{vector::ExtractOp::create(b, loc, low, i), ones},
            ValueRange{}, "min.u16x2 $0, $1, $2;", Value())
            .getResult(0));
  Value rounded = arith::OrIOp::create(
      b, loc, high, vector::FromElementsOp::create(b, loc, wordsType, sticky));
  return {
      vector::BitCastOp::create(b, loc, type.clone(b.getBF16Type()), rounded),
      high};
}

/// The E2M1 codes of f32 `lo` and `hi` packed into one byte, `lo` in the low
/// nibble, by the hardware `cvt.rn.satfinite.e2m1x2.f32` (sm_100a). It
/// rounds to nearest even and saturates Inf to +-6 as the software does, but
/// E2M1 has no NaN and the contract's code for one is 0, which the
/// instruction does not promise: a NaN input's nibble is cleared.
Value packPairInHardware(OpBuilder &b, Location loc, Value lo, Value hi) {
  // The first operand lands in the high nibble.
  Value pair = NVVM::ConvertF32x2ToF4x2Op::create(
      b, loc, b.getI8Type(), hi, lo, /*relu=*/false,
      b.getType<Float4E2M1FNType>());
  pair = arith::SelectOp::create(
      b, loc, isNaN(b, loc, lo),
      arith::AndIOp::create(b, loc, pair, cI8(b, loc, 0xF0)), pair);
  return arith::SelectOp::create(
      b, loc, isNaN(b, loc, hi),
      arith::AndIOp::create(b, loc, pair, cI8(b, loc, 0x0F)), pair);
}

/// Packs an even-length f32 vector, already multiplied by its block's factor,
/// into E2M1 codes two to a byte (element 2i in the low nibble).
Value packFP4(OpBuilder &b, Location loc, Value scaled, Chip chip) {
  if (!hasHardwareConversion(chip, b.getType<Float4E2M1FNType>()))
    return packCodesInSoftware(b, loc, buildE2M1Codes(b, loc, scaled),
                               /*codesPerWord=*/1, kF32MagicBits);
  int64_t length = cast<VectorType>(scaled.getType()).getNumElements();
  SmallVector<Value> bytes;
  for (int64_t i = 0; i < length; i += 2) {
    Value lo = vector::ExtractOp::create(b, loc, scaled, i);
    Value hi = vector::ExtractOp::create(b, loc, scaled, i + 1);
    bytes.push_back(packPairInHardware(b, loc, lo, hi));
  }
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({length / 2}, b.getI8Type()), bytes);
}

/// NVFP4's E4M3 block scale of a block with f32 `amax` under `tensorScale`,
/// and its factor 1 / t / s: buildNVFP4BlockScale and buildNVFP4Factor,
/// with the E4M3 rounding and its decoding fused. The clamped ratio is NaN
/// or in [2^-6, 448], E4M3's normal range, where rounding to 3 mantissa bits
/// is the f32 rounding trick of buildTruncToElementBits, and the rounded f32
/// is then the scale's value, which needs no decoding; a NaN ratio stays
/// the divisor (any NaN makes the factor NaN) and gets the NaN byte 0x7F.
std::pair<Value, Value> buildNVFP4Scale(OpBuilder &b, Location loc, Value amax,
                                        Value tensorScale) {
  auto f32 = [&](float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v)).getResult();
  };
  auto i32 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, v, 32).getResult();
  };
  Value ratio = arith::DivFOp::create(
      b, loc, arith::DivFOp::create(b, loc, amax, f32(6)), tensorScale);
  Value clamped = arith::MinimumFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, ratio, f32(0x1p-6f)), f32(448));
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), clamped);
  Value keptLsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, i32(20)), i32(1));
  Value rounded = arith::AndIOp::create(
      b, loc,
      arith::AddIOp::create(
          b, loc, bits, arith::AddIOp::create(b, loc, keptLsb, i32(0x7FFFF))),
      i32(0xFFF00000));
  Value code = arith::SubIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, rounded, i32(20)),
      i32((127 - 7) << 3));
  Value nan = isNaN(b, loc, clamped);
  code = arith::SelectOp::create(b, loc, nan, i32(0x7F), code);
  Value scale = arith::BitcastOp::create(
      b, loc, b.getType<Float8E4M3FNType>(),
      arith::TruncIOp::create(b, loc, b.getI8Type(), code));
  Value value = arith::SelectOp::create(
      b, loc, nan, clamped,
      arith::BitcastOp::create(b, loc, b.getF32Type(), rounded));
  Value inverse = arith::DivFOp::create(b, loc, f32(1), tensorScale);
  return {scale, arith::DivFOp::create(b, loc, inverse, value)};
}

/// The stored scale of a block with f32 `amax` and the f32 factor that moves
/// its elements into E2M1's range: NVFP4's E4M3 scale under `tensorScale`
/// when given, else MXFP4's E8M0 power of two.
std::pair<Value, Value> buildBlockScale(OpBuilder &b, Location loc, Value amax,
                                        QuantizeOp op, Value tensorScale) {
  if (tensorScale)
    return buildNVFP4Scale(b, loc, amax, tensorScale);
  Value exponent = buildScaleExponent(b, loc, amax, op.getRounding(),
                                      op.getData().getType().getElementType());
  Type scaleType = op.getScales().getType().getElementType();
  return {buildStoredScale(b, loc, exponent, scaleType),
          buildInverseScaleValue(b, loc, exponent)};
}

/// Block `index` (row-major over the [rows, K / size] blocks) of a 2-D
/// `input` as loaded, with its row and block column.
struct RowBlock {
  Value values, row, column;
};
RowBlock loadRowBlock(OpBuilder &b, Location loc, Value input, Value index,
                      int64_t size) {
  auto type = cast<MemRefType>(input.getType());
  Value blocksPerRow = cIndex(b, loc, type.getDimSize(1) / size);
  Value row = arith::DivUIOp::create(b, loc, index, blocksPerRow);
  Value column = arith::RemUIOp::create(b, loc, index, blocksPerRow);
  Value col = arith::MulIOp::create(b, loc, column, cIndex(b, loc, size));
  auto vectorType = VectorType::get({size}, type.getElementType());
  return {loadVector(b, loc, vectorType, input, ValueRange{row, col}), row,
          column};
}

Value reduceMax(OpBuilder &b, Location loc, Value floatVector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXIMUMF,
                                     floatVector);
}

/// The f32 amax of a loaded block, NaN if it holds one: reduced in the
/// loaded type (bf16 and f16 two elements an instruction), which is exact.
Value buildBlockAmax(OpBuilder &b, Location loc, Value values) {
  Value amax = reduceMax(b, loc, magnitude(b, loc, values));
  if (amax.getType().isF32())
    return amax;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), amax);
}

/// The packed E2M1 bytes of a loaded rowwise block (16 or 32 elements, whole
/// runs of 8) with f32 `amax` and `factor`. On sm_90a they come from
/// packBF16Codes: a bf16 block times MXFP4's power-of-two factor is exact in
/// bf16 as in f32 (both have 8 exponent bits) except where it leaves the
/// normal range, and there the code is 0 or 7 either way; other blocks round
/// their f32 products to odd (roundToOddBF16). A NaN product needs a NaN
/// block there, which holds for MXFP4's factors and for NVFP4's under a
/// tensor scale in [2^-120, max]: then every factor is finite and positive,
/// or NaN with the block. Any other tensor scale, which could make a zero
/// times an infinite factor (or an infinity times a zero one) NaN, takes
/// packFP4, which tests every element, as does every block on sm_100a.
Value packRowBlock(OpBuilder &b, Location loc, Value values, Value amax,
                   Value factor, Value tensorScale, Chip chip) {
  auto type = cast<VectorType>(values.getType());
  SmallVector<int64_t> order = getNibblePairOrder(type.getNumElements());
  auto pair = [&](OpBuilder &nb, Location nl, Value v) {
    return vector::ShuffleOp::create(nb, nl, v, v, order).getResult();
  };
  bool hardware = hasHardwareConversion(chip, b.getType<Float4E2M1FNType>());
  if (!hardware && !tensorScale && type.getElementType().isBF16()) {
    Value factors = vector::BroadcastOp::create(
        b, loc, type, arith::TruncFOp::create(b, loc, b.getBF16Type(), factor));
    Value scaled = arith::MulFOp::create(b, loc, pair(b, loc, values), factors);
    auto wordsType =
        VectorType::get({type.getNumElements() / 2}, b.getI32Type());
    return packBF16Codes(b, loc, scaled,
                         vector::BitCastOp::create(b, loc, wordsType, scaled),
                         amax);
  }
  Value f32Values = extendToF32(b, loc, values);
  Value products = arith::MulFOp::create(
      b, loc, f32Values,
      vector::BroadcastOp::create(b, loc, f32Values.getType(), factor));
  if (hardware)
    return packFP4(b, loc, products, chip);
  auto packRoundedToOdd = [&](OpBuilder &nb, Location nl) {
    auto [rounded, truncated] = roundToOddBF16(nb, nl, pair(nb, nl, products));
    return packBF16Codes(nb, nl, rounded, truncated, amax);
  };
  if (!tensorScale)
    return packRoundedToOdd(b, loc);
  auto f32 = [&](float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  };
  Value usual = arith::AndIOp::create(
      b, loc,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, tensorScale,
                            f32(0x1p-120f)),
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, tensorScale,
                            f32(std::numeric_limits<float>::max())));
  auto ifOp = scf::IfOp::create(
      b, loc, usual,
      [&](OpBuilder &nb, Location nl) {
        scf::YieldOp::create(nb, nl, packRoundedToOdd(nb, nl));
      },
      [&](OpBuilder &nb, Location nl) {
        scf::YieldOp::create(nb, nl, packFP4(nb, nl, products, chip));
      });
  return ifOp.getResult(0);
}

/// Vectors that a thread of the finite-amax kernel reduces: enough that the
/// CTAs' atomics on the one word do not queue up (one per 2048 vectors).
constexpr int64_t kAmaxVectorsPerThread = 8;

/// The max over the finite elements of an f32 vector, NaN and Inf counting
/// as 0 (`olt` is false for both).
Value buildFiniteMax(OpBuilder &b, Location loc, Value values) {
  Value magnitudes = magnitude(b, loc, values);
  auto type = cast<VectorType>(magnitudes.getType());
  Value infinity = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(INFINITY)));
  Value zero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0f)));
  Value finite = arith::SelectOp::create(
      b, loc,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, magnitudes,
                            infinity),
      magnitudes, zero);
  return reduceMax(b, loc, finite);
}

/// The max |x| over the finite elements of `input` (NVFP4's tensor amax) as
/// the bits of an f32 in a device `memref<1xi32>`. A one-thread kernel zeroes
/// it; then each thread reduces kAmaxVectorsPerThread vectors, a warp's
/// loads contiguous, each CTA combines its threads, and its first thread
/// folds the result in with an atomic unsigned max: finite magnitudes are
/// non-negative floats, whose bit patterns order like their values. The
/// kernels run in order on one stream. A vector is the widest of up to 16
/// elements that tiles a row (FP4 rows have even length).
Value buildFiniteAmax(OpBuilder &b, Location loc, Value input) {
  auto inputType = cast<MemRefType>(input.getType());
  int64_t blockSize = std::gcd(inputType.getDimSize(1), kNVFP4Block);
  Value amaxBits =
      allocDevice(b, loc, RankedTensorType::get({1}, b.getI32Type()));
  buildLaunch(b, loc, 1, [&](OpBuilder &nb, Location l, Value thread) {
    buildIf(nb, l, cmpLT(nb, l, thread, cIndex(nb, l, 1)),
            [&](OpBuilder &ib, Location il) {
              Value zero = arith::ConstantIntOp::create(ib, il, 0, 32);
              memref::StoreOp::create(ib, il, zero, amaxBits,
                                      ValueRange{cIndex(ib, il, 0)});
            });
  });
  int64_t blocks = inputType.getNumElements() / blockSize;
  int64_t perCTA = kThreadsPerBlock * kAmaxVectorsPerThread;
  buildBlockLaunch(
      b, loc, llvm::divideCeil(blocks, perCTA),
      {getCTAMaxBufferType(b.getContext())},
      [&](OpBuilder &nb, Location l, const KernelIds &ids) {
        Value first = arith::AddIOp::create(
            nb, l,
            arith::MulIOp::create(nb, l, ids.block, cIndex(nb, l, perCTA)),
            ids.thread);
        Value amax;
        for (int64_t k = 0; k < kAmaxVectorsPerThread; ++k) {
          // Every thread takes part in the CTA's max: those past the end
          // re-read the last vector, which leaves the max unchanged.
          Value index = arith::MinUIOp::create(
              nb, l,
              arith::AddIOp::create(nb, l, first,
                                    cIndex(nb, l, k * kThreadsPerBlock)),
              cIndex(nb, l, blocks - 1));
          Value vectorMax = buildFiniteMax(
              nb, l,
              extendToF32(nb, l,
                          loadRowBlock(nb, l, input, index, blockSize).values));
          amax = amax ? arith::MaximumFOp::create(nb, l, amax, vectorMax)
                            .getResult()
                      : vectorMax;
        }
        amax = buildCTAMax(nb, l, amax, ids.thread, ids.workgroup.front());
        buildIf(nb, l, isZeroIndex(nb, l, ids.thread),
                [&](OpBuilder &ib, Location il) {
                  Value bits =
                      arith::BitcastOp::create(ib, il, ib.getI32Type(), amax);
                  memref::AtomicRMWOp::create(
                      ib, il, arith::AtomicRMWKind::maxu, bits, amaxBits,
                      ValueRange{cIndex(ib, il, 0)});
                });
      });
  return amaxBits;
}

/// Where NVFP4's tensor scale comes from in the block kernel: the given
/// tensor's buffer, or a finite amax (the f32 bits of buildFiniteAmax, or
/// the op's `amax` operand), from which each thread computes t and thread 0
/// stores it in the `computed` result.
struct TensorScaleSource {
  Value given, amaxBits, amax, computed;

  Value build(OpBuilder &b, Location loc, Value thread) const {
    if (given)
      return memref::LoadOp::create(b, loc, given, ValueRange{});
    if (!amaxBits && !amax)
      return Value();
    Value finiteAmax =
        amax ? memref::LoadOp::create(b, loc, amax, ValueRange{}).getResult()
             : arith::BitcastOp::create(
                   b, loc, b.getF32Type(),
                   memref::LoadOp::create(b, loc, amaxBits,
                                          ValueRange{cIndex(b, loc, 0)}))
                   .getResult();
    Value t = buildNVFP4TensorScale(b, loc, finiteAmax);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        thread, cIndex(b, loc, 0));
    buildIf(b, loc, first, [&](OpBuilder &nb, Location l) {
      memref::StoreOp::create(nb, l, t, computed, ValueRange{});
    });
    return t;
  }
};

/// The buffers of an FP4 quantize kernel: the input and scales as 2-D
/// memrefs, the packed data as bytes.
struct FP4QuantizeBuffers {
  Value input, bytes, scales;
  TensorScaleSource tensorScale;
};

/// Elements that a thread of the rowwise kernel quantizes where its row
/// allows: one MXFP4 block or two NVFP4 blocks, so that a thread loads 16-byte
/// vectors of bf16 four at a time and stores its bytes with one 16-byte store,
/// and NVFP4's tensor scale work is shared by two blocks.
constexpr int64_t kRowwiseElementsPerThread = 32;

/// A rowwise quantize (checkFP4Quantize): one thread per group of
/// consecutive blocks of one row (kRowwiseElementsPerThread, or one block
/// where the row's blocks do not split into such groups), which stores its
/// packed bytes at once.
void buildRowwiseKernel(OpBuilder &b, Location loc, QuantizeOp op, Chip chip,
                        const FP4QuantizeBuffers &buffers) {
  int64_t blockSize = op.getBlock().back();
  int64_t perThread = kRowwiseElementsPerThread / blockSize;
  if (cast<MemRefType>(buffers.input.getType()).getDimSize(1) %
      kRowwiseElementsPerThread)
    perThread = 1;
  int64_t groupSize = perThread * blockSize;
  int64_t groups = op.getData().getType().getNumElements() / groupSize;
  buildLaunch(b, loc, groups, [&](OpBuilder &lb, Location l, Value thread) {
    buildIf(lb, l, cmpLT(lb, l, thread, cIndex(lb, l, groups)),
            [&](OpBuilder &nb, Location nl) {
              RowBlock group =
                  loadRowBlock(nb, nl, buffers.input, thread, groupSize);
              Value tensorScale = buffers.tensorScale.build(nb, nl, thread);
              Value bytes;
              for (int64_t k = 0; k < perThread; ++k) {
                Value values = vector::ShuffleOp::create(
                    nb, nl, group.values, group.values,
                    llvm::to_vector(llvm::seq<int64_t>(k * blockSize,
                                                       (k + 1) * blockSize)));
                Value amax = buildBlockAmax(nb, nl, values);
                auto [scale, factor] =
                    buildBlockScale(nb, nl, amax, op, tensorScale);
                Value blockBytes = packRowBlock(nb, nl, values, amax, factor,
                                                tensorScale, chip);
                bytes = bytes ? vector::ShuffleOp::create(
                                    nb, nl, bytes, blockBytes,
                                    llvm::to_vector(llvm::seq<int64_t>(
                                        0, (k + 1) * blockSize / 2)))
                                    .getResult()
                              : blockBytes;
                Value column = arith::AddIOp::create(
                    nb, nl,
                    arith::MulIOp::create(nb, nl, group.column,
                                          cIndex(nb, nl, perThread)),
                    cIndex(nb, nl, k));
                memref::StoreOp::create(nb, nl, scale, buffers.scales,
                                        ValueRange{group.row, column});
              }
              // Groups are whole bytes, and row-major, so group `thread`
              // starts at byte thread * size / 2, aligned to its own length.
              Value offset = arith::MulIOp::create(
                  nb, nl, thread, cIndex(nb, nl, groupSize / 2));
              vector::StoreOp::create(
                  nb, nl, bytes, buffers.bytes, ValueRange{offset},
                  /*nontemporal=*/false, llvm::MaybeAlign(groupSize / 2));
            });
  });
}

/// `size` rows from `firstRow` of columns `col` and `col + 1` of a 2-D
/// `input`: each row's pair as f32, its row index and whether it exists (loads
/// past the last row re-read it), and the pair's amax over the rows that
/// exist.
struct ColumnPairBlock {
  SmallVector<Value> values, rows, valid;
  Value amax;
};
ColumnPairBlock loadColumnPairBlock(OpBuilder &b, Location loc, Value input,
                                    Value firstRow, Value col, int64_t size) {
  auto type = cast<MemRefType>(input.getType());
  Value lastRow = cIndex(b, loc, type.getDimSize(0) - 1);
  auto pairType = VectorType::get({2}, type.getElementType());
  ColumnPairBlock block;
  for (int64_t i = 0; i < size; ++i) {
    Value row = arith::AddIOp::create(b, loc, firstRow, cIndex(b, loc, i));
    Value loadRow = arith::MinUIOp::create(b, loc, row, lastRow);
    Value valid =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, row, lastRow);
    Value values = extendToF32(
        b, loc, loadVector(b, loc, pairType, input, ValueRange{loadRow, col}));
    Value magnitudes = magnitude(b, loc, values);
    Value zero =
        arith::ConstantOp::create(b, loc, b.getZeroAttr(magnitudes.getType()));
    Value counted = arith::SelectOp::create(b, loc, valid, magnitudes, zero);
    block.amax =
        block.amax
            ? arith::MaximumFOp::create(b, loc, block.amax, counted).getResult()
            : counted;
    block.values.push_back(values);
    block.rows.push_back(row);
    block.valid.push_back(valid);
  }
  return block;
}

/// A columnwise quantize of a 2-D tensor: one thread per block row and pair
/// of adjacent columns, so that each of its bytes is whole (two columns of
/// one row) and a warp's loads and byte stores are contiguous. A partial
/// last block row takes its amax over the rows that exist.
void buildColumnwiseKernel(OpBuilder &b, Location loc, QuantizeOp op, Chip chip,
                           const FP4QuantizeBuffers &buffers) {
  auto inputType = cast<MemRefType>(buffers.input.getType());
  int64_t rows = inputType.getDimSize(0), pairs = inputType.getDimSize(1) / 2;
  int64_t blockSize = op.getBlock().take_back(2).front();
  int64_t count = llvm::divideCeil(rows, blockSize) * pairs;
  buildLaunch(b, loc, count, [&](OpBuilder &lb, Location l, Value thread) {
    buildIf(
        lb, l, cmpLT(lb, l, thread, cIndex(lb, l, count)),
        [&](OpBuilder &nb, Location nl) {
          Value pairsPerRow = cIndex(nb, nl, pairs);
          Value blockRow = arith::DivUIOp::create(nb, nl, thread, pairsPerRow);
          Value pair = arith::RemUIOp::create(nb, nl, thread, pairsPerRow);
          Value col = arith::MulIOp::create(nb, nl, pair, cIndex(nb, nl, 2));
          Value firstRow = arith::MulIOp::create(nb, nl, blockRow,
                                                 cIndex(nb, nl, blockSize));
          ColumnPairBlock block = loadColumnPairBlock(nb, nl, buffers.input,
                                                      firstRow, col, blockSize);
          Value t = buffers.tensorScale.build(nb, nl, thread);
          SmallVector<Value> factors;
          for (int64_t c : {0, 1}) {
            auto [scale, factor] = buildBlockScale(
                nb, nl, vector::ExtractOp::create(nb, nl, block.amax, c), op,
                t);
            factors.push_back(factor);
            Value scaleCol =
                arith::AddIOp::create(nb, nl, col, cIndex(nb, nl, c));
            memref::StoreOp::create(nb, nl, scale, buffers.scales,
                                    ValueRange{blockRow, scaleCol});
          }
          Value factorPair = vector::FromElementsOp::create(
              nb, nl, cast<VectorType>(block.amax.getType()), factors);
          for (int64_t i = 0; i < blockSize; ++i) {
            Value scaled =
                arith::MulFOp::create(nb, nl, block.values[i], factorPair);
            Value byte = vector::ExtractOp::create(
                nb, nl, packFP4(nb, nl, scaled, chip), 0);
            buildIf(nb, nl, block.valid[i], [&](OpBuilder &sb, Location sl) {
              Value rowStart =
                  arith::MulIOp::create(sb, sl, block.rows[i], pairsPerRow);
              Value offset = arith::AddIOp::create(sb, sl, rowStart, pair);
              memref::StoreOp::create(sb, sl, byte, buffers.bytes, offset);
            });
          }
        });
  });
}

/// `buffer` as a 2-D memref whose rows are its leading dimensions folded
/// together (rowwise blocks never span them).
Value collapseToMatrix(OpBuilder &b, Location loc, Value buffer) {
  int64_t rank = cast<MemRefType>(buffer.getType()).getRank();
  if (rank == 2)
    return buffer;
  SmallVector<ReassociationIndices> groups = {
      llvm::to_vector(llvm::seq<int64_t>(0, rank - 1)), {rank - 1}};
  return memref::CollapseShapeOp::create(b, loc, buffer, groups);
}

/// An MXFP4 or NVFP4 quantize that checkFP4Quantize accepts: rowwise of any
/// rank, or columnwise of a 2-D tensor or of slices of whole blocks. Its data
/// is an i8 buffer of half the elements, which the result views as the
/// f4E2M1FN memref.
struct FP4QuantizeToGPU : PlannedQuantizePattern {
  FP4QuantizeToGPU(MLIRContext *context, Chip chip,
                   const QuantizeFusionPlan &plan)
      : PlannedQuantizePattern(context, plan, QuantizeKernel::fp4, chip) {}

  LogicalResult rewritePlanned(QuantizeOp op, const QuantizePlan &,
                               PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType dataType = op.getData().getType();
    FP4QuantizeBuffers buffers;
    buffers.input =
        collapseToMatrix(rewriter, loc, toBuffer(rewriter, loc, op.getInput()));
    buffers.bytes =
        allocDevice(rewriter, loc,
                    RankedTensorType::get({dataType.getNumElements() / 2},
                                          rewriter.getI8Type()));
    Value scales = allocDevice(rewriter, loc, op.getScales().getType());
    buffers.scales = collapseToMatrix(rewriter, loc, scales);
    if (op.getTensorScale()) {
      buffers.tensorScale.given = toBuffer(rewriter, loc, op.getTensorScale());
    } else if (op.getComputedTensorScale()) {
      if (op.getAmax())
        buffers.tensorScale.amax = toBuffer(rewriter, loc, op.getAmax());
      else
        buffers.tensorScale.amaxBits =
            buildFiniteAmax(rewriter, loc, buffers.input);
      buffers.tensorScale.computed =
          allocDevice(rewriter, loc, op.getComputedTensorScale().getType());
    }
    if (op.getBlock().back() == 1)
      buildColumnwiseKernel(rewriter, loc, op, chip, buffers);
    else
      buildRowwiseKernel(rewriter, loc, op, chip, buffers);

    Value data = memref::ViewOp::create(
        rewriter, loc,
        MemRefType::get(dataType.getShape(), dataType.getElementType()),
        buffers.bytes, cIndex(rewriter, loc, 0), ValueRange{});
    SmallVector<Value> results = {toTensor(rewriter, loc, data),
                                  toTensor(rewriter, loc, scales)};
    if (buffers.tensorScale.computed)
      results.push_back(toTensor(rewriter, loc, buffers.tensorScale.computed));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

LogicalResult gpu_kernels::checkFP4Quantize(QuantizeOp op,
                                            std::string &reason) {
  RankedTensorType type = op.getInput().getType();
  ArrayRef<int64_t> block = op.getBlock();
  bool columnwise = block.back() == 1;
  // Batch slices fold into rows, which is exact when no block straddles two
  // slices.
  int64_t rows = type.getDimSize(type.getRank() - 2);
  if (columnwise && type.getRank() > 2 && rows % block[block.size() - 2])
    reason = "the columnwise FP4 GPU kernel needs the rows of each batch "
             "slice to be a multiple of the block";
  else if (!columnwise && type.getShape().back() % block.back())
    reason = "the rowwise FP4 GPU kernel needs K to be a multiple of the "
             "block (32 for MXFP4, 16 for NVFP4)";
  return success(reason.empty());
}

void gpu_kernels::populateFP4Patterns(RewritePatternSet &patterns, Chip chip,
                                      const QuantizeFusionPlan &plan) {
  patterns.add<FP4QuantizeToGPU>(patterns.getContext(), chip, plan);
}
