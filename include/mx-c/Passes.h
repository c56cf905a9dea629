/*===-- mx-c/Passes.h - C API of the mx passes and pipelines ------*- C -*-===*\
|*                                                                            *|
|* Registration and creation of the mx conversion passes (generated from      *|
|* mx/Conversion/Passes.td: mlirRegisterMXConversionPasses, and per pass      *|
|* mlirCreateMXConversion<Pass> / mlirRegisterMXConversion<Pass>), and the    *|
|* two pipelines, by name (mlirRegisterMXPipelines, then                      *|
|* mlirParsePassPipeline / mlirOpPassManagerAddPipeline with                  *|
|* "mx-lower-to-cpu" or "mx-lower-to-nvvm{chip=... format=... gemm=...}") or  *|
|* built into a pass manager directly.                                        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MX_C_PASSES_H
#define MX_C_PASSES_H

#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "mx/Conversion/Passes.capi.h.inc"

/* Registers mx-lower-to-cpu and mx-lower-to-nvvm with the global pass
 * registry. Idempotent. */
MLIR_CAPI_EXPORTED void mlirRegisterMXPipelines(void);

/* Registers every mx pass and both pipelines (mx::registerAllPasses).
 * Idempotent. */
MLIR_CAPI_EXPORTED void mlirRegisterAllMXPasses(void);

/* Appends mx-lower-to-cpu to `pm`, which must be anchored on builtin.module:
 * mx ops through linalg and loops to the LLVM dialect for the host CPU. */
MLIR_CAPI_EXPORTED void mlirMXBuildLowerToCPUPipeline(MlirOpPassManager pm);

/* Appends mx-lower-to-nvvm to `pm` (anchored on builtin.module) with the
 * pipeline's options in their textual form, e.g. "chip=sm_100a gemm=cublas"
 * (empty: the defaults). Options that do not parse are reported through
 * `errorCallback` (with `userData`), if given, and nothing is appended. */
MLIR_CAPI_EXPORTED MlirLogicalResult mlirMXBuildLowerToNVVMPipeline(
    MlirOpPassManager pm, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* MX_C_PASSES_H */
