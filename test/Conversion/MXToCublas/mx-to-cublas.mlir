// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_100a" --split-input-file --verify-diagnostics | FileCheck %s

// Every scale mode runs on sm_100a; mx-to-cublas-sm90a.mlir has the chip
// that lacks MX.

// FP8 blockwise: 1x128 f32 scales (VEC128_F32 = 2) times 128x128 f32 scales
// (BLK128X128_F32 = 3), E4M3 (0) operands, bf16 (2) output; equal codes fold
// into one constant.
// CHECK: llvm.func @mxrtScaledMatmul(i64, i64, i64, !llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-LABEL: func @blockwise
// CHECK-DAG: %[[M:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 384 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 512 : i64
// CHECK-DAG: %[[E4M3:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-DAG: %[[BLK128:.*]] = arith.constant 3 : i32
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[OUT:.*]] = gpu.alloc () : memref<256x384xbf16>
// CHECK-NOT: scf.for
// CHECK: llvm.call @mxrtScaledMatmul(%[[M]], %[[N]], %[[K]], %{{.*}}, %[[E4M3]], %[[E4M3]], %{{.*}}, %[[TWO]], %{{.*}}, %[[E4M3]], %[[E4M3]], %{{.*}}, %[[BLK128]], %[[NULL]], %{{.*}}, %[[TWO]], %[[NULL]])
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
func.func @blockwise(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x4xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<3x4xf32>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<384x512xf8E4M3FN>, tensor<3x4xf32> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}

// -----

// MX: swizzled E8M0 scales of 1x32 blocks (VEC32_UE8M0 = 1); per-tensor is
// TENSOR_F32 = 0 with an E5M2 (1) operand and f32 (4) output.
// CHECK-LABEL: func @mx_and_per_tensor
// CHECK: llvm.call @mxrtScaledMatmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i32, %c0_i32, %{{.*}}, %c1_i32, %{{.*}}, %c0_i32, %c0_i32, %{{.*}}, %c1_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}})
// CHECK: llvm.call @mxrtScaledMatmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i32, %c0_i32, %{{.*}}, %c0_i32, %{{.*}}, %c1_i32, %c0_i32, %{{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c4_i32, %{{.*}})
func.func @mx_and_per_tensor(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>,
                             %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>,
                             %c: tensor<64x128xf8E4M3FN>, %cs: tensor<1x1xf32>,
                             %d: tensor<32x128xf8E5M2>, %ds: tensor<1x1xf32>) -> (tensor<256x128xbf16>, tensor<64x32xf32>) {
  %0 = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  %1 = mx.scaled_matmul %c, %cs, %d, %ds lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %0, %1 : tensor<256x128xbf16>, tensor<64x32xf32>
}

// -----

func.func @linear_mx(%a: tensor<64x64xf8E4M3FN>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<32x64xf8E4M3FN>, %bs: tensor<32x2xf8E8M0FNU>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt takes swizzled E8M0 scales of 32-element blocks, swizzled E4M3 scales of 16-element blocks (NVFP4), f32 scales of 128-element or 128x128 blocks, or one f32 scale per operand}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

// A module symbol in the way of the runtime call is reported on the op.
func.func private @mxrtScaledMatmul(i32) -> i32

func.func @runtime_symbol_taken(%a: tensor<64x128xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<32x128xf8E5M2>, %bs: tensor<1x1xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: the module defines @mxrtScaledMatmul as 'func.func', not the runtime's !llvm.func<i32 (i64, i64, i64, ptr, i32, i32, ptr, i32, ptr, i32, i32, ptr, i32, ptr, ptr, i32, ptr)>}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

// Batch dimensions: one call per slice, each pointer advanced by its slice's
// bytes (A 64x128 E4M3 = 8192, its per-slice scale 4, out 64x32 f32 = 8192).
// CHECK-LABEL: func @batched
// CHECK: scf.for %[[I:.*]] = %c0 to %c6 step %c1
// CHECK:   %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK:   %[[A_OFF:.*]] = arith.muli %[[I64]], %c8192_i64 : i64
// CHECK:   llvm.getelementptr %{{.*}}[%[[A_OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK:   %[[AS_OFF:.*]] = arith.muli %[[I64]], %c4_i64 : i64
// CHECK:   llvm.call @mxrtScaledMatmul(%c64_i64, %c32_i64, %c128_i64,
func.func @batched(%a: tensor<2x3x64x128xf8E4M3FN>, %as: tensor<2x3x1x1xf32>, %b: tensor<2x3x32x128xf8E5M2>, %bs: tensor<2x3x1x1xf32>) -> tensor<2x3x64x32xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 1, 64, 128] rhs_block [1, 1, 32, 128]
      : tensor<2x3x64x128xf8E4M3FN>, tensor<2x3x1x1xf32>, tensor<2x3x32x128xf8E5M2>, tensor<2x3x1x1xf32> -> tensor<2x3x64x32xf32>
  return %c : tensor<2x3x64x32xf32>
}

