//===- MXToCublas.h - Lower mx.scaled_matmul to cuBLASLt --------*- C++ -*-===//
//
// Patterns that turn mx.scaled_matmul into a call of the runtime's cuBLASLt
// entry point (mxrtScaledMatmul, include/mx/Runtime/MXRuntime.h).
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H
#define MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Adds the pattern that rewrites mx.scaled_matmul on device tensors into a
/// call of mxrtScaledMatmul with the scale modes its operands imply.
void populateMXToCublasConversionPatterns(mlir::RewritePatternSet &patterns);

} // namespace mx

#endif // MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H
