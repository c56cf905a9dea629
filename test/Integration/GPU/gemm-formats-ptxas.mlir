// The sm_90a MX exact kernel on FP6, FP4, INT8 and mixed operands assembles
// with no spill and no serialized wgmma (ptxas C7514): the packed codes are
// widened with integer ops and converted by the FP8 cvt, INT8 by f16 math.
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_90a format=isa gemm=kernel" | %python -m mx.ptx --split %t.gemm
// RUN: FileCheck %s --check-prefix=PACKED < %t.gemm.0.ptx
// RUN: FileCheck %s --check-prefix=INT8 < %t.gemm.3.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.gemm.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PACKED: ld.shared.v4.b32
// PACKED: shf.{{[lr]}}.wrap.b32
// PACKED: cvt.rn.f16x2.e4m3x2
// PACKED: mul.rn.f16x2
// PACKED: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16

// The INT8 x E5M2 kernel comes after the two kernels that swizzle its
// linear scales.
// INT8: ld.shared.v4.b32
// INT8: fma.rn.f16x2
// INT8: cvt.rn.f16x2.e5m2x2
// INT8: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16

// PTXAS-NOT: warning
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @fp6_fp4(%a: tensor<256x512xf6E3M2FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf4E2M1FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf6E3M2FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf4E2M1FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

func.func @int8_e5m2(%a: tensor<200x256xi8>, %as: tensor<200x8xf8E8M0FNU>, %b: tensor<72x256xf8E5M2>, %bs: tensor<72x8xf8E8M0FNU>) -> tensor<200x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<200x256xi8>, tensor<200x8xf8E8M0FNU>, tensor<72x256xf8E5M2>, tensor<72x8xf8E8M0FNU> -> tensor<200x72xf32>
  return %c : tensor<200x72xf32>
}
