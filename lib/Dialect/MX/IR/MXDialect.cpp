//===- MXDialect.cpp - The mx dialect -------------------------------------===//
//
// Registers the mx operations and attributes with the dialect.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/MXDialect.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mx;

#include "mx/Dialect/MX/IR/MXOpsDialect.cpp.inc"

#include "mx/Dialect/MX/IR/MXEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "mx/Dialect/MX/IR/MXAttrs.cpp.inc"

void MXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mx/Dialect/MX/IR/MXOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mx/Dialect/MX/IR/MXAttrs.cpp.inc"
      >();
}
