// The sm_100a kernel covers MX only; FP8 blockwise and per-tensor GEMMs are
// reported by convert-mx-to-gpu with the reason (mx-lower-to-nvvm gemm=auto
// sends them to cuBLASLt instead).
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="chip=sm_100a" -verify-diagnostics

func.func @blockwise(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x4xf32>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4xf32>) -> tensor<256x128xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: the sm_100a kernel takes MX or NVFP4 operands only (E8M0 scales of [1, 32] blocks, E4M3 of [1, 16]); cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<128x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

func.func @per_tensor(%a: tensor<64x128xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<32x128xf8E5M2>, %bs: tensor<1x1xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: the sm_100a kernel takes MX or NVFP4 operands only (E8M0 scales of [1, 32] blocks, E4M3 of [1, 16]); cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

// kind::mxf8f6f4 has no integer operands; cuBLASLt has no MXINT8 GEMM.
func.func @int8(%a: tensor<128x256xi8>, %as: tensor<1x2x32x4x4xf8E8M0FNU>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<1x2x32x4x4xf8E8M0FNU>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: the sm_100a kernel (tcgen05 kind::mxf8f6f4) takes FP8, FP6 and FP4 operands, not MXINT8; nor has it a cuBLASLt lowering (cuBLASLt takes FP8 (f8E4M3FN, f8E5M2) or FP4 (f4E2M1FN) operands, got i8)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<128x256xi8>, tensor<1x2x32x4x4xf8E8M0FNU>, tensor<128x256xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}

// -----

// The unpacking tensor maps of packed operands take rows of whole 128-element
// boxes.
func.func @fp6_short_k(%a: tensor<128x64xf6E2M3FN>, %as: tensor<128x2xf8E8M0FNU>, %b: tensor<128x64xf8E4M3FN>, %bs: tensor<128x2xf8E8M0FNU>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: K = 64 of 6-bit elements is not a multiple of 128 (the sm_100a kernel's tensor maps spread packed rows in boxes of 128)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<128x64xf6E2M3FN>, tensor<128x2xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}

// -----

// FP4 beside FP8 takes kind::mxf8f6f4 and its unpacking maps (only FP4 x FP4
// reads packed rows, on kind::mxf4).
func.func @fp4_e4m3_short_k(%a: tensor<128x64xf4E2M1FN>, %as: tensor<128x2xf8E8M0FNU>, %b: tensor<128x64xf8E4M3FN>, %bs: tensor<128x2xf8E8M0FNU>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: K = 64 of 4-bit elements is not a multiple of 128 (the sm_100a kernel's tensor maps spread packed rows in boxes of 128)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}

// -----

// NVFP4 reads two whole 128x4 scale chunks (64 K each) per 128-K stage.
func.func @nvfp4_short_k(%a: tensor<128x64xf4E2M1FN>, %as: tensor<128x4xf8E4M3FN>, %b: tensor<128x64xf4E2M1FN>, %bs: tensor<128x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no generated kernel on sm_100a: K = 64 of NVFP4 is not a multiple of 128 (the sm_100a kernel reads two 128x4 scale chunks of 64 K per stage)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
    : tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}
