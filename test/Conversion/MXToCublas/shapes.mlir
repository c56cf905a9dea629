// Shapes that mxrtScaledMatmul would refuse at run time (cuBLASLt's rules,
// MXRuntime.h) are rejected when compiling: shapes are static.
// RUN: mx-opt %s --convert-mx-to-cublas --split-input-file --verify-diagnostics | FileCheck %s
// RUN: mx-opt %s --convert-mx-to-cublas="chip=sm_100a" --split-input-file --verify-diagnostics | FileCheck %s

// Rows that are multiples of 4 take VEC128 scales; 16-byte rows everywhere.
// CHECK-LABEL: func @accepted
// CHECK: llvm.call @mxrtScaledMatmul
func.func @accepted(%a: tensor<132x256xf8E4M3FN>, %as: tensor<132x2xf32>, %b: tensor<136x256xf8E4M3FN>, %bs: tensor<2x2xf32>) -> tensor<132x136xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<132x256xf8E4M3FN>, tensor<132x2xf32>, tensor<136x256xf8E4M3FN>, tensor<2x2xf32> -> tensor<132x136xbf16>
  return %c : tensor<132x136xbf16>
}

// -----

func.func @vec128_rows(%a: tensor<130x256xf8E4M3FN>, %as: tensor<130x2xf32>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<130x128xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: lhs has 130 rows, not a multiple of 4, which cuBLASLt needs for its 1x128 (VEC128_32F) scales}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<130x256xf8E4M3FN>, tensor<130x2xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<130x128xbf16>
  return %c : tensor<130x128xbf16>
}

// -----

func.func @vec128_gemm_ready_rows(%a: tensor<128x256xf8E4M3FN>, %as: tensor<1x2xf32>, %b: tensor<70x256xf8E4M3FN>, %bs: tensor<2x18x4xf32>) -> tensor<128x70xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: rhs has 70 rows, not a multiple of 4, which cuBLASLt needs for its 1x128 (VEC128_32F) scales}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 128] rhs_block [1, 128]
      : tensor<128x256xf8E4M3FN>, tensor<1x2xf32>, tensor<70x256xf8E4M3FN>, tensor<2x18x4xf32> -> tensor<128x70xf32>
  return %c : tensor<128x70xf32>
}

// -----

func.func @k_row_bytes(%a: tensor<64x200xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<32x200xf8E4M3FN>, %bs: tensor<1x1xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: lhs's stored rows of 200 elements (K) are not a multiple of 16 bytes}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 200] rhs_block [32, 200]
      : tensor<64x200xf8E4M3FN>, tensor<1x1xf32>, tensor<32x200xf8E4M3FN>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

func.func @output_row_bytes(%a: tensor<64x128xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<20x128xf8E4M3FN>, %bs: tensor<1x1xf32>) -> tensor<64x20xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: the result's rows of N = 20 elements are not a multiple of 16 bytes}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [20, 128]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<20x128xf8E4M3FN>, tensor<1x1xf32> -> tensor<64x20xbf16>
  return %c : tensor<64x20xbf16>
}

// -----

func.func @e5m2_both(%a: tensor<64x128xf8E5M2>, %as: tensor<1x1xf32>, %b: tensor<32x128xf8E5M2>, %bs: tensor<1x1xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt has no f8E5M2 x f8E5M2 GEMM; quantize one operand to f8E4M3FN}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [64, 128] rhs_block [32, 128]
      : tensor<64x128xf8E5M2>, tensor<1x1xf32>, tensor<32x128xf8E5M2>, tensor<1x1xf32> -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

func.func @blk128_both(%a: tensor<128x256xf8E4M3FN>, %as: tensor<1x2xf32>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt takes 128x128 scales on one operand only; quantize the other with [1, 128] blocks}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 128] rhs_block [128, 128]
      : tensor<128x256xf8E4M3FN>, tensor<1x2xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}

// -----

// One call per batch slice: the second slice's 128x128 scales (8 bytes on)
// would not be 16-byte aligned.
func.func @batched_blk128(%a: tensor<2x128x256xf8E4M3FN>, %as: tensor<2x128x2xf32>, %b: tensor<2x128x256xf8E4M3FN>, %bs: tensor<2x1x2xf32>) -> tensor<2x128x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: rhs's 128x128 scales take 8 bytes a batch slice, so the next slice's are not 16-byte aligned}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 1, 128] rhs_block [1, 128, 128]
      : tensor<2x128x256xf8E4M3FN>, tensor<2x128x2xf32>, tensor<2x128x256xf8E4M3FN>, tensor<2x1x2xf32> -> tensor<2x128x128xf32>
  return %c : tensor<2x128x128xf32>
}
