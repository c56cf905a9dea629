//===- MXToGPU.h - Lower mx to GPU kernels ----------------------*- C++ -*-===//
//
// Patterns that lower mx ops to `gpu.launch` kernels written with arith,
// vector, memref and NVVM ops, for one chip.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_MXTOGPU_H
#define MX_CONVERSION_MXTOGPU_MXTOGPU_H

#include "mx/Conversion/Target.h"

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Why `op` has no GPU kernel on `chip`, or success if the patterns below
/// lower it. An `mx.scaled_matmul` is asked only once the GEMM patterns have
/// had their turn, so any that is left has no kernel on `chip`.
mlir::LogicalResult checkGPUSupport(mlir::Operation *op, Chip chip,
                                    std::string &reason);

/// Adds the patterns that rewrite mx.quantize (fusing a consuming
/// mx.swizzle), mx.dequantize, mx.swizzle and mx.unswizzle into GPU kernels on
/// device buffers, and the GEMM patterns of `chip`.
void populateMXToGPUConversionPatterns(mlir::RewritePatternSet &patterns,
                                       Chip chip);

/// Adds the patterns that rewrite mx.scaled_matmul into generated GEMM
/// kernels for `chip`; none where `chip` has no generated kernel.
void populateMXToGPUGemmPatterns(mlir::RewritePatternSet &patterns, Chip chip);

} // namespace mx

#endif // MX_CONVERSION_MXTOGPU_MXTOGPU_H
