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

#include "mx/Conversion/GemmLowering.h"
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
    std::string error;
    FailureOr<gemm::GemmConfig> config = gemm::parseGemmConfig(gemmConfig, error);
    if (failed(config)) {
      getOperation()->emitError(error);
      return signalPassFailure();
    }
    gemmConfig_ = *config;
    swizzleGemmScales(getOperation(), chip, gemm, gemmConfig_);
    // The plan refers to ops by address: fold (unswizzle(swizzle(x)) -> x)
    // and erase dead ops first, so that the driver below erases none of them.
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet());
    QuantizeFusionPlan plan(getOperation(), chip);
    RewritePatternSet patterns(&getContext());
    populateMXToGPUConversionPatterns(patterns, chip, gemm, gemmConfig_, plan);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has no kernel: say which op and why. The pipelined
    // gathers are collectives, which convert-shard-to-mxrt lowers.
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (!isa<MXDialect>(op->getDialect()) ||
          isa<GatherChunkOp, GatherJoinOp>(op))
        return WalkResult::advance();
      if (auto matmul = dyn_cast<ScaledMatmulOp>(op))
        reportScaledMatmul(matmul);
      else
        op->emitOpError("has no GPU lowering: ")
            << getMissingKernelReason(op, plan);
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// Why no generated kernel lowered `op`: no lowering runs it, or it is
  /// cuBLASLt's and convert-mx-to-cublas has not run.
  void reportScaledMatmul(ScaledMatmulOp op) const {
    std::string reason;
    FailureOr<GemmLoweringChoice> choice =
        chooseGemmLowering(op, chip, gemm, gemmConfig_, reason);
    if (failed(choice)) {
      op.emitOpError(reason);
      return;
    }
    op.emitOpError("is left to cuBLASLt (")
        << choice->reason
        << "): run convert-mx-to-cublas first, as mx-lower-to-nvvm does";
  }

  /// Why no pattern lowered `op`. Dequantize (but FP4), swizzle, unswizzle
  /// and update_amax_history always have a kernel.
  std::string getMissingKernelReason(Operation *op,
                                     const QuantizeFusionPlan &plan) const {
    if (auto quantize = dyn_cast<QuantizeOp>(op))
      return plan.getUnsupportedReason(quantize).str();
    if (std::string reason = getPerTensorUnsupportedReason(op); !reason.empty())
      return reason;
    return "no GPU kernel exists for this op; use the CPU pipeline";
  }

  gemm::GemmConfig gemmConfig_;
};

} // namespace

void mx::populateMXToGPUConversionPatterns(RewritePatternSet &patterns,
                                           Chip chip, GemmLowering gemm,
                                           const gemm::GemmConfig &config,
                                           const QuantizeFusionPlan &plan) {
  populateRowwiseQuantizePatterns(patterns, chip, plan);
  populateColumnwiseQuantizePatterns(patterns, chip, plan);
  populateBlockwiseQuantizePatterns(patterns, chip, plan);
  populatePerTensorScalingPatterns(patterns, chip, plan);
  populateAmaxHistoryUpdatePatterns(patterns);
  populateElementwisePatterns(patterns, chip, plan);
  populateFP4Patterns(patterns, chip, plan);
  populateMXToGPUGemmPatterns(patterns, chip, gemm, config);
}
