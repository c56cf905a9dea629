//===- MXOps.cpp - Operations of the mx dialect ---------------------------===//
//
// Verifiers and folders of the mx operations. Every verifier message names the
// offending operand, the shape or type it got and the one it expected, so that
// a compiler emitting mx ops can fix its output without reading this file.
// Shapes must be static: block and scale shapes are compile-time layout facts.
// Tensors of data have rank >= 2; their leading dimensions are batch
// dimensions, which blocks never span.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
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

SmallVector<int64_t> mx::getTransposedShape(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> transposed(shape);
  std::swap(transposed[shape.size() - 2], transposed[shape.size() - 1]);
  return transposed;
}

SmallVector<int64_t> mx::getSwizzledShape(int64_t rows, int64_t cols) {
  return {llvm::divideCeilSigned(rows, SwizzleTiles::kRows),
          llvm::divideCeilSigned(cols, SwizzleTiles::kCols),
          SwizzleTiles::kRowStride, SwizzleTiles::kRowGroups,
          SwizzleTiles::kCols};
}

SmallVector<int64_t> mx::getSwizzledScalesShape(ArrayRef<int64_t> shape,
                                                int64_t unscaledDim,
                                                SwizzleLayout layout) {
  int64_t rank = shape.size();
  int64_t rows = shape[unscaledDim];
  int64_t cols = shape[unscaledDim == rank - 1 ? rank - 2 : rank - 1];
  SmallVector<int64_t> result(shape.drop_back(2));
  if (layout == SwizzleLayout::tiles)
    llvm::append_range(result, getSwizzledShape(rows, cols));
  else
    result.append({cols, llvm::divideCeilSigned(rows, kBlockwisePadding),
                   kBlockwisePadding});
  return result;
}

MatmulOperandShape mx::getMatmulOperandShape(ArrayRef<int64_t> shape,
                                             OperandLayout layout) {
  int64_t rank = shape.size();
  MatmulOperandShape result;
  result.batch.assign(shape.begin(), shape.end() - 2);
  result.kDim = layout == OperandLayout::k_contiguous ? rank - 1 : rank - 2;
  result.rowsDim = layout == OperandLayout::k_contiguous ? rank - 2 : rank - 1;
  result.rows = shape[result.rowsDim];
  result.k = shape[result.kDim];
  return result;
}

bool mx::isNVFP4Scale(Type scaleType) {
  return isa<Float8E4M3FNType>(scaleType);
}

static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

/// Checks every operand and result: a static shape, no empty dimension, and
/// fewer than 2^48 elements, so that the lowerings' padded sizes (at most
/// 4x: blocks and tiles pad the last two dimensions) and byte counts fit in
/// int64 with room to spare.
static LogicalResult verifyStaticShapes(Operation *op) {
  constexpr int64_t kMaxElements = int64_t(1) << 48;
  for (Type type :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto tensor = cast<RankedTensorType>(type);
    if (!tensor.hasStaticShape())
      return op->emitOpError("requires static shapes, got ") << type;
    if (llvm::is_contained(tensor.getShape(), 0))
      return op->emitOpError("requires non-empty tensors, got ") << type;
    int64_t elements = 1;
    for (int64_t size : tensor.getShape())
      if (llvm::MulOverflow(elements, size, elements) ||
          elements >= kMaxElements)
        return op->emitOpError("requires tensors of fewer than 2^48 "
                               "elements, got ")
               << type;
  }
  return success();
}

