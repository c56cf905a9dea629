//===- MXDialect.cpp - The mx dialect -------------------------------------===//
//
// Registers the mx operations and attributes with the dialect, and verifies
// the dialect's argument attribute (`mx.updated`).
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/MXDialect.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
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

LogicalResult MXDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().strref();
  if (name != getUpdatedAttrName())
    return op->emitOpError()
           << "argument " << argIndex << " has the unknown attribute '" << name
           << "': the mx dialect's argument attribute is '"
           << getUpdatedAttrName() << "'";
  auto error = [&]() {
    return op->emitOpError()
           << "argument " << argIndex << " has '" << name << "': expected ";
  };
  if (!isa<UnitAttr>(attribute.getValue()))
    return error() << "a unit attribute, got '" << attribute.getValue() << "'";
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return error() << "an argument of a function (FunctionOpInterface)";
  Type type = function.getArgumentTypes()[argIndex];
  if (!isa<RankedTensorType, MemRefType>(type))
    return error() << "a ranked tensor or memref argument, got " << type;
  return success();
}
