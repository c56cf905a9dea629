// gemm-config makes the generated kernel's choices instead of the generator:
// here clusters of two CTAs on neighbouring tiles that share an operand.
// Each CTA loads its half of the shared tile with a TMA multicast into both
// (a shared::cluster destination and a CTA mask), every consumer warp
// releases a stage on the empty barrier of both CTAs (lane r through mapa on
// CTA r), the CTAs pass a cluster barrier after the barriers are set up and
// before they exit, and the host launches the grid in clusters.
// RUN: mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3,waves=1,cluster=1x2" | FileCheck %s --check-prefix=SHARE-A
// RUN: mx-opt %s --convert-mx-to-gpu="gemm-config=cluster=2x1,epilogue=registers" | FileCheck %s --check-prefix=SHARE-B

// The shared A tile of 192 rows is loaded in boxes of 96.
// SHARE-A: %[[BOX:.*]] = llvm.alloca %{{.*}} x i32
// SHARE-A: llvm.store %c96_i32
// SHARE-A: gpu.launch_func @mx_gemm_per_tensor_512x512x256::@kernel clusters in (%c2, %c1, %c1) blocks in (%c12, %c1, %c1) threads in (%c512, %c1, %c1)
// SHARE-A: llvm.func @kernel
// SHARE-A-SAME: mx.gemm_plan = "recipe=per_tensor chip=sm_90a mnk=512x512x256 tile=192x128x128 stages=4 roles=tma:1,mma:3x1 regs=40/152 wgmma=m64n128k32 ctas=12 cluster=1x2 group=8 epilogue=tma
// SHARE-A-SAME: nvvm.cluster_dim = array<i32: 2, 1, 1>
// SHARE-A: arith.constant 3 : i16
// SHARE-A: nvvm.read.ptx.sreg.cluster.ctarank
// SHARE-A: nvvm.fence.mbarrier.init
// SHARE-A: nvvm.cluster.arrive
// SHARE-A-NEXT: nvvm.cluster.wait
// SHARE-A: %[[DST:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr<3> to !llvm.ptr<7>
// SHARE-A: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DST]], %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}] multicast_mask = %{{.*}} : !llvm.ptr<7>, !llvm.ptr
// SHARE-A: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// SHARE-A: nvvm.wgmma.wait.group.sync.aligned 0
// SHARE-A: arith.cmpi ult, %{{.*}}, %c2_i32
// SHARE-A: %[[REMOTE:.*]] = nvvm.mapa %{{.*}}, %{{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// SHARE-A: nvvm.mbarrier.arrive %[[REMOTE]] : !llvm.ptr<7>
// SHARE-A: nvvm.cluster.arrive
// SHARE-A-NEXT: nvvm.cluster.wait

// SHARE-B: gpu.launch_func @mx_gemm_per_tensor_512x512x256::@kernel clusters in (%c2, %c1, %c1)
// SHARE-B: mx.gemm_plan = "recipe=per_tensor chip=sm_90a mnk=512x512x256 tile=128x128x128 {{.*}} cluster=2x1 group=8 epilogue=registers
// SHARE-B: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// SHARE-B: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
func.func @per_tensor(%a: tensor<512x256xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<512x256xf8E4M3FN>, %bs: tensor<1x1xf32>) -> tensor<512x512xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [512, 256] rhs_block [512, 256]
    : tensor<512x256xf8E4M3FN>, tensor<1x1xf32>, tensor<512x256xf8E4M3FN>, tensor<1x1xf32> -> tensor<512x512xbf16>
  return %c : tensor<512x512xbf16>
}
