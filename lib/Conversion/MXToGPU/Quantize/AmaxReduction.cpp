//===- AmaxReduction.cpp - Block amaxes of the strip kernels --------------===//
//
// See QuantizeStrips.h. The strip kernels reduce the amaxes of bf16 and f16
// inputs on the loaded pairs, one `max.NaN.xorsign.abs` per two elements
// (exact, and NaN where either element is), and widen only the reduced
// values to f32; f32 inputs reduce f32 magnitudes.
//
//===----------------------------------------------------------------------===//

#include "QuantizeStrips.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

Value AmaxReduction::combine(OpBuilder &b, Location l, Value x, Value y) const {
  if (!isPacked())
    return arith::MaximumFOp::create(b, l, x, y);
  std::string ptx =
      (Twine("max.NaN.xorsign.abs.") +
       (elementType.isBF16() ? "bf16x2" : "f16x2") + " $0, $1, $2;")
          .str();
  return NVVM::InlinePtxOp::create(b, l, b.getI32Type(), ValueRange{x, y},
                                   ValueRange{}, ptx, Value())
      .getResult(0);
}

SmallVector<Value> AmaxReduction::elements(OpBuilder &b, Location l,
                                           Value loaded, Value values,
                                           Value valid) const {
  int64_t length = cast<VectorType>(loaded.getType()).getNumElements();
  Value reduced =
      isPacked()
          ? vector::BitCastOp::create(
                b, l, VectorType::get({length / 2}, b.getI32Type()), loaded)
          : magnitude(b, l, values);
  if (valid) {
    Value zero =
        arith::ConstantOp::create(b, l, b.getZeroAttr(reduced.getType()));
    reduced = arith::SelectOp::create(b, l, valid, reduced, zero);
  }
  SmallVector<Value> elements;
  for (int64_t i = 0, e = cast<VectorType>(reduced.getType()).getNumElements();
       i < e; ++i)
    elements.push_back(vector::ExtractOp::create(b, l, reduced, i));
  return elements;
}

SmallVector<Value> AmaxReduction::toF32(OpBuilder &b, Location l,
                                        ArrayRef<Value> reduced) const {
  if (!isPacked())
    return SmallVector<Value>(reduced);
  int64_t count = 2 * reduced.size();
  Value pairs = vector::BitCastOp::create(
      b, l, VectorType::get({count}, elementType),
      vector::FromElementsOp::create(
          b, l, VectorType::get({count / 2}, b.getI32Type()), reduced));
  Value amaxes = extendToF32(b, l, magnitude(b, l, pairs));
  SmallVector<Value> result;
  for (int64_t i = 0; i < count; ++i)
    result.push_back(vector::ExtractOp::create(b, l, amaxes, i));
  return result;
}

Value AmaxReduction::pairRows(OpBuilder &b, Location l, Value a,
                              Value c) const {
  auto wordType = VectorType::get({1}, b.getI32Type());
  auto pairType = VectorType::get({2}, elementType);
  auto asPair = [&](Value word) -> Value {
    return vector::BitCastOp::create(
        b, l, pairType, vector::BroadcastOp::create(b, l, wordType, word));
  };
  Value pa = asPair(a), pc = asPair(c);
  auto word = [&](ArrayRef<int64_t> mask) -> Value {
    Value pair = vector::ShuffleOp::create(b, l, pa, pc, mask);
    return vector::ExtractOp::create(
        b, l, vector::BitCastOp::create(b, l, wordType, pair), 0);
  };
  return combine(b, l, word({0, 2}), word({1, 3}));
}

Value AmaxReduction::reduce(OpBuilder &b, Location l, Value loaded) const {
  SmallVector<Value> level = elements(
      b, l, loaded, isPacked() ? Value() : extendToF32(b, l, loaded), Value());
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(combine(b, l, level[i], level[i + 1]));
    if (level.size() % 2)
      next.push_back(level.back());
    level = std::move(next);
  }
  if (!isPacked())
    return level.front();
  SmallVector<Value> halves = toF32(b, l, level);
  return arith::MaximumFOp::create(b, l, halves[0], halves[1]);
}
