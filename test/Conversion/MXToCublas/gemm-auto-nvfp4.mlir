// gemm=auto on NVFP4 (E4M3 scales of [1, 16] blocks, f32 tensor scales):
// sm_100a leaves it to the generated tcgen05 kernel (kind::mxf4nvf4, the
// fact of Target.cpp; never run), sm_90a has neither lowering and says why.
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_100a gemm=auto" | FileCheck %s
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a gemm=auto" -verify-diagnostics

// CHECK-LABEL: func.func @nvfp4
// CHECK: mx.scaled_matmul {{.*}} lhs_block [1, 16] rhs_block [1, 16] tensor_scales
// CHECK-NOT: mxrtScaledMatmul
func.func @nvfp4(%a: tensor<128x512xf4E2M1FN>, %as: tensor<1x8x32x4x4xf8E4M3FN>, %b: tensor<256x512xf4E2M1FN>, %bs: tensor<2x8x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<128x256xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has neither a generated kernel on sm_90a (the sm_90a kernels have no NVFP4 main loop (tcgen05 kind::mxf4nvf4 needs SM100)) nor a cuBLASLt lowering (cuBLASLt has no block-scaled MX or NVFP4 GEMM}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
      : tensor<128x512xf4E2M1FN>, tensor<1x8x32x4x4xf8E4M3FN>, tensor<256x512xf4E2M1FN>, tensor<2x8x32x4x4xf8E4M3FN> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}
