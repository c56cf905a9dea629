// mx-lower-to-nvvm exchanges the all-gathered results of a quantize by the
// placed broadcast after the whole quantize (mx-pipeline-gathers chunks=1,
// in place) where they hold at least placed-gather-bytes (64 MiB by
// default, every device's part together), and by ncclAllGather below it.
// Either way each device's scales, in whole 128x4 tiles, are swizzled by
// the quantize kernel before the exchange (mx-swizzle-before-gather).
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=isa" | FileCheck %s
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=isa placed-gather-bytes=-1" | FileCheck %s --check-prefix=NONE
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=isa placed-gather-bytes=0" | FileCheck %s --check-prefix=ALL
// A user's own pipelining comes first; the pipeline finds nothing left to do.
// RUN: mx-opt %s --mx-partition --mx-pipeline-gathers=chunks=2 | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=isa" | FileCheck %s --check-prefix=USER

shard.grid @grid(shape = 2)

// 64 MiB of FP8 data and 2 MiB of E8M0 scales gathered: one kernel (the
// quantize writing the tiles), the placed gathers, nothing after the join.
// CHECK-LABEL: llvm.func @large(
// CHECK-NOT: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtCommRank(
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NEXT: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: llvm.call @mxrtAllGather(
// CHECK: llvm.return
// NONE-LABEL: llvm.func @large(
// NONE-NOT: mxrtAllGatherPlaced
// NONE: llvm.call @mxrtAllGather(
// NONE: llvm.call @mxrtAllGather(
// NONE-NOT: mxrtAllGatherPlaced
// NONE: llvm.return
// USER-LABEL: llvm.func @large(
// USER-COUNT-4: llvm.call @mxrtAllGatherPlaced(
// USER-NOT: mxrtAllGatherPlaced
// USER: llvm.call @mxrtCollectivesJoin(
func.func @large(%x: tensor<8192x8192xbf16>) -> (tensor<8192x8192xf8E4M3FN>, tensor<64x64x32x4x4xf8E8M0FNU>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<8192x8192xbf16>
  %q:2 = mx.quantize %xs block [1, 32] : tensor<8192x8192xbf16> -> tensor<8192x8192xf8E4M3FN>, tensor<8192x256xf8E8M0FNU>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<8192x8192xf8E4M3FN>
  %t = mx.swizzle %q#1 : tensor<8192x256xf8E8M0FNU> -> tensor<64x64x32x4x4xf8E8M0FNU>
  %tw = shard.shard %t to %whole : tensor<64x64x32x4x4xf8E8M0FNU>
  return %dw, %tw : tensor<8192x8192xf8E4M3FN>, tensor<64x64x32x4x4xf8E8M0FNU>
}

// 8 MiB of FP8 data and 256 KiB of scales: one grouped ncclAllGather each,
// of the data and of the tiles that the quantize kernel swizzled.
// CHECK-LABEL: llvm.func @small(
// CHECK-NOT: mxrtAllGatherPlaced
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtGroupEnd()
// CHECK-NOT: mxrtAllGatherPlaced
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.return
// ALL-LABEL: llvm.func @small(
// ALL-NOT: llvm.call @mxrtAllGather(
// ALL: llvm.call @mxrtAllGatherPlaced(
// ALL: llvm.call @mxrtAllGatherPlaced(
// ALL: llvm.call @mxrtCollectivesJoin(
// ALL-NOT: llvm.call @mxrtAllGather(
// ALL: llvm.return
func.func @small(%x: tensor<1024x8192xbf16>) -> (tensor<1024x8192xf8E4M3FN>, tensor<8x64x32x4x4xf8E8M0FNU>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<1024x8192xbf16>
  %q:2 = mx.quantize %xs block [1, 32] : tensor<1024x8192xbf16> -> tensor<1024x8192xf8E4M3FN>, tensor<1024x256xf8E8M0FNU>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<1024x8192xf8E4M3FN>
  %t = mx.swizzle %q#1 : tensor<1024x256xf8E8M0FNU> -> tensor<8x64x32x4x4xf8E8M0FNU>
  %tw = shard.shard %t to %whole : tensor<8x64x32x4x4xf8E8M0FNU>
  return %dw, %tw : tensor<1024x8192xf8E4M3FN>, tensor<8x64x32x4x4xf8E8M0FNU>
}

// MXFP4, 64 MiB of packed data and 4 MiB of scales gathered: its quantize
// kernel does not swizzle, so a swizzle kernel of the shard's scales follows
// it, still before the one group of placed gathers; nothing after the join.
// CHECK-LABEL: llvm.func @large_fp4(
// CHECK: gpu.launch_func
// CHECK: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtGroupStart()
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK-NEXT: llvm.call @mxrtGroupEnd()
// CHECK-NEXT: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.return
func.func @large_fp4(%x: tensor<16384x8192xbf16>) -> (tensor<16384x8192xf4E2M1FN>, tensor<128x64x32x4x4xf8E8M0FNU>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<16384x8192xbf16>
  %q:2 = mx.quantize %xs block [1, 32] : tensor<16384x8192xbf16> -> tensor<16384x8192xf4E2M1FN>, tensor<16384x256xf8E8M0FNU>
  %dw = shard.shard %q#0 to %whole annotate_for_users : tensor<16384x8192xf4E2M1FN>
  %t = mx.swizzle %q#1 : tensor<16384x256xf8E8M0FNU> -> tensor<128x64x32x4x4xf8E8M0FNU>
  %tw = shard.shard %t to %whole : tensor<128x64x32x4x4xf8E8M0FNU>
  return %dw, %tw : tensor<16384x8192xf4E2M1FN>, tensor<128x64x32x4x4xf8E8M0FNU>
}
