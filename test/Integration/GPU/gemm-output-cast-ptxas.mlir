// The GEMM kernels with a fused delayed cast of the product (FP8 output,
// docs/gpu.md) assemble with no spill on sm_90a (per-tensor, wgmma; sm_100a:
// gemm-output-cast-ptxas-sm100.mlir): the kernel rounds to the product's type,
// converts pairs with the saturating cvt, stores them as 16-bit words into
// the TMA store's panels,
// reduces its amax over the warp and takes an atomic max into its CTA's
// slot; the delayed cast of the partials assembles beside it.
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa gemm=kernel" | %python -m mx.ptx --split %t.sm90
// RUN: FileCheck %s --check-prefix=SM90 < %t.sm90.1.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.0.ptx -o %t.sm90.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.sm90.1.ptx -o %t.sm90.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// SM90: .entry kernel(
// SM90-DAG: cvt.rn.bf16.f32
// SM90-DAG: cvt.f32.bf16
// SM90-DAG: mul.rn.f32
// SM90-DAG: cvt.rn.satfinite.e4m3x2.f32
// SM90-DAG: st.shared.b16
// SM90-DAG: cp.async.bulk.tensor.2d.global.shared::cta
// SM90-DAG: shfl.sync.bfly.b32
// SM90-DAG: atom.global.max.u32
// PTXAS-NOT: warning
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: warning
func.func @fprop_fp8(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %bias: tensor<384xbf16>, %scales: tensor<2xf32>, %history: tensor<16x2xf32> {mx.updated}) -> (tensor<256x384xf8E4M3FN>, tensor<1x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      bias(%bias : tensor<384xbf16>)
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 1
      : tensor<256x384xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  return %y, %sinv : tensor<256x384xf8E4M3FN>, tensor<1x1xf32>
}
