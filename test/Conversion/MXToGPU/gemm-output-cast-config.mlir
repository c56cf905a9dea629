// gemm-config=epilogue=tma keeps a product and its delayed cast apart: the
// kernel stores the product through shared memory and TMA, and the cast's
// own kernel reads it (the fused cast stores its codes from registers,
// gemm-output-cast.mlir).
// RUN: mx-opt %s --convert-mx-to-gpu="gemm-config=epilogue=tma" | FileCheck %s

// CHECK-LABEL: func.func @fprop_fp8
// CHECK: gpu.alloc () : memref<256x384xbf16>
// CHECK: gpu.launch_func @mx_gemm_per_tensor_256x384x512::@kernel
// CHECK: gpu.launch blocks
// CHECK: llvm.func @kernel
// CHECK-NOT: cast=
// CHECK-SAME: epilogue=tma
func.func @fprop_fp8(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x384xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
}