/// Checks that a tensor of data has the batch-plus-matrix rank every mx op
/// takes.
static LogicalResult verifyDataRank(Operation *op, StringRef name,
                                    RankedTensorType type) {
  if (type.getRank() < 2)
    return op->emitOpError("expected ")
           << name << " of rank >= 2 ([batch..., rows, columns]), got " << type;
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
  for (int64_t dim = 0, e = shape.size() - 2; dim < e; ++dim)
    if (block[dim] != 1)
      return op->emitOpError("block must be 1 on batch dimension ")
             << dim << " (blocks span only the last two dimensions), got "
             << formatShape(block);
  SmallVector<int64_t> expected = getScalesShape(shape, block);
  if (scalesType.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected scales of shape ")
           << formatShape(expected) << " (ceil of " << shapeName << " shape "
           << formatShape(shape) << " / block " << formatShape(block)
           << "), got " << formatShape(scalesType.getShape());
  return success();
}

/// The name of the MX recipe of `format` (E8M0 scales per 32 elements):
/// "MXFP8", "MXFP6", "MXFP4" or "MXINT8".
static std::string getMXRecipeName(const ElementFormat &format) {
  return (llvm::Twine("MX") + (format.isInteger ? "INT" : "FP") +
          llvm::Twine(format.bitWidth))
      .str();
}

/// Checks which scales and blocks go with the element format of `data`: the
/// FP8 formats take every scale type but NVFP4's; the others take E8M0
/// scales per 32 elements (MX) along one of the last two dimensions, and E2M1
/// also E4M3 scales per 16 (NVFP4). Packed formats need whole groups of
/// elements in the innermost dimension.
static LogicalResult verifyFormat(Operation *op, StringRef name,
                                  RankedTensorType data, Type scaleType,
                                  ArrayRef<int64_t> block) {
  Type element = data.getElementType();
  ElementFormat format = getVerifiedElementFormat(element);
  bool nvfp4 = isNVFP4Scale(scaleType);
  if (nvfp4 && !format.takesNVFP4Scales())
    return op->emitOpError("f8E4M3FN scales are NVFP4's and need f4E2M1FN ")
           << name << ", got " << element;
  if (format.isPacked() &&
      data.getShape().back() % format.packedElements != 0)
    return op->emitOpError()
           << element << " " << name << " stores " << format.packedElements
           << " elements in " << format.packedBytes
           << (format.packedBytes == 1 ? " byte" : " bytes")
           << ": its innermost extent must be a multiple of "
           << format.packedElements << ", got " << data;
  if (format.takesFP8Recipes())
    return success();
  std::string mx = getMXRecipeName(format);
  if (scaleType.isF32()) {
    InFlightDiagnostic diag = op->emitOpError()
                              << element << " " << name
                              << " takes f8E8M0FNU scales (" << mx
                              << ", block " << kMXBlock << ")";
    if (format.takesNVFP4Scales())
      diag << " or f8E4M3FN scales (NVFP4, block " << kNVFP4Block << ")";
    return diag << ", got f32";
  }
  int64_t extent = nvfp4 ? kNVFP4Block : kMXBlock;
  int64_t rank = block.size();
  auto isOne = [](int64_t size) { return size == 1; };
  bool alongLast =
      block.back() == extent && llvm::all_of(block.drop_back(), isOne);
  bool alongSecondLast = rank >= 2 && block[rank - 2] == extent &&
                         block.back() == 1 &&
                         llvm::all_of(block.drop_back(2), isOne);
  if (!alongLast && !alongSecondLast)
    return op->emitOpError(nvfp4 ? "NVFP4" : mx)
           << " needs a block of " << extent
           << " along one of the last two dimensions and 1 elsewhere, got "
           << formatShape(block);
  return success();
}

//===----------------------------------------------------------------------===//
// QuantizeOp
//===----------------------------------------------------------------------===//

/// Checks what every quantize shares: static shapes, an input of rank >= 2
/// and data of the input's shape, or of its transpose (the last two
/// dimensions swapped) when `transposed`.
static LogicalResult verifyQuantizedData(Operation *op, RankedTensorType input,
                                         RankedTensorType data,
                                         bool transposed) {
  if (failed(verifyStaticShapes(op)) ||
      failed(verifyDataRank(op, "input", input)))
    return failure();
  if (!transposed && data.getShape() != input.getShape())
    return op->emitOpError("data shape ")
           << formatShape(data.getShape()) << " must equal the input shape "
           << formatShape(input.getShape());
  if (transposed && data.getShape() != ArrayRef<int64_t>(getTransposedShape(
                                           input.getShape())))
    return op->emitOpError("transposed data shape ")
           << formatShape(data.getShape())
           << " must be the input shape with its last two dimensions "
              "swapped, "
           << formatShape(getTransposedShape(input.getShape()));
  return success();
}

LogicalResult QuantizeOp::verify() {
  if (failed(verifyQuantizedData(*this, getInput().getType(),
                                 getData().getType(), getTransposed())))
    return failure();
  // Blocks and scales are those of the data: the input's shape, or its
  // transpose.
  ArrayRef<int64_t> shape = getData().getType().getShape();
  if (failed(verifyBlockScales(*this, getTransposed() ? "data" : "input",
                               shape, getBlock(), getScales().getType())))
    return failure();
  Type scaleType = getScales().getType().getElementType();
  if (getRounding() == ScaleRounding::exact && !scaleType.isF32())
    return emitOpError("rounding 'exact' needs f32 scales, got ")
           << scaleType << " (power-of-two scales need 'ceil' or 'floor')";
  if (failed(verifyFormat(*this, "data", getData().getType(), scaleType,
                          getBlock())))
    return failure();
  bool given = static_cast<bool>(getTensorScale());
  bool computed = static_cast<bool>(getComputedTensorScale());
  if (!isNVFP4Scale(scaleType)) {
    if (given || computed)
      return emitOpError("a tensor scale is for NVFP4 (f8E4M3FN scales) "
                         "only, got ")
             << scaleType << " scales";
    if (getAmax() && getScales().getType().getNumElements() != 1)
      return emitOpError("amax stands for the amax of a single block over "
                         "the whole input (per-tensor scaling), got ")
             << formatShape(getScales().getType().getShape()) << " scales";
    return success();
  }
  if (given == computed)
    return emitOpError("NVFP4 takes its f32 tensor scale either as the "
                       "tensor_scale operand or as a third result, ")
           << (given ? "got both" : "got neither");
  if (getRounding() != ScaleRounding::ceil)
    return emitOpError("NVFP4 scales follow their own rule; rounding '")
           << stringifyScaleRounding(getRounding()) << "' does not apply";
  if (getAmax() && given)
    return emitOpError("amax is what NVFP4's computed tensor scale derives "
                       "from; a given tensor_scale needs none");
  return success();
}

//===----------------------------------------------------------------------===//
// DequantizeOp
//===----------------------------------------------------------------------===//

LogicalResult DequantizeOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifyDataRank(*this, "data", getData().getType())))
    return failure();
  ArrayRef<int64_t> shape = getData().getType().getShape();
  if (getResult().getType().getShape() != shape)
    return emitOpError("result shape ")
           << formatShape(getResult().getType().getShape())
           << " must equal the data shape " << formatShape(shape);
  if (failed(verifyBlockScales(*this, "data", shape, getBlock(),
                               getScales().getType())))
    return failure();
  Type scaleType = getScales().getType().getElementType();
  if (failed(verifyFormat(*this, "data", getData().getType(), scaleType,
                          getBlock())))
    return failure();
  if (isNVFP4Scale(scaleType) != static_cast<bool>(getTensorScale()))
    return emitOpError(getTensorScale()
                           ? "a tensor scale is for NVFP4 (f8E4M3FN scales) "
                             "only"
                           : "NVFP4 data needs its f32 tensor_scale");
  return success();
}

