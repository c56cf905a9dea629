// mx-pipeline-gathers on partitioned programs (the IR that mx-partition
// gives bench/collectives.py's programs, smaller): each gathered quantize
// becomes chunk quantizes of consecutive row slices, each followed by the
// placed gathers of its results (data and scales next to each other: one
// NCCL group), and one join before the first reader.
// RUN: mx-opt %s --mx-pipeline-gathers=chunks=2 | FileCheck %s
// RUN: mx-opt %s --mx-pipeline-gathers=chunks=1 | FileCheck %s --check-prefix=ONE
// min-bytes leaves gathers of fewer bytes (every device's part) alone: MXFP8
// gathers 67584 bytes (data and scales), per-tensor 65536, NVFP4 36864.
// RUN: mx-opt %s --mx-pipeline-gathers="chunks=1 min-bytes=65536" | FileCheck %s --check-prefix=AT
// RUN: mx-opt %s --mx-pipeline-gathers="chunks=1 min-bytes=65537" | FileCheck %s --check-prefix=ABOVE
// AT-LABEL: func.func @mxfp8(
// AT: mx.gather_join
// AT-LABEL: func.func @per_tensor(
// AT: mx.gather_join
// AT-LABEL: func.func @nvfp4(
// AT-NOT: mx.gather_chunk
// AT: shard.all_gather
// ABOVE-LABEL: func.func @mxfp8(
// ABOVE: mx.gather_join
// ABOVE-LABEL: func.func @per_tensor(
// ABOVE-NOT: mx.gather_chunk
// ABOVE: shard.all_gather
// ABOVE-LABEL: func.func @nvfp4(
// ABOVE-NOT: mx.gather_chunk
// ABOVE: shard.all_gather

shard.grid @grid(shape = 2)

// MXFP8: data and E8M0 scales gathered, the scales swizzled after the join.
// CHECK-LABEL: func.func @mxfp8(
// CHECK-SAME: %[[X:.*]]: tensor<128x256xbf16>)
// CHECK-DAG: %[[ES:.*]] = tensor.empty() : tensor<256x8xf8E8M0FNU>
// CHECK-DAG: %[[ED:.*]] = tensor.empty() : tensor<256x256xf8E4M3FN>
// CHECK: %[[X0:.*]] = tensor.extract_slice %[[X]][0, 0] [64, 256] [1, 1] : tensor<128x256xbf16> to tensor<64x256xbf16>
// CHECK-NEXT: %[[D0:.*]], %[[S0:.*]] = mx.quantize %[[X0]] block [1, 32] : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU>
// CHECK-NEXT: %[[GD0:.*]] = mx.gather_chunk %[[D0]] into %[[ED]] at row 0 of 2 devices : tensor<64x256xf8E4M3FN> into tensor<256x256xf8E4M3FN>
// CHECK-NEXT: %[[GS0:.*]] = mx.gather_chunk %[[S0]] into %[[ES]] at row 0 of 2 devices : tensor<64x8xf8E8M0FNU> into tensor<256x8xf8E8M0FNU>
// CHECK-NEXT: %[[X1:.*]] = tensor.extract_slice %[[X]][64, 0] [64, 256] [1, 1]
// CHECK-NEXT: %[[D1:.*]], %[[S1:.*]] = mx.quantize %[[X1]] block [1, 32] : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU>
// CHECK-NEXT: %[[GD1:.*]] = mx.gather_chunk %[[D1]] into %[[GD0]] at row 64 of 2 devices
// CHECK-NEXT: %[[GS1:.*]] = mx.gather_chunk %[[S1]] into %[[GS0]] at row 64 of 2 devices
// CHECK-NEXT: %[[J:.*]]:2 = mx.gather_join %[[GD1]], %[[GS1]] : tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
// CHECK-NEXT: %[[T:.*]] = mx.swizzle %[[J]]#1
// CHECK-NEXT: return %[[J]]#0, %[[T]]
// CHECK-NOT: shard.all_gather
// One chunk: the quantize stays whole (no slice), its results are exchanged
// by the placed gather.
// ONE-LABEL: func.func @mxfp8(
// ONE-SAME: %[[X:.*]]: tensor<128x256xbf16>)
// ONE-NOT: tensor.extract_slice
// ONE: %[[D:.*]], %[[S:.*]] = mx.quantize %[[X]] block [1, 32] : tensor<128x256xbf16>
// ONE-NEXT: %[[GD:.*]] = mx.gather_chunk %[[D]] into %{{.*}} at row 0 of 2 devices : tensor<128x256xf8E4M3FN> into tensor<256x256xf8E4M3FN>
// ONE-NEXT: %[[GS:.*]] = mx.gather_chunk %[[S]] into %{{.*}} at row 0 of 2 devices : tensor<128x8xf8E8M0FNU> into tensor<256x8xf8E8M0FNU>
// ONE-NEXT: %[[J:.*]]:2 = mx.gather_join %[[GD]], %[[GS]]
// ONE-NOT: shard.all_gather
// ONE: mx.swizzle %[[J]]#1
func.func @mxfp8(%arg0: tensor<128x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<2x2x32x4x4xf8E8M0FNU>) {
  %data, %scales = mx.quantize %arg0 block [1, 32] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %gs = shard.all_gather %scales on @grid grid_axes = [0] gather_axis = 0 : tensor<128x8xf8E8M0FNU> -> tensor<256x8xf8E8M0FNU>
  %gd = shard.all_gather %data on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<256x256xf8E4M3FN>
  %t = mx.swizzle %gs : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
  return %gd, %t : tensor<256x256xf8E4M3FN>, tensor<2x2x32x4x4xf8E8M0FNU>
}

