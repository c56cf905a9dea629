//===- Pipelines.h - mx lowering pipelines ----------------------*- C++ -*-===//
//
// Declares the registered pass pipelines that take a module using the mx
// dialect all the way to the LLVM dialect, one per target.
//
//===----------------------------------------------------------------------===//

#ifndef MX_PIPELINES_PIPELINES_H
#define MX_PIPELINES_PIPELINES_H

#include "mx/Conversion/Target.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mx {

/// Options of the CPU pipeline: none. The pipeline is registered with this
/// empty struct rather than without options so that the option parser names
/// an option it is given (`mx-lower-to-cpu{opt=3}`: "no such option opt")
/// instead of failing in silence.
struct MXToCPUPipelineOptions
    : public mlir::PassPipelineOptions<MXToCPUPipelineOptions> {};

/// The gathered bytes from which the GPU pipeline exchanges a quantize's
/// results by the placed broadcast, in place, instead of ncclAllGather. On 2
/// H200s (bench/collectives, thirteenth session) the compiled placed gather
/// was 12-17% faster at 128 and 256 MiB gathered and 0-14% slower at 32 MiB;
/// on 2 H100s the runtime's placed broadcast took 136 against 155 us at
/// 64 MiB and 92 against 90 us at 32 MiB. The line sits between.
constexpr int64_t kPlacedGatherBytes = int64_t(64) << 20;

/// Options of the GPU pipeline. Each takes a fixed set of values, so the
/// option parser rejects anything else before a pass runs.
struct MXToNVVMPipelineOptions
    : public mlir::PassPipelineOptions<MXToNVVMPipelineOptions> {
  Option<Chip> chip{*this, "chip", llvm::cl::desc("NVIDIA GPU to compile for"),
                    llvm::cl::init(kDefaultChip), getChipOptionValues()};
  Option<mlir::gpu::CompilationTarget> format{
      *this, "format", llvm::cl::desc("Embedded GPU code"),
      llvm::cl::init(mlir::gpu::CompilationTarget::Binary),
      llvm::cl::values(clEnumValN(mlir::gpu::CompilationTarget::Binary, "bin",
                                  "cubin, assembled by ptxas"),
                       clEnumValN(mlir::gpu::CompilationTarget::Fatbin,
                                  "fatbin", "fatbin (cubin and PTX)"),
                       clEnumValN(mlir::gpu::CompilationTarget::Assembly, "isa",
                                  "PTX text"))};
  Option<GemmLowering> gemm{
      *this, "gemm", llvm::cl::desc("Lowering of mx.scaled_matmul"),
      llvm::cl::init(GemmLowering::automatic), getGemmLoweringOptionValues()};
  Option<std::string> gemmConfig{
      *this, "gemm-config",
      llvm::cl::desc("Choices for the generated GEMM kernels "
                     "(convert-mx-to-gpu's gemm-config)"),
      llvm::cl::init("")};
  Option<int> optLevel{*this, "opt-level",
                       llvm::cl::desc("LLVM optimization level of the kernels"),
                       llvm::cl::init(3)};
  Option<int64_t> placedGatherBytes{
      *this, "placed-gather-bytes",
      llvm::cl::desc("All-gathers of a quantize's results of at least this "
                     "many bytes (every device's part) run as placed "
                     "broadcasts after the whole quantize (mx-pipeline-gathers "
                     "chunks=1), the others as ncclAllGather; negative: "
                     "none"),
      llvm::cl::init(kPlacedGatherBytes)};
};

/// A module annotated with shard.sharding -> one program per device, with
/// shard collectives (sharding propagation forward from the annotations,
/// shard-partition, mx-combine-collectives, canonicalization).
void buildPartitionPipeline(mlir::OpPassManager &pm);

/// mx -> linalg -> bufferized loops -> LLVM dialect for the host CPU.
void buildMXToCPUPipeline(mlir::OpPassManager &pm);

/// mx -> GPU kernels on device buffers -> NVVM -> an embedded GPU binary,
/// with host code calling the `mgpu*` runtime ABI (lib/Runtime).
void buildMXToNVVMPipeline(mlir::OpPassManager &pm,
                           const MXToNVVMPipelineOptions &options);

/// Registers every mx pipeline with the global pass registry. Idempotent.
void registerMXPipelines();

} // namespace mx

#endif // MX_PIPELINES_PIPELINES_H
