// The tcgen05 kernel with a fused delayed cast of the product (MX operands,
// an f32 product into E5M2; never run, docs/gpu.md) assembles for sm_100a
// with no spill: its epilogue warpgroup converts what it reads from tensor
// memory with the saturating cvt, reduces its amax over the warp and takes
// an atomic max into its CTA's slot, as the sm_90a kernels do
// (gemm-output-cast-ptxas.mlir).
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx --split %t.sm100
// RUN: FileCheck %s < %t.sm100.4.ptx
// RUN: %ptxas -arch=sm_100a -v %t.sm100.4.ptx -o %t.sm100.4.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// CHECK: .entry kernel(
// CHECK-DAG: tcgen05.ld
// CHECK-DAG: cvt.rn.satfinite.e5m2x2.f32
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: atom.global.max.u32
// PTXAS-NOT: warning
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: warning
func.func @mx_fp8(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x16xf8E8M0FNU>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<384x16xf8E8M0FNU>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<384x512xf8E4M3FN>, tensor<384x16xf8E8M0FNU> -> tensor<256x384xf32>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x384xf32>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>
}
