// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: mx-opt %s --convert-mx-to-gpu="chip=sm_100a" --split-input-file --verify-diagnostics | FileCheck %s --check-prefixes=CHECK,SM100

// MXFP4: one thread per 32-element block writes its scale, then its 16 packed
// bytes with one 16-byte store into an i8 buffer, which the result views as
// f4E2M1FN. E2M1 is converted in software on sm_90a, in bf16x2 arithmetic
// (the bf16 elements times the factor, then three rounded pieces and their
// min), and by the hardware on sm_100a, where a NaN's nibble is cleared.
// CHECK-LABEL: func @mxfp4
// CHECK-DAG: %[[IN:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<64x96xbf16>
// CHECK-DAG: %[[BYTES:.*]] = gpu.alloc () : memref<3072xi8>
// CHECK-DAG: %[[SCALES:.*]] = gpu.alloc () : memref<64x3xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK:   vector.load %[[IN]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x96xbf16>, vector<32xbf16>
// CHECK-NOT: gpu.shuffle
// SM90-NOT: nvvm.convert
// SM90:   arith.mulf %{{.*}}, %{{.*}} : vector<32xbf16>
// SM90-COUNT-3: arith.minnumf %{{.*}}, %{{.*}} : vector<32xbf16>
// SM90-NOT: nvvm.convert
// SM100-COUNT-16: nvvm.convert.f32x2.to.f4x2 {{.*}} : i8(f4E2M1FN)
// SM100-NOT: nvvm.convert
// CHECK:   memref.store %{{.*}}, %[[SCALES]][%{{.*}}, %{{.*}}] : memref<64x3xf8E8M0FNU>
// CHECK:   vector.store %{{.*}}, %[[BYTES]][%{{.*}}] {alignment = 16 : i64} : memref<3072xi8>, vector<16xi8>
// CHECK: gpu.terminator
// CHECK: %[[DATA:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<3072xi8> to memref<64x96xf4E2M1FN>
// CHECK-NOT: mx.
// CHECK: bufferization.to_tensor %[[DATA]]
func.func @mxfp4(%x: tensor<64x96xbf16>) -> (tensor<64x96xf4E2M1FN>, tensor<64x3xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x96xbf16> -> tensor<64x96xf4E2M1FN>, tensor<64x3xf8E8M0FNU>
  return %d, %s : tensor<64x96xf4E2M1FN>, tensor<64x3xf8E8M0FNU>
}

// -----

// NVFP4 with a given tensor scale: a thread quantizes two 16-element blocks
// of a row and stores their 16 packed bytes at once. On sm_90a a block's
// products are rounded to bf16 to odd (an inline min.u16x2 a pair) for the
// bf16x2 conversion, under a tensor scale of [2^-120, max]; any other takes
// the f32 one. The swizzle of FP4 scales is a kernel of its own.
// CHECK-LABEL: func @nvfp4_given
// CHECK-DAG: %[[T:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<f32>
// CHECK: gpu.launch
// CHECK:   memref.load %[[T]][] : memref<f32>
// SM90:    scf.if %{{.*}} -> (vector<8xi8>)
// SM90-COUNT-8: nvvm.inline_ptx "min.u16x2 $0, $1, $2;"
// CHECK:   memref.store %{{.*}} : memref<128x4xf8E4M3FN>
// CHECK:   memref.store %{{.*}} : memref<128x4xf8E4M3FN>
// CHECK:   vector.store %{{.*}} {alignment = 16 : i64} : memref<4096xi8>, vector<16xi8>
// CHECK: gpu.launch
// CHECK:   vector.store %{{.*}} : memref<1x1x32x4x4xf8E4M3FN>, vector<16xf8E4M3FN>
func.func @nvfp4_given(%x: tensor<128x64xf32>, %t: tensor<f32>) -> (tensor<128x64xf4E2M1FN>, tensor<1x1x32x4x4xf8E4M3FN>) {
  %d, %s = mx.quantize %x block [1, 16] tensor_scale(%t : tensor<f32>) : tensor<128x64xf32> -> tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>
  %w = mx.swizzle %s : tensor<128x4xf8E4M3FN> -> tensor<1x1x32x4x4xf8E4M3FN>
  return %d, %w : tensor<128x64xf4E2M1FN>, tensor<1x1x32x4x4xf8E4M3FN>
}

