// The clustered FP8 kernels (gemm-config cluster=1x2 or 2x1: CTAs in pairs
// sharing A or B by TMA multicast, stages released on both CTAs' barriers)
// assemble for sm_90a with no spill and no serialized wgmma.
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa gemm=kernel gemm-config=consumers=3,waves=1,cluster=1x2" | %python -m mx.ptx --split %t.a
// RUN: FileCheck %s < %t.a.0.ptx
// RUN: %ptxas -arch=sm_90a -v %t.a.0.ptx -o %t.a.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa gemm=kernel gemm-config=cluster=2x1" | %python -m mx.ptx --split %t.b
// RUN: FileCheck %s < %t.b.0.ptx
// RUN: %ptxas -arch=sm_90a -v %t.b.0.ptx -o %t.b.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// CHECK: .explicitcluster
// CHECK: .reqnctapercluster 2, 1, 1
// CHECK: mov.u32 {{.*}}%cluster_ctarank;
// CHECK: barrier.cluster.arrive;
// CHECK: barrier.cluster.wait;
// CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
// CHECK: mapa.shared::cluster
// CHECK: mbarrier.arrive.shared::cluster.b64

// PTXAS-NOT: warning
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @blockwise(%a: tensor<512x1024xf8E4M3FN>, %as: tensor<8x128x4xf32>, %b: tensor<512x1024xf8E4M3FN>, %bs: tensor<4x8xf32>) -> tensor<512x512xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
    : tensor<512x1024xf8E4M3FN>, tensor<8x128x4xf32>, tensor<512x1024xf8E4M3FN>, tensor<4x8xf32> -> tensor<512x512xbf16>
  return %c : tensor<512x512xbf16>
}
