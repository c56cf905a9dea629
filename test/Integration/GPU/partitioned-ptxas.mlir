// Partitioned programs through the whole GPU pipeline: mx-partition, then
// mx-lower-to-nvvm assembles every kernel with ptxas (format=bin fails on any
// error) for Hopper and Blackwell, among them the per-tensor cast that reads
// the all-reduced amax, the finite amax of NVFP4's tensor scale, the order
// keys of a max and the rounding of reduced partial sums. The host code
// calls the runtime's collectives, each between the kernels it depends on.
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_100a format=bin" -o /dev/null
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=bin" | FileCheck %s

shard.grid @grid(shape = 2)

// CHECK-LABEL: llvm.func @per_tensor
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: gpu.launch_func
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.return
func.func @per_tensor(%x: tensor<512x1024xbf16>) -> (tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<512x1024xbf16>
  %d, %s = mx.quantize %xs block [512, 1024] : tensor<512x1024xbf16> -> tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>
  %dw = shard.shard %d to %whole annotate_for_users : tensor<512x1024xf8E4M3FN>
  return %dw, %s : tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>
}

// CHECK-LABEL: llvm.func @nvfp4
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtAllGather(
func.func @nvfp4(%x: tensor<512x1024xbf16>) -> (tensor<512x1024xf4E2M1FN>, tensor<4x16x32x4x4xf8E4M3FN>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<512x1024xbf16>
  %d, %s, %t = mx.quantize %xs block [1, 16] : tensor<512x1024xbf16> -> tensor<512x1024xf4E2M1FN>, tensor<512x64xf8E4M3FN>, tensor<f32>
  %dw = shard.shard %d to %whole annotate_for_users : tensor<512x1024xf4E2M1FN>
  %tiles = mx.swizzle %s : tensor<512x64xf8E4M3FN> -> tensor<4x16x32x4x4xf8E4M3FN>
  %tw = shard.shard %tiles to %whole : tensor<4x16x32x4x4xf8E4M3FN>
  return %dw, %tw : tensor<512x1024xf4E2M1FN>, tensor<4x16x32x4x4xf8E4M3FN>
}

// CHECK-LABEL: llvm.func @matmul_k
// CHECK: llvm.call @mxrtReduceScatter(
// CHECK: gpu.launch_func
func.func @matmul_k(%a: tensor<256x1024xf8E4M3FN>, %as: tensor<256x32xf8E8M0FNU>,
                    %b: tensor<256x1024xf8E4M3FN>, %bs: tensor<256x32xf8E8M0FNU>) -> tensor<256x256xbf16> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %a1 = shard.shard %a to %k : tensor<256x1024xf8E4M3FN>
  %as1 = shard.shard %as to %k : tensor<256x32xf8E8M0FNU>
  %b1 = shard.shard %b to %k : tensor<256x1024xf8E4M3FN>
  %bs1 = shard.shard %bs to %k : tensor<256x32xf8E8M0FNU>
  %c = mx.scaled_matmul %a1, %as1, %b1, %bs1 lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x1024xf8E4M3FN>, tensor<256x32xf8E8M0FNU>, tensor<256x1024xf8E4M3FN>, tensor<256x32xf8E8M0FNU> -> tensor<256x256xbf16>
  %cw = shard.shard %c to %whole : tensor<256x256xbf16>
  %cr = shard.shard %cw to %rows annotate_for_users : tensor<256x256xbf16>
  return %cr : tensor<256x256xbf16>
}

// CHECK-LABEL: llvm.func @delayed
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: gpu.launch_func
func.func @delayed(%x: tensor<512x1024xbf16>, %s: tensor<2xf32>, %h: tensor<16x2xf32>)
    -> (tensor<512x1024xf8E4M3FN>, tensor<16x2xf32>, tensor<2xf32>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<512x1024xbf16>
  %d, %i, %h1 = mx.quantize_delayed %xs, %s, %h index 0
      : tensor<512x1024xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  %h2, %s2 = mx.update_amax_history %h1, %s element f8E4M3FN
      : tensor<16x2xf32>, tensor<2xf32> -> tensor<16x2xf32>, tensor<2xf32>
  return %d, %h2, %s2 : tensor<512x1024xf8E4M3FN>, tensor<16x2xf32>, tensor<2xf32>
}
