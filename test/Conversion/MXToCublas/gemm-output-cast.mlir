// A delayed cast of a product that cuBLASLt computes is not fused (the
// generated kernels fuse it, MXToGPU/gemm-output-cast.mlir): cuBLASLt writes
// the product, and the cast's own kernel reads it.
// RUN: mx-opt %s --convert-mx-to-cublas="gemm=cublas" --convert-mx-to-gpu="gemm=cublas" | FileCheck %s

// CHECK-LABEL: func.func @cublas_product
// CHECK: llvm.call @mxrtScaledMatmul
// The cast's kernel (after the copy of the history), 6 CTAs of 256 threads
// reading 16 elements each:
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c6, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c256,
// CHECK-NOT: gpu.module @mx_gemm
func.func @cublas_product(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x384xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
}
