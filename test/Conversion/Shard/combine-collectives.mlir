// A sum that every device computes whole and then slices is a reduce-scatter.
// RUN: mx-opt %s --mx-combine-collectives | FileCheck %s

shard.grid @grid(shape = 2x2)

// CHECK-LABEL: func.func @rounded
// CHECK: %[[R:.*]] = shard.reduce_scatter %{{.*}} on @grid grid_axes = [1] scatter_axis = 1 : tensor<64x32xf32> -> tensor<64x16xf32>
// CHECK: %[[T:.*]] = arith.truncf %[[R]] : tensor<64x16xf32> to tensor<64x16xbf16>
// CHECK: return %[[T]]
func.func @rounded(%p: tensor<64x32xf32>) -> tensor<64x16xbf16> {
  %s = shard.all_reduce %p on @grid grid_axes = [1] : tensor<64x32xf32> -> tensor<64x32xf32>
  %t = arith.truncf %s : tensor<64x32xf32> to tensor<64x32xbf16>
  %m = shard.all_slice %t on @grid grid_axes = [1] slice_axis = 1 : tensor<64x32xbf16> -> tensor<64x16xbf16>
  return %m : tensor<64x16xbf16>
}

// CHECK-LABEL: func.func @max
// CHECK: shard.reduce_scatter %{{.*}} on @grid grid_axes = [0] reduction = max scatter_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
func.func @max(%p: tensor<64x32xf32>) -> tensor<32x32xf32> {
  %s = shard.all_reduce %p on @grid grid_axes = [0] reduction = max : tensor<64x32xf32> -> tensor<64x32xf32>
  %m = shard.all_slice %s on @grid grid_axes = [0] slice_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
  return %m : tensor<32x32xf32>
}

// Kept: the slice is over other axes than the sum, the sum has another
// user, the all-reduce converts its element type.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: shard.all_slice
// CHECK-NOT: shard.reduce_scatter
func.func @kept(%p: tensor<64x32xf32>, %q: tensor<64x32xbf16>) -> (tensor<32x32xf32>, tensor<32x32xf32>, tensor<64x32xf32>, tensor<32x32xf32>) {
  %s = shard.all_reduce %p on @grid grid_axes = [0] : tensor<64x32xf32> -> tensor<64x32xf32>
  %a = shard.all_slice %s on @grid grid_axes = [1] slice_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
  %u = shard.all_reduce %p on @grid grid_axes = [1] : tensor<64x32xf32> -> tensor<64x32xf32>
  %b = shard.all_slice %u on @grid grid_axes = [1] slice_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
  %w = shard.all_reduce %q on @grid grid_axes = [0] : tensor<64x32xbf16> -> tensor<64x32xf32>
  %c = shard.all_slice %w on @grid grid_axes = [0] slice_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
  return %a, %b, %u, %c : tensor<32x32xf32>, tensor<32x32xf32>, tensor<64x32xf32>, tensor<32x32xf32>
}
