// gemm=auto with a shape cuBLASLt refuses: on sm_90a the
// generated kernel takes M = 130, on sm_100a the FP8 blockwise recipe has no
// generated kernel, and the op is rejected with cuBLASLt's reason rather than
// left to fail at run time.
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_90a gemm=auto" | FileCheck %s --check-prefix=SM90
// RUN: not mx-opt %s --convert-mx-to-cublas="chip=sm_100a gemm=auto" 2>&1 | FileCheck %s --check-prefix=SM100

// SM90-LABEL: func @blockwise_m130
// SM90: mx.scaled_matmul
// SM90-NOT: mxrtScaledMatmul
// SM100: error: 'mx.scaled_matmul' op has neither a generated kernel on sm_100a ({{.*}}) nor a cuBLASLt lowering (lhs has 130 rows, not a multiple of 4, which cuBLASLt needs for its 1x128 (VEC128_32F) scales)
func.func @blockwise_m130(%a: tensor<130x256xf8E4M3FN>, %as: tensor<130x2xf32>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<130x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<130x256xf8E4M3FN>, tensor<130x2xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<130x128xbf16>
  return %c : tensor<130x128xbf16>
}
