//===- MXToGPU.h - Lower mx to GPU kernels ----------------------*- C++ -*-===//
//
// Patterns that lower mx ops to `gpu.launch` kernels written with arith,
// vector, memref and NVVM ops, for one chip.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_MXTOGPU_H
#define MX_CONVERSION_MXTOGPU_MXTOGPU_H

#include "mx/Conversion/MXToGPU/Quantize/FusionPlan.h"
#include "mx/Conversion/Target.h"

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Adds the patterns that rewrite mx.quantize (fusing a consuming
/// mx.swizzle), mx.dequantize, mx.swizzle and mx.unswizzle into GPU kernels on
/// device buffers, and the GEMM patterns of `chip`. The quantize and swizzle
/// patterns lower ops as `plan` (built on the same ops) decides; it must
/// outlive the patterns.
void populateMXToGPUConversionPatterns(mlir::RewritePatternSet &patterns,
                                       Chip chip,
                                       const QuantizeFusionPlan &plan);

/// Why the GEMM generator has no kernel for `op` on `chip`, or success.
mlir::LogicalResult checkGemmKernelSupport(ScaledMatmulOp op, Chip chip,
                                           std::string &reason);

/// Gives every MX mx.scaled_matmul that the generator lowers on `chip`
/// swizzled scales, inserting an mx.swizzle for linear ones. Runs before the
/// quantize fusion plan is built (the GEMM patterns require it).
void swizzleGemmScales(mlir::Operation *root, Chip chip);

/// Adds the patterns that rewrite mx.scaled_matmul into generated GEMM
/// kernels for `chip`; none where `chip` has no generated kernel.
void populateMXToGPUGemmPatterns(mlir::RewritePatternSet &patterns, Chip chip);

} // namespace mx

#endif // MX_CONVERSION_MXTOGPU_MXTOGPU_H
