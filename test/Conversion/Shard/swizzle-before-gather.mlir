// The swizzle of gathered scales moves before the gather where every
// device's scales fill whole 128-row tiles: the gathered tiles are then the
// devices' tiles in order.
// RUN: mx-opt %s --mx-swizzle-before-gather --split-input-file | FileCheck %s

shard.grid @grid(shape = 2)
// The swizzle and the tiles' gather take the place of the scales' gather,
// before the data's: a swizzle that the quantize kernel does not absorb
// still runs before both gathers, which stay one NCCL group.
// CHECK-LABEL: func.func @tiles
// CHECK-SAME: (%[[D:.*]]: tensor<256x320xf8E4M3FN>, %[[S:.*]]: tensor<256x10xf8E8M0FNU>)
// CHECK: %[[T:.*]] = mx.swizzle %[[S]] : tensor<256x10xf8E8M0FNU> -> tensor<2x3x32x4x4xf8E8M0FNU>
// CHECK: %[[G:.*]] = shard.all_gather %[[T]] on @grid grid_axes = [0] gather_axis = 0 : tensor<2x3x32x4x4xf8E8M0FNU> -> tensor<4x3x32x4x4xf8E8M0FNU>
// CHECK: %[[GD:.*]] = shard.all_gather %[[D]]
// CHECK-NOT: mx.swizzle
// CHECK: return %[[GD]], %[[G]]
func.func @tiles(%d: tensor<256x320xf8E4M3FN>, %s: tensor<256x10xf8E8M0FNU>) -> (tensor<512x320xf8E4M3FN>, tensor<4x3x32x4x4xf8E8M0FNU>) {
  %g = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<256x10xf8E8M0FNU> -> tensor<512x10xf8E8M0FNU>
  %gd = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<256x320xf8E4M3FN> -> tensor<512x320xf8E4M3FN>
  %t = mx.swizzle %g : tensor<512x10xf8E8M0FNU> -> tensor<4x3x32x4x4xf8E8M0FNU>
  return %gd, %t : tensor<512x320xf8E4M3FN>, tensor<4x3x32x4x4xf8E8M0FNU>
}

// -----

// A shard of 192 rows ends in a partial tile, which the whole tensor's
// tiles fill with the next device's rows: left alone.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @partial_tile
// CHECK: shard.all_gather %{{.*}} : tensor<192x8xf8E8M0FNU> -> tensor<384x8xf8E8M0FNU>
// CHECK: mx.swizzle
func.func @partial_tile(%s: tensor<192x8xf8E8M0FNU>) -> tensor<3x2x32x4x4xf8E8M0FNU> {
  %g = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<192x8xf8E8M0FNU> -> tensor<384x8xf8E8M0FNU>
  %t = mx.swizzle %g : tensor<384x8xf8E8M0FNU> -> tensor<3x2x32x4x4xf8E8M0FNU>
  return %t : tensor<3x2x32x4x4xf8E8M0FNU>
}

// -----

// The blockwise layout has the rows innermost, and gathered scales that are
// also returned cross the wire compact: both left alone.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @left_alone
// CHECK: %[[B:.*]] = shard.all_gather %{{.*}} : tensor<256x4xf32> -> tensor<512x4xf32>
// CHECK: mx.swizzle %[[B]] layout blockwise
// CHECK: %[[G:.*]] = shard.all_gather %{{.*}} : tensor<256x8xf8E8M0FNU> -> tensor<512x8xf8E8M0FNU>
// CHECK: mx.swizzle %[[G]] :
func.func @left_alone(%b: tensor<256x4xf32>, %s: tensor<256x8xf8E8M0FNU>)
    -> (tensor<4x128x4xf32>, tensor<4x2x32x4x4xf8E8M0FNU>, tensor<512x8xf8E8M0FNU>) {
  %gb = shard.all_gather %b on @grid grid_axes = [0] gather_axis = 0 : tensor<256x4xf32> -> tensor<512x4xf32>
  %tb = mx.swizzle %gb layout blockwise : tensor<512x4xf32> -> tensor<4x128x4xf32>
  %g = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<256x8xf8E8M0FNU> -> tensor<512x8xf8E8M0FNU>
  %t = mx.swizzle %g : tensor<512x8xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return %tb, %t, %g : tensor<4x128x4xf32>, tensor<4x2x32x4x4xf8E8M0FNU>, tensor<512x8xf8E8M0FNU>
}

// -----

// Columnwise scales (unscaled_dim = 1) gathered along their rows: the tiles
// run along the other dimension, left alone.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @columnwise
// CHECK: shard.all_gather
// CHECK: mx.swizzle %{{.*}} unscaled_dim 1
func.func @columnwise(%s: tensor<256x128xf8E8M0FNU>) -> tensor<1x128x32x4x4xf8E8M0FNU> {
  %g = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<256x128xf8E8M0FNU> -> tensor<512x128xf8E8M0FNU>
  %t = mx.swizzle %g unscaled_dim 1 : tensor<512x128xf8E8M0FNU> -> tensor<1x128x32x4x4xf8E8M0FNU>
  return %t : tensor<1x128x32x4x4xf8E8M0FNU>
}
