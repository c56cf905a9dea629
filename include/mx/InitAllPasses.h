//===- InitAllPasses.h - Every mx pass and pipeline -------------*- C++ -*-===//
//
// The one call that puts every mx pass (convert-mx-to-linalg, -gpu, -cublas,
// the function ABI passes) and both pipelines (mx-lower-to-cpu,
// mx-lower-to-nvvm) into the global pass registry, as upstream's
// mlir::registerAllPasses does for MLIR, so that textual pipelines
// (mlir::parsePassPipeline, mlir-opt-style drivers) can name them.
//
//===----------------------------------------------------------------------===//

#ifndef MX_INITALLPASSES_H
#define MX_INITALLPASSES_H

namespace mx {

/// Registers every mx pass and pass pipeline. Idempotent.
void registerAllPasses();

} // namespace mx

#endif // MX_INITALLPASSES_H
