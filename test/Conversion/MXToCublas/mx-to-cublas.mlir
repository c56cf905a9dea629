// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_100a" --split-input-file --verify-diagnostics | FileCheck %s

// Every scale mode runs on sm_100a; mx-to-cublas-sm90a.mlir has the chip
// that lacks MX.

// FP8 blockwise: 1x128 f32 scales (VEC128_F32 = 2) times 128x128 f32 scales
// (BLK128X128_F32 = 3), E4M3 (0) operands, bf16 (2) output; equal codes fold
// into one constant.
// CHECK: llvm.func @mxrtScaledMatmul(i64, i64, i64, !llvm.ptr, i32, !llvm.ptr, i32, !llvm.ptr, i32, !llvm.ptr, i32, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-LABEL: func @blockwise
// CHECK-DAG: %[[M:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 384 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 512 : i64
// CHECK-DAG: %[[E4M3:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-DAG: %[[BLK128:.*]] = arith.constant 3 : i32
// CHECK: %[[OUT:.*]] = gpu.alloc () : memref<256x384xbf16>
// CHECK: llvm.call @mxrtScaledMatmul(%[[M]], %[[N]], %[[K]], %{{.*}}, %[[E4M3]], %{{.*}}, %[[TWO]], %{{.*}}, %[[E4M3]], %{{.*}}, %[[BLK128]], %{{.*}}, %[[TWO]], %{{.*}})
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
// CHECK: llvm.call @mxrtScaledMatmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i32, %{{.*}}, %c1_i32, %{{.*}}, %c0_i32, %{{.*}}, %c1_i32, %{{.*}}, %c2_i32, %{{.*}})
// CHECK: llvm.call @mxrtScaledMatmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i32, %{{.*}}, %c0_i32, %{{.*}}, %c1_i32, %{{.*}}, %c0_i32, %{{.*}}, %c4_i32, %{{.*}})
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
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt takes swizzled E8M0 scales of [1, 32] blocks, f32 scales of [1, 128] or [128, 128] blocks, or one f32 scale per tensor}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

// A module symbol in the way of the runtime call is reported on the op.
func.func private @mxrtScaledMatmul(i32) -> i32

func.func @runtime_symbol_taken(%a: tensor<64x128xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<32x128xf8E5M2>, %bs: tensor<1x1xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: the module defines @mxrtScaledMatmul as 'func.func', not the runtime's !llvm.func<i32 (i64, i64, i64, ptr, i32, ptr, i32, ptr, i32, ptr, i32, ptr, i32, ptr)>}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}
