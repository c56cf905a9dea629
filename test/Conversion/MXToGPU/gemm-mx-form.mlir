// gemm-config mx=staged|fused chooses SM90's form of MX against the
// generator: at 4096x2048 (where the generator stages) mx=fused keeps the
// conversion in the main loop, and at 256x128 (where it fuses) mx=staged
// converts each operand once into a bf16 copy first.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu | FileCheck %s --check-prefix=DEFAULT
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="gemm-config=mx=fused" | FileCheck %s --check-prefix=FUSED
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="gemm-config=mx=staged" | FileCheck %s --check-prefix=STAGED

// DEFAULT-LABEL: func.func @large
// DEFAULT: gpu.launch_func @mx_stage_bf16_f8E4M3FN_4096x256::@kernel
// DEFAULT: gpu.launch_func @mx_gemm_mx_staged_4096x2048x256::@kernel
// FUSED-LABEL: func.func @large
// FUSED-NOT: mx_stage_bf16
// FUSED: gpu.launch_func @mx_gemm_mx_exact_4096x2048x256::@kernel
// FUSED-NOT: mx_stage_bf16
// STAGED-LABEL: func.func @large
// STAGED: gpu.launch_func @mx_gemm_mx_staged_4096x2048x256::@kernel
func.func @large(%a: tensor<4096x256xf8E4M3FN>, %as: tensor<4096x8xf8E8M0FNU>, %b: tensor<2048x256xf8E4M3FN>, %bs: tensor<2048x8xf8E8M0FNU>) -> tensor<4096x2048xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<4096x256xf8E4M3FN>, tensor<4096x8xf8E8M0FNU>, tensor<2048x256xf8E4M3FN>, tensor<2048x8xf8E8M0FNU> -> tensor<4096x2048xbf16>
  return %c : tensor<4096x2048xbf16>
}

// -----

// DEFAULT-LABEL: func.func @small
// DEFAULT-NOT: mx_stage_bf16
// DEFAULT: gpu.launch_func @mx_gemm_mx_exact_256x128x256::@kernel
// FUSED-LABEL: func.func @small
// FUSED: gpu.launch_func @mx_gemm_mx_exact_256x128x256::@kernel
// STAGED-LABEL: func.func @small
// STAGED: gpu.launch_func @mx_stage_bf16_f8E4M3FN_256x256::@kernel
// STAGED: gpu.launch_func @mx_stage_bf16_f8E4M3FN_128x256::@kernel
// STAGED: gpu.launch_func @mx_gemm_mx_staged_256x128x256::@kernel
func.func @small(%a: tensor<256x256xf8E4M3FN>, %as: tensor<256x8xf8E8M0FNU>, %b: tensor<128x256xf8E4M3FN>, %bs: tensor<128x8xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>, tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}
