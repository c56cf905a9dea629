//===- GemmLowering.cpp - Who lowers an mx.scaled_matmul ------------------===//
//
// See GemmLowering.h. What cuBLASLt runs is read off the operands' blocks and
// scales as cuBLASLt's scale modes (the enum values of MXRuntime.h, which
// the runtime implements, so the two cannot drift); what the generator runs
// is its planner's answer (GemmGenerator.h); which of the two is faster is a
// fact of the chip (Target.h).
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/GemmLowering.h"
#include "mx/Conversion/DeviceBuffers.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mx;

namespace {

/// The cuBLASLt scale mode of one operand, or a reason why none. Batch
/// dimensions are left to the caller's loop: only the matrix part counts.
FailureOr<mxrtScaleMode> getScaleMode(RankedTensorType operand,
                                      OperandLayout layout,
                                      ArrayRef<int64_t> block,
                                      RankedTensorType scales,
                                      std::string &reason) {
  Type scaleType = scales.getElementType();
  int64_t rank = operand.getRank();
  MatmulOperandShape view = getMatmulOperandShape(operand.getShape(), layout);
  ArrayRef<int64_t> matrixBlock = block.take_back(2);
  int64_t blockK = block[view.kDim];
  bool alongK = block[view.rowsDim] == 1;
  bool tiles = scales.getRank() == rank + 3;
  if (tiles && alongK && blockK == kMXBlock &&
      isa<Float8E8M0FNUType>(scaleType))
    return MXRT_SCALE_VEC32_UE8M0;
  if (tiles && alongK && blockK == kNVFP4Block && isNVFP4Scale(scaleType))
    return MXRT_SCALE_VEC16_UE4M3;
  if (scaleType.isF32()) {
    bool kOuter = layout == OperandLayout::k_outer;
    if (alongK && blockK == 128) {
      // cuBLASLt's own [KB, rows]: GEMM-ready, or linear K-outer scales.
      if (scales.getRank() == rank + 1 || (scales.getRank() == rank && kOuter))
        return MXRT_SCALE_VEC128_F32_KB_ROWS;
      if (scales.getRank() == rank)
        return MXRT_SCALE_VEC128_F32;
    }
    if (matrixBlock == ArrayRef<int64_t>{128, 128} &&
        scales.getRank() == rank) {
      if (!kOuter)
        return MXRT_SCALE_BLK128X128_F32;
      reason = "cuBLASLt's 128x128 scales are laid out for K-contiguous "
               "operands; this operand is K-outer";
      return failure();
    }
    if (matrixBlock == operand.getShape().take_back(2) &&
        scales.getRank() == rank)
      return MXRT_SCALE_TENSOR_F32;
  }
  reason = "cuBLASLt takes swizzled E8M0 scales of 32-element blocks, "
           "swizzled E4M3 scales of 16-element blocks (NVFP4), f32 scales "
           "of 128-element or 128x128 blocks, or one f32 scale per operand";
  return failure();
}

/// How one operand is scaled, as the recipes tell them apart: by blocks of
/// `alongK` elements of K (a row each), by 128x128 tiles, or as a whole.
struct OperandScaling {
  Type scaleType;
  int64_t alongK = 0;
  bool tile128 = false, whole = false;
};

OperandScaling getOperandScaling(RankedTensorType operand, OperandLayout layout,
                                 ArrayRef<int64_t> block, Type scaleType) {
  MatmulOperandShape view = getMatmulOperandShape(operand.getShape(), layout);
  ArrayRef<int64_t> matrixBlock = block.take_back(2);
  OperandScaling scaling;
  scaling.scaleType = scaleType;
  if (block[view.rowsDim] == 1)
    scaling.alongK = block[view.kDim];
  scaling.tile128 = matrixBlock == ArrayRef<int64_t>{128, 128};
  scaling.whole = matrixBlock == operand.getShape().take_back(2);
  return scaling;
}

StringRef getLoweringName(GemmLowering lowering) {
  return lowering == GemmLowering::kernel ? "kernel" : "cublas";
}

} // namespace

