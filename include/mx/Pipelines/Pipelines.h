//===- Pipelines.h - mx lowering pipelines ----------------------*- C++ -*-===//
//
// Declares the registered pass pipelines that take a module using the mx
// dialect all the way to the LLVM dialect, one per target.
//
//===----------------------------------------------------------------------===//

#ifndef MX_PIPELINES_PIPELINES_H
#define MX_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace mx {

/// mx -> linalg -> bufferized loops -> LLVM dialect for the host CPU.
void buildMXToCPUPipeline(mlir::OpPassManager &pm);

/// Registers every mx pipeline with the global pass registry.
void registerMXPipelines();

} // namespace mx

#endif // MX_PIPELINES_PIPELINES_H
