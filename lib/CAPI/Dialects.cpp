//===- Dialects.cpp - C API of the mx dialect -----------------------------===//
//
// mx-c/Dialects.h: the dialect handle (MLIR's registration macro) and the
// C form of mx::registerAllDialects + mx::registerAllExtensions.
//
//===----------------------------------------------------------------------===//

#include "mx-c/Dialects.h"
#include "mx/Dialect/MX/IR/MXDialect.h"
#include "mx/InitAllDialects.h"
#include "mx/InitAllExtensions.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(MX, mx, mx::MXDialect)

void mlirRegisterAllMXDialects(MlirDialectRegistry registry) {
  mx::registerAllDialects(*unwrap(registry));
  mx::registerAllExtensions(*unwrap(registry));
}
