//===- consumer.cpp - A compiler that uses mx as a library ----------------===//
//
// What a compiler pipeline that emits mx ops does with the installed mx
// package: one call each for mx's dialects, extensions and passes, then it
// parses a function with mx.quantize and mx.scaled_matmul (an MXFP8 linear
// layer: quantize activations and weights, multiply), runs mx-lower-to-cpu by
// name, and checks that only the LLVM dialect is left. Prints what it lowered
// and exits 0, or says what failed and exits 1.
//
//===----------------------------------------------------------------------===//

#include "mx/InitAllDialects.h"
#include "mx/InitAllExtensions.h"
#include "mx/InitAllPasses.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

static const char kProgram[] = R"mlir(
func.func @linear(%x: tensor<64x256xbf16>, %w: tensor<32x256xbf16>)
    -> tensor<64x32xf32> {
  %xd, %xs = mx.quantize %x block [1, 32]
      : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU>
  %wd, %ws = mx.quantize %w block [1, 32]
      : tensor<32x256xbf16> -> tensor<32x256xf8E4M3FN>, tensor<32x8xf8E8M0FNU>
  %y = mx.scaled_matmul %xd, %xs, %wd, %ws lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU>,
        tensor<32x256xf8E4M3FN>, tensor<32x8xf8E8M0FNU> -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
)mlir";

int main() {
  mlir::DialectRegistry registry;
  mx::registerAllDialects(registry);
  mx::registerAllExtensions(registry);
  mx::registerAllPasses();
  mlir::MLIRContext context(registry);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kProgram, &context);
  if (!module) {
    llvm::errs() << "mx-consumer: the program does not parse\n";
    return 1;
  }
  // The pass manager is anchored on the module; the pipeline is added by name.
  mlir::PassManager pm(&context);
  if (mlir::failed(mlir::parsePassPipeline("mx-lower-to-cpu", pm)) ||
      mlir::failed(pm.run(*module))) {
    llvm::errs() << "mx-consumer: mx-lower-to-cpu failed\n";
    return 1;
  }

  int functions = 0, others = 0;
  module->walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::LLVM::LLVMFuncOp>(op))
      ++functions;
    else if (!mlir::isa<mlir::ModuleOp>(op) &&
             op->getName().getDialectNamespace() != "llvm") {
      llvm::errs() << "mx-consumer: '" << op->getName()
                   << "' is left after mx-lower-to-cpu\n";
      ++others;
    }
  });
  if (!module->lookupSymbol<mlir::LLVM::LLVMFuncOp>("_mlir_ciface_linear") ||
      others) {
    llvm::errs() << "mx-consumer: the lowered module has " << others
                 << " ops outside the LLVM dialect or no @_mlir_ciface_linear\n";
    return 1;
  }
  llvm::outs() << "mx-consumer: @linear lowered by mx-lower-to-cpu to "
               << functions << " llvm.func ops\n";
  return 0;
}
