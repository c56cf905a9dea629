//===- Pipelines.cpp - mx lowering pipelines ------------------------------===//
//
// The CPU pipeline is the reference path: the portable linalg lowering,
// one-shot bufferization with identity-layout function boundaries (so that
// compiled functions take plain row-major memrefs), ownership-based
// deallocation, loops, and the standard conversions to the LLVM dialect.
// Its results are malloc'd buffers that the caller frees: deallocation
// clones each result the function does not own (an argument, a constant);
// its public functions never write their arguments (mx-readonly-arguments).
// bf16 arithmetic is expanded to integer ops because LLVM's x86 backend has
// no native bf16 conversions. The NVVM pipeline bufferizes the host code the
// same way but without ownership-based deallocation, which knows nothing of
// device memory: its results live in device memory from `gpu.alloc` and
// belong to the caller, and the buffers that only the function itself reads
// are freed after their last use (mx-free-device-temporaries); each public
// function becomes a guarded call of the runtime (mx-guard-device-calls);
// upstream's GPU-to-NVVM pipeline then outlines the kernels, compiles them
// for the chosen chip and lowers the host side to `mgpu*` calls. `mx.scaled_matmul` goes through a generated kernel
// or cuBLASLt as the `gemm` option says (GemmLowering, Target.h).
// Both pipelines record the public functions' signatures in the
// `_mx_signatures` global (mx-export-signatures) right after bufferization,
// so that every compiled library describes itself; before that, a result
// bufferized into an argument that the source marks writable is dropped
// (mx-drop-in-place-results): the function updates that argument in place.
// Every public function gets a C interface (`_mlir_ciface_*`) in both, so the
// runtime binding can call it with memref descriptors.
// A program partitioned over a device grid (mx-partition: upstream's
// sharding propagation and partitioning through the mx ops' sharding
// interface) keeps its collectives: the CPU pipeline runs them on a grid of
// one device, the NVVM pipeline lowers them to the runtime's NCCL calls.
//
//===----------------------------------------------------------------------===//

#include "mx/Pipelines/Pipelines.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// Compiled functions take and return plain row-major memrefs.
static bufferization::OneShotBufferizePassOptions
getFunctionBoundaryBufferizeOptions() {
  bufferization::OneShotBufferizePassOptions options;
  options.bufferizeFunctionBoundaries = true;
  options.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  return options;
}

/// What follows bufferization in both pipelines: the results written into
/// writable arguments dropped, then the signatures recorded (their final
/// results, shapes and element types still there).
static void addFunctionBoundaryPasses(OpPassManager &pm) {
  pm.addPass(mx::createDropInPlaceResults());
  pm.addPass(mx::createExportSignatures());
}

void mx::buildPartitionPipeline(OpPassManager &pm) {
  shard::ShardingPropagationOptions propagation;
  propagation.traversal = shard::TraversalOrder::Forward;
  pm.addNestedPass<func::FuncOp>(shard::createShardingPropagation(propagation));
  pm.addNestedPass<func::FuncOp>(shard::createPartition());
  pm.addPass(createCombineCollectives());
  pm.addPass(createCanonicalizerPass());
}

void mx::buildMXToCPUPipeline(OpPassManager &pm) {
  pm.addPass(createShardSingleDevice());
  pm.addPass(createConvertMXToLinalg());
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());

  pm.addPass(createReadOnlyArguments());
  pm.addPass(bufferization::createOneShotBufferizePass(
      getFunctionBoundaryBufferizeOptions()));
  addFunctionBoundaryPasses(pm);
  bufferization::buildBufferDeallocationPipeline(pm, {});
  // Deallocation returns a clone of each result the caller would not own
  // otherwise (an argument, a constant, a view of either); no later pass
  // lowers clones but this one.
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());

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

