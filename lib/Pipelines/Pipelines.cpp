//===- Pipelines.cpp - mx lowering pipelines ------------------------------===//
//
// The CPU pipeline is the reference path: the portable linalg lowering,
// one-shot bufferization with identity-layout function boundaries (so that
// compiled functions take plain row-major memrefs), ownership-based
// deallocation, loops, and the standard conversions to the LLVM dialect.
// bf16 arithmetic is expanded to integer ops because LLVM's x86 backend has
// no native bf16 conversions.
//
//===----------------------------------------------------------------------===//

#include "mx/Pipelines/Pipelines.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mx::buildMXToCPUPipeline(OpPassManager &pm) {
  pm.addPass(createConvertMXToLinalg());
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());

  bufferization::OneShotBufferizePassOptions bufferizeOptions;
  bufferizeOptions.bufferizeFunctionBoundaries = true;
  bufferizeOptions.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions));
  bufferization::buildBufferDeallocationPipeline(pm, {});

  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  arith::ArithExpandOpsPassOptions expandOptions;
  expandOptions.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expandOptions));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mx::registerMXPipelines() {
  PassPipelineRegistration<>(
      "mx-lower-to-cpu",
      "Lower mx ops through linalg and loops to the LLVM dialect for the CPU "
      "(the reference path; run the result with mlir-runner).",
      buildMXToCPUPipeline);
}
