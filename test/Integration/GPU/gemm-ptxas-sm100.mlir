// The generated SM100 MX kernel assembles for sm_100a with no spill, in PTX
// ISA 8.8 (the first with `.block32`), and is made of the instructions it is
// built on: the TMA and bulk copies of the skeleton, the tensor-memory
// allocation, the scale copies, the block-scaled MMA, the commits, and the
// tensor-memory loads of the epilogue. ptxas -v reports the registers; the
// shared memory is dynamic (the plan's smem, checked in gemm-sm100.mlir).
// Six kernels: FP8 (E4M3 x E5M2, E5M2 x E4M3), FP6 x FP4 and FP4 x E4M3 on
// kind::mxf8f6f4, MXFP4 x MXFP4 on kind::mxf4 and NVFP4 on kind::mxf4nvf4
// (packed operands).
// Nothing here runs on an SM100 GPU.
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx --split %t.gemm
// RUN: FileCheck %s --check-prefix=PTX < %t.gemm.0.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.gemm.1.ptx
// RUN: %ptxas -arch=sm_100a -v %t.gemm.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_100a -v %t.gemm.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=PTX < %t.gemm.2.ptx
// RUN: %ptxas -arch=sm_100a -v %t.gemm.2.ptx -o %t.2.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=PTX < %t.gemm.3.ptx
// RUN: %ptxas -arch=sm_100a -v %t.gemm.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=MXF4 < %t.gemm.4.ptx
// RUN: %ptxas -arch=sm_100a -v %t.gemm.4.ptx -o %t.4.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=NVF4 < %t.gemm.5.ptx
// RUN: %ptxas -arch=sm_100a -v %t.gemm.5.ptx -o %t.5.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PTX: .version 8.8
// PTX: .target sm_100a
// PTX: .maxntid 256, 1, 1
// PTX: tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// PTX: tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
// PTX-DAG: tcgen05.cp.cta_group::1.32x128b.warpx4
// PTX-DAG: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// PTX-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG: tcgen05.ld.sync.aligned.32x32b.x32.b32
// PTX-DAG: tcgen05.wait::ld.sync.aligned;
// PTX: tcgen05.dealloc.cta_group::1.sync.aligned.b32

// MXF4: .target sm_100a
// MXF4: tcgen05.cp.cta_group::1.32x128b.warpx4
// MXF4: tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32
// MXF4-NOT: kind::mxf8f6f4

// NVF4: .target sm_100a
// NVF4: tcgen05.cp.cta_group::1.32x128b.warpx4
// NVF4: tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16
// NVF4: mul.rn.f32
// NVF4-NOT: kind::mxf8f6f4

// PTXAS-NOT: warning
// PTXAS: Compiling entry function 'kernel' for 'sm_100a'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers

func.func @mx(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<384x512xf8E5M2>, %bs: tensor<3x4x32x4x4xf8E8M0FNU>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<384x512xf8E5M2>, tensor<3x4x32x4x4xf8E8M0FNU> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}

// -----

// K = 8192 (64 stages through the ring), odd N, f32 output.
func.func @mx_long_k(%a: tensor<200x8192xf8E5M2>, %as: tensor<2x64x32x4x4xf8E8M0FNU>, %b: tensor<77x8192xf8E4M3FN>, %bs: tensor<1x64x32x4x4xf8E8M0FNU>) -> tensor<200x77xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<200x8192xf8E5M2>, tensor<2x64x32x4x4xf8E8M0FNU>, tensor<77x8192xf8E4M3FN>, tensor<1x64x32x4x4xf8E8M0FNU> -> tensor<200x77xf32>
  return %c : tensor<200x77xf32>
}

// -----

// kind::mxf8f6f4 on FP6 x FP4 and FP4 x E4M3 operands.
func.func @fp6_fp4(%a: tensor<256x512xf6E3M2FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf4E2M1FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf6E3M2FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf4E2M1FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

func.func @fp4_e4m3(%a: tensor<200x1024xf4E2M1FN>, %as: tensor<2x8x32x4x4xf8E8M0FNU>, %b: tensor<136x1024xf8E4M3FN>, %bs: tensor<2x8x32x4x4xf8E8M0FNU>) -> tensor<200x136xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<200x1024xf4E2M1FN>, tensor<2x8x32x4x4xf8E8M0FNU>, tensor<136x1024xf8E4M3FN>, tensor<2x8x32x4x4xf8E8M0FNU> -> tensor<200x136xf32>
  return %c : tensor<200x136xf32>
}

// -----

// kind::mxf4: MXFP4 x MXFP4, packed; K = 1056 ends in a partial stage.
func.func @fp4_fp4(%a: tensor<200x1056xf4E2M1FN>, %as: tensor<2x9x32x4x4xf8E8M0FNU>, %b: tensor<136x1056xf4E2M1FN>, %bs: tensor<2x9x32x4x4xf8E8M0FNU>) -> tensor<200x136xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<200x1056xf4E2M1FN>, tensor<2x9x32x4x4xf8E8M0FNU>, tensor<136x1056xf4E2M1FN>, tensor<2x9x32x4x4xf8E8M0FNU> -> tensor<200x136xf32>
  return %c : tensor<200x136xf32>
}

// -----

// kind::mxf4nvf4: NVFP4 x NVFP4 with its tensor scales, odd M and N.
func.func @nvfp4(%a: tensor<200x1024xf4E2M1FN>, %as: tensor<2x16x32x4x4xf8E4M3FN>, %b: tensor<136x1024xf4E2M1FN>, %bs: tensor<2x16x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<200x136xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
    : tensor<200x1024xf4E2M1FN>, tensor<2x16x32x4x4xf8E4M3FN>, tensor<136x1024xf4E2M1FN>, tensor<2x16x32x4x4xf8E4M3FN> -> tensor<200x136xbf16>
  return %c : tensor<200x136xbf16>
}
