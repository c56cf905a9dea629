//===- PointerKernels.h - Small kernels launched beside a GEMM --*- C++ -*-===//
//
// Private to the GEMM generator. Some GEMMs need a small kernel to run
// first (staged MX's bf16 copies, GemmStaging.h; the wgrad form's scale
// product rows, ScaleProducts.h): a 1-D kernel on device pointers, built in
// a gpu.module of its own the first time its shape is asked for and found
// by its symbol afterwards, launched from the host code before the GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_POINTERKERNELS_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_POINTERKERNELS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mx::gemm {

/// The kernel `name` of `module`: `arguments` pointer arguments, at most
/// `threads` threads a block, its body built by `body` on the arguments the
/// first time (in gpu.module `name`, of function `kernel`).
mlir::gpu::GPUFuncOp getPointerKernel(
    mlir::OpBuilder &builder, mlir::Location loc, mlir::ModuleOp module,
    llvm::StringRef name, int64_t arguments, int64_t threads,
    llvm::function_ref<void(mlir::ImplicitLocOpBuilder &, mlir::ValueRange)>
        body);

/// Host code at `b`'s insertion point launching `kernel` with `threads`
/// threads in all, `blockThreads` a block, on `arguments`.
void launchPointerKernel(mlir::ImplicitLocOpBuilder &b,
                         mlir::gpu::GPUFuncOp kernel, int64_t threads,
                         int64_t blockThreads, mlir::ValueRange arguments);

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_POINTERKERNELS_H