// Per-tensor current scaling: the amax all-reduce stays before; every chunk
// casts with the all-reduced amax, the one scale comes from the first chunk.
// CHECK-LABEL: func.func @per_tensor(
// CHECK: %[[R:.*]] = shard.all_reduce
// CHECK: %[[D0:.*]], %[[S0:.*]] = mx.quantize %{{.*}} block [256, 256] amax(%[[R]] : tensor<f32>) : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<1x1xf32>
// CHECK-NEXT: mx.gather_chunk %[[D0]] into %{{.*}} at row 0 of 2 devices
// CHECK: mx.quantize %{{.*}} amax(%[[R]] : tensor<f32>) : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<1x1xf32>
// CHECK-NEXT: %[[G1:.*]] = mx.gather_chunk %{{.*}} at row 64 of 2 devices
// CHECK-NEXT: %[[J:.*]] = mx.gather_join %[[G1]] : tensor<256x256xf8E4M3FN>
// CHECK-NEXT: return %[[J]], %[[S0]]
func.func @per_tensor(%arg0: tensor<128x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<1x1xf32>) {
  %0 = mx.amax %arg0 : tensor<128x256xbf16> -> tensor<f32>
  %r = shard.all_reduce %0 on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  %data, %scales = mx.quantize %arg0 block [256, 256] amax(%r : tensor<f32>) : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<1x1xf32>
  %g = shard.all_gather %data on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<256x256xf8E4M3FN>
  return %g, %scales : tensor<256x256xf8E4M3FN>, tensor<1x1xf32>
}

// NVFP4 with its tensor scale computed from the all-reduced finite amax:
// packed FP4 data and E4M3 scales gathered, the tensor scale of the first
// chunk (unused here).
// CHECK-LABEL: func.func @nvfp4(
// CHECK: mx.quantize %{{.*}} block [1, 16] amax(%{{.*}} : tensor<f32>) : tensor<64x256xbf16> -> tensor<64x256xf4E2M1FN>, tensor<64x16xf8E4M3FN>, tensor<f32>
// CHECK-NEXT: mx.gather_chunk %{{.*}} at row 0 of 2 devices : tensor<64x256xf4E2M1FN> into tensor<256x256xf4E2M1FN>
// CHECK-NEXT: mx.gather_chunk %{{.*}} at row 0 of 2 devices : tensor<64x16xf8E4M3FN> into tensor<256x16xf8E4M3FN>
// CHECK: mx.gather_join
// CHECK-NEXT: mx.swizzle
func.func @nvfp4(%arg0: tensor<128x256xbf16>) -> (tensor<256x256xf4E2M1FN>, tensor<2x4x32x4x4xf8E4M3FN>) {
  %0 = mx.amax %arg0 finite : tensor<128x256xbf16> -> tensor<f32>
  %r = shard.all_reduce %0 on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  %data, %scales, %t = mx.quantize %arg0 block [1, 16] amax(%r : tensor<f32>) : tensor<128x256xbf16> -> tensor<128x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<f32>
  %gs = shard.all_gather %scales on @grid grid_axes = [0] gather_axis = 0 : tensor<128x16xf8E4M3FN> -> tensor<256x16xf8E4M3FN>
  %gd = shard.all_gather %data on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf4E2M1FN> -> tensor<256x256xf4E2M1FN>
  %sw = mx.swizzle %gs : tensor<256x16xf8E4M3FN> -> tensor<2x4x32x4x4xf8E4M3FN>
  return %gd, %sw : tensor<256x256xf4E2M1FN>, tensor<2x4x32x4x4xf8E4M3FN>
}

