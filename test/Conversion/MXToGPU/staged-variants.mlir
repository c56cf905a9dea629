// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=1" --split-input-file | FileCheck %s --check-prefix=SAT
// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=2" --split-input-file | FileCheck %s --check-prefix=PIPE
// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=3" --split-input-file | FileCheck %s --check-prefix=BOTH

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
// staged-variant=2: the 16 tiles (2 slices x 4 row blocks x 2) go 4 to a
// CTA through two tile buffers. The CTA copies its first tile with one
// 16-byte cp.async per chunk (4 a thread, rows and columns clamped as the
// loads of one tile are), then each part (warps 0-3 columns, 4-7 rows) loops
// over the 4 tiles in its own branch: copy the next tile into the other
// buffer, commit, wait for all groups but that one, barrier, quantize from
// buffer t % 2, barrier. The values are still clamped before cvt.
// PIPE-LABEL: func @mxfp6_fused
// PIPE: gpu.launch blocks({{.*}}) in (%{{.*}} = %c4, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256, {{.*}}) workgroup(%[[TILE:.*]] : memref<2x32x256xbf16, #gpu.address_space<workgroup>>)
// PIPE:   %[[FIRST:.*]] = arith.muli %{{.*}}, %c4 : index
// PIPE:   arith.minui %{{.*}}, %c264 : index
// PIPE:   arith.minui %{{.*}}, %c79 : index
// PIPE-COUNT-4: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg : !llvm.ptr<3>, !llvm.ptr<1>
// PIPE-NEXT: nvvm.cp.async.commit.group
// PIPE: scf.if %{{.*}} {
// PIPE-NEXT: scf.for %[[T:.*]] = %c0 to %c4 step %c1 {
// PIPE:   %[[NEXT:.*]] = arith.addi %[[T]], %c1 : index
// PIPE:   %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %c4 : index
// PIPE:   scf.if %[[MORE]] {
// PIPE:     arith.remui %[[NEXT]], %c2 : index
// PIPE-COUNT-4: nvvm.cp.async.shared.global
// PIPE:   }
// PIPE-NEXT: nvvm.cp.async.commit.group
// PIPE-NEXT: nvvm.cp.async.wait.group 1
// PIPE-NEXT: gpu.barrier
// PIPE-NEXT: %[[BUFFER:.*]] = arith.remui %[[T]], %c2 : index
// PIPE-COUNT-16: vector.load %[[TILE]][%[[BUFFER]], %{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<2x32x256xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// PIPE:   gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : i32
// PIPE:   arith.minnumf
// PIPE:   gpu.barrier
// PIPE-NEXT: }
// PIPE: } else {
// PIPE-NEXT: scf.for
// PIPE:   nvvm.cp.async.wait.group 1
// PIPE-NEXT: gpu.barrier
// PIPE-COUNT-16: vector.load %[[TILE]]
// PIPE:   gpu.shuffle  idx
// PIPE:   gpu.barrier
// PIPE-NEXT: }
// PIPE: gpu.terminator
//
// staged-variant=3: both.
// BOTH-LABEL: func @mxfp6_fused
// BOTH: gpu.launch {{.*}} workgroup(%{{.*}} : memref<2x32x256xbf16, #gpu.address_space<workgroup>>)
// BOTH-NOT: arith.minnumf
// BOTH: nvvm.cp.async.wait.group 1
// BOTH-NOT: arith.minnumf
// BOTH: arith.subi %{{.*}}, %{{.*}} : vector<1xi32>
// BOTH-NOT: arith.minnumf
// BOTH: gpu.terminator
func.func @mxfp6_fused(%x: tensor<2x40x272xbf16>) -> (tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x40x9xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x40x9xf8E8M0FNU> -> tensor<2x1x3x32x4x4xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [1, 32, 1] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
  return %d, %t, %c, %cs : tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
}

// -----

// Two 32 KiB tiles of f32 do not fit in 48 KiB of static shared memory: the
// pipelined candidates keep one tile a CTA, loaded and stored through
// registers, and one barrier. The rowwise and columnwise kernels of FP6 are
// not candidates: they clamp the values whatever the variant.
// SAT-LABEL: func @mxfp6_fused_f32
// SAT: arith.minnumf
// PIPE-LABEL: func @mxfp6_fused_f32
// PIPE: gpu.launch blocks({{.*}}) in (%{{.*}} = %c2, {{.*}}) {{.*}} workgroup(%{{.*}} : memref<32x256xf32, #gpu.address_space<workgroup>>)
// PIPE-NOT: nvvm.cp.async
// PIPE-COUNT-1: gpu.barrier
// PIPE-NOT: gpu.barrier
// PIPE: gpu.terminator
// PIPE: gpu.launch
// PIPE: arith.minnumf
// BOTH-LABEL: func @mxfp6_fused_f32
// BOTH: workgroup(%{{.*}} : memref<32x256xf32, #gpu.address_space<workgroup>>)
// BOTH-NOT: arith.minnumf
// BOTH: gpu.terminator
// BOTH: gpu.launch
// BOTH: arith.minnumf
func.func @mxfp6_fused_f32(%x: tensor<64x256xf32>, %y: tensor<32x64xf32>) -> (tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>, tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>, tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x256xf32> -> tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] : tensor<64x256xf32> -> tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>
  %r, %rs = mx.quantize %y block [1, 32] : tensor<32x64xf32> -> tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>
  return %d, %s, %c, %cs, %r, %rs : tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>, tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>, tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>
}
