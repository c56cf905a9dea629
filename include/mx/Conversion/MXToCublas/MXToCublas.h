//===- MXToCublas.h - Lower mx.scaled_matmul to cuBLASLt --------*- C++ -*-===//
//
// Patterns that turn mx.scaled_matmul into a call of the runtime's cuBLASLt
// entry point (mxrtScaledMatmul, include/mx/Runtime/MXRuntime.h).
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H
#define MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H

#include "mx/Conversion/MXToGPU/Gemm/GemmGenerator.h"
#include "mx/Conversion/Target.h"

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Adds the pattern that rewrites each mx.scaled_matmul on device tensors
/// that goes to cuBLASLt on `chip` under `gemm` (chooseGemmLowering, with
/// `config` for the generated kernels it weighs) into a call of
/// mxrtScaledMatmul with the scale modes its operands imply.
void populateMXToCublasConversionPatterns(mlir::RewritePatternSet &patterns,
                                          Chip chip, GemmLowering gemm,
                                          const gemm::GemmConfig &config);

} // namespace mx

#endif // MX_CONVERSION_MXTOCUBLAS_MXTOCUBLAS_H
