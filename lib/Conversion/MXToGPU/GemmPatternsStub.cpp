//===- GemmPatternsStub.cpp - Placeholder of the GEMM kernel patterns -----===//
//
// TEMPORARY: populateMXToGPUGemmPatterns adds no pattern yet, so every
// mx.scaled_matmul reaching convert-mx-to-gpu is reported as having no GPU
// lowering. The generated wgmma GEMM kernels (lib/Conversion/MXToGPU/Gemm/)
// replace this file.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/MXToGPU.h"

void mx::populateMXToGPUGemmPatterns(mlir::RewritePatternSet &, Chip) {}
