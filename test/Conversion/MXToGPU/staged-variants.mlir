// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=1" --split-input-file | FileCheck %s --check-prefix=SAT
// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=2" --split-input-file | FileCheck %s --check-prefixes=PAIRS,PIPE
// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=3" --split-input-file | FileCheck %s --check-prefixes=PERSIST,PIPE

// The candidates of the staged fused FP6 kernel (mxfp6-mxint8.mlir has the
// kernel they are measured against, staged-variant=0).
//
// staged-variant=1: E3M2 codes come from E5M2's cvt unclamped, and a wide
// code above E3M2's range (an exponent bit above its 3) becomes 0x1F, once
// per packed word of a strip row (16 rows in each part).
// SAT-LABEL: func @mxfp6_fused
// SAT: gpu.launch {{.*}} workgroup(%{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>>)
// SAT-NOT: arith.minnumf
// SAT-COUNT-32: arith.subi %{{.*}}, %{{.*}} : vector<1xi32>
// SAT-NOT: arith.minnumf
// SAT: gpu.terminator
//
// staged-variant=2 and 3 saturate too, and pipeline the 16 tiles (2 slices
// x 4 row blocks x 2) through two tile buffers: 2 tiles a CTA (8 CTAs,
// straight-line), or a persistent grid of 3 CTAs an SM (sm_90a: 132 SMs, so
// 16 CTAs here), CTA b taking tiles b, b + 16, ... in a loop of
// (31 - b) / 16 steps. The CTA copies its first tile with one 16-byte
// cp.async per chunk (4 a thread, rows and columns clamped as the loads of
// one tile are); then each part (warps 0-3 columns, 4-7 rows) runs the
// steps in its own branch: copy the next tile into the other buffer, commit,
// wait for all groups but that one, barrier, quantize from buffer t % 2,
// barrier.
// PIPE-LABEL: func @mxfp6_fused
// PAIRS: gpu.launch blocks({{.*}}) in (%{{.*}} = %c8, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256, {{.*}}) workgroup(%[[TILE:.*]] : memref<2x32x256xbf16, #gpu.address_space<workgroup>>)
// PAIRS-NEXT: arith.muli %{{.*}}, %c2 : index
// PERSIST: gpu.launch blocks(%[[BLOCK:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c16, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256, {{.*}}) workgroup(%[[TILE:.*]] : memref<2x32x256xbf16, #gpu.address_space<workgroup>>)
// PERSIST-NEXT: %[[LEFT:.*]] = arith.subi %c31, %[[BLOCK]] : index
// PERSIST-NEXT: %[[STEPS:.*]] = arith.divui %[[LEFT]], %c16 : index
// PIPE:   arith.minui %{{.*}}, %c264 : index
// PIPE:   arith.minui %{{.*}}, %c79 : index
// PIPE-COUNT-4: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg : !llvm.ptr<3>, !llvm.ptr<1>
// PIPE-NEXT: nvvm.cp.async.commit.group
// PIPE: scf.if %{{.*}} {
// PAIRS-NEXT: scf.if %true {
// PERSIST-NEXT: scf.for %[[T:.*]] = %c0 to %[[STEPS]] step %c1 {
// PERSIST:   %[[NEXT:.*]] = arith.addi %[[T]], %c1 : index
// PERSIST:   %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %[[STEPS]] : index
// PERSIST:   scf.if %[[MORE]] {
// PIPE-COUNT-4: nvvm.cp.async.shared.global
// PIPE:   }
// PIPE-NEXT: nvvm.cp.async.commit.group
// PIPE-NEXT: nvvm.cp.async.wait.group 1
// PIPE-NEXT: gpu.barrier
// PIPE-COUNT-16: vector.load %[[TILE]][%{{.*}}, %{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<2x32x256xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// PIPE:   gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : i32
// PIPE-NOT: arith.minnumf
// PIPE:   arith.subi %{{.*}}, %{{.*}} : vector<1xi32>
// PIPE:   gpu.barrier
// PAIRS-NEXT: scf.if %false {
// PAIRS: nvvm.cp.async.wait.group 1
// PAIRS-NEXT: gpu.barrier
// PAIRS-COUNT-16: vector.load %[[TILE]]
// PAIRS: gpu.barrier
// PERSIST-NEXT: }
// PIPE: } else {
// PERSIST-NEXT: scf.for
// PIPE:   nvvm.cp.async.wait.group 1
// PIPE-NEXT: gpu.barrier
// PIPE-COUNT-16: vector.load %[[TILE]]
// PIPE:   gpu.shuffle  idx
// PIPE:   gpu.barrier
// PIPE: gpu.terminator
func.func @mxfp6_fused(%x: tensor<2x40x272xbf16>) -> (tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x40x9xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x40x9xf8E8M0FNU> -> tensor<2x1x3x32x4x4xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [1, 32, 1] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
  return %d, %t, %c, %cs : tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
}

// -----

// Two 32 KiB tiles of f32 do not fit in 48 KiB of static shared memory: the
// pipelined candidates keep one tile a CTA, loaded and stored through
// registers, and one barrier, with saturated codes. The rowwise and
// columnwise kernels of FP6 are not candidates: they clamp the values
// whatever the variant.
// SAT-LABEL: func @mxfp6_fused_f32
// SAT: workgroup(%{{.*}} : memref<32x256xf32, #gpu.address_space<workgroup>>)
// SAT-NOT: arith.minnumf
// SAT: gpu.terminator
// SAT: gpu.launch
// SAT: arith.minnumf
// PIPE-LABEL: func @mxfp6_fused_f32
// PIPE: gpu.launch blocks({{.*}}) in (%{{.*}} = %c2, {{.*}}) {{.*}} workgroup(%{{.*}} : memref<32x256xf32, #gpu.address_space<workgroup>>)
// PIPE-NOT: nvvm.cp.async
// PIPE-COUNT-1: gpu.barrier
// PIPE-NOT: gpu.barrier
// PIPE-NOT: arith.minnumf
// PIPE: gpu.terminator
// PIPE: gpu.launch
// PIPE: arith.minnumf
func.func @mxfp6_fused_f32(%x: tensor<64x256xf32>, %y: tensor<32x64xf32>) -> (tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>, tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>, tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x256xf32> -> tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] : tensor<64x256xf32> -> tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>
  %r, %rs = mx.quantize %y block [1, 32] : tensor<32x64xf32> -> tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>
  return %d, %s, %c, %cs, %r, %rs : tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>, tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>, tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>
}