std::optional<ScaledMatmulRecipe> mx::classifyScaledMatmul(ScaledMatmulOp op) {
  OperandScaling a = getOperandScaling(
      op.getLhs().getType(), op.getLhsLayout(), op.getLhsBlock(),
      op.getLhsScales().getType().getElementType());
  OperandScaling b = getOperandScaling(
      op.getRhs().getType(), op.getRhsLayout(), op.getRhsBlock(),
      op.getRhsScales().getType().getElementType());
  if (isa<Float8E8M0FNUType>(a.scaleType) &&
      isa<Float8E8M0FNUType>(b.scaleType) && a.alongK == kMXBlock &&
      b.alongK == kMXBlock)
    return ScaledMatmulRecipe::mx;
  if (isNVFP4Scale(a.scaleType) && isNVFP4Scale(b.scaleType) &&
      a.alongK == kNVFP4Block && b.alongK == kNVFP4Block)
    return ScaledMatmulRecipe::nvfp4;
  if (!a.scaleType.isF32() || !b.scaleType.isF32())
    return std::nullopt;
  if (a.whole && b.whole)
    return ScaledMatmulRecipe::perTensor;
  if (a.alongK == 128 && b.alongK == 128)
    return ScaledMatmulRecipe::blockwiseColumns;
  if ((a.alongK == 128 && b.tile128) || (a.tile128 && b.alongK == 128))
    return ScaledMatmulRecipe::blockwise;
  return std::nullopt;
}

FailureOr<CublasGemm> mx::getCublasGemm(ScaledMatmulOp op, Chip chip,
                                         std::string &reason) {
  // mxrtScaledMatmul takes no epilogue operands: gemm=auto then picks the
  // generated kernel, which adds them.
  if (op.getBias() || op.getAccumulator()) {
    reason = "the cuBLASLt lowering takes no bias or accumulate operand";
    return failure();
  }
  for (Value operand : {op.getLhs(), op.getRhs()})
    if (failed(checkCublasElementType(getElementTypeOrSelf(operand.getType()),
                                      reason)))
      return failure();
  FailureOr<mxrtScaleMode> lhs =
      getScaleMode(op.getLhs().getType(), op.getLhsLayout(), op.getLhsBlock(),
                   op.getLhsScales().getType(), reason);
  FailureOr<mxrtScaleMode> rhs =
      getScaleMode(op.getRhs().getType(), op.getRhsLayout(), op.getRhsBlock(),
                   op.getRhsScales().getType(), reason);
  if (failed(lhs) || failed(rhs))
    return failure();
  for (mxrtScaleMode mode : {*lhs, *rhs})
    if (failed(checkCublasScaleMode(chip, mode, reason)))
      return failure();
  for (OperandLayout layout : {op.getLhsLayout(), op.getRhsLayout()})
    if (failed(
            checkCublasOperandLayout(chip, getRuntimeLayout(layout), reason)))
      return failure();
  bool blockScaled =
      *lhs == MXRT_SCALE_VEC32_UE8M0 || *lhs == MXRT_SCALE_VEC16_UE4M3 ||
      *rhs == MXRT_SCALE_VEC32_UE8M0 || *rhs == MXRT_SCALE_VEC16_UE4M3;
  if (blockScaled && *lhs != *rhs) {
    reason = "cuBLASLt takes MX (E8M0) or NVFP4 (E4M3) scales on both "
             "operands, not one of each";
    return failure();
  }
  auto code = [](Value v) {
    return static_cast<mxrtElemType>(
        *getRuntimeElementType(getElementTypeOrSelf(v.getType())));
  };
  MatmulOperandShape lhsShape = op.getLhsShape(), rhsShape = op.getRhsShape();
  CublasGemm gemm{lhsShape.rows,
                  rhsShape.rows,
                  lhsShape.k,
                  code(op.getLhs()),
                  code(op.getRhs()),
                  code(op.getResult()),
                  getRuntimeLayout(op.getLhsLayout()),
                  getRuntimeLayout(op.getRhsLayout()),
                  *lhs,
                  *rhs,
                  op.getResult().getType().getRank() > 2};
  if (failed(checkCublasGemm(gemm, reason)) ||
      failed(checkRuntimeFunction(op->getParentOfType<ModuleOp>(),
                                  kScaledMatmulFn,
                                  getScaledMatmulFnType(op.getContext()),
                                  reason)))
    return failure();
  return gemm;
}

