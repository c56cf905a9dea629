//===- MXOps.cpp - Operations of the mx dialect ---------------------------===//
//
// Verifiers and folders of the mx operations. Every verifier message names the
// offending operand, the shape or type it got and the one it expected, so that
// a compiler emitting mx ops can fix its output without reading this file.
// Shapes must be static: block and scale shapes are compile-time layout facts.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mx;

//===----------------------------------------------------------------------===//
// Shape arithmetic
//===----------------------------------------------------------------------===//

SmallVector<int64_t> mx::getScalesShape(ArrayRef<int64_t> shape,
                                        ArrayRef<int64_t> block) {
  SmallVector<int64_t> scalesShape;
  for (auto [size, blockSize] : llvm::zip_equal(shape, block))
    scalesShape.push_back(llvm::divideCeilSigned(size, blockSize));
  return scalesShape;
}

SmallVector<int64_t> mx::getSwizzledShape(int64_t rows, int64_t cols) {
  return {llvm::divideCeilSigned(rows, kSwizzleTileRows),
          llvm::divideCeilSigned(cols, kSwizzleTileCols), 32, 4, 4};
}

double mx::getMaxFinite(Type elementType) {
  return isa<Float8E4M3FNType>(elementType) ? 448.0 : 57344.0;
}

int64_t mx::getEmax(Type elementType) {
  return isa<Float8E4M3FNType>(elementType) ? 8 : 15;
}

static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

static LogicalResult verifyStaticShapes(Operation *op) {
  for (Type type : llvm::concat<Type>(op->getOperandTypes(),
                                      op->getResultTypes()))
    if (!cast<RankedTensorType>(type).hasStaticShape())
      return op->emitOpError("requires static shapes, got ") << type;
  return success();
}

