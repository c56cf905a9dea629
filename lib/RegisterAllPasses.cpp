//===- RegisterAllPasses.cpp - Every mx pass and pipeline -----------------===//
//
// mx::registerAllPasses (InitAllPasses.h).
//
//===----------------------------------------------------------------------===//

#include "mx/InitAllPasses.h"
#include "mx/Conversion/Passes.h"
#include "mx/Pipelines/Pipelines.h"

void mx::registerAllPasses() {
  registerMXConversionPasses();
  registerMXPipelines();
}
