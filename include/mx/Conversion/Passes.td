//===- Passes.td - mx conversion passes ---------------------*- tablegen -*-===//
//
// Declares every pass that lowers the mx dialect. Each lowering lives in its
// own Conversion/<From>To<To> directory and exposes a populate function; the
// passes here are thin drivers around those patterns.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_PASSES_TD
#define MX_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMXToLinalg : Pass<"convert-mx-to-linalg"> {
  let summary = "Lower mx ops to linalg, tensor and arith (the portable reference)";
  let description = [{
    Rewrites every mx op into tensor-level linalg, tensor, arith and math ops
    that run on any target. FP8 and E8M0 conversions are emitted as integer
    bit manipulation (round-to-nearest-even, saturation, subnormals, NaN and
    Inf rules of docs/numerics.md), because LLVM has no FP8 types and
    `arith.truncf` to `f8E4M3FN` does not lower to LLVM on the CPU.

    * `mx.quantize`: `tensor.pad` to whole blocks, `tensor.expand_shape` to
      `[n0, b0, n1, b1, ...]`, a `linalg.reduce` for each block's amax, one
      `linalg.generic` for the scales and one for the elements.
    * `mx.dequantize`: one `linalg.generic` reading each element's block scale
      through a `floordiv` indexing map.
    * `mx.swizzle` / `mx.unswizzle`: pad or slice, reshape and
      `linalg.transpose`.
    * `mx.scaled_matmul`: dequantize both operands to f32 and contract over K
      in f32.

    Example:

    ```mlir
    // mx-opt --convert-mx-to-linalg
    %d, %s = mx.quantize %x block [1, 32]
        : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
    // becomes tensor.expand_shape + linalg.reduce + 2 x linalg.generic
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect",
    "mlir::tensor::TensorDialect",
  ];
}

def ConvertMXToGPU : Pass<"convert-mx-to-gpu", "mlir::ModuleOp"> {
  let summary = "Lower mx ops to GPU kernels (gpu.launch + NVVM) on device buffers";
  let description = [{
    Rewrites mx ops on tensors into `gpu.launch` kernels that read and write
    device buffers: inputs are taken with `bufferization.to_buffer`, results
    are allocated with `gpu.alloc` (owned by the caller once returned) and
    handed back with `bufferization.to_tensor`. The kernels use 16-byte vector
    loads, warp shuffles for the block amax, the hardware FP8 conversion
    `cvt.rn.satfinite.{e4m3,e5m2}x2.f32` and the shared E8M0 exponent
    builders, so their results equal the CPU lowering bit for bit.

    `mx.quantize` with `[1, 32]` blocks becomes one kernel; when its scales
    feed only an `mx.swizzle` (unscaled_dim 0), that kernel writes the 128x4
    tiled layout directly and the swizzle disappears. `mx.scaled_matmul`
    becomes a generated GEMM kernel for `chip` where one exists
    (`populateMXToGPUGemmPatterns`): on sm_90a TMA + `wgmma` kernels for the
    MX, FP8 blockwise and per-tensor recipes, on sm_100a a
    `tcgen05.mma.block_scale` kernel for MX; otherwise it has to be lowered
    through cuBLASLt first (`convert-mx-to-cublas`, or `mx-lower-to-nvvm
    gemm=auto|cublas`). `gemm-config` makes some of the generated GEMM
    kernels' choices instead of the generator (tile, waves, consumers,
    cluster, epilogue, stages; GemmConfig.h), for tuning; the chosen plan is
    printed on each kernel as `mx.gemm_plan`.
    An op without a GPU kernel is reported with the reason, and the pass fails.

    Example:

    ```mlir
    // mx-opt --convert-mx-to-gpu="chip=sm_90a"
    %d, %s = mx.quantize %x block [1, 32]
        : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
    %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
    // becomes gpu.alloc x 2 + one gpu.launch writing data and tiled scales
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::bufferization::BufferizationDialect",
    "mlir::gpu::GPUDialect",
    "mlir::memref::MemRefDialect",
    "mlir::NVVM::NVVMDialect",
    "mlir::scf::SCFDialect",
    "mlir::vector::VectorDialect",
  ];
  let options = [
    Option<"chip", "chip", "::mx::Chip", "::mx::kDefaultChip",
           "NVIDIA GPU to compile for",
           "::mx::getChipOptionValues()">,
    Option<"gemm", "gemm", "::mx::GemmLowering", "::mx::GemmLowering::kernel",
           "Which mx.scaled_matmul ops get a generated kernel: every one "
           "(kernel), or those that gemm=auto gives one (auto)",
           "::mx::getGemmLoweringOptionValues()">,
    Option<"gemmConfig", "gemm-config", "std::string", "\"\"",
           "Choices for the generated GEMM kernels, `key=value` separated by "
           "commas (consumers, waves, tile_n, stages, cluster=MxN, "
           "epilogue=tma|registers); the rest are the generator's">,
  ];
}

