// The SASS of the SM100 MX kernel, disassembled with nvdisasm: the
// block-scaled MMA is UTCQMMA with its scale-factor tensor-memory operand
// (the unscaled kind has none), the scale copies UTCCP 4x32dp128bit at the
// plan's SFA/SFB columns (256 = 0x100, 260 = 0x104, 264 = 0x108 for stage 0),
// the commits UTCBAR, the epilogue loads LDTM.x32, the allocation and the
// release UTCATOMSWS. Nothing here runs on an SM100 GPU.
// REQUIRES: ptxas, nvdisasm
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx > %t.ptx
// RUN: %ptxas -arch=sm_100a %t.ptx -o %t.cubin
// RUN: %nvdisasm %t.cubin | FileCheck %s

// CHECK: UTCATOMSWS.FIND_AND_SET.ALIGN
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[UR{{[0-9]+}}+0x100], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[UR{{[0-9]+}}+0x104], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCCP.T.S.4x32dp128bit tmem[UR{{[0-9]+}}+0x108], gdesc[UR{{[0-9]+}}]
// CHECK-DAG: UTCQMMA gdesc[UR{{[0-9]+}}], gdesc[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}], idesc[UR{{[0-9]+}}], tmem[UR{{[0-9]+}}],
// CHECK-DAG: UTCBAR
// CHECK-DAG: LDTM.x32
// CHECK: UTCATOMSWS.AND

func.func @mx(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<384x512xf8E5M2>, %bs: tensor<3x4x32x4x4xf8E8M0FNU>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<384x512xf8E5M2>, tensor<3x4x32x4x4xf8E8M0FNU> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}