// -----

// NVFP4 with a computed tensor scale: a one-thread kernel zeroes the amax
// word, a second folds each warp's finite amax into it with an atomic max of
// the bits, and the block kernel computes t from it and returns it.
// CHECK-LABEL: func @nvfp4_computed
// CHECK-DAG: %[[AMAX:.*]] = gpu.alloc () : memref<1xi32>
// CHECK: gpu.launch
// CHECK:   memref.store %{{.*}}, %[[AMAX]]
// CHECK: gpu.launch
// CHECK:   gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK:   memref.atomic_rmw maxu %{{.*}}, %[[AMAX]]
// CHECK: %[[T:.*]] = gpu.alloc () : memref<f32>
// CHECK: gpu.launch
// CHECK:   memref.load %[[AMAX]]
// CHECK:   memref.store %{{.*}}, %[[T]][] : memref<f32>
// CHECK:   vector.store %{{.*}} : memref<1600xi8>, vector<16xi8>
// CHECK: bufferization.to_tensor %[[T]]
func.func @nvfp4_computed(%x: tensor<50x64xf16>) -> (tensor<50x64xf4E2M1FN>, tensor<50x4xf8E4M3FN>, tensor<f32>) {
  %d, %s, %t = mx.quantize %x block [1, 16] : tensor<50x64xf16> -> tensor<50x64xf4E2M1FN>, tensor<50x4xf8E4M3FN>, tensor<f32>
  return %d, %s, %t : tensor<50x64xf4E2M1FN>, tensor<50x4xf8E4M3FN>, tensor<f32>
}

// -----

// FP4 dequantize: one thread per packed byte, read from global memory
// through the operand's aligned pointer; each nibble has its own block's
// scale.
// CHECK-LABEL: func @dequantize_nvfp4
// CHECK: memref.extract_aligned_pointer_as_index %{{.*}} : memref<32x64xf4E2M1FN> -> index
// CHECK: gpu.launch
// CHECK:   llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr<1> -> i8
// CHECK-COUNT-2: memref.store %{{.*}} : memref<32x64xbf16>
func.func @dequantize_nvfp4(%d: tensor<32x64xf4E2M1FN>, %s: tensor<32x4xf8E4M3FN>, %t: tensor<f32>) -> tensor<32x64xbf16> {
  %y = mx.dequantize %d, %s block [1, 16] tensor_scale(%t : tensor<f32>) : tensor<32x64xf4E2M1FN>, tensor<32x4xf8E4M3FN> -> tensor<32x64xbf16>
  return %y : tensor<32x64xbf16>
}

// -----

// CHECK-LABEL: func @dequantize_mxfp4_columnwise
// CHECK: gpu.launch
// CHECK-COUNT-2: memref.load %{{.*}} : memref<2x6xf8E8M0FNU>
func.func @dequantize_mxfp4_columnwise(%d: tensor<64x6xf4E2M1FN>, %s: tensor<2x6xf8E8M0FNU>) -> tensor<64x6xf32> {
  %y = mx.dequantize %d, %s block [32, 1] : tensor<64x6xf4E2M1FN>, tensor<2x6xf8E8M0FNU> -> tensor<64x6xf32>
  return %y : tensor<64x6xf32>
}

// -----

