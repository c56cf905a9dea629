//===- FusionPlan.cpp - Which GPU kernel computes each mx.quantize --------===//
//
// One walk collects the quantize ops in program order, rejects those no
// kernel covers and plans those that share nothing; rowwise ops are then
// paired with the columnwise ops of the same input, the ones left alone get
// their own kernel (or the reason they have none), and every planned op the
// swizzle its kernel writes. See FusionPlan.h for the rules.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/Quantize/FusionPlan.h"

#include "FusionPolicy.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

/// The last two dimensions of a quantize's input and its block there: the
/// matrix of every batch slice.
struct MatrixBlock {
  int64_t rows, cols, blockRows, blockCols;
};

MatrixBlock getMatrixBlock(QuantizeOp op) {
  // The block is the data's: the input's shape, or its transpose.
  ArrayRef<int64_t> shape = op.getData().getType().getShape().take_back(2);
  ArrayRef<int64_t> block = op.getBlock().take_back(2);
  return {shape[0], shape[1], block[0], block[1]};
}

/// Whether `op` is a rowwise quantize that the strip kernel can compute:
/// blocks [1, 32] (MX) or [1, 128] (FP8 blockwise), the widths of its
/// column blocks.
bool isFusableRowwise(QuantizeOp op) {
  MatrixBlock m = getMatrixBlock(op);
  return m.blockRows == 1 && getStripLanesAcross(m.blockCols);
}

/// The kernel of a transposed quantize, of one-byte elements: the
/// per-tensor cast+transpose kernel for one block per matrix, the strip
/// kernel for [1, 32] (MX) and [1, 128] (FP8 blockwise) blocks of the data
/// (the input's columns).
std::optional<QuantizeKernel> getTransposedKernel(QuantizeOp op, Chip chip,
                                                  std::string &reason) {
  // In the data's dimensions: its rows are the input's columns.
  MatrixBlock m = getMatrixBlock(op);
  Type elementType = op.getData().getType().getElementType();
  bool perTensor = m.blockRows >= m.rows && m.blockCols >= m.cols;
  bool columns = m.blockRows == 1 && getStripLanesAcross(m.blockCols);
  if (!perTensor && !columns) {
    reason = "the GPU kernels write transposed data for one block per matrix "
             "(per-tensor scaling) and for [1, 32] and [1, 128] blocks of the "
             "data only";
    return std::nullopt;
  }
  if (getVerifiedElementFormat(elementType).isPacked() ||
      !ElementConversion::get(elementType, chip)) {
    llvm::raw_string_ostream(reason)
        << "no GPU kernel writes transposed " << elementType << " data on "
        << getChipName(chip);
    return std::nullopt;
  }
  if (columns) {
    if (m.cols % kElementsPerLane == 0 && m.rows % kStripCols == 0)
      return QuantizeKernel::stripColumnwise;
    reason = "the transposed columnwise GPU kernel needs the input's rows to "
             "be a multiple of 16 and its columns a multiple of 4";
    return std::nullopt;
  }
  if (m.rows % kElementsPerLane || m.cols % kElementsPerLane) {
    reason = "the cast+transpose GPU kernel needs both matrix dimensions to "
             "be multiples of 16";
    return std::nullopt;
  }
  return QuantizeKernel::perTensor;
}

/// Whether a plain and a transposed per-tensor quantize of one input can
/// share the cast+transpose kernel: one element type, scale type, rounding
/// and amax, and one block, where the kernel is built before the first.
bool canShareCastTranspose(QuantizeOp plain, QuantizeOp transposed) {
  return plain->getBlock() == transposed->getBlock() &&
         plain.getAmax() == transposed.getAmax() &&
         plain.getData().getType().getElementType() ==
             transposed.getData().getType().getElementType() &&
         plain.getScales().getType().getElementType() ==
             transposed.getScales().getType().getElementType() &&
         plain.getRounding() == transposed.getRounding();
}