FailureOr<GemmLoweringChoice>
mx::chooseGemmLowering(ScaledMatmulOp op, Chip chip, GemmLowering option,
                       const gemm::GemmConfig &config, std::string &reason) {
  std::string kernelReason, cublasReason;
  bool kernel =
      succeeded(gemm::checkKernelSupport(op, chip, config, kernelReason));
  bool cublas = succeeded(getCublasGemm(op, chip, cublasReason));
  auto choose = [&](GemmLowering lowering, const Twine &why)
      -> FailureOr<GemmLoweringChoice> {
    return GemmLoweringChoice{lowering,
                              (getLoweringName(lowering) + ": " + why).str()};
  };
  switch (option) {
  case GemmLowering::kernel:
    if (kernel)
      return choose(GemmLowering::kernel, "gemm=kernel");
    reason = ("has no generated kernel on " + getChipName(chip) + ": " +
              kernelReason +
              (cublas ? "; cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or "
                        "gemm=auto)"
                      : "; nor has it a cuBLASLt lowering (" + cublasReason +
                            ")"))
                 .str();
    return failure();
  case GemmLowering::cublas:
    if (cublas)
      return choose(GemmLowering::cublas, "gemm=cublas");
    reason = "has no cuBLASLt lowering: " + cublasReason +
             (kernel ? "; the generated kernel runs it (mx-lower-to-nvvm "
                       "gemm=kernel or gemm=auto)"
                     : "; nor has it a generated kernel on " +
                           getChipName(chip).str() + " (" + kernelReason +
                           ")");
    return failure();
  case GemmLowering::automatic:
    break;
  }
  if (!kernel && !cublas) {
    reason = ("has neither a generated kernel on " + getChipName(chip) + " (" +
              kernelReason + ") nor a cuBLASLt lowering (" + cublasReason +
              ")")
                 .str();
    return failure();
  }
  std::optional<ScaledMatmulRecipe> recipe = classifyScaledMatmul(op);
  if (recipe) {
    GemmLoweringFact fact = getFasterGemmLowering(chip, *recipe);
    bool fasterRuns = fact.faster == GemmLowering::kernel ? kernel : cublas;
    if (fasterRuns)
      return choose(fact.faster, "faster on " + getChipName(chip) + " (" +
                                     fact.evidence + ")");
  }
  // The faster one (or, for a recipe without a measurement, either) cannot
  // run this op: the other one does, and says why.
  if (kernel)
    return choose(GemmLowering::kernel,
                  "cuBLASLt cannot run it (" + cublasReason + ")");
  return choose(GemmLowering::cublas,
                "the generated kernel cannot run it (" + kernelReason + ")");
}

FailureOr<GemmLoweringChoice>
mx::matchGemmLowering(ScaledMatmulOp op, PatternRewriter &rewriter, Chip chip,
                      GemmLowering option, const gemm::GemmConfig &config,
                      GemmLowering wanted) {
  std::string reason;
  FailureOr<GemmLoweringChoice> choice =
      chooseGemmLowering(op, chip, option, config, reason);
  if (failed(choice))
    return rewriter.notifyMatchFailure(op, reason);
  if (choice->lowering != wanted)
    return rewriter.notifyMatchFailure(op, choice->reason);
  return choice;
}
