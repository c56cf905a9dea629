//===- GemmLowering.h - Who lowers an mx.scaled_matmul ----------*- C++ -*-===//
//
// The one place that decides whether an `mx.scaled_matmul` becomes a
// generated GEMM kernel (convert-mx-to-gpu) or a cuBLASLt call
// (convert-mx-to-cublas). Both passes ask `chooseGemmLowering` with the same
// inputs, so they agree on every op: under `gemm=auto` each op goes to the
// lowering that runs its recipe faster on the chip (the measured facts of
// Target.h), or to the other one, with the reason, where that one cannot run
// the op; it is an error where neither can. The choice and its reason are
// printed on what each pass emits (`mx.gemm_lowering`), for lit tests and for
// anyone reading the lowered IR.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_GEMMLOWERING_H
#define MX_CONVERSION_GEMMLOWERING_H

#include "mx/Conversion/MXToGPU/Gemm/GemmGenerator.h"
#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/IR/PatternMatch.h"

#include <string>
#include <utility>

namespace mx {

/// The name of the attribute that records the choice on the lowered IR.
inline constexpr llvm::StringLiteral kGemmLoweringAttrName =
    "mx.gemm_lowering";

/// The recipe of `op` as gemm=auto weighs it, if it is one of those.
std::optional<ScaledMatmulRecipe> classifyScaledMatmul(ScaledMatmulOp op);

/// `op`'s cuBLASLt call (one per batch slice): sizes, types, layouts and the
/// scale modes its blocks and scales imply; or why cuBLASLt cannot run it on
/// `chip` (no mode for its scales, a mode or layout the chip's cuBLASLt does
/// not run, shapes it refuses (checkCublasGemm), or a module symbol in the
/// way of the runtime call).
mlir::FailureOr<CublasGemm> getCublasGemm(ScaledMatmulOp op, Chip chip,
                                          std::string &reason);

struct GemmLoweringChoice {
  GemmLowering lowering; // kernel or cublas
  std::string reason;    // why, as printed in `mx.gemm_lowering`
};

/// Who lowers `op` on `chip` under the `gemm` option `option` (a
/// `gemm-config` of `config` for the generated kernel), or, when neither
/// lowering can run it, failure with both reasons in `reason`.
mlir::FailureOr<GemmLoweringChoice>
chooseGemmLowering(ScaledMatmulOp op, Chip chip, GemmLowering option,
                   const gemm::GemmConfig &config, std::string &reason);

/// `chooseGemmLowering` as the pattern of the lowering `wanted` asks it: the
/// choice when it is `wanted`, otherwise a match failure on `rewriter` that
/// says why (the op cannot be lowered at all, or the other lowering takes it).
mlir::FailureOr<GemmLoweringChoice>
matchGemmLowering(ScaledMatmulOp op, mlir::PatternRewriter &rewriter,
                  Chip chip, GemmLowering option,
                  const gemm::GemmConfig &config, GemmLowering wanted);

} // namespace mx

#endif // MX_CONVERSION_GEMMLOWERING_H