def ConvertMXToCublas : Pass<"convert-mx-to-cublas", "mlir::ModuleOp"> {
  let summary = "Lower mx.scaled_matmul to cuBLASLt through the mx runtime";
  let description = [{
    Rewrites each `mx.scaled_matmul` on tensors into calls of
    `mxrtScaledMatmul` (include/mx/Runtime/MXRuntime.h) on device buffers,
    one per batch slice, with the result allocated by `gpu.alloc`. The scale
    mode of each operand follows from its block and scales: swizzled
    f8E8M0FNU scales of 32-element blocks are `VEC32_UE8M0` (MXFP8, MXFP4),
    swizzled f8E4M3FN scales of 16-element blocks `VEC16_UE4M3` (NVFP4, whose
    tensor scales' product becomes cuBLASLt's alpha, computed on the device),
    f32 scales of 128-element blocks `VEC128_32F` (re-laid out by the
    runtime, or passed through when already GEMM-ready or K-outer), of
    `[128, 128]` blocks `BLK128x128_32F`, and one f32 scale of a whole
    operand per-tensor (`SCALAR_32F`). K-outer operands become cuBLASLt's
    transpose flags. Other combinations are reported and the pass fails, and
    so is what cuBLASLt does not run on `chip`: MX, NVFP4 and K-outer
    operands need sm_100a (for MXFP8 on sm_90a use the generated kernel,
    `mx-lower-to-nvvm gemm=kernel`). Code compiled for sm_100a but run on an
    older GPU fails in the call, with the runtime's message naming the mode,
    the compute capability and the alternative. With `gemm=auto`, each op
    goes to the lowering that runs its recipe faster on `chip` (measured;
    the same choice `convert-mx-to-gpu` makes, GemmLowering.h): the ops the
    generated kernels take are left alone, and one that neither lowering
    takes is reported with both reasons. Each call records why cuBLASLt runs
    it in its `mx.gemm_lowering` attribute.

    Example:

    ```mlir
    // mx-opt --convert-mx-to-cublas="chip=sm_90a"
    %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
        : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<384x512xf8E4M3FN>,
          tensor<3x4xf32> -> tensor<256x384xbf16>
    // becomes gpu.alloc + llvm.call @mxrtScaledMatmul(256, 384, 512, ...)
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::bufferization::BufferizationDialect",
    "mlir::gpu::GPUDialect",
    "mlir::LLVM::LLVMDialect",
    "mlir::memref::MemRefDialect",
    "mlir::scf::SCFDialect",
  ];
  let options = [
    Option<"chip", "chip", "::mx::Chip", "::mx::kDefaultChip",
           "NVIDIA GPU to compile for",
           "::mx::getChipOptionValues()">,
    Option<"gemm", "gemm", "::mx::GemmLowering", "::mx::GemmLowering::cublas",
           "Which mx.scaled_matmul ops go to cuBLASLt: every one (cublas), or "
           "those that gemm=auto gives it, leaving the others to "
           "convert-mx-to-gpu (auto)",
           "::mx::getGemmLoweringOptionValues()">,
    Option<"gemmConfig", "gemm-config", "std::string", "\"\"",
           "The generated kernels' choices (convert-mx-to-gpu's gemm-config), "
           "which gemm=auto weighs">,
  ];
}

def CombineCollectives : Pass<"mx-combine-collectives"> {
  let summary = "Fuse an all-reduce that is then sliced into a reduce-scatter";
  let description = [{
    Runs after `shard-partition` (in `mx-partition`). A sum that every device
    computes whole and then keeps a slice of -- a `shard.all_reduce` whose
    only user is a `shard.all_slice` over the same grid axes, possibly
    through the `arith.truncf` that rounds a K-split `mx.scaled_matmul`'s f32
    partial sums -- is a `shard.reduce_scatter`: each device receives its
    slice of the sum only, and half the bytes cross the wire. The rounding
    moves after the scatter.

    Example:

    ```mlir
    // mx-opt --mx-combine-collectives
    %s = shard.all_reduce %p on @grid grid_axes = [0] : tensor<256x128xf32> -> tensor<256x128xf32>
    %t = arith.truncf %s : tensor<256x128xf32> to tensor<256x128xbf16>
    %m = shard.all_slice %t on @grid grid_axes = [0] slice_axis = 0 : tensor<256x128xbf16> -> tensor<128x128xbf16>
    // becomes
    %r = shard.reduce_scatter %p on @grid grid_axes = [0] scatter_axis = 0 : tensor<256x128xf32> -> tensor<128x128xf32>
    %m = arith.truncf %r : tensor<128x128xf32> to tensor<128x128xbf16>
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::shard::ShardDialect",
  ];
}

def PipelineGathers : Pass<"mx-pipeline-gathers"> {
  let summary = "Overlap the quantize of a partitioned program with the "
                "all-gather of its results, chunk by chunk";
  let description = [{
    Runs after `mx-partition`, before `mx-lower-to-nvvm`. An `mx.quantize`
    whose row-shaped results (data, block scales) are each all-gathered
    along dimension 0 (`shard.all_gather`, their only user, or the only user
    of the swizzle into 128x4 tiles that `mx-swizzle-before-gather` put
    between them: each chunk then swizzles its scales, whose tile rows must
    not straddle chunks) becomes
    `chunks` quantizes of consecutive, block-aligned chunks of its input's
    rows (`tensor.extract_slice`), each followed by an `mx.gather_chunk`
    per gathered result that places every device's chunk at its final rows
    of the gathered tensor; one `mx.gather_join` before the first reader of
    the gathered values (the swizzle of the scales) ends the chains. On the
    GPU the exchange of chunk c runs on a side stream while chunk c + 1 is
    quantized, and the chunks of one quantize are one NCCL group.

    Every chunk computes the bytes of the whole quantize at its rows: the
    chunks hold whole blocks, and what the whole input decides -- the one
    block of per-tensor current scaling, NVFP4's computed tensor scale -- is
    taken from the quantize's `amax` operand (the all-reduced amax that
    mx-partition gives it), whose results (a per-tensor scale, the tensor
    scale) are the same in every chunk and are taken from the first.
    Quantizes whose rows do not split into `chunks` chunks of whole blocks,
    or that span the whole input without an `amax` operand, are errors that
    name the op; quantizes with other results or users are left alone.
    `chunks=1` keeps the quantize whole and exchanges its results with the
    placed gather (one `mx.gather_chunk` each), which needs no split and
    measured faster than `ncclAllGather` of the same bytes at 256 and 512
    MiB on 2 H200s; `mx-lower-to-nvvm` runs it so for gathers of at least
    its `placed-gather-bytes`. `min-bytes` leaves smaller gathers alone.

    Example:

    ```mlir
    // mx-opt --mx-pipeline-gathers=chunks=2
    %d, %s = mx.quantize %x block [1, 32] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
    %gs = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<128x8xf8E8M0FNU> -> tensor<256x8xf8E8M0FNU>
    %gd = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<256x256xf8E4M3FN>
    %t = mx.swizzle %gs : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
    // becomes, per chunk c of 64 rows (c = 0, 1):
    %x0 = tensor.extract_slice %x[0, 0] [64, 256] [1, 1] : tensor<128x256xbf16> to tensor<64x256xbf16>
    %d0, %s0 = mx.quantize %x0 block [1, 32] : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU>
    %gd0 = mx.gather_chunk %d0 into %ed at row 0 of 2 devices : tensor<64x256xf8E4M3FN> into tensor<256x256xf8E4M3FN>
    %gs0 = mx.gather_chunk %s0 into %es at row 0 of 2 devices : tensor<64x8xf8E8M0FNU> into tensor<256x8xf8E8M0FNU>
    ...
    %jd, %js = mx.gather_join %gd1, %gs1 : tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
    %t = mx.swizzle %js : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
    ```
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", "4",
           "The chunks of rows that each pipelined quantize is split into">,
    Option<"minBytes", "min-bytes", "int64_t", "0",
           "Leave a quantize whose gathered results (every device's part) "
           "hold fewer bytes than this">,
  ];
  let dependentDialects = [
    "mlir::tensor::TensorDialect",
    "::mx::MXDialect",
  ];
}

def SwizzleBeforeGather : Pass<"mx-swizzle-before-gather"> {
  let summary = "Swizzle each device's block scales before their all-gather "
                "where the gathered tiles are the devices' tiles in order";
  let description = [{
    Runs in `mx-lower-to-nvvm`, after `mx-partition`. A partitioned program
    swizzles the gathered compact scales (the spec's section 12): an
    `mx.swizzle` (`layout tiles`, rowwise 2-D scales) of a `shard.all_gather`
    along dimension 0 that has no other user. Where each device's scales
    have a multiple of 128 rows, the 128x4 tiles of the gathered scales are
    each device's tiles one after the other, so the swizzle moves before the
    gather: the same bytes cross the wire and every device gets the same
    tiles. On the GPU the shard's swizzle is then fused into its quantize
    kernel rather than a kernel after the gather. Other swizzles (blockwise
    layout, whose rows are innermost; shards of partial tiles; gathered
    scales that something else reads) are left alone.

    Example:

    ```mlir
    // mx-opt --mx-swizzle-before-gather
    %g = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<256x8xf8E8M0FNU> -> tensor<512x8xf8E8M0FNU>
    %t = mx.swizzle %g : tensor<512x8xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
    // becomes
    %u = mx.swizzle %s : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
    %t = shard.all_gather %u on @grid grid_axes = [0] gather_axis = 0 : tensor<2x2x32x4x4xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
    ```
  }];
  let dependentDialects = [
    "mlir::shard::ShardDialect",
  ];
}

def ShardSingleDevice : Pass<"mx-shard-single-device", "mlir::ModuleOp"> {
  let summary = "Run the collectives of a one-device grid locally (the CPU pipeline)";
  let description = [{
    `mx-lower-to-cpu` runs one process on one device, so a partitioned
    program runs there only on a grid of one device, where every collective
    is local: `shard.all_gather`, `shard.all_reduce`, `shard.reduce_scatter`
    and `shard.all_slice` over it become their input (converted to the
    result's element type where the all-reduce says so), and the process
    index is 0. A collective over more than one device, and any other
    `shard` op left in the program, is reported and the pass fails; the
    `shard.grid` symbols are erased.

    Example:

    ```mlir
    // mx-opt --mx-shard-single-device
    shard.grid @one(shape = 1)
    %a = shard.all_reduce %x on @one grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
    // becomes %x
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def ConvertShardToMXRuntime : Pass<"convert-shard-to-mxrt", "mlir::ModuleOp"> {
  let summary = "Lower the shard collectives of a GPU program to NCCL calls of the mx runtime";
  let description = [{
    Runs in `mx-lower-to-nvvm`, where tensors are device memory. Each
    collective of a partitioned program becomes one call of the runtime
    (include/mx/Runtime/MXRuntime.h), which runs it on the process's NCCL
    communicator (`mxrtCommInit`) on the call stream; the result buffer comes
    from `gpu.alloc`:

    * `shard.all_gather` -> `mxrtAllGather`, the bytes of the input (FP4
      packed, any element type: the compact formats cross the wire as they
      are);
    * `shard.all_reduce` -> `mxrtAllReduce` (sum, max) of f32, bf16 or f16;
    * `shard.reduce_scatter` -> `mxrtReduceScatter` (sum, max);
    * `mx.gather_chunk` (mx-pipeline-gathers) -> `mxrtAllGatherPlaced` of
      the chunk into the buffer of its chain (allocated at the chain's
      `tensor.empty`), on the runtime's side stream; the chunks next to each
      other (one chunk of a quantize's results) are one NCCL group;
      `mx.gather_join` -> `mxrtCollectivesJoin`, after which the buffers are
      the gathered values;
    * `tensor.extract_slice` of whole rows of a static tensor (the chunks of
      mx-pipeline-gathers) -> a view of the rows' bytes in the tensor's
      buffer (no copy; bufferization would otherwise copy it on the host).

    A gathered value or chunk that is the tensor of a `gpu.alloc` of its
    bytes in the collective's block (a quantize's result), used by nothing
    after the collective, is produced in its own slot of the result instead:
    the allocation becomes a view of the result at this process's rank
    (`mxrtCommRank`, read once per function), so that NCCL runs in place.
    The buffers that gathers write carry the unit attribute
    `mx.collective_buffer`: `convert-collective-buffers-to-mxrt` later makes
    them the runtime's memory registered with NCCL.

    NCCL concatenates whole buffers, so a gather or scatter must be along
    the outermost dimension that is not 1; NCCL's float max drops NaN, so a
    max reduces order-preserving integer keys of the floats instead (a
    kernel before and after; an `mx.amax` result, whose buffer carries
    `mx.magnitude_bits`, is its own keys and needs neither), which keeps
    the spec's rule that a NaN amax anywhere is NaN everywhere. The
    `arith.truncf` that rounds reduced f32 partial sums (a K-split
    `mx.scaled_matmul`) becomes a kernel. The group
    of a collective must be the whole grid (one communicator per process),
    whose size the runtime checks against the communicator's; the
    `shard.grid` symbols are erased. Anything else of the `shard` dialect is
    reported and the pass fails.

    Example:

    ```mlir
    // mx-opt --convert-shard-to-mxrt
    %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0
        : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
    // becomes gpu.alloc + llvm.call @mxrtAllGather(%send, %recv, 65536, 2, null)
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::bufferization::BufferizationDialect",
    "mlir::gpu::GPUDialect",
    "mlir::LLVM::LLVMDialect",
    "mlir::memref::MemRefDialect",
  ];
}

def ConvertCollectiveBuffersToMXRuntime
    : Pass<"convert-collective-buffers-to-mxrt", "mlir::ModuleOp"> {
  let summary = "Allocate the buffers that collectives write from the runtime's NCCL-registered memory";
  let description = [{
    NCCL moves a buffer registered with its communicator without its
    staging copies: the peers write straight into it over NVLink (on two
    H100s an in-place all-gather of 33 MiB gathered took 70 us instead of
    91; bench/RESULTS.md). The runtime keeps such memory
    (`mxrtCollectiveAlloc`, `mxrtCollectiveFree`; MXRuntime.h). This pass
    gives it to every synchronous, static, identity-layout `gpu.alloc`
    marked `mx.collective_buffer` (what `convert-shard-to-mxrt` allocates
    for gathers): the allocation becomes
    `llvm.call @mxrtCollectiveAlloc(bytes, null)` (null: the call stream)
    with the memref's descriptor built around the pointer, and each
    `gpu.dealloc` of it `llvm.call @mxrtCollectiveFree(ptr, null)`. Any
    other use of the buffer takes the new memref as it took the old one.

    `mx-lower-to-nvvm` runs it after `mx-free-device-temporaries` has
    placed the frees, so that the buffers' lifetimes are decided on
    ordinary `gpu.alloc`s, and before `gpu-async-region`. A marked
    allocation the pass cannot take (asynchronous, dynamic, another layout)
    stays an ordinary one, and without the pass the attribute changes
    nothing. A module that defines `mxrtCollectiveAlloc` or
    `mxrtCollectiveFree` as something else is reported and the pass fails.

    Example:

    ```mlir
    // mx-opt --convert-collective-buffers-to-mxrt
    %recv = gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
    ...
    gpu.dealloc %recv : memref<256x512xf8E4M3FN>
    // becomes
    %p = llvm.call @mxrtCollectiveAlloc(%c131072_i64, %null)
        : (i64, !llvm.ptr) -> !llvm.ptr
    %recv = builtin.unrealized_conversion_cast %descriptor
        : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
        to memref<256x512xf8E4M3FN>
    ...
    llvm.call @mxrtCollectiveFree(%p, %null) : (!llvm.ptr, !llvm.ptr) -> ()
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::LLVM::LLVMDialect",
  ];
}

def RejectHostCompute : Pass<"mx-reject-host-compute", "mlir::ModuleOp"> {
  let summary = "Reject tensor computations left on the host of a GPU program";
  let description = [{
    Runs after `convert-mx-to-gpu` in `mx-lower-to-nvvm`. By then every
    tensor of the program lives in device memory (function arguments, kernel
    results), so an op outside the GPU kernels that reads or writes tensor
    elements -- `linalg.*`, elementwise `arith`/`math` on tensors,
    `tensor.extract`, `tensor.insert`, `tensor.pad`, a tensor constant, ... --
    would run on the host over device memory (or put data in host memory
    that a kernel then reads). Each such op is reported by name and the pass
    fails. Ops that only relabel or pass along tensors are kept:
    `tensor.collapse_shape`, `tensor.expand_shape`, `tensor.extract_slice`
    and `tensor.cast` (views), the bufferization casts, calls, returns and
    the region-carrying control flow ops (whose bodies are checked).

    Example:

    ```mlir
    // mx-opt --mx-reject-host-compute
    %t = linalg.transpose ins(%x : tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
    // error: 'linalg.transpose' op would run on the host over device memory
    ```
  }];
}

def AlignWorkgroupBuffers
    : Pass<"mx-align-workgroup-buffers", "mlir::gpu::GPUModuleOp"> {
  let summary = "Align the workgroup buffers of GPU kernels for vector access";
  let description = [{
    Gives every workgroup (shared memory) buffer of every `gpu.func` of the
    module an alignment of at least `alignment` bytes (the `llvm.align`
    attribution attribute, which the NVVM lowering puts on the buffer's
    `.shared` variable). Without it a buffer is aligned to its element type
    only, while the mx kernels move 16-byte vectors through their buffers
    (`ld.shared.v4` / `st.shared.v4` need 16-byte addresses). A larger
    alignment already given is kept. `mx-lower-to-nvvm` runs it right after
    gpu-kernel-outlining, which creates the functions from the `gpu.launch`
    ops of `convert-mx-to-gpu` (a launch has no attribution attributes).

    Example:

    ```mlir
    // mx-opt --pass-pipeline="builtin.module(gpu.module(mx-align-workgroup-buffers))"
    gpu.func @k() workgroup(%tile : memref<32x256xbf16, #gpu.address_space<workgroup>>) kernel
    // becomes
    gpu.func @k() workgroup(%tile : memref<32x256xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"16",
           "The least alignment of a workgroup buffer, in bytes (a power of "
           "two)">,
  ];
}

def KernelOccupancy : Pass<"mx-kernel-occupancy", "mlir::gpu::GPUModuleOp"> {
  let summary = "Keep kernels' registers within the CTAs per SM they ask for";
  let description = [{
    Gives every `gpu.func` of the module whose body holds an op with an
    `mx.min_ctas_per_sm` attribute (a quantize kernel's request, set on an op
    of its `gpu.launch` body, since the launch's own attributes do not
    survive gpu-kernel-outlining) the `nvvm.minctasm` attribute of the largest
    such request, and drops the requests: the NVVM lowering writes it as PTX
    `.minnctapersm`, and ptxas then keeps the kernel's registers within that
    many CTAs an SM (64 for four CTAs of 256 threads) instead of choosing more
    for its schedule. `mx-lower-to-nvvm` runs it right after
    gpu-kernel-outlining.

    Example:

    ```mlir
    // mx-opt --pass-pipeline="builtin.module(gpu.module(mx-kernel-occupancy))"
    gpu.func @k() kernel { gpu.barrier {mx.min_ctas_per_sm = 4 : i64} ... }
    // becomes
    gpu.func @k() kernel attributes {nvvm.minctasm = 4 : i32} { gpu.barrier ... }
    ```
  }];
}

def ReadOnlyArguments : Pass<"mx-readonly-arguments", "mlir::ModuleOp"> {
  let summary = "Keep compiled public functions from writing their arguments";
  let description = [{
    Marks every ranked tensor argument of every public, defined `func.func` with
    `bufferization.writable = false`, so that one-shot bufferization with
    function boundaries copies an argument before an op writes into it
    rather than reusing the caller's buffer. Tensors are values: a caller of
    the compiled function (a numpy array passed by `mx.compile`'s Kernel)
    must find its data unchanged, for example the history that
    `mx.quantize_delayed` returns updated. `mx-lower-to-cpu` runs it before
    bufferizing. An argument that the source marks `mx.updated` becomes
    `bufferization.writable = true` instead: the function may update it in
    place (see `mx-drop-in-place-results`). An existing
    `bufferization.writable` attribute is overwritten. Private functions keep
    the analysis' freedom: their callers are in the module.

    Example:

    ```mlir
    // mx-opt --mx-readonly-arguments
    func.func @f(%x: tensor<4xf32>, %n: index) -> tensor<4xf32>
    // becomes
    func.func @f(%x: tensor<4xf32> {bufferization.writable = false},
                 %n: index) -> tensor<4xf32>
    ```
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect"];
}

def DropInPlaceResults : Pass<"mx-drop-in-place-results", "mlir::ModuleOp"> {
  let summary = "Public functions update their `mx.updated` arguments in place";
  let description = [{
    Runs after one-shot bufferization with function boundaries. The source
    marks a tensor argument of a public function `mx.updated` when the
    caller's buffer may take its new value, which the function returns (the
    CPU pipeline keeps such an argument writable, `mx-readonly-arguments`).
    A result of a public, defined `func.func` that every `func.return`
    returns as the same `mx.updated` argument (bufferization wrote the new
    value into the argument's buffer: nothing read the old value after) is
    erased from the function and its returns: the compiled function updates
    the caller's buffer and allocates, copies and returns nothing for it
    (mx.torch's delayed-scaling history). `mx.updated` is then removed from
    every argument whose new value was not written in place (such a result
    stays a result, with value semantics), so that it marks exactly the
    arguments that a caller finds updated; `mx-export-signatures` lists them
    (`"updated"`). Private functions are left alone: their callers are in
    the module.

    Example:

    ```mlir
    // mx-opt --mx-drop-in-place-results
    func.func @record(%h: memref<4x2xf32> {mx.updated}, %v: f32)
        -> memref<4x2xf32> {
      memref.store %v, %h[%c0, %c0] : memref<4x2xf32>
      return %h : memref<4x2xf32>
    }
    // becomes
    func.func @record(%h: memref<4x2xf32> {mx.updated}, %v: f32) {
      memref.store %v, %h[%c0, %c0] : memref<4x2xf32>
      return
    }
    ```
  }];
}

def GuardDeviceCalls : Pass<"mx-guard-device-calls", "mlir::ModuleOp"> {
  let summary = "Make each public GPU function a guarded call of the runtime";
  let description = [{
    Brackets every public, defined `func.func` with the call guard of
    `libmx_runtime` (`include/mx/Runtime/MXRuntime.h`): at its entry
    `mxrtCallBegin(name)` and, for each memref argument,
    `mxrtCheckArgument(index, pointer, MXRT_ARGUMENT_ALIGNMENT)`; before each
    `func.return`, `mxrtCallEnd()`. The runtime refuses a NULL or misaligned
    argument, and from the first failure inside a call (a refused argument, a
    tensor map that does not encode, a failed allocation or launch) it skips
    every later kernel launch, copy, memset and cuBLASLt matmul of the call,
    so that no kernel starts on memory it cannot take: that would kill the
    CUDA context of the whole process. The failure is reported through
    `mxrtGetLastError()` and the status `mxrtCallEnd` returns.

    `mx-lower-to-nvvm` runs it on the host code after bufferization, when
    public arguments are memrefs. Private functions are left alone: they run
    inside a public one's call. The function's name goes into an internal
    global `@__mx_call_name_<name>`; a module that already defines that
    symbol, or the runtime functions with other types, is an error.

    Example:

    ```mlir
    // mx-opt --mx-guard-device-calls
    func.func @f(%x: memref<64x64xbf16>) -> memref<64x64xbf16> {
      ...
      return %y : memref<64x64xbf16>
    }
    // becomes
    func.func @f(%x: memref<64x64xbf16>) -> memref<64x64xbf16> {
      llvm.call @mxrtCallBegin(%name) : (!llvm.ptr) -> ()
      llvm.call @mxrtCheckArgument(%c0_i32, %x_ptr, %c16_i64)
          : (i32, !llvm.ptr, i64) -> ()
      ...
      %status = llvm.call @mxrtCallEnd() : () -> i32
      return %y : memref<64x64xbf16>
    }
    ```
  }];
  let dependentDialects = [
    "mlir::LLVM::LLVMDialect",
    "mlir::arith::ArithDialect",
    "mlir::memref::MemRefDialect"
  ];
}

def FreeDeviceTemporaries
    : Pass<"mx-free-device-temporaries", "mlir::func::FuncOp"> {
  let summary = "Free the device buffers a function allocates and does not hand on";
  let description = [{
    Inserts a `gpu.dealloc` for each synchronous `gpu.alloc` of the function
    whose buffer nothing uses past the function: right after the last op of
    the allocation's block that uses the buffer or a value derived from it
    (an op whose region uses it -- an `scf.if`, an `scf.for`, a
    `gpu.launch` -- counts as a whole, so the free follows it on every path).
    `mx-lower-to-nvvm` runs it on the bufferized host code, after
    `mx-guard-device-calls` and before `gpu-async-region`, which orders each
    free on the call's stream after the work before it: the lowerings'
    intermediate buffers (scales laid out for a GEMM, a quantize's outputs
    feeding a GEMM, a gathered shard) are freed in every call instead of
    leaking.

    Understood uses are views and casts (`ViewLikeOpInterface`,
    `memref.cast`, `bufferization.to_tensor` / `to_buffer`), the device
    address (`memref.extract_aligned_pointer_as_index`, `arith.index_cast`,
    `llvm.inttoptr`, `llvm.ptrtoint`, `llvm.getelementptr` on it), the ops
    of a `gpu.launch` body, `gpu.launch_func`, `gpu.memcpy`, `gpu.memset`, and
    `llvm.call` of the runtime functions that use a buffer only in the
    call's stream-ordered work (`mxrtEncodeTensorMap`, whose tensor map
    refers to the buffer and is followed like it, through the `llvm.load`
    that reads the map as a kernel's by-value argument; `mxrtScaledMatmul`;
    the NCCL collectives). A buffer with any other use -- returned (the caller owns
    it), passed to a `func.call`, stored, yielded from a region, used in
    another block, an op the pass does not know -- is left allocated, and
    so is one that some alias of it is already freed by a `gpu.dealloc`.
    Asynchronous allocations are left to whoever threads their tokens.

    Example:

    ```mlir
    // mx-opt --pass-pipeline="builtin.module(func.func(mx-free-device-temporaries))"
    %tiles = gpu.alloc () : memref<1x4x32x4x4xf8E8M0FNU>
    gpu.launch ... { ... writes %tiles ... }
    %out = gpu.alloc () : memref<128x128xbf16>
    gpu.launch_func @gemm::@kernel ... args(%tiles_ptr : !llvm.ptr, ...)
    return %out : memref<128x128xbf16>
    // gets, after the gpu.launch_func,
    gpu.dealloc %tiles : memref<1x4x32x4x4xf8E8M0FNU>
    ```
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def ExportSignatures : Pass<"mx-export-signatures", "mlir::ModuleOp"> {
  let summary = "Record the signatures of the public functions in a global";
  let description = [{
    Describes every public, defined `func.func` of the module (declarations
    and private functions are skipped) in one JSON string and adds it to the
    module as

    ```mlir
    llvm.mlir.global external constant @_mx_signatures("<json>\00")
    ```

    an `!llvm.array<N x i8>` NUL-terminated constant, so that a shared
    library compiled from the module describes its own entry points (from
    Python: `ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib,
    "_mx_signatures")))`). Both `mx-lower-to-cpu` and `mx-lower-to-nvvm` run
    it right after bufferization and `mx-drop-in-place-results`, while the
    function types still have the shapes and element types of the source
    (as memrefs).

    The JSON is one line, compact (no spaces), with the keys in exactly this
    order: `{"version":1,"functions":[F,...]}` with one F per function in
    module order, F = `{"name":"quantize","args":[V,...],"results":[V,...]}`
    and one V = `{"kind":...,"shape":[...],"dtype":...}` per argument or
    result:

    * `"tensor"` for a ranked tensor or ranked memref: `shape` its sizes
      (-1 for a dynamic one, `[]` for rank 0), `dtype` its element type as
      MLIR prints it (`f32`, `bf16`, `f8E4M3FN`, `f8E8M0FNU`, `f4E2M1FN`,
      `i8`, `index`, ...).
    * `"scalar"` for an integer, index or float: `shape` is `[]`, `dtype`
      the type.
    * `"other"` for anything else (unranked tensors and memrefs, vectors,
      ...): `shape` is `[]`, `dtype` the whole printed type.

    A function with arguments marked `mx.updated` (the arguments it updates
    in place: `mx-drop-in-place-results` leaves the mark on those only) has
    one more key after
    `"results"`: `"updated":[i,...]`, their indices in increasing order. The
    pass is the mark's last reader and removes it from every function: the
    LLVM functions that follow have no tensor or memref arguments for it (the
    mx dialect verifies that it marks one).

    A module without a public function gets no global. A module that already
    has a symbol `_mx_signatures` is an error, reported on that symbol.

    Example:

    ```mlir
    // mx-opt --mx-export-signatures
    func.func @quantize(%x: tensor<128x96xbf16>)
        -> (tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>)
    // adds @_mx_signatures with this JSON (wrapped here, one line there):
    // {"version":1,"functions":[{"name":"quantize","args":[{"kind":"tensor",
    // "shape":[128,96],"dtype":"bf16"}
    // ],"results":[{"kind":"tensor","shape":[128,96],"dtype":"f8E4M3FN"},
    // {"kind":"tensor","shape":[128,3],"dtype":"f8E8M0FNU"}
    // ]}
    // ]}
    ```
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // MX_CONVERSION_PASSES_TD
