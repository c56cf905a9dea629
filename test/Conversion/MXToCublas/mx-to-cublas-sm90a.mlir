// RUN: mx-opt %s --convert-mx-to-cublas --split-input-file --verify-diagnostics | FileCheck %s
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a" --split-input-file --verify-diagnostics | FileCheck %s

// On sm_90a (the default chip) cuBLASLt runs per-tensor and FP8 blockwise
// scales but no MX GEMM: that is rejected when compiling, not left to fail
// at run time.

// CHECK-LABEL: func @per_tensor_and_blockwise
// CHECK-COUNT-2: llvm.call @mxrtScaledMatmul
func.func @per_tensor_and_blockwise(%a: tensor<64x128xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<32x128xf8E5M2>, %bs: tensor<1x1xf32>,
                                    %c: tensor<256x512xf8E4M3FN>, %cs: tensor<256x4xf32>, %d: tensor<384x512xf8E4M3FN>, %ds: tensor<3x4xf32>)
    -> (tensor<64x32xf32>, tensor<256x384xbf16>) {
  %0 = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  %1 = mx.scaled_matmul %c, %cs, %d, %ds lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<384x512xf8E4M3FN>, tensor<3x4xf32> -> tensor<256x384xbf16>
  return %0, %1 : tensor<64x32xf32>, tensor<256x384xbf16>
}

// -----

func.func @mx(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt has no block-scaled MX or NVFP4 GEMM (VEC32_UE8M0, VEC16_UE4M3) before SM100, so none on sm_90a; for MXFP8 use the generated kernel instead (mx-lower-to-nvvm gemm=kernel)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}
