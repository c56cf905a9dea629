//===- FusionPlan.cpp - Which GPU kernel computes each mx.quantize --------===//
//
// One walk collects the quantize ops in program order and rejects those no
// kernel covers; rowwise ops are then paired with the columnwise ops of the
// same input, the ones left alone get their own kernel (or the reason they
// have none), and every planned op the swizzle its kernel writes. See
// FusionPlan.h for the rules.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/FusionPlan.h"

#include "KernelBuilder.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

bool isRowwise(QuantizeOp op) {
  return op.getBlock() == ArrayRef<int64_t>{1, kMXBlock};
}

/// What every FP8 quantize kernel needs: a 2-D input, [1, 32] or [32, 1]
/// blocks, power-of-two scales and K a multiple of 4 (whole strips).
LogicalResult checkQuantizeBasics(QuantizeOp op, std::string &reason) {
  RankedTensorType type = op.getInput().getType();
  ArrayRef<int64_t> block = op.getBlock();
  if (type.getRank() != 2 || (block != ArrayRef<int64_t>{1, kMXBlock} &&
                                   block != ArrayRef<int64_t>{kMXBlock, 1}))
    reason = "the GPU kernels cover [1, 32] and [32, 1] blocks of 2-D tensors";
  else if (op.getRounding() == ScaleRounding::exact)
    reason = "the GPU kernels cover power-of-two ('ceil', 'floor') scales";
  else if (type.getDimSize(1) % kStripCols != 0)
    reason = "the GPU kernels need K to be a multiple of 4";
  return success(reason.empty());
}

/// Whether a rowwise and a columnwise quantize of one input can share a strip
/// kernel: it writes both with one element type, scale type and rounding, and
/// is built at one insertion point, which must dominate the users of both.
bool canShareStripKernel(QuantizeOp rowwise, QuantizeOp columnwise) {
  return rowwise->getBlock() == columnwise->getBlock() &&
         rowwise.getData().getType().getElementType() ==
             columnwise.getData().getType().getElementType() &&
         rowwise.getScales().getType().getElementType() ==
             columnwise.getScales().getType().getElementType() &&
         rowwise.getRounding() == columnwise.getRounding();
}

/// The swizzle that alone consumes `op`'s scales and tiles them along `op`'s
/// unscaled dimension, if any.
SwizzleOp getFusableSwizzle(QuantizeOp op) {
  Value scales = op.getScales();
  if (!scales.hasOneUse())
    return {};
  auto swizzle = dyn_cast<SwizzleOp>(*scales.getUsers().begin());
  int64_t unscaledDim = isRowwise(op) ? 0 : 1;
  return swizzle && swizzle.getLayout() == SwizzleLayout::tiles &&
                 int64_t(swizzle.getUnscaledDim()) == unscaledDim
             ? swizzle
             : SwizzleOp();
}

} // namespace

QuantizeFusionPlan::QuantizeFusionPlan(Operation *root) {
  SmallVector<QuantizeOp> rowwise;
  llvm::DenseMap<Value, SmallVector<QuantizeOp>> columnwiseByInput;
  root->walk([&](QuantizeOp op) {
    std::string reason;
    if (isa<Float4E2M1FNType>(op.getData().getType().getElementType())) {
      // FP4 has a kernel of its own, and it writes no swizzle.
      if (succeeded(checkFP4Quantize(op, reason)))
        quantizes[op] = {QuantizeKernel::fp4, {}, {}};
      else
        unsupported[op] = std::move(reason);
    } else if (failed(checkQuantizeBasics(op, reason)))
      unsupported[op] = std::move(reason);
    else if (isRowwise(op))
      rowwise.push_back(op);
    else
      columnwiseByInput[op.getInput()].push_back(op);
  });

  auto findSibling = [&](QuantizeOp op) -> QuantizeOp {
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
    } else if (op.getInput().getType().getDimSize(1) % kElementsPerLane) {
      unsupported[op] =
          "the rowwise GPU kernel needs K to be a multiple of 16 (4 when "
          "fused with a columnwise quantize of the same input)";
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
  SwizzleOp swizzle = getFusableSwizzle(op);
  quantizes[op] = {kernel, sibling, swizzle};
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
