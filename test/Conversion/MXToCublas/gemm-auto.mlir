// convert-mx-to-cublas{gemm=auto} (what mx-lower-to-nvvm gemm=auto runs)
// lowers each mx.scaled_matmul whose recipe cuBLASLt runs faster on the chip
// (the measured facts of Target.h), or that only cuBLASLt runs, to a call
// that says why in `mx.gemm_lowering`; leaves the others to
// convert-mx-to-gpu; and names both reasons for one that neither takes.
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_100a gemm=auto" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=SM100
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a gemm=auto" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=SM90

// sm_100a: MX stays for the tcgen05 kernel, the FP8 recipes go to cuBLASLt
// (the sm_100a kernel takes MX and NVFP4 only).
// sm_90a: the generated kernels are faster for per-tensor and both
// blockwise forms, so no FP8 op goes to cuBLASLt.
// SM100-LABEL: func @recipes
// SM100: mx.scaled_matmul {{.*}} lhs_block [1, 32] rhs_block [1, 32]
// SM100: llvm.call @mxrtScaledMatmul({{.*}}) {mx.gemm_lowering = "cublas: faster on sm_100a (the generator's sm_100a kernel takes MX and NVFP4 only)"}
// SM100: llvm.call @mxrtScaledMatmul({{.*}}) {mx.gemm_lowering = "cublas: faster on sm_100a (the generator's sm_100a kernel takes MX and NVFP4 only)"}
// SM90-LABEL: func @recipes
// SM90: mx.scaled_matmul {{.*}} lhs_block [1, 32] rhs_block [1, 32]
// SM90: mx.scaled_matmul {{.*}} lhs_block [1, 128] rhs_block [128, 128]
// SM90: mx.scaled_matmul {{.*}} lhs_block [1, 128] rhs_block [1, 128]
// SM90-NOT: llvm.call @mxrtScaledMatmul
func.func @recipes(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>,
                   %c: tensor<256x512xf8E4M3FN>, %cs: tensor<256x4xf32>, %d: tensor<384x512xf8E4M3FN>, %ds: tensor<3x4xf32>, %es: tensor<384x4xf32>)
    -> (tensor<256x128xbf16>, tensor<256x384xbf16>, tensor<256x384xbf16>) {
  %0 = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  %1 = mx.scaled_matmul %c, %cs, %d, %ds lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<384x512xf8E4M3FN>, tensor<3x4xf32> -> tensor<256x384xbf16>
  %2 = mx.scaled_matmul %c, %cs, %d, %es lhs_block [1, 128] rhs_block [1, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<384x512xf8E4M3FN>, tensor<384x4xf32> -> tensor<256x384xbf16>
  return %0, %1, %2 : tensor<256x128xbf16>, tensor<256x384xbf16>, tensor<256x384xbf16>
}

// -----

// M = 2^31 is past the generated kernels' i32 indexing, and cuBLASLt takes
// MX scales swizzled only: no lowering on either chip.
func.func @too_large(%a: tensor<2147483648x32xf8E4M3FN>, %as: tensor<2147483648x1xf8E8M0FNU>, %b: tensor<128x32xf8E4M3FN>, %bs: tensor<128x1xf8E8M0FNU>) -> tensor<2147483648x128xf32> {
  // expected-error @+1 {{(M, N and K must be in [1, 2^31)) nor a cuBLASLt lowering (cuBLASLt takes swizzled E8M0 scales of 32-element blocks}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<2147483648x32xf8E4M3FN>, tensor<2147483648x1xf8E8M0FNU>, tensor<128x32xf8E4M3FN>, tensor<128x1xf8E8M0FNU> -> tensor<2147483648x128xf32>
  return %c : tensor<2147483648x128xf32>
}
