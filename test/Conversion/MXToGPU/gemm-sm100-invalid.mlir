// The sm_100a kernel covers MX only; FP8 blockwise and per-tensor GEMMs are
// reported by convert-mx-to-gpu with the reason (mx-lower-to-nvvm gemm=auto
// sends them to cuBLASLt instead).
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="chip=sm_100a" -verify-diagnostics

func.func @blockwise(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x4xf32>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4xf32>) -> tensor<256x128xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: the sm_100a kernel takes MX operands only (E8M0 scales of [1, 32] blocks); cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<128x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

func.func @per_tensor(%a: tensor<64x128xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<32x128xf8E5M2>, %bs: tensor<1x1xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: the sm_100a kernel takes MX operands only (E8M0 scales of [1, 32] blocks); cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}
