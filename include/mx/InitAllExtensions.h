//===- InitAllExtensions.h - Extensions the mx pipelines rely on -*- C++ -*-===//
//
// The upstream dialect extensions and external interface models that the mx
// pipelines need at run time and that no pass declares as a dependency: the
// sharding interface models of the mx ops (mx-partition), the
// bufferization and deallocation models of the dialects the lowerings emit,
// the ConvertToLLVM interfaces that `convert-to-llvm` looks up, the NVVM
// target attribute and the LLVM IR translations that `gpu-module-to-binary`
// compiles kernels with. Like upstream's mlir::registerAllExtensions, but
// only what mx-partition, mx-lower-to-cpu and mx-lower-to-nvvm use.
//
//===----------------------------------------------------------------------===//

#ifndef MX_INITALLEXTENSIONS_H
#define MX_INITALLEXTENSIONS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mx {

/// Adds the extensions the mx pipelines rely on to `registry`.
void registerAllExtensions(mlir::DialectRegistry &registry);

} // namespace mx

#endif // MX_INITALLEXTENSIONS_H
