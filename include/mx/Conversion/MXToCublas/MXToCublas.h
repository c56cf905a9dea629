//===- MXToCublas.h - Lower mx.scaled_matmul to cuBLASLt --------*- C++ -*-===//
//
// Patterns that turn mx.scaled_matmul into a call of the runtime's cuBLASLt
// entry point (mxrtScaledMatmul, include/mx/Runtime/MXRuntime.h).
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H
#define MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H

#include "mx/Conversion/Target.h"

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Adds the pattern that rewrites mx.scaled_matmul on device tensors into a
/// call of mxrtScaledMatmul with the scale modes its operands imply, where
/// cuBLASLt runs those modes on `chip`; with `skipGenerated`, only where the
/// GEMM generator has no kernel for the op on `chip`.
void populateMXToCublasConversionPatterns(mlir::RewritePatternSet &patterns,
                                          Chip chip, bool skipGenerated);

} // namespace mx

#endif // MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H
