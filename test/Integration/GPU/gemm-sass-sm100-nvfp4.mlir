// The SASS of the SM100 NVFP4 kernel (kind::mxf4nvf4), disassembled with
// nvdisasm: the MMA is the FP4 UTCOMMA with scale_vec::4X, the six scale
// copies of a stage land K chunk major at the stage's scale columns (A's
// two chunks at +0 and +0x4, B's row tiles at +0x8 and +0xc for K chunk 0,
// +0x10 and +0x14 for K chunk 1), and the first of a stage's two MMAs
// reads the scale columns at the stage's base. Nothing here runs on an
// SM100 GPU.
// REQUIRES: ptxas, nvdisasm
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx > %t.ptx
// RUN: %ptxas -arch=sm_100a %t.ptx -o %t.cubin
// RUN: %nvdisasm %t.cubin | FileCheck %s

// CHECK: UTCCP.T.S.4x32dp128bit tmem[[[BASE:UR[0-9]+]]], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[[[BASE]]+0x4], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[[[BASE]]+0x8], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[[[BASE]]+0x10], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[[[BASE]]+0xc], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[[[BASE]]+0x14], gdesc[UR{{[0-9]+}}]
// CHECK: UTCOMMA.4X gdesc[UR{{[0-9]+}}], gdesc[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}], idesc[UR{{[0-9]+}}], tmem[[[BASE]]],
// CHECK-NEXT: UTCOMMA.4X gdesc[UR{{[0-9]+}}], gdesc[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}], idesc[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}],
// CHECK-NOT: UTCQMMA

func.func @nvfp4(%a: tensor<256x512xf4E2M1FN>, %as: tensor<2x8x32x4x4xf8E4M3FN>, %b: tensor<384x512xf4E2M1FN>, %bs: tensor<3x8x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
      : tensor<256x512xf4E2M1FN>, tensor<2x8x32x4x4xf8E4M3FN>, tensor<384x512xf4E2M1FN>, tensor<3x8x32x4x4xf8E4M3FN> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}