/// The kernel that computes `op` on its own on `chip`, or the reason why none
/// does. The K conditions of rowwise quantizations are checked once it is
/// known whether they are fused.
std::optional<QuantizeKernel> getStandaloneKernel(QuantizeOp op, Chip chip,
                                                  std::string &reason) {
  MatrixBlock m = getMatrixBlock(op);
  Type elementType = op.getData().getType().getElementType();
  if (op.getTransposed())
    return getTransposedKernel(op, chip, reason);
  ElementFormat format = getVerifiedElementFormat(elementType);
  // FP4 has kernels of its own, which write no swizzle.
  if (format.takesNVFP4Scales()) {
    if (succeeded(checkFP4Quantize(op, reason)))
      return QuantizeKernel::fp4;
    return std::nullopt;
  }
  if (!ElementConversion::get(elementType, chip)) {
    llvm::raw_string_ostream(reason)
        << "no GPU quantize kernel converts to " << elementType << " on "
        << getChipName(chip);
    return std::nullopt;
  }
  auto perTensor = [&]() -> std::optional<QuantizeKernel> {
    if ((m.rows * m.cols) % kElementsPerLane == 0)
      return QuantizeKernel::perTensor;
    reason = "the per-tensor GPU kernels need the element count of each "
             "matrix to be a multiple of 16";
    return std::nullopt;
  };
  // A given amax (of the whole tensor the input is a shard of) is read by
  // the per-tensor kernels only, whatever the block looks like.
  if (op.getAmax())
    return perTensor();
  if (m.blockRows == 1 && getRowwiseLanesPerBlock(m.blockCols))
    return QuantizeKernel::rowwise;
  if (m.blockRows == kMXBlock && m.blockCols == 1) {
    int64_t multiple = getStripColumnMultiple(format);
    if (m.cols % multiple == 0)
      return QuantizeKernel::stripColumnwise;
    llvm::raw_string_ostream(reason)
        << "the columnwise GPU kernel needs K to be a multiple of " << multiple
        << " for " << elementType;
    return std::nullopt;
  }
  if (m.blockRows == kBlockwiseExtent && m.blockCols == kBlockwiseExtent) {
    if (m.cols % kElementsPerLane == 0)
      return QuantizeKernel::blockwise2D;
    reason = "the [128, 128] GPU kernel needs K to be a multiple of 16";
    return std::nullopt;
  }
  if (m.blockRows >= m.rows && m.blockCols >= m.cols)
    return perTensor();
  reason = "the GPU kernels cover blocks [1, w] (w = 16 x 2^k, up to 512), "
           "[32, 1], [128, 128] and one block per matrix, over the last two "
           "dimensions";
  return std::nullopt;
}

/// Whether a rowwise and a columnwise quantize of one input can share a strip
/// kernel: it writes both with one element type, scale type and rounding,
/// for rowwise blocks as wide as the column blocks are tall ([1, 32] with
/// [32, 1] or MX's transposed [1, 32]; FP8 blockwise's [1, 128] with its
/// transposed [1, 128]), and is built at one insertion point, which must
/// dominate the users of both.
bool canShareStripKernel(QuantizeOp rowwise, QuantizeOp columnwise) {
  return rowwise->getBlock() == columnwise->getBlock() &&
         getStripBlockRows(columnwise) == getMatrixBlock(rowwise).blockCols &&
         rowwise.getData().getType().getElementType() ==
             columnwise.getData().getType().getElementType() &&
         rowwise.getScales().getType().getElementType() ==
             columnwise.getScales().getType().getElementType() &&
         rowwise.getRounding() == columnwise.getRounding();
}

/// The swizzle that alone consumes `op`'s scales and tiles them along `op`'s
/// unscaled dimension, if any: the rowwise and strip kernels write it.
SwizzleOp getFusableSwizzle(QuantizeOp op, QuantizeKernel kernel) {
  Value scales = op.getScales();
  if (kernel == QuantizeKernel::blockwise2D ||
      kernel == QuantizeKernel::perTensor || kernel == QuantizeKernel::fp4 ||
      !scales.hasOneUse())
    return {};
  auto swizzle = dyn_cast<SwizzleOp>(*scales.getUsers().begin());
  int64_t rank = op.getInput().getType().getRank();
  int64_t unscaledDim = getMatrixBlock(op).blockRows == 1 ? rank - 2 : rank - 1;
  return swizzle && swizzle.getLayout() == SwizzleLayout::tiles &&
                 int64_t(swizzle.getUnscaledDim()) == unscaledDim
             ? swizzle
             : SwizzleOp();
}

} // namespace

