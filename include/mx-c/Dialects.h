/*===-- mx-c/Dialects.h - C API of the mx dialect -----------------*- C -*-===*\
|*                                                                            *|
|* The mx dialect for programs that host MLIR through its C API (C, Rust,     *|
|* Python bindings, ...), in upstream's style: a dialect handle, and one call *|
|* that registers every dialect and extension an mx compilation needs.        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MX_C_DIALECTS_H
#define MX_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__mx__(): the handle of the mx dialect, for
 * mlirDialectHandleInsertDialect / mlirDialectHandleLoadDialect. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(MX, mx);

/* Adds to `registry` the mx dialect, the upstream dialects that mx programs
 * use and the mx pipelines produce, and the extensions those pipelines rely
 * on (mx::registerAllDialects and mx::registerAllExtensions of the C++ API). A
 * context given this registry parses any mx program and runs both pipelines. */
MLIR_CAPI_EXPORTED void mlirRegisterAllMXDialects(MlirDialectRegistry registry);

#ifdef __cplusplus
}
#endif

#endif /* MX_C_DIALECTS_H */
