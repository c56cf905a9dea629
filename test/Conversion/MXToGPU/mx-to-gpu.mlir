// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// A quantize whose scales feed only a swizzle is one kernel that writes the
// tiled scales itself: 16-byte loads, two xor-shuffles for the block amax,
// hardware FP8 conversion, 8-byte stores, and a 5-D scale store.
// CHECK-LABEL: func @quantize_swizzled
// CHECK-SAME: (%[[X:.*]]: tensor<200x512xbf16>)
// CHECK-DAG: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK-DAG: %[[DATA:.*]] = gpu.alloc () : memref<200x512xf8E4M3FN>
// CHECK-DAG: %[[TILES:.*]] = gpu.alloc () : memref<2x4x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}} = %{{.*}}, {{.*}} = %{{.*}}) threads
// CHECK:   vector.load %[[IN]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<200x512xbf16>, vector<8xbf16>
// CHECK:   gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:   gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-COUNT-4: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E4M3FN)
// CHECK:   vector.store %{{.*}}, %[[DATA]][%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<200x512xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK:   memref.store %{{.*}}, %[[TILES]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x4x32x4x4xf8E8M0FNU>
// CHECK: gpu.terminator
// CHECK-NOT: mx.
// CHECK: bufferization.to_tensor %[[TILES]] restrict writable
// CHECK: bufferization.to_tensor %[[DATA]] restrict writable
func.func @quantize_swizzled(%x: tensor<200x512xbf16>) -> (tensor<200x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<200x512xbf16> -> tensor<200x512xf8E4M3FN>, tensor<200x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<200x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return %d, %t : tensor<200x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>
}

// -----

// Linear scales, f32 input, E5M2 elements, OCP rounding.
// CHECK-LABEL: func @quantize_linear
// CHECK: gpu.alloc () : memref<64x3xf32>
// CHECK: vector.load {{.*}} : memref<64x96xf32>, vector<8xf32>
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E5M2)
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x3xf32>
func.func @quantize_linear(%x: tensor<64x96xf32>) -> (tensor<64x96xf8E5M2>, tensor<64x3xf32>) {
  %d, %s = mx.quantize %x block [1, 32] rounding floor : tensor<64x96xf32> -> tensor<64x96xf8E5M2>, tensor<64x3xf32>
  return %d, %s : tensor<64x96xf8E5M2>, tensor<64x3xf32>
}

// -----

func.func @columnwise(%x: tensor<64x96xf32>) -> tensor<2x96xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernel covers rowwise [1, 32] blocks of 2-D tensors}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<64x96xf32> -> tensor<64x96xf8E4M3FN>, tensor<2x96xf8E8M0FNU>
  return %s : tensor<2x96xf8E8M0FNU>
}

// -----

func.func @exact(%x: tensor<64x96xf32>) -> tensor<64x3xf32> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernel covers power-of-two ('ceil', 'floor') scales}}
  %d, %s = mx.quantize %x block [1, 32] rounding exact : tensor<64x96xf32> -> tensor<64x96xf8E4M3FN>, tensor<64x3xf32>
  return %s : tensor<64x3xf32>
}

// -----

func.func @unaligned_k(%x: tensor<64x70xf32>) -> tensor<64x3xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernel needs K to be a multiple of 8 (16-byte rows)}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x70xf32> -> tensor<64x70xf8E4M3FN>, tensor<64x3xf8E8M0FNU>
  return %s : tensor<64x3xf8E8M0FNU>
}