//===----------------------------------------------------------------------===//
// SwizzleOp / UnswizzleOp
//===----------------------------------------------------------------------===//

/// Checks that `swizzled` is the `layout` form of the compact scales
/// `compact`.
static LogicalResult verifySwizzlePair(Operation *op, int64_t unscaledDim,
                                       SwizzleLayout layout,
                                       RankedTensorType compact,
                                       RankedTensorType swizzled) {
  if (failed(verifyStaticShapes(op)) ||
      failed(verifyDataRank(op, "compact scales", compact)))
    return failure();
  int64_t rank = compact.getRank();
  if (unscaledDim != rank - 2 && unscaledDim != rank - 1)
    return op->emitOpError("unscaled_dim must be one of the last two "
                           "dimensions (")
           << rank - 2 << " or " << rank - 1 << "), got " << unscaledDim;
  if (compact.getElementType() != swizzled.getElementType())
    return op->emitOpError("swizzled and compact scales must have one "
                           "element type, got ")
           << swizzled.getElementType() << " and " << compact.getElementType();
  if (layout == SwizzleLayout::blockwise && !compact.getElementType().isF32())
    return op->emitOpError("layout blockwise is for the f32 scales of FP8 "
                           "blockwise quantization, got ")
           << compact.getElementType();
  SmallVector<int64_t> expected =
      getSwizzledScalesShape(compact.getShape(), unscaledDim, layout);
  if (swizzled.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected ")
           << stringifySwizzleLayout(layout) << " shape "
           << formatShape(expected) << " for "
           << formatShape(compact.getShape()) << " scales with unscaled_dim "
           << unscaledDim << ", got " << formatShape(swizzled.getShape());
  return success();
}

LogicalResult SwizzleOp::verify() {
  return verifySwizzlePair(*this, getUnscaledDim(), getLayout(),
                           getInput().getType(), getResult().getType());
}

LogicalResult UnswizzleOp::verify() {
  return verifySwizzlePair(*this, getUnscaledDim(), getLayout(),
                           getResult().getType(), getInput().getType());
}

OpFoldResult UnswizzleOp::fold(FoldAdaptor) {
  auto swizzle = getInput().getDefiningOp<SwizzleOp>();
  if (swizzle && swizzle.getUnscaledDim() == getUnscaledDim() &&
      swizzle.getLayout() == getLayout() &&
      swizzle.getInput().getType() == getType())
    return swizzle.getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

/// Checks one GEMM operand against its block and its scales in any of
/// their three forms (linear, tiles, blockwise GEMM-ready).
static LogicalResult verifyMatmulOperand(Operation *op, StringRef name,
                                         RankedTensorType operand,
                                         OperandLayout layout,
                                         ArrayRef<int64_t> block,
                                         RankedTensorType scales) {
  ArrayRef<int64_t> shape = operand.getShape();
  int64_t rank = operand.getRank();
  if (static_cast<int64_t>(block.size()) != rank ||
      llvm::any_of(block, [](int64_t s) { return s <= 0; }))
    return op->emitOpError("expected a ")
           << rank << "-entry positive " << name << "_block, got "
           << formatShape(block);
  MatmulOperandShape view = getMatmulOperandShape(shape, layout);
  if (view.k % block[view.kDim] != 0)
    return op->emitOpError("K = ")
           << view.k << " is not a multiple of the " << name
           << " block's K extent " << block[view.kDim] << " (dimension "
           << view.kDim << " of a " << stringifyOperandLayout(layout)
           << " operand)";
  if (scales.getRank() == rank)
    return verifyBlockScales(op, name, shape, block, scales);
  bool tiles = scales.getRank() == rank + 3;
  if (!tiles && scales.getRank() != rank + 1)
    return op->emitOpError("expected ")
           << name << " scales of rank " << rank << " (linear), " << rank + 3
           << " (tiles) or " << rank + 1 << " (blockwise GEMM-ready), got "
           << scales;
  SwizzleLayout swizzleLayout =
      tiles ? SwizzleLayout::tiles : SwizzleLayout::blockwise;
  if (llvm::any_of(block.drop_back(2), [](int64_t s) { return s != 1; }) ||
      block[view.rowsDim] != 1)
    return op->emitOpError("swizzled ")
           << name << " scales need a block of extent 1 off K, got "
           << formatShape(block);
  if (!tiles && !scales.getElementType().isF32())
    return op->emitOpError("blockwise GEMM-ready ")
           << name << " scales must be f32, got " << scales.getElementType();
  SmallVector<int64_t> compact(view.batch);
  compact.append({view.rows, view.k / block[view.kDim]});
  SmallVector<int64_t> expected =
      getSwizzledScalesShape(compact, rank - 2, swizzleLayout);
  if (scales.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected ")
           << stringifySwizzleLayout(swizzleLayout) << " " << name
           << " scales of shape " << formatShape(expected) << ", got "
           << formatShape(scales.getShape());
  return success();
}

MatmulOperandShape ScaledMatmulOp::getLhsShape() {
  return getMatmulOperandShape(getLhs().getType().getShape(), getLhsLayout());
}

MatmulOperandShape ScaledMatmulOp::getRhsShape() {
  return getMatmulOperandShape(getRhs().getType().getShape(), getRhsLayout());
}

LogicalResult ScaledMatmulOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  if (failed(verifyDataRank(*this, "lhs", lhs)) ||
      failed(verifyDataRank(*this, "rhs", rhs)))
    return failure();
  if (lhs.getRank() != rhs.getRank())
    return emitOpError("lhs and rhs must have one rank, got ")
           << lhs << " and " << rhs;
  MatmulOperandShape lhsView = getLhsShape(), rhsView = getRhsShape();
  if (lhsView.batch != rhsView.batch)
    return emitOpError("lhs and rhs batch dimensions differ: ")
           << formatShape(lhsView.batch) << " and "
           << formatShape(rhsView.batch);
  if (lhsView.k != rhsView.k)
    return emitOpError("lhs K (")
           << lhsView.k << ", " << stringifyOperandLayout(getLhsLayout())
           << ") must equal rhs K (" << rhsView.k << ", "
           << stringifyOperandLayout(getRhsLayout()) << ")";
  if (failed(verifyMatmulOperand(*this, "lhs", lhs, getLhsLayout(),
                                 getLhsBlock(), getLhsScales().getType())) ||
      failed(verifyMatmulOperand(*this, "rhs", rhs, getRhsLayout(),
                                 getRhsBlock(), getRhsScales().getType())))
    return failure();
  Type lhsScale = getLhsScales().getType().getElementType();
  Type rhsScale = getRhsScales().getType().getElementType();
  if (failed(verifyFormat(*this, "lhs", lhs, lhsScale, getLhsBlock())) ||
      failed(verifyFormat(*this, "rhs", rhs, rhsScale, getRhsBlock())))
    return failure();
  bool nvfp4 = isNVFP4Scale(lhsScale) || isNVFP4Scale(rhsScale);
  size_t expectedScales = nvfp4 ? 2 : 0;
  if (getTensorScales().size() != expectedScales)
    return emitOpError("expected ")
           << expectedScales << " tensor_scales ("
           << (nvfp4 ? "lhs and rhs, for NVFP4 operands"
                     : "only NVFP4 operands have them")
           << "), got " << getTensorScales().size();
  SmallVector<int64_t> expected(lhsView.batch);
  expected.append({lhsView.rows, rhsView.rows});
  if (getResult().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << formatShape(expected) << " ([batch..., M, N]), got "
           << formatShape(getResult().getType().getShape());
  if (Value bias = getBias();
      bias && cast<RankedTensorType>(bias.getType()).getShape() !=
                  ArrayRef<int64_t>{rhsView.rows})
    return emitOpError("expected bias of shape [")
           << rhsView.rows << "] (one value per column N), got "
           << formatShape(cast<RankedTensorType>(bias.getType()).getShape());
  if (Value accumulator = getAccumulator();
      accumulator && accumulator.getType() != getResult().getType())
    return emitOpError("accumulate operand must have the result type ")
           << getResult().getType() << ", got " << accumulator.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AmaxOp / QuantizeDelayedOp / UpdateAmaxHistoryOp
//===----------------------------------------------------------------------===//

LogicalResult AmaxOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  return verifyDataRank(*this, "input", getInput().getType());
}

/// Checks an amax history `[L, N]` against the scales `[N]` it updates.
static LogicalResult verifyHistory(Operation *op, RankedTensorType history,
                                   RankedTensorType scales) {
  if (history.getDimSize(1) != scales.getDimSize(0))
    return op->emitOpError("history ")
           << history << " must have one column per scale of " << scales;
  return success();
}

LogicalResult QuantizeDelayedOp::verify() {
  // Per-tensor scaling has FP8 elements (docs/spec.md, section 8); the other
  // formats take E8M0 block scales, and packed bytes (FP4, FP6) could not
  // even hold an odd extent. Checked first, before the data's shape.
  Type element = getData().getType().getElementType();
  if (!getVerifiedElementFormat(element).takesFP8Recipes())
    return emitOpError("casts to FP8 (f8E4M3FN or f8E5M2) only, got ")
           << element
           << " data: the other formats are quantized with block scales "
              "(mx.quantize)";
  if (failed(verifyQuantizedData(*this, getInput().getType(),
                                 getData().getType(), getTransposed())))
    return failure();
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  SmallVector<int64_t> ones(shape.size(), 1);
  if (getScaleInv().getType().getShape() != ArrayRef<int64_t>(ones))
    return emitOpError("expected scale_inv of shape ")
           << formatShape(ones) << " (one scale for the whole tensor), got "
           << formatShape(getScaleInv().getType().getShape());
  if (failed(
          verifyHistory(*this, getHistory().getType(), getScales().getType())))
    return failure();
  if (getNewHistory().getType() != getHistory().getType())
    return emitOpError("new_history must have the history's type ")
           << getHistory().getType() << ", got " << getNewHistory().getType();
  int64_t count = getScales().getType().getDimSize(0);
  auto index = static_cast<int64_t>(getIndex());
  if (index < 0 || index >= count)
    return emitOpError("index ")
           << index << " is out of range for " << count << " scales";
  return success();
}

LogicalResult UpdateAmaxHistoryOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(
          verifyHistory(*this, getHistory().getType(), getScales().getType())))
    return failure();
  if (getNewHistory().getType() != getHistory().getType() ||
      getNewScales().getType() != getScales().getType())
    return emitOpError("results must have the types of history and scales (")
           << getHistory().getType() << ", " << getScales().getType()
           << "), got " << getNewHistory().getType() << ", "
           << getNewScales().getType();
  auto margin = static_cast<int64_t>(getMargin());
  if (margin < -126 || margin > 127)
    return emitOpError("margin must lie in -126..127 (2^margin a normal "
                       "f32), got ")
           << margin;
  return success();
}

//===----------------------------------------------------------------------===//
// ColumnSumOp
//===----------------------------------------------------------------------===//

LogicalResult ColumnSumOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType input = getInput().getType();
  auto result = cast<RankedTensorType>(getResult().getType());
  if (input.getRank() != 2)
    return emitOpError("expected an input of rank 2 ([rows, columns]), got ")
           << input;
  if (!result.getElementType().isF32())
    return emitOpError("sums in f32: expected an f32 result, got ") << result;
  if (result.getShape() != ArrayRef<int64_t>{input.getDimSize(1)})
    return emitOpError("expected a result of shape [")
           << input.getDimSize(1) << "] (one sum per column of " << input
           << "), got " << formatShape(result.getShape());
  return success();
}

