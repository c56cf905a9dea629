// mx-lower-to-nvvm frees every device buffer a function allocates but does
// not return (mx-free-device-temporaries), on the call's stream after the
// last launch or runtime call that reads it; the results stay the caller's.
// Without it each call of these programs leaked its intermediates.
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_90a format=isa" | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: mx-opt %s --mx-partition | mx-opt --mx-lower-to-nvvm="chip=sm_100a format=isa" | FileCheck %s --check-prefixes=CHECK,SM100

shard.grid @grid(shape = 2)

// Compact [R, K/32] scales: a swizzle kernel lays out each operand's scales
// into a buffer only the GEMM kernel reads (through a tensor map on sm_90a).
// CHECK-LABEL: llvm.func @gemm_compact(
// CHECK: %[[AS:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[BS:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[OUT:.*]] = llvm.call @mgpuMemAlloc
// CHECK-NOT: mgpuMemFree
// CHECK: gpu.launch_func <%[[STREAM:.*]] : !llvm.ptr> @mx_gemm_mx_
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[AS]], %[[STREAM]])
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[BS]], %[[STREAM]])
// CHECK-NOT: mgpuMemFree
// CHECK: llvm.call @mxrtCallEnd
// CHECK-NEXT: llvm.return
func.func @gemm_compact(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x16xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<128x16xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<128x16xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// Both operands quantized in the function: the data and scales of each are
// freed after the GEMM kernel.
// CHECK-LABEL: llvm.func @quantize_gemm(
// CHECK: %[[XD:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[XS:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[WD:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[WS:.*]] = llvm.call @mgpuMemAlloc
// CHECK-NOT: mgpuMemFree
// CHECK: gpu.launch_func <%[[STREAM:.*]] : !llvm.ptr> @mx_gemm_mx_
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[XD]], %[[STREAM]])
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[XS]], %[[STREAM]])
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[WD]], %[[STREAM]])
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[WS]], %[[STREAM]])
// CHECK-NOT: mgpuMemFree
// CHECK: llvm.return
func.func @quantize_gemm(%x: tensor<256x512xbf16>, %w: tensor<128x512xbf16>) -> tensor<256x128xbf16> {
  %xd, %xs = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %wd, %ws = mx.quantize %w block [1, 32] : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<128x16xf8E8M0FNU>
  %c = mx.scaled_matmul %xd, %xs, %wd, %ws lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<128x16xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// FP8 blockwise: a generated kernel on sm_90a, where A's scales are freed as
// soon as the inserted kernel has laid them out into GEMM-ready tiles (one
// more temporary); cuBLASLt on sm_100a, after whose call the four quantized
// operands are freed.
// CHECK-LABEL: llvm.func @quantize_blockwise_gemm(
// CHECK: %[[XD:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[XS:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[WD:.*]] = llvm.call @mgpuMemAlloc
// CHECK: %[[WS:.*]] = llvm.call @mgpuMemAlloc
// CHECK-NOT: mgpuMemFree
// SM90: %[[TILES:.*]] = llvm.call @mgpuMemAlloc
// SM90-NEXT: gpu.launch_func <%[[FIRST:.*]] : !llvm.ptr> @quantize_blockwise_gemm_kernel
// SM90-NEXT: llvm.call @mgpuMemFree(%[[XS]], %[[FIRST]])
// SM90-NOT: mgpuMemFree
// SM90: gpu.launch_func <%[[STREAM:.*]] : !llvm.ptr> @mx_gemm_blockwise_
// SM90-NEXT: llvm.call @mgpuMemFree(%[[XD]], %[[STREAM]])
// SM90-NEXT: llvm.call @mgpuMemFree(%[[WD]], %[[STREAM]])
// SM90-NEXT: llvm.call @mgpuMemFree(%[[WS]], %[[STREAM]])
// SM90-NEXT: llvm.call @mgpuMemFree(%[[TILES]], %[[STREAM]])
// SM100: llvm.call @mxrtScaledMatmul(
// SM100-NEXT: %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// SM100-NEXT: llvm.call @mgpuMemFree(%[[XD]], %[[STREAM]])
// SM100-NEXT: llvm.call @mgpuMemFree(%[[XS]], %[[STREAM]])
// SM100-NEXT: llvm.call @mgpuMemFree(%[[WD]], %[[STREAM]])
// SM100-NEXT: llvm.call @mgpuMemFree(%[[WS]], %[[STREAM]])
// CHECK-NOT: mgpuMemFree
// CHECK: llvm.return
func.func @quantize_blockwise_gemm(%x: tensor<256x512xbf16>, %w: tensor<128x512xbf16>) -> tensor<256x128xbf16> {
  %xd, %xs = mx.quantize %x block [1, 128] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x4xf32>
  %wd, %ws = mx.quantize %w block [128, 128] : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<1x4xf32>
  %c = mx.scaled_matmul %xd, %xs, %wd, %ws lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<128x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// Partitioned per-tensor quantize: the quantized shard is written into its
// rows of the all-gather's result (at this process's rank), so it has no
// buffer of its own (256x1024 FP8 bytes) to free after the gather.
// CHECK-LABEL: llvm.func @per_tensor(
// CHECK: llvm.call @mxrtCommRank(
// CHECK-NOT: llvm.getelementptr %{{.*}}[262144] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK: llvm.call @mxrtAllGather(
// CHECK-NOT: mgpuMemFree
// CHECK: llvm.return
func.func @per_tensor(%x: tensor<512x1024xbf16>) -> (tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>) {
  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %split : tensor<512x1024xbf16>
  %d, %s = mx.quantize %xs block [512, 1024] : tensor<512x1024xbf16> -> tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>
  %dw = shard.shard %d to %whole annotate_for_users : tensor<512x1024xf8E4M3FN>
  return %dw, %s : tensor<512x1024xf8E4M3FN>, tensor<1x1xf32>
}

// A column sum's partials ([M / 64, N] f32): the tile kernel writes them,
// the partials kernel reads them, and they are freed after it.
// CHECK-LABEL: llvm.func @column_sum_partials(
// CHECK: %[[P:.*]] = llvm.call @mgpuMemAlloc
// CHECK-NEXT: gpu.launch_func <%[[STREAM:.*]] : !llvm.ptr> @column_sum_partials_kernel::
// CHECK: %[[R:.*]] = llvm.call @mgpuMemAlloc
// CHECK-NOT: mgpuMemFree
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @column_sum_partials_kernel_{{[0-9]+}}::{{.*}} args(%[[P]] : !llvm.ptr
// CHECK-NEXT: llvm.call @mgpuMemFree(%[[P]], %[[STREAM]])
// CHECK-NOT: mgpuMemFree
// CHECK: llvm.call @mxrtCallEnd
func.func @column_sum_partials(%x: tensor<256x128xbf16>) -> tensor<128xf32> {
  %s = mx.column_sum %x : tensor<256x128xbf16> -> tensor<128xf32>
  return %s : tensor<128xf32>
}