// A columnwise quantize: one thread per block row and column pair, which
// loads two elements of each of its 32 rows and stores one byte per row (the
// partial last block only where rows exist), and two scales.
// CHECK-LABEL: func @mxfp4_columnwise
// CHECK: %[[BYTES:.*]] = gpu.alloc () : memref<2800xi8>
// CHECK: gpu.launch
// CHECK-COUNT-32: vector.load %{{.*}} {alignment = 8 : i64} : memref<70x80xf32>, vector<2xf32>
// CHECK-COUNT-2: memref.store %{{.*}} : memref<3x80xf8E8M0FNU>
// CHECK: scf.if
// CHECK:   memref.store %{{.*}}, %[[BYTES]][%{{.*}}] : memref<2800xi8>
func.func @mxfp4_columnwise(%x: tensor<70x80xf32>) -> (tensor<70x80xf4E2M1FN>, tensor<3x80xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [32, 1] : tensor<70x80xf32> -> tensor<70x80xf4E2M1FN>, tensor<3x80xf8E8M0FNU>
  return %d, %s : tensor<70x80xf4E2M1FN>, tensor<3x80xf8E8M0FNU>
}

// -----

// Batch dimensions of a rowwise quantize fold into rows.
// CHECK-LABEL: func @nvfp4_batched
// CHECK: memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : memref<2x3x32xbf16> into memref<6x32xbf16>
// CHECK: %[[SCALES:.*]] = gpu.alloc () : memref<2x3x2xf8E4M3FN>
// CHECK: memref.collapse_shape %[[SCALES]] {{\[}}[0, 1], [2]] : memref<2x3x2xf8E4M3FN> into memref<6x2xf8E4M3FN>
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<96xi8> to memref<2x3x32xf4E2M1FN>
func.func @nvfp4_batched(%x: tensor<2x3x32xbf16>, %t: tensor<f32>) -> (tensor<2x3x32xf4E2M1FN>, tensor<2x3x2xf8E4M3FN>) {
  %d, %s = mx.quantize %x block [1, 1, 16] tensor_scale(%t : tensor<f32>) : tensor<2x3x32xbf16> -> tensor<2x3x32xf4E2M1FN>, tensor<2x3x2xf8E4M3FN>
  return %d, %s : tensor<2x3x32xf4E2M1FN>, tensor<2x3x2xf8E4M3FN>
}

// -----

// Slices of whole blocks fold into rows: one launch over [2 * 32, 4].
// CHECK-LABEL: func @fp4_batched_columnwise
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<2x32x4xf32> into memref<64x4xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK:   arith.muli %{{.*}}, %c32 : index
func.func @fp4_batched_columnwise(%x: tensor<2x32x4xf32>) -> (tensor<2x32x4xf4E2M1FN>, tensor<2x1x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32, 1] : tensor<2x32x4xf32> -> tensor<2x32x4xf4E2M1FN>, tensor<2x1x4xf8E8M0FNU>
  return %d, %s : tensor<2x32x4xf4E2M1FN>, tensor<2x1x4xf8E8M0FNU>
}

// -----

// A block straddling two slices has no kernel.
func.func @fp4_batched_columnwise_partial(%x: tensor<2x40x4xf32>) -> (tensor<2x40x4xf4E2M1FN>, tensor<2x2x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the columnwise FP4 GPU kernel needs the rows of each batch slice to be a multiple of the block}}
  %d, %s = mx.quantize %x block [1, 32, 1] : tensor<2x40x4xf32> -> tensor<2x40x4xf4E2M1FN>, tensor<2x2x4xf8E8M0FNU>
  return %d, %s : tensor<2x40x4xf4E2M1FN>, tensor<2x2x4xf8E8M0FNU>
}

// -----

func.func @fp4_odd_k(%x: tensor<4x40xf32>) -> (tensor<4x40xf4E2M1FN>, tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the rowwise FP4 GPU kernel needs K to be a multiple of the block (32 for MXFP4, 16 for NVFP4)}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x40xf32> -> tensor<4x40xf4E2M1FN>, tensor<4x2xf8E8M0FNU>
  return %d, %s : tensor<4x40xf4E2M1FN>, tensor<4x2xf8E8M0FNU>
}
