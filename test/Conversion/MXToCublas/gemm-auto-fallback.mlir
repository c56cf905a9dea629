// Where the lowering that is faster for a recipe cannot run an op, gemm=auto
// gives it to the other one and records why. On sm_90a the generated kernel
// is the 1x128 x 1x128 (wgrad) form's (its scale products from a tf32
// wgmma); a gemm-config that the kernel cannot build leaves the op to
// cuBLASLt, whose call says so.
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a gemm=auto" --convert-mx-to-gpu="chip=sm_90a gemm=auto" | FileCheck %s --check-prefix=KERNEL
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a gemm=auto gemm-config=consumers=3,products=on" | FileCheck %s --check-prefix=CUBLAS

// KERNEL-LABEL: func.func @wgrad
// KERNEL-NOT: llvm.call @mxrtScaledMatmul
// KERNEL: gpu.launch_func @mx_gemm_blockwise_256x384x512::@kernel
// KERNEL: llvm.func @kernel
// KERNEL-SAME: mx.gemm_lowering = "kernel: faster on sm_90a (the generated kernel (its scale products from a tf32 wgmma) ran at
// CUBLAS-LABEL: func.func @wgrad
// CUBLAS: llvm.call @mxrtScaledMatmul({{.*}}) {mx.gemm_lowering = "cublas: the generated kernel cannot run it (a 192x128 tile needs 192 accumulator registers per consumer thread with scale products, more than the 128 that 3 consumers leave; use fewer waves or a narrower tile, or products=off)"}
func.func @wgrad(%a: tensor<256x512xf8E4M3FN>, %as: tensor<4x64x4xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<4x96x4xf32>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
      : tensor<256x512xf8E4M3FN>, tensor<4x64x4xf32>, tensor<384x512xf8E4M3FN>, tensor<4x96x4xf32> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}