void mx::buildMXToNVVMPipeline(OpPassManager &pm,
                               const MXToNVVMPipelineOptions &options) {
  // Gathers of scales whose devices hold whole 128x4 tiles gather the tiles,
  // swizzled by (or right after) the quantize kernel.
  pm.addPass(createSwizzleBeforeGather());
  // Large quantized all-gathers of a partitioned program: the whole quantize,
  // then its results exchanged in place by the placed broadcast (faster than
  // ncclAllGather there; kPlacedGatherBytes). Gathers that a user already
  // pipelined are mx.gather_chunk chains, which the pass does not match.
  if (options.placedGatherBytes >= 0)
    pm.addPass(createPipelineGathers(
        {/*chunks=*/1, /*minBytes=*/options.placedGatherBytes}));
  // cuBLASLt calls replace the matmuls they take before the kernel lowering;
  // convert-mx-to-gpu generates kernels for the rest.
  if (options.gemm != GemmLowering::kernel)
    pm.addPass(createConvertMXToCublas(
        {options.chip, options.gemm, options.gemmConfig}));
  pm.addPass(createConvertMXToGPU(
      {options.chip,
       options.gemm == GemmLowering::cublas ? GemmLowering::automatic
                                            : options.gemm.getValue(),
       options.gemmConfig}));
  pm.addPass(createConvertShardToMXRuntime());
  pm.addPass(createCanonicalizerPass());
  // Tensors are device memory from here on: nothing may compute on them on
  // the host (after canonicalization, which folds what needs no kernel).
  pm.addPass(createRejectHostCompute());
  pm.addPass(bufferization::createOneShotBufferizePass(
      getFunctionBoundaryBufferizeOptions()));
  addFunctionBoundaryPasses(pm);
  // Checks the arguments of each call and skips its device work after a
  // failure, so that no bad input launches a kernel.
  pm.addPass(createGuardDeviceCalls());
  // Frees what only the function's own later work reads after the last op
  // that uses it (gpu-async-region then orders each free on the call's
  // stream), inside the guarded call.
  pm.addNestedPass<func::FuncOp>(createFreeDeviceTemporaries());
  // Gathered buffers, their frees placed, from the runtime's memory
  // registered with NCCL.
  pm.addPass(createConvertCollectiveBuffersToMXRuntime());
  pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  // Folding hoisted the kernels' constants to the host function; sink them
  // back so that outlining does not turn each one into a kernel argument.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // Outlined kernels' shared buffers, aligned for 16-byte vector accesses.
  pm.addNestedPass<gpu::GPUModuleOp>(createAlignWorkgroupBuffers());
  // The CTAs per SM a kernel asked for, as PTX `.minnctapersm`.
  pm.addNestedPass<gpu::GPUModuleOp>(createKernelOccupancy());
  // gpu-to-llvm lowers gpu.alloc only in its async form: chain allocations
  // and launches on one stream per call, synchronized before returning.
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());

  gpu::GPUToNVVMPipelineOptions nvvmOptions;
  nvvmOptions.cubinChip = getChipName(options.chip).str();
  nvvmOptions.cubinFeatures = getPtxFeatures(options.chip).str();
  nvvmOptions.cubinFormat =
      gpu::stringifyCompilationTarget(options.format).str();
  nvvmOptions.optLevel = options.optLevel;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvmOptions);
}

void mx::registerMXPipelines() {
  // A pipeline name registered twice is an error in assertion builds of MLIR;
  // a compiler and a library it links may both call this.
  static const bool registered = [] {
    PassPipelineRegistration<>(
        "mx-partition",
        "Partition the functions of a module whose values carry shard.sharding "
        "annotations into one program per device (sharding propagation, "
        "partitioning, reduce-scatters from all-reduces that are sliced).",
        buildPartitionPipeline);
    PassPipelineRegistration<MXToCPUPipelineOptions>(
        "mx-lower-to-cpu",
        "Lower mx ops through linalg and loops to the LLVM dialect for the CPU "
        "(the reference path; run the result with mlir-runner).",
        [](OpPassManager &pm, const MXToCPUPipelineOptions &) {
          buildMXToCPUPipeline(pm);
        });
    PassPipelineRegistration<MXToNVVMPipelineOptions>(
        "mx-lower-to-nvvm",
        "Lower mx ops to GPU kernels compiled for an NVIDIA chip (embedded "
        "binary) and host code calling the mx_runtime library.",
        buildMXToNVVMPipeline);
    return true;
  }();
  (void)registered;
}