LogicalResult GatherChunkOp::verify() {
  auto chunk = cast<RankedTensorType>(getChunk().getType());
  auto dest = cast<RankedTensorType>(getDest().getType());
  if (!chunk.hasStaticShape() || !dest.hasStaticShape())
    return emitOpError("expected static shapes, got ")
           << chunk << " into " << dest;
  if (chunk.getElementType() != dest.getElementType() ||
      chunk.getRank() != dest.getRank() || chunk.getRank() == 0 ||
      chunk.getShape().drop_front() != dest.getShape().drop_front())
    return emitOpError("expected a chunk of rows of the gathered tensor (the "
                       "same element type and dimensions but the first), "
                       "got ")
           << chunk << " into " << dest;
  int64_t devices = getDevices();
  if (devices < 1 || dest.getDimSize(0) % devices)
    return emitOpError("expected ")
           << devices << " devices to hold equal parts of the "
           << dest.getDimSize(0) << " rows of " << dest;
  int64_t part = dest.getDimSize(0) / devices, row = getRow();
  if (row < 0 || row + chunk.getDimSize(0) > part)
    return emitOpError("places rows [")
           << row << ", " << row + chunk.getDimSize(0)
           << ") of each device's part, which has " << part << " rows";
  return success();
}

LogicalResult GatherJoinOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, GatherJoinOp::Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  llvm::append_range(types, adaptor.getGathered().getTypes());
  return success();
}

LogicalResult GatherJoinOp::verify() {
  for (Value gathered : getGathered())
    if (!gathered.getDefiningOp<GatherChunkOp>())
      return emitOpError("expected every operand to end a chain of "
                         "mx.gather_chunk, got one of ")
             << gathered.getType();
  return success();
}

#define GET_OP_CLASSES
#include "mx/Dialect/MX/IR/MXOps.cpp.inc"
