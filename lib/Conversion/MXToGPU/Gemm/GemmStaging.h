//===- GemmStaging.h - MX operands to bf16 copies for staged MX -*- C++ -*-===//
//
// Private to the GEMM generator. Staged MX on SM90 (GemmRecipe::mxStaged)
// converts each MX operand once, before the GEMM, into a bf16 copy of the
// same [rows, K] shape in global memory: every element its exact value
// code x 2^(b - 127) (MXDecode.h), read with its scale from the compact or
// the swizzled 128x4 layout, whichever the GEMM's operand comes in. The bf16 GEMM then reads the
// copies by TMA. Converting once costs (M + N) K conversions, where the
// fused main loop converts each operand once per tile of the other.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMSTAGING_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMSTAGING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mx::gemm {

/// Host code at `b`'s insertion point that launches the staging kernel of
/// an MX operand of `elementType` and shape [rows, k] (k a multiple of 16):
/// `data` and `scales` are the operand's device pointers, its E8M0 scales
/// compact ([rows, k/32]) or, where `tiledScales`, in the swizzled 128x4
/// tiles; `out` is the device pointer of the [rows, k] bf16 copy. The kernel
/// is built in its own gpu.module of `module` on first use and shared by
/// later launches of the same element type, shape and scale layout.
void launchStagingKernel(mlir::ImplicitLocOpBuilder &b, mlir::ModuleOp module,
                         mlir::Type elementType, int64_t rows, int64_t k,
                         bool tiledScales, mlir::Value data,
                         mlir::Value scales, mlir::Value out);

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMSTAGING_H
