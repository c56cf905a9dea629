// Where the lowering that is faster for a recipe cannot run an op, gemm=auto
// gives it to the other one and records why. On sm_90a cuBLASLt is the
// 1x128 x 1x128 (wgrad) form's; a module symbol in the way of its runtime
// call leaves the op to the generated kernel, whose plan says so.
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a gemm=auto" --convert-mx-to-gpu="chip=sm_90a gemm=auto" | FileCheck %s

llvm.func @mxrtScaledMatmul(i32) -> i32

// CHECK-LABEL: func.func @wgrad
// CHECK-NOT: llvm.call @mxrtScaledMatmul
// CHECK: gpu.launch_func @mx_gemm_blockwise_256x384x512::@kernel
// CHECK: llvm.func @kernel
// CHECK-SAME: mx.gemm_lowering = "kernel: cuBLASLt cannot run it (the module defines @mxrtScaledMatmul as !llvm.func<i32 (i32)>, not the runtime's
func.func @wgrad(%a: tensor<256x512xf8E4M3FN>, %as: tensor<4x64x4xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<4x96x4xf32>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
      : tensor<256x512xf8E4M3FN>, tensor<4x64x4xf32>, tensor<384x512xf8E4M3FN>, tensor<4x96x4xf32> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}