// -----

// K-outer operands (layout 1) and cuBLASLt's own [KB, rows] f32 scales
// (VEC128_F32_KB_ROWS = 5): the linear scales of a K-outer [128, 1] block,
// and blockwise GEMM-ready ones.
// CHECK-LABEL: func @k_outer_and_gemm_ready
// CHECK: llvm.call @mxrtScaledMatmul(%c64_i64, %c96_i64, %c256_i64, %{{.*}}, %c0_i32, %c1_i32, %{{.*}}, %c5_i32, %{{.*}}, %c0_i32, %c0_i32, %{{.*}}, %c5_i32,
func.func @k_outer_and_gemm_ready(%a: tensor<256x64xf8E4M3FN>, %as: tensor<2x64xf32>, %b: tensor<96x256xf8E4M3FN>, %bs: tensor<2x24x4xf32>) -> tensor<64x96xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 1] lhs_layout k_outer rhs_block [1, 128]
      : tensor<256x64xf8E4M3FN>, tensor<2x64xf32>, tensor<96x256xf8E4M3FN>, tensor<2x24x4xf32> -> tensor<64x96xbf16>
  return %c : tensor<64x96xbf16>
}

// -----

// NVFP4 (F4E2M1 = 6, VEC16_UE4M3 = 4): alpha is the product of the tensor
// scales, computed on the device by a one-thread kernel.
// CHECK-LABEL: func @nvfp4
// CHECK: %[[ALPHA:.*]] = gpu.alloc () : memref<f32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1)
// CHECK:   %[[TA:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK:   %[[TB:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK:   %[[P:.*]] = arith.mulf %[[TA]], %[[TB]] : f32
// CHECK:   memref.store %[[P]], %[[ALPHA]][] : memref<f32>
// CHECK: %[[ALPHA_I:.*]] = memref.extract_aligned_pointer_as_index %[[ALPHA]]
// CHECK: llvm.call @mxrtScaledMatmul(%c128_i64, %c256_i64, %c512_i64, %{{.*}}, %c6_i32, %c0_i32, %{{.*}}, %c4_i32, %{{.*}}, %c6_i32, %c0_i32, %{{.*}}, %c4_i32, %{{.*}}, %{{.*}}, %c2_i32,
// CHECK: gpu.dealloc %[[ALPHA]] : memref<f32>
func.func @nvfp4(%a: tensor<128x512xf4E2M1FN>, %as: tensor<1x8x32x4x4xf8E4M3FN>, %b: tensor<256x512xf4E2M1FN>, %bs: tensor<2x8x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<128x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
      : tensor<128x512xf4E2M1FN>, tensor<1x8x32x4x4xf8E4M3FN>, tensor<256x512xf4E2M1FN>, tensor<2x8x32x4x4xf8E4M3FN> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}

// -----

func.func @mixed_fp4_scales(%a: tensor<128x512xf4E2M1FN>, %as: tensor<1x4x32x4x4xf8E8M0FNU>, %b: tensor<256x512xf4E2M1FN>, %bs: tensor<2x8x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<128x256xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt takes MX (E8M0) or NVFP4 (E4M3) scales on both operands, not one of each}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
      : tensor<128x512xf4E2M1FN>, tensor<1x4x32x4x4xf8E8M0FNU>, tensor<256x512xf4E2M1FN>, tensor<2x8x32x4x4xf8E4M3FN> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}

// -----

func.func @k_outer_128x128(%a: tensor<256x128xf8E4M3FN>, %as: tensor<2x1xf32>, %b: tensor<96x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<128x96xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt's 128x128 scales are laid out for K-contiguous operands; this operand is K-outer}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 128] lhs_layout k_outer rhs_block [128, 128]
      : tensor<256x128xf8E4M3FN>, tensor<2x1xf32>, tensor<96x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<128x96xbf16>
  return %c : tensor<128x96xbf16>
}

// -----

// cuBLASLt has no MXINT8 (or MXFP6) GEMM on any chip.
func.func @mxint8(%a: tensor<128x512xi8>, %as: tensor<1x4x32x4x4xf8E8M0FNU>, %b: tensor<256x512xi8>, %bs: tensor<2x4x32x4x4xf8E8M0FNU>) -> tensor<128x256xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt takes FP8 (f8E4M3FN, f8E5M2) or FP4 (f4E2M1FN) operands, got i8}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<128x512xi8>, tensor<1x4x32x4x4xf8E8M0FNU>, tensor<256x512xi8>, tensor<2x4x32x4x4xf8E8M0FNU> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}