// Columnwise MX blocks of 32 rows: chunks of 64 rows hold two block rows
// of scales each.
// CHECK-LABEL: func.func @columnwise(
// CHECK: mx.quantize %{{.*}} block [32, 1] : tensor<64x256xbf16> -> tensor<64x256xf8E4M3FN>, tensor<2x256xf8E8M0FNU>
// CHECK: mx.gather_chunk %{{.*}} at row 2 of 2 devices : tensor<2x256xf8E8M0FNU> into tensor<8x256xf8E8M0FNU>
func.func @columnwise(%arg0: tensor<128x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<8x256xf8E8M0FNU>) {
  %data, %scales = mx.quantize %arg0 block [32, 1] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<4x256xf8E8M0FNU>
  %gd = shard.all_gather %data on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<256x256xf8E4M3FN>
  %gs = shard.all_gather %scales on @grid grid_axes = [0] gather_axis = 0 : tensor<4x256xf8E8M0FNU> -> tensor<8x256xf8E8M0FNU>
  return %gd, %gs : tensor<256x256xf8E4M3FN>, tensor<8x256xf8E8M0FNU>
}

// Left alone: scales used on this device too; a gather over one device.
// CHECK-LABEL: func.func @not_pipelined(
// CHECK-NOT: mx.gather_chunk
// CHECK: mx.quantize %{{.*}} : tensor<128x256xbf16>
// CHECK: mx.quantize %{{.*}} : tensor<128x256xbf16>
// CHECK-NOT: mx.gather_chunk
// CHECK: return
shard.grid @one(shape = 1)
func.func @not_pipelined(%arg0: tensor<128x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<128x256xf8E4M3FN>) {
  %data, %scales = mx.quantize %arg0 block [1, 32] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %gd = shard.all_gather %data on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<256x256xf8E4M3FN>
  %d1, %s1 = mx.quantize %arg0 block [1, 32] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %g1 = shard.all_gather %d1 on @one grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<128x256xf8E4M3FN>
  return %gd, %scales, %g1 : tensor<256x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<128x256xf8E4M3FN>
}

// Scales swizzled before their gather (mx-swizzle-before-gather): each
// chunk's scales are swizzled into their own tile rows, whose chunk is
// placed at its tile rows of the gathered tiles; the whole swizzle is gone.
// The swizzle comes before the chunk's gathers, which stay next to each
// other (one NCCL group: a kernel between them would split it).
// CHECK-LABEL: func.func @swizzled_tiles(
// CHECK-DAG: %[[ET:.*]] = tensor.empty() : tensor<4x2x32x4x4xf8E8M0FNU>
// CHECK: %[[D0:.*]], %[[S0:.*]] = mx.quantize %{{.*}} block [1, 32] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
// CHECK-NEXT: %[[T0:.*]] = mx.swizzle %[[S0]] : tensor<128x8xf8E8M0FNU> -> tensor<1x2x32x4x4xf8E8M0FNU>
// CHECK-NEXT: mx.gather_chunk %[[D0]]
// CHECK-NEXT: %[[G0:.*]] = mx.gather_chunk %[[T0]] into %[[ET]] at row 0 of 2 devices : tensor<1x2x32x4x4xf8E8M0FNU> into tensor<4x2x32x4x4xf8E8M0FNU>
// CHECK: %[[D1:.*]], %[[S1:.*]] = mx.quantize
// CHECK: %[[T1:.*]] = mx.swizzle %[[S1]] : tensor<128x8xf8E8M0FNU> -> tensor<1x2x32x4x4xf8E8M0FNU>
// CHECK: mx.gather_chunk %[[T1]] into %[[G0]] at row 1 of 2 devices
// CHECK: mx.gather_join
// CHECK-NOT: mx.swizzle
// CHECK: return
// ONE-LABEL: func.func @swizzled_tiles(
// ONE: %{{.*}}, %[[S:.*]] = mx.quantize %{{.*}} : tensor<256x256xbf16>
// ONE: %[[T:.*]] = mx.swizzle %[[S]] : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
// ONE: mx.gather_chunk %[[T]] into %{{.*}} at row 0 of 2 devices
// ONE-NOT: mx.swizzle
// ONE: return
func.func @swizzled_tiles(%arg0: tensor<256x256xbf16>) -> (tensor<512x256xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>) {
  %data, %scales = mx.quantize %arg0 block [1, 32] : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %t = mx.swizzle %scales : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
  %gt = shard.all_gather %t on @grid grid_axes = [0] gather_axis = 0 : tensor<2x2x32x4x4xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  %gd = shard.all_gather %data on @grid grid_axes = [0] gather_axis = 0 : tensor<256x256xf8E4M3FN> -> tensor<512x256xf8E4M3FN>
  return %gd, %gt : tensor<512x256xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>
}
