//===- mx-opt.cpp - The mx optimizer driver -------------------------------===//
//
// mlir-opt with the mx dialect, its sharding interface models, its conversion
// passes and its pipelines added.
// Every upstream dialect, pass and LLVM IR translation is registered too, so
// one tool takes a .mlir file from mx ops down to LLVM IR or a GPU binary.
//
//===----------------------------------------------------------------------===//

#include "mx/InitAllDialects.h"
#include "mx/InitAllExtensions.h"
#include "mx/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mx::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mx::registerAllDialects(registry);
  mx::registerAllExtensions(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mx optimizer driver\n", registry));
}
