// What the GEMM generator does not cover is reported by convert-mx-to-gpu
// with the op, the chip and the reason, and the pass fails.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu -verify-diagnostics

func.func @mixed_scales(%a: tensor<128x256xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no GPU lowering: f32 scales need [1, 128] or [128, 128] blocks on both operands, or one scale per operand; cuBLASLt may run it instead (mx-lower-to-nvvm gemm=cublas)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 256] rhs_block [128, 128]
    : tensor<128x256xf8E4M3FN>, tensor<1x1xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}
