//===- Passes.cpp - C API of the mx passes and pipelines ------------------===//
//
// mx-c/Passes.h: the generated per-pass entry points (Passes.capi.cpp.inc,
// which names each pass's create/register function unqualified), pipeline
// registration, and the two pipelines built into a C pass manager.
//
//===----------------------------------------------------------------------===//

#include "mx-c/Passes.h"
#include "mx/Conversion/Passes.h"
#include "mx/InitAllPasses.h"
#include "mx/Pipelines/Pipelines.h"

#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"
#include "mlir/Pass/Pass.h"

using namespace mx;

#include "mx/Conversion/Passes.capi.cpp.inc"

void mlirRegisterMXPipelines(void) { registerMXPipelines(); }

void mlirRegisterAllMXPasses(void) { registerAllPasses(); }

void mlirMXBuildLowerToCPUPipeline(MlirOpPassManager pm) {
  buildMXToCPUPipeline(*unwrap(pm));
}

MlirLogicalResult mlirMXBuildLowerToNVVMPipeline(
    MlirOpPassManager pm, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData) {
  MXToNVVMPipelineOptions parsed;
  std::string message;
  llvm::raw_string_ostream errors(message);
  if (failed(parsed.parseFromString(unwrap(options), errors))) {
    if (errorCallback)
      errorCallback(mlirStringRefCreate(message.data(), message.size()),
                    userData);
    return mlirLogicalResultFailure();
  }
  buildMXToNVVMPipeline(*unwrap(pm), parsed);
  return mlirLogicalResultSuccess();
}
