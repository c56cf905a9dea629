//===- MXToGPU.cpp - Lower mx to GPU kernels ------------------------------===//
//
// The convert-mx-to-gpu pass: each mx op becomes `gpu.launch` kernels on
// device buffers (`gpu.alloc` for the results, `bufferization.to_buffer` /
// `to_tensor` at the seams), which the NVVM pipeline outlines and compiles.
// The quantize, dequantize and swizzle kernels are in Quantize/, which
// kernel computes each quantize being decided once by the fusion plan
// (Quantize/FusionPlan.cpp); the GEMM kernels are in Gemm/. This file runs
// them and explains every op it cannot lower.
//
//===----------------------------------------------------------------------===//

#include "Quantize/FusionPolicy.h"

#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Conversion/Passes.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTMXTOGPU
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

struct ConvertMXToGPUPass : mx::impl::ConvertMXToGPUBase<ConvertMXToGPUPass> {
  using ConvertMXToGPUBase::ConvertMXToGPUBase;

  void runOnOperation() override {
    swizzleGemmScales(getOperation(), chip);
    // The plan refers to ops by address: fold (unswizzle(swizzle(x)) -> x)
    // and erase dead ops first, so that the driver below erases none of them.
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet());
    QuantizeFusionPlan plan(getOperation(), chip);
    RewritePatternSet patterns(&getContext());
    populateMXToGPUConversionPatterns(patterns, chip, plan);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has no kernel: say which op and why.
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (!isa<MXDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError("has no GPU lowering: ")
          << getMissingKernelReason(op, plan);
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// Why no pattern lowered `op`. Dequantize (but FP4), swizzle, unswizzle
  /// and update_amax_history always have a kernel; a scaled_matmul has one
  /// where the GEMM generator plans one for the chip.
  std::string getMissingKernelReason(Operation *op,
                                     const QuantizeFusionPlan &plan) const {
    if (auto quantize = dyn_cast<QuantizeOp>(op))
      return plan.getUnsupportedReason(quantize).str();
    if (auto matmul = dyn_cast<ScaledMatmulOp>(op)) {
      std::string reason, cublasReason;
      (void)checkGemmKernelSupport(matmul, chip, reason);
      for (Value operand : {matmul.getLhs(), matmul.getRhs()})
        if (failed(checkCublasElementType(
                getElementTypeOrSelf(operand.getType()), cublasReason)))
          return reason + "; nor does cuBLASLt: " + cublasReason;
      return reason + "; cuBLASLt may run it instead (mx-lower-to-nvvm "
                      "gemm=cublas)";
    }
    if (std::string reason = getPerTensorUnsupportedReason(op); !reason.empty())
      return reason;
    return "no GPU kernel exists for this op; use the CPU pipeline";
  }
};

} // namespace

void mx::populateMXToGPUConversionPatterns(RewritePatternSet &patterns,
                                           Chip chip,
                                           const QuantizeFusionPlan &plan) {
  populateRowwiseQuantizePatterns(patterns, chip, plan);
  populateColumnwiseQuantizePatterns(patterns, chip, plan);
  populateBlockwiseQuantizePatterns(patterns, chip, plan);
  populatePerTensorScalingPatterns(patterns, chip, plan);
  populateElementwisePatterns(patterns, chip, plan);
  populateFP4Patterns(patterns, chip, plan);
  populateMXToGPUGemmPatterns(patterns, chip);
}