QuantizeFusionPlan::QuantizeFusionPlan(Operation *root, Chip chip) {
  SmallVector<QuantizeOp> rowwise, transposedCasts;
  llvm::DenseMap<Value, SmallVector<QuantizeOp>> columnwiseByInput,
      plainCastsByInput;
  root->walk([&](QuantizeOp op) {
    std::string reason;
    std::optional<QuantizeKernel> kernel =
        getStandaloneKernel(op, chip, reason);
    if (!kernel) {
      unsupported[op] = std::move(reason);
      return;
    }
    if (*kernel == QuantizeKernel::rowwise)
      rowwise.push_back(op);
    else if (*kernel == QuantizeKernel::stripColumnwise)
      columnwiseByInput[op.getInput()].push_back(op);
    else
      plan(op, *kernel, {});
    if (*kernel == QuantizeKernel::perTensor)
      (op.getTransposed() ? transposedCasts : plainCastsByInput[op.getInput()])
          .push_back(op);
  });
  // Each transposed cast takes the first plain cast of its input that it can
  // share the cast+transpose kernel with.
  for (QuantizeOp op : transposedCasts)
    for (QuantizeOp plain : plainCastsByInput.lookup(op.getInput()))
      if (!quantizes.lookup(plain).sibling &&
          canShareCastTranspose(plain, op)) {
        plan(plain, QuantizeKernel::perTensor, op);
        plan(op, QuantizeKernel::perTensor, plain);
        break;
      }

  auto findSibling = [&](QuantizeOp op) -> QuantizeOp {
    if (!isFusableRowwise(op))
      return {};
    for (QuantizeOp columnwise : columnwiseByInput.lookup(op.getInput()))
      if (!quantizes.contains(columnwise) &&
          canShareStripKernel(op, columnwise))
        return columnwise;
    return {};
  };
  for (QuantizeOp op : rowwise) {
    if (QuantizeOp sibling = findSibling(op)) {
      plan(op, QuantizeKernel::stripFused, sibling);
      plan(sibling, QuantizeKernel::stripFused, op);
    } else if (getMatrixBlock(op).cols % kElementsPerLane) {
      unsupported[op] =
          "the rowwise GPU kernel needs K to be a multiple of 16 (of 4 when "
          "fused with a columnwise FP8 or MXINT8 quantize of the same input)";
    } else {
      plan(op, QuantizeKernel::rowwise, {});
    }
  }
  for (auto &[input, ops] : columnwiseByInput)
    for (QuantizeOp op : ops)
      if (!quantizes.contains(op))
        plan(op, QuantizeKernel::stripColumnwise, {});
}

void QuantizeFusionPlan::plan(QuantizeOp op, QuantizeKernel kernel,
                              QuantizeOp sibling) {
  SwizzleOp swizzle = getFusableSwizzle(op, kernel);
  bool reversedTiles = kernel == QuantizeKernel::perTensor && !op.getAmax();
  quantizes[op] = {kernel, sibling, swizzle, reversedTiles};
  if (swizzle)
    fusedSwizzles[swizzle] = op;
}

const QuantizePlan *QuantizeFusionPlan::lookup(QuantizeOp op) const {
  auto it = quantizes.find(op);
  return it == quantizes.end() ? nullptr : &it->second;
}

StringRef QuantizeFusionPlan::getUnsupportedReason(QuantizeOp op) const {
  auto it = unsupported.find(op);
  return it == unsupported.end() ? StringRef() : StringRef(it->second);
}

QuantizeOp QuantizeFusionPlan::getFusedInto(SwizzleOp op) const {
  return fusedSwizzles.lookup(op);
}

ElementConversion PlannedQuantizePattern::getConversion(QuantizeOp op) const {
  return ElementConversion::forQuantize(op, chip);
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
