//===- MXDialect.h - The mx dialect -----------------------------*- C++ -*-===//
//
// Declares the mx dialect class and its enum attributes (scale rounding).
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_MXDIALECT_H
#define MX_DIALECT_MX_IR_MXDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "mx/Dialect/MX/IR/MXOpsDialect.h.inc"

#include "mx/Dialect/MX/IR/MXEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "mx/Dialect/MX/IR/MXAttrs.h.inc"

#endif // MX_DIALECT_MX_IR_MXDIALECT_H
