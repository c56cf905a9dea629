//===- MXToGPU.h - Lower mx to GPU kernels ----------------------*- C++ -*-===//
//
// Patterns that lower mx ops to `gpu.launch` kernels written with arith,
// vector, memref and NVVM ops, for one chip.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_MXTOGPU_H
#define MX_CONVERSION_MXTOGPU_MXTOGPU_H

#include "mx/Conversion/MXToGPU/Quantize/FusionPlan.h"
#include "mx/Conversion/MXToGPU/Gemm/GemmGenerator.h"
#include "mx/Conversion/Target.h"

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Adds the patterns that rewrite mx.quantize (fusing a consuming
/// mx.swizzle), mx.dequantize, mx.swizzle and mx.unswizzle into GPU kernels on
/// device buffers, and the GEMM patterns of `chip` (for the mx.scaled_matmul
/// ops that `gemm`, the pipeline's gemm option, gives a generated kernel,
/// with the choices of `config`). The quantize and swizzle patterns lower ops
/// as `plan` (built on the same ops) decides; it must outlive the patterns.
void populateMXToGPUConversionPatterns(mlir::RewritePatternSet &patterns,
                                       Chip chip, GemmLowering gemm,
                                       const gemm::GemmConfig &config,
                                       const QuantizeFusionPlan &plan);

/// Gives every mx.scaled_matmul that gets a generated kernel on `chip`
/// (chooseGemmLowering) scales in the GEMM-ready layout its kernel copies,
/// inserting an mx.swizzle for linear MX scales (128x4 tiles) and compact
/// 1x128 FP8 ones (`layout blockwise`). Runs before the quantize fusion plan
/// is built (the GEMM patterns require it).
void swizzleGemmScales(mlir::Operation *root, Chip chip, GemmLowering gemm,
                       const gemm::GemmConfig &config);

/// Adds the pattern that rewrites each mx.scaled_matmul that gets a
/// generated kernel on `chip` under `gemm` into that kernel.
void populateMXToGPUGemmPatterns(mlir::RewritePatternSet &patterns, Chip chip,
                                 GemmLowering gemm,
                                 const gemm::GemmConfig &config);

} // namespace mx

#endif // MX_CONVERSION_MXTOGPU_MXTOGPU_H
