// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// A quantize whose scales feed only a swizzle is one kernel that writes the
// tiled scales itself: 16-byte loads, one xor-shuffle for the block amax,
// hardware FP8 conversion, 16-byte stores, and a 5-D scale store.
// CHECK-LABEL: func @quantize_swizzled
// CHECK-SAME: (%[[X:.*]]: tensor<200x512xbf16>)
// CHECK-DAG: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK-DAG: %[[DATA:.*]] = gpu.alloc () : memref<200x512xf8E4M3FN>
// CHECK-DAG: %[[TILES:.*]] = gpu.alloc () : memref<2x4x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}} = %{{.*}}, {{.*}} = %{{.*}}) threads
// CHECK:   vector.load %[[IN]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<200x512xbf16>, vector<16xbf16>
// CHECK:   gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-8: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E4M3FN)
// CHECK:   vector.store %{{.*}}, %[[DATA]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<200x512xf8E4M3FN>, vector<16xf8E4M3FN>
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
// CHECK: vector.load {{.*}} : memref<64x96xf32>, vector<16xf32>
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E5M2)
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x3xf32>
func.func @quantize_linear(%x: tensor<64x96xf32>) -> (tensor<64x96xf8E5M2>, tensor<64x3xf32>) {
  %d, %s = mx.quantize %x block [1, 32] rounding floor : tensor<64x96xf32> -> tensor<64x96xf8E5M2>, tensor<64x3xf32>
  return %d, %s : tensor<64x96xf8E5M2>, tensor<64x3xf32>
}

// -----

// Rowwise and columnwise quantization of one input share one kernel that
// reads the input once; both swizzles are written by it (columnwise scales
// with K as the unscaled dimension).
// CHECK-LABEL: func @fused
// CHECK-COUNT-4: gpu.alloc
// CHECK: gpu.launch
// CHECK-COUNT-16: vector.load %{{.*}} {alignment = 8 : i64} : memref<256x512xbf16>, vector<4xbf16>
// CHECK: gpu.shuffle  xor
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK-NOT: mx.
// CHECK: return
func.func @fused(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  %cd, %cs = mx.quantize %x block [32, 1] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<8x512xf8E8M0FNU>
  %ct = mx.swizzle %cs unscaled_dim 1 : tensor<8x512xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return %d, %t, %cd, %ct : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>
}

// -----

// Columnwise alone: two half-warps share a 32-row block (one shuffle per
// column combines their amax); linear scales are stored 4 at a time.
// CHECK-LABEL: func @columnwise
// CHECK: gpu.launch
// CHECK-COUNT-4: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<3x96xf8E8M0FNU>, vector<4xf8E8M0FNU>
func.func @columnwise(%x: tensor<70x96xf32>) -> (tensor<70x96xf8E4M3FN>, tensor<3x96xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [32, 1] : tensor<70x96xf32> -> tensor<70x96xf8E4M3FN>, tensor<3x96xf8E8M0FNU>
  return %d, %s : tensor<70x96xf8E4M3FN>, tensor<3x96xf8E8M0FNU>
}

// -----

// Ops without a fused producer get one-thread-per-element kernels.
// CHECK-LABEL: func @elementwise
// CHECK-COUNT-3: gpu.launch
// CHECK-NOT: mx.
func.func @elementwise(%d: tensor<64x96xf8E4M3FN>, %s: tensor<64x3xf8E8M0FNU>, %t: tensor<1x1x32x4x4xf32>) -> (tensor<64x96xbf16>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<4x2xf32>) {
  %x = mx.dequantize %d, %s block [1, 32] : tensor<64x96xf8E4M3FN>, tensor<64x3xf8E8M0FNU> -> tensor<64x96xbf16>
  %w = mx.swizzle %s : tensor<64x3xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  %u = mx.unswizzle %t unscaled_dim 1 : tensor<1x1x32x4x4xf32> -> tensor<4x2xf32>
  return %x, %w, %u : tensor<64x96xbf16>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<4x2xf32>
}

// -----

func.func @blockwise(%x: tensor<64x256xf32>) -> tensor<64x2xf32> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernels cover [1, 32] and [32, 1] blocks of 2-D tensors}}
  %d, %s = mx.quantize %x block [1, 128] : tensor<64x256xf32> -> tensor<64x256xf8E4M3FN>, tensor<64x2xf32>
  return %s : tensor<64x2xf32>
}

// -----

func.func @exact(%x: tensor<64x96xf32>) -> tensor<64x3xf32> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernels cover power-of-two ('ceil', 'floor') scales}}
  %d, %s = mx.quantize %x block [1, 32] rounding exact : tensor<64x96xf32> -> tensor<64x96xf8E4M3FN>, tensor<64x3xf32>
  return %s : tensor<64x3xf32>
}

// -----

func.func @unaligned_k(%x: tensor<64x72xf32>) -> tensor<64x3xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the rowwise GPU kernel needs K to be a multiple of 16 (4 when fused with a columnwise quantize of the same input)}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x72xf32> -> tensor<64x72xf8E4M3FN>, tensor<64x3xf8E8M0FNU>
  return %s : tensor<64x3xf8E8M0FNU>
}

// -----

func.func @odd_k(%x: tensor<64x70xf32>) -> tensor<2x70xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernels need K to be a multiple of 4}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<64x70xf32> -> tensor<64x70xf8E4M3FN>, tensor<2x70xf8E8M0FNU>
  return %s : tensor<2x70xf8E8M0FNU>
}

// -----

// One thread per tile byte, batch index first: each slice is tiled alone.
// CHECK-LABEL: func @swizzle_batched
// CHECK: gpu.alloc () : memref<2x2x1x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c8, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK: memref.load %{{.*}}[%[[B:.*]], %{{.*}}, %{{.*}}] : memref<2x200x3xf8E8M0FNU>
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[B]], %{{.*}}, %c0, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x2x1x32x4x4xf8E8M0FNU>
func.func @swizzle_batched(%s: tensor<2x200x3xf8E8M0FNU>) -> tensor<2x2x1x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x200x3xf8E8M0FNU> -> tensor<2x2x1x32x4x4xf8E8M0FNU>
  return %t : tensor<2x2x1x32x4x4xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func @unswizzle_blockwise
// CHECK: gpu.alloc () : memref<2x250xf32>
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x63x4xf32>
// CHECK: memref.store %[[V]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x250xf32>
func.func @unswizzle_blockwise(%t: tensor<2x63x4xf32>) -> tensor<2x250xf32> {
  %s = mx.unswizzle %t unscaled_dim 1 layout blockwise : tensor<2x63x4xf32> -> tensor<2x250xf32>
  return %s : tensor<2x250xf32>
}

// -----

func.func @amax(%x: tensor<64x128xbf16>) -> tensor<f32> {
  // expected-error @+1 {{'mx.amax' op has no GPU lowering: no GPU kernel exists for this op; use the CPU pipeline}}
  %a = mx.amax %x : tensor<64x128xbf16> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

func.func @batched_quantize(%x: tensor<2x64x64xf32>) -> tensor<2x64x2xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernels cover [1, 32] and [32, 1] blocks of 2-D tensors}}
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x64x64xf32> -> tensor<2x64x64xf8E4M3FN>, tensor<2x64x2xf8E8M0FNU>
  return %s : tensor<2x64x2xf8E8M0FNU>
}
