// The CPU pipeline runs a partitioned program on a grid of one device: its
// collectives are local, and anything that needs a second device is
// reported.
// RUN: mx-opt %s --mx-shard-single-device --split-input-file -verify-diagnostics | FileCheck %s

// CHECK-NOT: shard.grid
shard.grid @one(shape = 1)
// CHECK-LABEL: func.func @local
// CHECK-SAME: (%[[X:.*]]: tensor<64x32xf32>, %[[A:.*]]: tensor<f32>)
// CHECK: %[[W:.*]] = arith.extf %[[A]] : tensor<f32> to tensor<f64>
// CHECK: %[[I:.*]] = arith.constant 0 : index
// CHECK: return %[[X]], %[[X]], %[[X]], %[[W]], %[[I]]
func.func @local(%x: tensor<64x32xf32>, %a: tensor<f32>) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<f64>, index) {
  %g = shard.all_gather %x on @one grid_axes = [0] gather_axis = 0 : tensor<64x32xf32> -> tensor<64x32xf32>
  %s = shard.reduce_scatter %x on @one grid_axes = [0] scatter_axis = 1 : tensor<64x32xf32> -> tensor<64x32xf32>
  %l = shard.all_slice %x on @one grid_axes = [0] slice_axis = 0 : tensor<64x32xf32> -> tensor<64x32xf32>
  %r = shard.all_reduce %a on @one grid_axes = [0] reduction = max : tensor<f32> -> tensor<f64>
  %i = shard.process_linear_index on @one : index
  return %g, %s, %l, %r, %i : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<f64>, index
}

// -----

shard.grid @two(shape = 2)
func.func @two_devices(%x: tensor<64x32xf32>) -> tensor<128x32xf32> {
  // expected-error @+1 {{'shard.all_gather' op runs over 2 devices: mx-lower-to-cpu runs one process on one device (partition for a grid of one device, or compile with mx-lower-to-nvvm and run one process per GPU)}}
  %g = shard.all_gather %x on @two grid_axes = [0] gather_axis = 0 : tensor<64x32xf32> -> tensor<128x32xf32>
  return %g : tensor<128x32xf32>
}

// -----

shard.grid @two(shape = 2)
func.func @process_index() -> index {
  // expected-error @+1 {{'shard.process_linear_index' op needs the process index of a grid of more than one device; mx-lower-to-cpu runs one}}
  %i = shard.process_linear_index on @two : index
  return %i : index
}

// -----

shard.grid @one(shape = 1)
func.func @not_partitioned(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'shard.sharding' op is left in the program: mx-lower-to-cpu takes partitioned programs (mx-partition), whose only shard ops are collectives}}
  %s = shard.sharding @one split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %s : tensor<64x32xf32>
  return %x1 : tensor<64x32xf32>
}

// -----

shard.grid @one(shape = 1)
func.func @integer_conversion(%x: tensor<4xi32>) -> tensor<4xi64> {
  // expected-error @+1 {{'shard.all_reduce' op converts 'i32' to 'i64', which only floats do here}}
  %r = shard.all_reduce %x on @one grid_axes = [0] : tensor<4xi32> -> tensor<4xi64>
  return %r : tensor<4xi64>
}

// -----

// A pipelined gather (mx-pipeline-gathers) is for the GPU pipeline.
func.func @pipelined(%c: tensor<32x64xf8E4M3FN>) -> tensor<128x64xf8E4M3FN> {
  %e = tensor.empty() : tensor<128x64xf8E4M3FN>
  // expected-error @+1 {{'mx.gather_chunk' op gathers over 2 devices: mx-lower-to-cpu runs one process on one device (mx-pipeline-gathers is for mx-lower-to-nvvm)}}
  %g = mx.gather_chunk %c into %e at row 0 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %j = mx.gather_join %g : tensor<128x64xf8E4M3FN>
  return %j : tensor<128x64xf8E4M3FN>
}
