// What the GEMM generator does not cover is reported by convert-mx-to-gpu
// with the op, the chip and the reason, and the pass fails.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu -verify-diagnostics

func.func @mixed_scales(%a: tensor<128x256xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_90a: f32 scales need [1, 128] or [128, 128] blocks on both operands, or one scale per operand; cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 256] rhs_block [128, 128]
    : tensor<128x256xf8E4M3FN>, tensor<1x1xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}

// -----

// A module symbol in the way of the runtime function the host code calls is
// reported on the op (not a crash, not an invalid call).
llvm.func @mxrtEncodeTensorMap(i32) -> i32

func.func @tensor_map_symbol_taken(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_90a: the module defines @mxrtEncodeTensorMap as !llvm.func<i32 (i32)>, not the runtime's !llvm.func<ptr (ptr, ptr, i32, i32, ptr, ptr, i32)>}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

// FP6 rows of K = 32 elements are 24 bytes, which a TMA row stride cannot
// be; cuBLASLt has no FP6 GEMM: the reason says both.
func.func @fp6_short_rows(%a: tensor<128x32xf6E3M2FN>, %as: tensor<128x1xf8E8M0FNU>, %b: tensor<128x32xi8>, %bs: tensor<128x1xf8E8M0FNU>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_90a: K = 32 of 6-bit elements is not a multiple of 16 bytes (TMA row strides are 16-byte multiples); nor has it a cuBLASLt lowering (cuBLASLt takes FP8 (f8E4M3FN, f8E5M2) or FP4 (f4E2M1FN) operands, got f6E3M2FN)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<128x32xf6E3M2FN>, tensor<128x1xf8E8M0FNU>, tensor<128x32xi8>, tensor<128x1xf8E8M0FNU> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}
