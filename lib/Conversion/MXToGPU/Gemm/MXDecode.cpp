//===- MXDecode.cpp - MX codes to exact bf16 pairs ------------------------===//
//
// The code of each element type becomes an exact f16 pair first (f16 holds
// every FP8, FP6 and FP4 value, and INT8's), then the f32 product with the
// scale, whose upper 16 bits are its bf16 value (MXDecode.h).
//
//===----------------------------------------------------------------------===//

#include "MXDecode.h"

#include "mx/Dialect/MX/IR/ElementFormat.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

Value i32(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}

/// Four codes of `format` (the low 4 x bits of `group`) as E4M3 codes of
/// the same values times 2^(7 - bias), one per byte.
Value widenToE4M3(ImplicitLocOpBuilder &b, const ElementFormat &format,
                  Value group) {
  // Code i's sign (bit bits - 1) goes to bit 8i + 7, its exponent and
  // mantissa to bits 8i.. with the mantissa left-aligned to E4M3's 3 bits.
  // Every code has E4M3's value layout then (at most 4 exponent bits, never
  // the NaN exponent 15), scaled by 2^(bias - 7): ORs of masked shifts.
  ElementFormat e4m3 =
      getVerifiedElementFormat(Float8E4M3FNType::get(b.getContext()));
  assert(!format.isInteger && format.exponentBits < e4m3.exponentBits &&
         format.mantissaBits <= e4m3.mantissaBits && "code does not fit E4M3");
  int64_t bits = format.bitWidth, align = e4m3.mantissaBits - format.mantissaBits;
  std::map<int64_t, uint32_t> masks; // left shift -> bits kept after it
  for (int64_t i = 0; i < 4; ++i) {
    masks[8 * i + 7 - (bits * i + bits - 1)] |= uint32_t(1) << (8 * i + 7);
    uint32_t magnitude = (uint32_t(1) << (bits - 1)) - 1;
    masks[8 * i + align - bits * i] |= magnitude << (8 * i + align);
  }
  Value word;
  for (auto [shift, mask] : masks) {
    Value shifted = shift ? arith::ShLIOp::create(b, group, i32(b, shift))
                          : group;
    Value part = arith::AndIOp::create(b, shifted, i32(b, int32_t(mask)));
    word = word ? arith::OrIOp::create(b, word, part).getResult() : part;
  }
  return word;
}

/// The f16 pairs of a word of four FP8 or INT8 codes, times 2^`shift`.
SmallVector<Value, 2> convertToF16Pairs(ImplicitLocOpBuilder &b,
                                        const ElementFormat &format,
                                        Value word, int shift) {
  auto pairType = VectorType::get({2}, b.getF16Type());
  auto bytesType = VectorType::get({4}, b.getI8Type());
  SmallVector<Value, 2> pairs;
  if (format.isInteger) {
    // c + 128 in the low byte of f16 1024 is the f16 1152 + c: times
    // 2^-mantissaBits minus 1152 * 2^-mantissaBits: exact in f16, so the
    // two may be contracted into one fma.rn.f16x2.
    Value biased = vector::BitCastOp::create(
        b, bytesType,
        vector::BroadcastOp::create(
            b, VectorType::get({1}, b.getI32Type()),
            arith::XOrIOp::create(b, word, i32(b, int32_t(0x80808080)))));
    Value magic = arith::ConstantOp::create(
        b, DenseElementsAttr::get(bytesType, b.getI8IntegerAttr(0x64)));
    double unit = std::ldexp(1.0, -int(format.mantissaBits));
    Value factor = arith::ConstantOp::create(
        b, DenseElementsAttr::get(pairType, b.getF16FloatAttr(unit)));
    Value offset = arith::ConstantOp::create(
        b, DenseElementsAttr::get(pairType, b.getF16FloatAttr(-1152 * unit)));
    for (int64_t i = 0; i < 4; i += 2) {
      Value halves = vector::BitCastOp::create(
          b, pairType,
          vector::ShuffleOp::create(b, biased, magic,
                                    ArrayRef<int64_t>{i, 4, i + 1, 4}));
      auto contract = arith::FastMathFlagsAttr::get(
          b.getContext(), arith::FastMathFlags::contract);
      pairs.push_back(arith::AddFOp::create(
          b, arith::MulFOp::create(b, halves, factor, contract), offset,
          contract));
    }
    return pairs;
  }
  Value bytes = vector::BitCastOp::create(
      b, bytesType,
      vector::BroadcastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                  word));
  // FP8 to f16 is exact (cvt.rn.f16x2.e4m3x2 / e5m2x2).
  Type fp8 = format.bitWidth == 8 ? format.type
                                  : Float8E4M3FNType::get(b.getContext());
  for (int64_t i = 0; i < 4; i += 2) {
    Value pair =
        vector::ShuffleOp::create(b, bytes, bytes, ArrayRef<int64_t>{i, i + 1});
    Value halves = NVVM::ConvertF8x2ToF16x2Op::create(b, pairType, pair,
                                                      /*relu=*/false, fp8);
    if (shift)
      halves = arith::MulFOp::create(
          b, halves,
          arith::ConstantOp::create(
              b, DenseElementsAttr::get(
                     pairType, b.getF16FloatAttr(std::ldexp(1.0, shift)))));
    pairs.push_back(halves);
  }
  return pairs;
}

} // namespace

UnitPairs gemm::decodeMXUnit(ImplicitLocOpBuilder &b, Type elementType,
                             const LoadedUnit &unit) {
  ElementFormat format = getVerifiedElementFormat(elementType);
  auto word = [&](int64_t i) { return unit.words[i]; };
  // The unit's groups of four elements as words of four codes.
  SmallVector<Value, 4> groups;
  int shift = 0;
  if (!format.isPacked()) {
    groups.assign(unit.words.begin(), unit.words.end());
  } else {
    int64_t groupBits = 4 * format.bitWidth;
    for (int64_t g = 0; g < 4; ++g) {
      int64_t bit = g * groupBits, index = bit / 32, offset = bit % 32;
      Value group = word(index);
      if (offset + groupBits > 32)
        group = LLVM::FshrOp::create(b, word(index + 1), group,
                                     i32(b, offset));
      else if (offset)
        group = arith::ShRUIOp::create(b, group, i32(b, offset));
      groups.push_back(widenToE4M3(b, format, group));
    }
    shift = getVerifiedElementFormat(Float8E4M3FNType::get(b.getContext()))
                .bias -
            format.bias;
  }
  Value factor = buildScaleValue(
      b, b.getLoc(), arith::ExtUIOp::create(b, b.getI32Type(), unit.scaleByte));
  auto pairType = VectorType::get({2}, b.getF32Type());
  Value factors = vector::BroadcastOp::create(b, pairType, factor);
  UnitPairs words;
  for (Value group : groups) {
    for (Value halves : convertToF16Pairs(b, format, group, shift)) {
      Value scaled = arith::MulFOp::create(
          b, arith::ExtFOp::create(b, pairType, halves), factors);
      // The product has at most 4 significant bits (INT8: 7), so its bf16
      // value is the upper half of its f32 bits (one byte permute for the
      // pair instead of a conversion): exact wherever bf16 holds the value.
      Value halfWords = vector::BitCastOp::create(
          b, VectorType::get({4}, b.getI16Type()), scaled);
      Value upper = vector::ShuffleOp::create(b, halfWords, halfWords,
                                              ArrayRef<int64_t>{1, 3});
      words.push_back(vector::ExtractOp::create(
          b,
          vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                    upper),
          0));
    }
  }
  return words;
}