/// Checks a block against the shape it tiles and the scales it produces.
static LogicalResult verifyBlockScales(Operation *op, StringRef shapeName,
                                       ArrayRef<int64_t> shape,
                                       ArrayRef<int64_t> block,
                                       RankedTensorType scalesType) {
  if (block.size() != shape.size())
    return op->emitOpError("expected one block entry per ")
           << shapeName << " dimension (" << shape.size() << "), got block "
           << formatShape(block);
  if (llvm::any_of(block, [](int64_t size) { return size <= 0; }))
    return op->emitOpError("block entries must be positive, got ")
           << formatShape(block);
  SmallVector<int64_t> expected = getScalesShape(shape, block);
  if (scalesType.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected scales of shape ")
           << formatShape(expected) << " (ceil of " << shapeName << " shape "
           << formatShape(shape) << " / block " << formatShape(block)
           << "), got " << formatShape(scalesType.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// QuantizeOp
//===----------------------------------------------------------------------===//

LogicalResult QuantizeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  if (getData().getType().getShape() != shape)
    return emitOpError("data shape ")
           << formatShape(getData().getType().getShape())
           << " must equal the input shape " << formatShape(shape);
  if (failed(verifyBlockScales(*this, "input", shape, getBlock(),
                               getScales().getType())))
    return failure();
  Type scaleType = getScales().getType().getElementType();
  if (getRounding() == ScaleRounding::exact && !scaleType.isF32())
    return emitOpError("rounding 'exact' needs f32 scales, got ")
           << scaleType << " (power-of-two scales need 'ceil' or 'floor')";
  return success();
}

//===----------------------------------------------------------------------===//
// DequantizeOp
//===----------------------------------------------------------------------===//

LogicalResult DequantizeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> shape = getData().getType().getShape();
  if (getResult().getType().getShape() != shape)
    return emitOpError("result shape ")
           << formatShape(getResult().getType().getShape())
           << " must equal the data shape " << formatShape(shape);
  return verifyBlockScales(*this, "data", shape, getBlock(),
                           getScales().getType());
}

//===----------------------------------------------------------------------===//
// SwizzleOp / UnswizzleOp
//===----------------------------------------------------------------------===//

/// Checks that `tiled` is the swizzled form of the 2-D scales `linear`.
static LogicalResult verifySwizzlePair(Operation *op, int64_t unscaledDim,
                                       RankedTensorType linear,
                                       RankedTensorType tiled) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  if (linear.getRank() != 2)
    return op->emitOpError("expected 2-D scales, got ") << linear;
  if (tiled.getRank() != 5)
    return op->emitOpError("expected 5-D swizzled scales, got ") << tiled;
  if (unscaledDim != 0 && unscaledDim != 1)
    return op->emitOpError("unscaled_dim must be 0 or 1, got ") << unscaledDim;
  if (linear.getElementType() != tiled.getElementType())
    return op->emitOpError("swizzled and linear scales must have one element "
                           "type, got ")
           << tiled.getElementType() << " and " << linear.getElementType();
  int64_t rows = linear.getDimSize(unscaledDim);
  int64_t cols = linear.getDimSize(1 - unscaledDim);
  SmallVector<int64_t> expected = getSwizzledShape(rows, cols);
  if (tiled.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected swizzled shape ")
           << formatShape(expected) << " for " << formatShape(linear.getShape())
           << " scales with unscaled_dim " << unscaledDim << ", got "
           << formatShape(tiled.getShape());
  return success();
}

LogicalResult SwizzleOp::verify() {
  return verifySwizzlePair(*this, getUnscaledDim(), getInput().getType(),
                           getResult().getType());
}

LogicalResult UnswizzleOp::verify() {
  return verifySwizzlePair(*this, getUnscaledDim(), getResult().getType(),
                           getInput().getType());
}

OpFoldResult UnswizzleOp::fold(FoldAdaptor) {
  auto swizzle = getInput().getDefiningOp<SwizzleOp>();
  if (swizzle && swizzle.getUnscaledDim() == getUnscaledDim() &&
      swizzle.getInput().getType() == getType())
    return swizzle.getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

/// Checks one GEMM operand `[rows, K]` against its block and scales.
static LogicalResult verifyMatmulOperand(Operation *op, StringRef name,
                                         RankedTensorType operand,
                                         ArrayRef<int64_t> block,
                                         RankedTensorType scales) {
  ArrayRef<int64_t> shape = operand.getShape();
  if (block.size() != 2 || llvm::any_of(block, [](int64_t s) { return s <= 0; }))
    return op->emitOpError("expected a 2-entry positive ")
           << name << "_block, got " << formatShape(block);
  if (shape[1] % block[1] != 0)
    return op->emitOpError("K = ")
           << shape[1] << " is not a multiple of the " << name
           << " block's K extent " << block[1];
  if (scales.getRank() == 2)
    return verifyBlockScales(op, name, shape, block, scales);
  if (scales.getRank() != 5)
    return op->emitOpError("expected ")
           << name << " scales to be 2-D (linear) or 5-D (swizzled), got "
           << scales;
  if (block[0] != 1)
    return op->emitOpError("swizzled ")
           << name << " scales need a [1, k] block, got " << formatShape(block);
  SmallVector<int64_t> expected =
      getSwizzledShape(shape[0], shape[1] / block[1]);
  if (scales.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected swizzled ")
           << name << " scales of shape " << formatShape(expected) << ", got "
           << formatShape(scales.getShape());
  return success();
}

LogicalResult ScaledMatmulOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return emitOpError("expected 2-D lhs [M, K] and rhs [N, K], got ")
           << lhs << " and " << rhs;
  if (lhs.getDimSize(1) != rhs.getDimSize(1))
    return emitOpError("lhs K (")
           << lhs.getDimSize(1) << ") must equal rhs K (" << rhs.getDimSize(1)
           << "); rhs is [N, K]";
  if (failed(verifyMatmulOperand(*this, "lhs", lhs, getLhsBlock(),
                                 getLhsScales().getType())) ||
      failed(verifyMatmulOperand(*this, "rhs", rhs, getRhsBlock(),
                                 getRhsScales().getType())))
    return failure();
  SmallVector<int64_t> expected = {lhs.getDimSize(0), rhs.getDimSize(0)};
  if (getResult().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << formatShape(expected) << " ([M, N]), got "
           << formatShape(getResult().getType().getShape());
  return success();
}

#define GET_OP_CLASSES
#include "mx/Dialect/MX/IR/MXOps.cpp.inc"
