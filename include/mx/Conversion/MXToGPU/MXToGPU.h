//===- MXToGPU.h - Lower mx to GPU kernels ----------------------*- C++ -*-===//
//
// Patterns that lower mx ops to `gpu.launch` kernels written with arith,
// vector, memref and NVVM ops.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_MXTOGPU_H
#define MX_CONVERSION_MXTOGPU_MXTOGPU_H

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Why `op` has no GPU kernel, or success if the patterns below lower it.
mlir::LogicalResult checkGPUSupport(mlir::Operation *op, std::string &reason);

/// Adds the patterns that rewrite mx.quantize (fusing a consuming
/// mx.swizzle), mx.dequantize, mx.swizzle and mx.unswizzle into GPU kernels on
/// device buffers.
void populateMXToGPUConversionPatterns(mlir::RewritePatternSet &patterns);

} // namespace mx

#endif // MX_CONVERSION_MXTOGPU_MXTOGPU_H
