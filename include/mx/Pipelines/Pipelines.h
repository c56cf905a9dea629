//===- Pipelines.h - mx lowering pipelines ----------------------*- C++ -*-===//
//
// Declares the registered pass pipelines that take a module using the mx
// dialect all the way to the LLVM dialect, one per target.
//
//===----------------------------------------------------------------------===//

#ifndef MX_PIPELINES_PIPELINES_H
#define MX_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mx {

/// Options of the GPU pipeline.
struct MXToNVVMPipelineOptions
    : public mlir::PassPipelineOptions<MXToNVVMPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture (sm_90a, sm_100a)"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Embedded GPU code: 'bin' (cubin, assembled by ptxas), "
                     "'fatbin' or 'isa' (PTX text)"),
      llvm::cl::init("bin")};
  Option<int> optLevel{*this, "opt-level",
                       llvm::cl::desc("LLVM optimization level of the kernels"),
                       llvm::cl::init(3)};
};

/// mx -> linalg -> bufferized loops -> LLVM dialect for the host CPU.
void buildMXToCPUPipeline(mlir::OpPassManager &pm);

/// mx -> GPU kernels on device buffers -> NVVM -> an embedded GPU binary,
/// with host code calling the `mgpu*` runtime ABI (lib/Runtime).
void buildMXToNVVMPipeline(mlir::OpPassManager &pm,
                           const MXToNVVMPipelineOptions &options);

/// Registers every mx pipeline with the global pass registry.
void registerMXPipelines();

} // namespace mx

#endif // MX_PIPELINES_PIPELINES_H
