// The wgrad form (1x128 scales on both operands) with `products=off`: the
// promotion multiplies sa x sb itself, an FMUL and an FMA an element, with
// the tiles of that form (192x128, or 128x128 with overlap where 192-row
// tiles fill the grid poorly). The default takes the products from a tf32
// wgmma (gemm.mlir @odd_n).
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="gemm-config=products=off" | FileCheck %s

// 1x128 B scales (one per accumulator column) come as stage rows too; the
// promotion reads each column pair with one 8-byte load, and releases the
// stage after it. An odd N stores scalars from registers.
// CHECK-LABEL: func.func @odd_n
// CHECK: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=64x35x128 tile=128x128x128 stages=6 roles=tma:1,mma:2x1 regs=40/232
// CHECK-SAME: epilogue=registers scales=rows,rows
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.mbarrier.arrive
// CHECK-COUNT-16: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK: nvvm.mbarrier.arrive
// CHECK: llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
func.func @odd_n(%a: tensor<64x128xf8E4M3FN>, %as: tensor<64x1xf32>, %b: tensor<35x128xf8E4M3FN>, %bs: tensor<35x1xf32>) -> tensor<64x35xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<64x128xf8E4M3FN>, tensor<64x1xf32>, tensor<35x128xf8E4M3FN>, tensor<35x1xf32> -> tensor<64x35xbf16>
  return %c : tensor<64x35xbf16>
}

// -----

// The wgrad form where 128x128 tiles fill the grid better than 192x128 ones:
// overlap, two K-blocks per main-loop iteration, each chain its own wgmma
// group, the first block promoted while the second one's chain runs (wait
// for at most one pending group, then none); the third block after the loop.
// CHECK-LABEL: func.func @wgrad_overlap
// CHECK: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=256x256x384 tile=128x128x128 {{.*}} wgmma=m64n128k32 overlap
// CHECK: scf.for
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.yield
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
func.func @wgrad_overlap(%a: tensor<256x384xf8E4M3FN>, %as: tensor<256x3xf32>, %b: tensor<256x384xf8E4M3FN>, %bs: tensor<256x3xf32>) -> tensor<256x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32> -> tensor<256x256xbf16>
  return %c : tensor<256x256xbf16>
}
