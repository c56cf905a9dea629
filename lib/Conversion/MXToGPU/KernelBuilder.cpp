//===- KernelBuilder.cpp - Helpers for the mx GPU kernels -----------------===//
//
// Shared building blocks of the mx GPU kernels; see KernelBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

Value gpu_kernels::cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value gpu_kernels::cmpLT(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
}

Value gpu_kernels::andI(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}

void gpu_kernels::buildLaunch(
    OpBuilder &b, Location loc, int64_t numThreads,
    function_ref<void(OpBuilder &, Location, Value)> body) {
  Value one = cIndex(b, loc, 1);
  int64_t blocks = llvm::divideCeil(numThreads, kThreadsPerBlock);
  auto launch = gpu::LaunchOp::create(b, loc, cIndex(b, loc, blocks), one, one,
                                      cIndex(b, loc, kThreadsPerBlock), one,
                                      one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value blockStart = arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                                           launch.getBlockSize().x);
  body(b, loc,
       arith::AddIOp::create(b, loc, blockStart, launch.getThreadIds().x));
  gpu::TerminatorOp::create(b, loc);
}

SmallVector<Value> gpu_kernels::delinearize(OpBuilder &b, Location loc,
                                            Value index,
                                            ArrayRef<int64_t> shape) {
  SmallVector<Value> indices(shape.size());
  for (int64_t dim = shape.size() - 1; dim >= 0; --dim) {
    indices[dim] =
        arith::RemUIOp::create(b, loc, index, cIndex(b, loc, shape[dim]));
    index = arith::DivUIOp::create(b, loc, index, cIndex(b, loc, shape[dim]));
  }
  return indices;
}

void gpu_kernels::buildIf(OpBuilder &b, Location loc, Value condition,
                          function_ref<void(OpBuilder &, Location)> then) {
  scf::IfOp::create(b, loc, condition, [&](OpBuilder &nb, Location nloc) {
    then(nb, nloc);
    scf::YieldOp::create(nb, nloc);
  });
}

SmallVector<Value> gpu_kernels::swizzledIndices(OpBuilder &b, Location loc,
                                                Value r, Value c) {
  auto div = [&](Value x, int64_t d) {
    return arith::DivUIOp::create(b, loc, x, cIndex(b, loc, d)).getResult();
  };
  auto rem = [&](Value x, int64_t d) {
    return arith::RemUIOp::create(b, loc, x, cIndex(b, loc, d)).getResult();
  };
  return {div(r, kSwizzleTileRows), div(c, kSwizzleTileCols), rem(r, 32),
          div(rem(r, kSwizzleTileRows), 32), rem(c, kSwizzleTileCols)};
}

Value gpu_kernels::loadVector(OpBuilder &b, Location loc, VectorType type,
                              Value buffer, Value row, Value col) {
  // Callers start vectors at multiples of their length in rows whose length
  // is a multiple of it too, so a vector is aligned to its size (up to 16).
  int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  return vector::LoadOp::create(b, loc, type, buffer, ValueRange{row, col},
                                /*nontemporal=*/false,
                                llvm::MaybeAlign(std::min<int64_t>(bytes, 16)));
}

Value gpu_kernels::extendToF32(OpBuilder &b, Location loc, Value vector) {
  auto type = cast<VectorType>(vector.getType());
  if (type.getElementType().isF32())
    return vector;
  return arith::ExtFOp::create(b, loc, type.clone(b.getF32Type()), vector);
}

Value gpu_kernels::magnitude(OpBuilder &b, Location loc, Value f32Vector) {
  auto type = cast<VectorType>(f32Vector.getType());
  auto bitsType = type.clone(b.getI32Type());
  Value signMask = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(bitsType, b.getI32IntegerAttr(0x7FFFFFFF)));
  Value bits = arith::BitcastOp::create(b, loc, bitsType, f32Vector);
  return arith::BitcastOp::create(
      b, loc, type, arith::AndIOp::create(b, loc, bits, signMask));
}

Value gpu_kernels::buildGroupMax(OpBuilder &b, Location loc, Value value,
                                 int64_t lanes) {
  for (int32_t offset = 1; offset < lanes; offset *= 2) {
    Value other = gpu::ShuffleOp::create(b, loc, value, offset, /*width=*/32,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = arith::MaximumFOp::create(b, loc, value, other);
  }
  return value;
}

Value gpu_kernels::convertToElements(OpBuilder &b, Location loc, Value scaled,
                                     Type elementType, Value nanMask) {
  int64_t length = cast<VectorType>(scaled.getType()).getNumElements();
  auto i16 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, v, 16).getResult();
  };
  SmallVector<Value> pairs;
  for (int64_t i = 0; i < length; i += 2) {
    Value lo = vector::ExtractOp::create(b, loc, scaled, i);
    Value hi = vector::ExtractOp::create(b, loc, scaled, i + 1);
    // The first operand lands in the high byte, i.e. at the higher address.
    Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
        b, loc, b.getI16Type(), hi, lo, NVVM::FPRoundingMode::RN,
        NVVM::SaturationMode::SATFINITE, /*relu=*/false, elementType);
    // NaN blocks get the byte 0x7F whatever the hardware makes of a NaN.
    Value loNaN = vector::ExtractOp::create(b, loc, nanMask, i);
    Value hiNaN = vector::ExtractOp::create(b, loc, nanMask, i + 1);
    pair = arith::SelectOp::create(
        b, loc, loNaN,
        arith::OrIOp::create(b, loc, arith::AndIOp::create(b, loc, pair, i16(0xFF00)),
                             i16(0x7F)),
        pair);
    pair = arith::SelectOp::create(
        b, loc, hiNaN,
        arith::OrIOp::create(b, loc, arith::AndIOp::create(b, loc, pair, i16(0xFF)),
                             i16(0x7F00)),
        pair);
    pairs.push_back(pair);
  }
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({length / 2}, b.getI16Type()), pairs);
  Value bytes = vector::BitCastOp::create(
      b, loc, VectorType::get({length}, b.getI8Type()), packed);
  return arith::BitcastOp::create(b, loc,
                                  VectorType::get({length}, elementType), bytes);
}

Value gpu_kernels::isNaNExponent(OpBuilder &b, Location loc, Value exponent) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, exponent,
                               arith::ConstantIntOp::create(b, loc, 255, 32));
}

void gpu_kernels::replaceQuantize(RewriterBase &rewriter, QuantizeOp op,
                                  SwizzleOp swizzle, Value data, Value scales) {
  if (!swizzle) {
    rewriter.replaceOp(op, {data, scales});
    return;
  }
  // The linear scales never exist: their only user reads the tiles.
  rewriter.replaceOp(swizzle, scales);
  rewriter.replaceAllUsesWith(op.getData(), data);
  rewriter.eraseOp(op);
}
