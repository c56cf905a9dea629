// The cuBLASLt recipes through the whole pipeline on sm_100a (gemm=cublas: NVFP4
// would take the generated kernel under gemm=auto): NVFP4's alpha kernel is outlined
// and launched before the call that reads it, and K-outer operands reach the
// call as layout codes. Nothing here has run on an SM100 GPU.
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a gemm=cublas format=isa" | FileCheck %s

// CHECK-LABEL: llvm.func @nvfp4
// CHECK: gpu.launch_func <%{{.*}} : !llvm.ptr> @nvfp4_kernel::@nvfp4_kernel blocks in (%[[ONE:.*]], %[[ONE]], %[[ONE]]) threads in (%[[ONE]], %[[ONE]], %[[ONE]])
// CHECK: llvm.call @mxrtScaledMatmul(
// CHECK: gpu.binary @nvfp4_kernel
// CHECK-SAME: mul.rn.f32
func.func @nvfp4(%a: tensor<128x512xf4E2M1FN>, %as: tensor<1x8x32x4x4xf8E4M3FN>, %b: tensor<256x512xf4E2M1FN>, %bs: tensor<2x8x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<128x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
      : tensor<128x512xf4E2M1FN>, tensor<1x8x32x4x4xf8E4M3FN>, tensor<256x512xf4E2M1FN>, tensor<2x8x32x4x4xf8E4M3FN> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}

// CHECK-LABEL: llvm.func @wgrad
// CHECK-DAG: %[[K_OUTER:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @mxrtScaledMatmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[K_OUTER]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[K_OUTER]],
func.func @wgrad(%dy: tensor<256x64xf8E5M2>, %dys: tensor<1x2x32x4x4xf8E8M0FNU>, %x: tensor<256x96xf8E4M3FN>, %xs: tensor<1x2x32x4x4xf8E8M0FNU>) -> tensor<64x96xbf16> {
  %c = mx.scaled_matmul %dy, %dys, %x, %xs lhs_block [32, 1] lhs_layout k_outer rhs_block [32, 1] rhs_layout k_outer
      : tensor<256x64xf8E5M2>, tensor<1x2x32x4x4xf8E8M0FNU>, tensor<256x96xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU> -> tensor<64x96xbf16>
  return %c : tensor<64x96xbf16>
}
