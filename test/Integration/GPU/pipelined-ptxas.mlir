// The programs of bench/collectives.py (smaller), partitioned and pipelined
// in 4 chunks and in 1 (mx-pipeline-gathers), through the whole GPU
// pipeline: every kernel assembles with ptxas, and the host code runs, per
// chunk, the chunk quantize's kernels and then one NCCL group of its placed
// gathers (on the side stream), the join, and only then the swizzle. Each
// chunk is quantized into its own rows of the gathered buffers (its slot at
// this process's rank, mxrtCommRank), so the chunks have no buffers of their
// own: nothing is freed from the first placed gather to the join, and after
// it only the gathered scales, once swizzled (mxrtCollectiveFree: gathered
// buffers are the runtime's NCCL-registered memory).
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-partition --mx-pipeline-gathers=chunks=4 | mx-opt --mx-lower-to-nvvm="chip=sm_100a format=bin" -o /dev/null
// RUN: mx-opt %s --mx-partition --mx-pipeline-gathers=chunks=4 | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=bin" | FileCheck %s
// One chunk: the whole quantize, then its placed gathers, the join, the swizzle.
// RUN: mx-opt %s --mx-partition --mx-pipeline-gathers=chunks=1 | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=bin" | FileCheck %s --check-prefix=ONE
// ONE-LABEL: llvm.func @mxfp8(
// ONE: gpu.launch_func
// ONE-NOT: gpu.launch_func
// ONE: llvm.call @mxrtGroupStart()
// ONE: llvm.call @mxrtAllGatherPlaced(
// ONE: llvm.call @mxrtAllGatherPlaced(
// ONE: llvm.call @mxrtGroupEnd()
// ONE-NEXT: llvm.call @mxrtCollectivesJoin(
// ONE: gpu.launch_func
// ONE-LABEL: llvm.func @per_tensor(
// ONE: llvm.call @mxrtAllReduce(
// ONE: llvm.call @mxrtAllGatherPlaced(
// ONE-NEXT: llvm.call @mxrtCollectivesJoin(

shard.grid @grid(shape = 2)

// CHECK-LABEL: llvm.func @mxfp8(
// CHECK: llvm.call @mxrtCommRank(
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtCollectiveFree(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
func.func @mxfp8(%x: tensor<1024x1024xbf16>) -> (tensor<1024x1024xf8E4M3FN>, tensor<8x8x32x4x4xf8E8M0FNU>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<1024x1024xbf16>
  %q:2 = mx.quantize %xs block [1, 32] : tensor<1024x1024xbf16> -> tensor<1024x1024xf8E4M3FN>, tensor<1024x32xf8E8M0FNU>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<1024x1024xf8E4M3FN>
  %t = mx.swizzle %q#1 : tensor<1024x32xf8E8M0FNU> -> tensor<8x8x32x4x4xf8E8M0FNU>
  %tw = shard.shard %t to %whole : tensor<8x8x32x4x4xf8E8M0FNU>
  return %dw, %tw : tensor<1024x1024xf8E4M3FN>, tensor<8x8x32x4x4xf8E8M0FNU>
}

// CHECK-LABEL: llvm.func @blockwise(
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtCollectiveFree(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
func.func @blockwise(%x: tensor<1024x1024xbf16>) -> (tensor<1024x1024xf8E4M3FN>, tensor<8x256x4xf32>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<1024x1024xbf16>
  %q:2 = mx.quantize %xs block [1, 128] : tensor<1024x1024xbf16> -> tensor<1024x1024xf8E4M3FN>, tensor<1024x8xf32>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<1024x1024xf8E4M3FN>
  %t = mx.swizzle %q#1 layout blockwise : tensor<1024x8xf32> -> tensor<8x256x4xf32>
  %tw = shard.shard %t to %whole : tensor<8x256x4xf32>
  return %dw, %tw : tensor<1024x1024xf8E4M3FN>, tensor<8x256x4xf32>
}

// Per-tensor: the amax all-reduce before the chunks, each chunk one placed
// gather; nothing but the chunk quantizes' own temporaries is freed.
// CHECK-LABEL: llvm.func @per_tensor(
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK-NEXT: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
func.func @per_tensor(%x: tensor<1024x1024xbf16>) -> (tensor<1024x1024xf8E4M3FN>, tensor<1x1xf32>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<1024x1024xbf16>
  %q:2 = mx.quantize %xs block [1024, 1024] : tensor<1024x1024xbf16> -> tensor<1024x1024xf8E4M3FN>, tensor<1x1xf32>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<1024x1024xf8E4M3FN>
  return %dw, %q#1 : tensor<1024x1024xf8E4M3FN>, tensor<1x1xf32>
}

// CHECK-LABEL: llvm.func @mxfp4(
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtCollectiveFree(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
func.func @mxfp4(%x: tensor<1024x1024xbf16>) -> (tensor<1024x1024xf4E2M1FN>, tensor<8x8x32x4x4xf8E8M0FNU>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<1024x1024xbf16>
  %q:2 = mx.quantize %xs block [1, 32] : tensor<1024x1024xbf16> -> tensor<1024x1024xf4E2M1FN>, tensor<1024x32xf8E8M0FNU>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<1024x1024xf4E2M1FN>
  %t = mx.swizzle %q#1 : tensor<1024x32xf8E8M0FNU> -> tensor<8x8x32x4x4xf8E8M0FNU>
  %tw = shard.shard %t to %whole : tensor<8x8x32x4x4xf8E8M0FNU>
  return %dw, %tw : tensor<1024x1024xf4E2M1FN>, tensor<8x8x32x4x4xf8E8M0FNU>
}

// CHECK-LABEL: llvm.func @nvfp4(
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtCollectiveFree(
// CHECK-NOT: llvm.call @{{mgpuMemFree|mxrtCollectiveFree}}
func.func @nvfp4(%x: tensor<1024x1024xbf16>) -> (tensor<1024x1024xf4E2M1FN>, tensor<8x16x32x4x4xf8E4M3FN>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<1024x1024xbf16>
  %q:3 = mx.quantize %xs block [1, 16] : tensor<1024x1024xbf16> -> tensor<1024x1024xf4E2M1FN>, tensor<1024x64xf8E4M3FN>, tensor<f32>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<1024x1024xf4E2M1FN>
  %t = mx.swizzle %q#1 : tensor<1024x64xf8E4M3FN> -> tensor<8x16x32x4x4xf8E4M3FN>
  %tw = shard.shard %t to %whole : tensor<8x16x32x4x4xf8E4M3FN>
  return %dw, %tw : tensor<1024x1024xf4E2M1FN>, tensor<8x16x32x4x4xf8E4M3FN>
}
