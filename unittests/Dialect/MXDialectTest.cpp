//===- MXDialectTest.cpp - Unit tests of the mx dialect hooks -------------===//
//
// The dialect's argument-attribute verifier where no IR reaches it: MLIR
// calls it for the arguments of functions only (the FunctionOpInterface
// verifier), so its refusal of an operation that is not a function is
// checked by calling it directly.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/MXDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mx;

namespace {

TEST(UpdatedAttribute, OnlyOnFunctionArguments) {
  MLIRContext context;
  auto *dialect = context.getOrLoadDialect<MXDialect>();
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  NamedAttribute updated(b.getStringAttr(MXDialect::getUpdatedAttrName()),
                         b.getUnitAttr());
  EXPECT_TRUE(
      failed(dialect->verifyRegionArgAttribute(*module, 0, 0, updated)));
  EXPECT_EQ(message,
            "'builtin.module' op argument 0 has 'mx.updated': "
            "expected an argument of a function (FunctionOpInterface)");
}

} // namespace
