// An amax's magnitudes are their own order keys: convert-mx-to-gpu marks its
// buffer (mx.magnitude_bits), and the max all-reduce of current scaling is a
// U32 (7) max (1) of those bits, with no key kernel before or after it.
// RUN: mx-opt %s --convert-mx-to-gpu=chip=sm_90a --convert-shard-to-mxrt | FileCheck %s

// CHECK-LABEL: func.func @amax
// CHECK: %[[AMAX:.*]] = gpu.alloc () {mx.magnitude_bits} : memref<f32>
// CHECK: gpu.launch
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK-DAG: %[[U32:.*]] = arith.constant 7 : i32
// CHECK-DAG: %[[MAX:.*]] = arith.constant 1 : i32
// CHECK: llvm.call @mxrtAllReduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[U32]], %[[MAX]],
// CHECK-NOT: gpu.launch
// CHECK: return
shard.grid @grid(shape = 2)
func.func @amax(%x: tensor<256x512xbf16>) -> tensor<f32> {
  %a = mx.amax %x : tensor<256x512xbf16> -> tensor<f32>
  %m = shard.all_reduce %a on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  return %m : tensor<f32>
}

// Any other f32 max keeps its keys: the first kernel makes them.
// CHECK-LABEL: func.func @not_amax
// CHECK: gpu.launch
// CHECK: arith.cmpf uno
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: gpu.launch
func.func @not_amax(%x: tensor<f32>) -> tensor<f32> {
  %m = shard.all_reduce %x on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  return %m : tensor<f32>
}
