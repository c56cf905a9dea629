// The generated SM100 kernel of mx.scaled_matmul (MX: E8M0 scales of [1, 32]
// blocks): the plan with its tensor-memory columns, the warp roles, the
// tcgen05 instructions of the MMA thread and of the epilogue, and what it
// shares with the SM90 kernels (the TMA loads of A, B and the 128x4 scale
// chunks, the mbarrier ring, the masked stores).
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="chip=sm_100a" | FileCheck %s

// One 128x256 tile per CTA: the accumulator in columns 0-255, then per
// stage 4 SFA and 8 SFB columns (one 128x4 chunk of A, two of B), 512
// columns allocated. The empty barriers take one arrival (the commit), the
// accumulator-empty barrier one per epilogue thread.
// CHECK-LABEL: func.func @mx
// CHECK: gpu.launch_func  @mx_gemm_mx_block_scaled_256x384x512::@kernel blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1)  dynamic_shared_memory_size %c203864_i32
// CHECK: llvm.func @kernel
// CHECK-SAME: mx.gemm_plan = "recipe=mx_block_scaled chip=sm_100a mnk=256x384x512 tile=128x256x128 stages=4 roles=tma:w0,mma:w1,epilogue:wg1 tcgen05=mxf8f6f4.m128n256k32.block32 ctas=4 cluster=1x1 group=8 epilogue=registers scales=128x4,128x4 smem=203864 stage0=a:0,b:16384,sa:196608,sb:197120 barriers=202752,202784 acc_barriers=202816,202824 tmem_slot=202832 tmem=512 acc=0:256 sfa=256,268,280,292 sfb=260,272,284,296"
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.tcgen05.alloc %{{.*}}, %c512_i32 : !llvm.ptr<3>, i32
// CHECK: nvvm.tcgen05.relinquish_alloc_permit
// CHECK: nvvm.tcgen05.fence <before>
// CHECK: nvvm.barrier0
// CHECK: nvvm.tcgen05.fence <after>
// CHECK-NOT: nvvm.setmaxregister
// MMA thread: wait for the epilogue to have read the accumulator, then per
// stage the scale copies and four MMAs with scale ids k = 0-3, whose
// instruction descriptors are E4M3 A (0 << 7), E5M2 B (1 << 10), N = 256
// (32 << 17), UE8M0 (1 << 23), M = 128 (8 << 24): 0x08C00400, plus
// k << 4 | k << 29.
// CHECK: nvvm.elect.sync
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.tcgen05.fence <after>
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.tcgen05.fence <after>
// CHECK: nvvm.tcgen05.cp {{.*}} {multicast = #nvvm.tcgen05_cp_multicast<warpx4>, shape = #nvvm.tcgen05_cp_shape<shape_32x128b>}
// CHECK-COUNT-2: nvvm.tcgen05.cp {{.*}} {multicast = #nvvm.tcgen05_cp_multicast<warpx4>, shape = #nvvm.tcgen05_cp_shape<shape_32x128b>}
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c146801664_i32, %{{.*}}, %{{.*}}, %{{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block32>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf8f6f4>}
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c683672592_i32, %true
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c1220543520_i32, %true
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c1757414448_i32, %true
// CHECK: nvvm.tcgen05.commit %{{.*}} : !llvm.ptr<3>
// CHECK: nvvm.tcgen05.commit %{{.*}} : !llvm.ptr<3>
// TMA warp: the skeleton's loads, the same as on SM90.
// CHECK: nvvm.elect.sync
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-5: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// Epilogue: 8 loads of 32 columns, the accumulator released after the
// last, 16-byte stores of bf16.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.tcgen05.fence <after>
// CHECK-COUNT-7: nvvm.tcgen05.ld {{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<32xi32>
// CHECK: nvvm.tcgen05.ld {{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<32xi32>
// CHECK-NEXT: nvvm.tcgen05.wait <load>
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK: nvvm.mbarrier.arrive
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// After the roles: warp 1 frees the tensor memory.
// CHECK: nvvm.tcgen05.fence <before>
// CHECK: nvvm.barrier0
// CHECK: nvvm.tcgen05.fence <after>
// CHECK: nvvm.tcgen05.dealloc %{{.*}}, %c512_i32 : !llvm.ptr<6>, i32
func.func @mx(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<384x512xf8E5M2>, %bs: tensor<3x4x32x4x4xf8E8M0FNU>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<384x512xf8E5M2>, tensor<3x4x32x4x4xf8E8M0FNU> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}

// -----

// Linear scales get an inserted mx.swizzle (its own kernel) on sm_100a too.
// Partial tiles: N = 100 stores f32 runs of 4 columns (100 is no multiple
// of 8); one B chunk's SFB columns (4 per stage).
// CHECK-LABEL: func.func @mx_linear_scales
// CHECK: gpu.launch blocks
// CHECK: vector.store %{{.*}} : memref<1x2x32x4x4xf8E8M0FNU>, vector<16xf8E8M0FNU>
// CHECK: gpu.launch_func  @mx_gemm_mx_block_scaled_200x100x256::@kernel
// CHECK: mx.gemm_plan = "recipe=mx_block_scaled chip=sm_100a mnk=200x100x256 tile=128x256x128
// CHECK-SAME: sfa=256,268,280,292 sfb=260,272,284,296"
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
func.func @mx_linear_scales(%a: tensor<200x256xf8E4M3FN>, %as: tensor<200x8xf8E8M0FNU>, %b: tensor<100x256xf8E4M3FN>, %bs: tensor<100x8xf8E8M0FNU>) -> tensor<200x100xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<200x256xf8E4M3FN>, tensor<200x8xf8E8M0FNU>, tensor<100x256xf8E4M3FN>, tensor<100x8xf8E8M0FNU> -> tensor<200x100xf32>
  return %c : tensor<200x100xf32>
}

// -----

// FP6 x FP4 on kind::mxf8f6f4 (assembled, never run): the packed operands'
// tensor maps are of their element types (F6E3M2 = 8, F4E2M1 = 6, which
// the runtime encodes as 16U6/16U4_ALIGN16B: each 16 elements of a row in
// 16 bytes of shared memory) with K in elements and 128-element boxes, so
// the stage rows, the expected bytes and the smem descriptors are FP8's;
// the instruction descriptors carry A = E3M2 (4, bits 7-9) and B = E2M1
// (5, bits 10-12): 0x08C01600 plus the scale ids.
// CHECK-LABEL: func.func @fp6_fp4
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c8_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c6_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK: mx.gemm_plan = "recipe=mx_block_scaled chip=sm_100a mnk=256x128x512 tile=128x256x128 stages=4
// CHECK-SAME: stage0=a:0,b:16384,
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c146806272_i32,
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c683677200_i32,
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c50688_i32
func.func @fp6_fp4(%a: tensor<256x512xf6E3M2FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf4E2M1FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf6E3M2FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf4E2M1FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

// MXFP4 x MXFP4 on kind::mxf4 (assembled, never run): both operands stay
// packed, mapped as bytes (I8 = 10: what 16U4_ALIGN8B writes, 16 elements
// in 8 bytes) with 64-byte stage rows swizzled 64 (MXRT_SWIZZLE_64B), so a
// stage carries 128 x 64 + 256 x 64 operand bytes and 3 scale chunks
// (26112) and 8 stages fit. Two MMAs of K = 64 per stage, 32 bytes apart,
// whose smem descriptors are the 64B-swizzled tile (swizzle 4 << 61, SBO
// 512 bytes), and whose instruction descriptors have E2M1 = 1 at bits 7-9
// and 10-11 (0x08C00480) and scale_vec::2X's scale ids 0 and 2 (2 << 4 |
// 2 << 29 = 0x40000020). K = 64 is accepted: only the unpacking maps of
// kind::mxf8f6f4 need whole 128-element boxes.
// CHECK-LABEL: func.func @fp4_fp4
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c64_i32)
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c64_i32)
// CHECK: mx.gemm_plan = "recipe=mx_block_scaled chip=sm_100a mnk=256x384x512 tile=128x256x128 stages=8 roles=tma:w0,mma:w1,epilogue:wg1 tcgen05=mxf4.m128n256k64.block32
// CHECK-SAME: rows=64B/sw64,64B/sw64 smem=210072 stage0=a:0,b:8192,sa:196608,sb:197120
// CHECK-SAME: tmem=512 acc=0:256 sfa=256,268,280,292,304,316,328,340 sfb=260,272,284,296,308,320,332,344"
// CHECK-COUNT-3: nvvm.tcgen05.cp
// CHECK-NOT: nvvm.tcgen05.cp
// CHECK: arith.ori %{{.*}}, %c-9223301530671579136_i64 : i64
// CHECK: arith.ori %{{.*}}, %c-9223301530671579136_i64 : i64
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c146801792_i32, %{{.*}}, %{{.*}}, %{{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block32>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf4>}
// CHECK: arith.addi %{{.*}}, %c2_i64 : i64
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c1220543648_i32, %true, %{{.*}}, %{{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block32>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf4>}
// CHECK-NOT: nvvm.tcgen05.mma.block_scale
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c26112_i32
func.func @fp4_fp4(%a: tensor<256x512xf4E2M1FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<384x512xf4E2M1FN>, %bs: tensor<3x4x32x4x4xf8E8M0FNU>) -> tensor<256x384xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf4E2M1FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<384x512xf4E2M1FN>, tensor<3x4x32x4x4xf8E8M0FNU> -> tensor<256x384xbf16>
  return %c : tensor<256x384xbf16>
}

// -----

// NVFP4 on kind::mxf4nvf4 (assembled, never run): packed E2M1 as for
// kind::mxf4, E4M3 scales of 16-element blocks, two 128x4 chunks (64 K
// each) per stage and 128 rows, loaded as one box of 8 lines (A: 1024
// bytes, B: 2048; expected 8192 + 16384 + 3072 = 27648). Tensor memory
// holds them K chunk major, 8 SFA and 16 SFB columns per stage: A's chunks
// at 256 and 260, B's row tiles at 264 and 268 for K chunk 0, 272 and 276
// for K chunk 1. MMA k (K = 64) reads chunk k's columns with scale_vec::4X
// (block16, sf_id 0): UE4M3 (bit 23 clear), E2M1 codes 1: 0x08400480.
// The epilogue multiplies every value by the product of the two f32 tensor
// scales, the kernel's last two arguments.
// CHECK-LABEL: func.func @nvfp4
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c64_i32)
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c64_i32)
// CHECK: bufferization.to_buffer %arg4 read_only : tensor<f32> to memref<f32>
// CHECK: %[[TA:.*]] = llvm.inttoptr
// CHECK: bufferization.to_buffer %arg5 read_only : tensor<f32> to memref<f32>
// CHECK: %[[TB:.*]] = llvm.inttoptr
// CHECK: gpu.launch_func  @mx_gemm_mx_block_scaled_128x256x512::@kernel {{.*}} args(%{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>, %[[TA]] : !llvm.ptr, %[[TB]] : !llvm.ptr)
// CHECK: mx.gemm_plan = "recipe=mx_block_scaled chip=sm_100a mnk=128x256x512 tile=128x256x128 stages=8 roles=tma:w0,mma:w1,epilogue:wg1 tcgen05=mxf4nvf4.m128n256k64.block16
// CHECK-SAME: rows=64B/sw64,64B/sw64 smem=222360 stage0=a:0,b:8192,sa:196608,sb:197632
// CHECK-SAME: tmem=512 acc=0:256 sfa=256,280,304,328,352,376,400,424 sfb=264,288,312,336,360,384,408,432"
// CHECK: arith.addi %{{.*}}, %c256_i32 : i32
// CHECK: nvvm.tcgen05.cp
// CHECK: arith.addi %{{.*}}, %c260_i32 : i32
// CHECK: nvvm.tcgen05.cp
// CHECK: arith.addi %{{.*}}, %c264_i32 : i32
// CHECK: nvvm.tcgen05.cp
// CHECK: arith.addi %{{.*}}, %c272_i32 : i32
// CHECK: nvvm.tcgen05.cp
// CHECK: arith.addi %{{.*}}, %c268_i32 : i32
// CHECK: nvvm.tcgen05.cp
// CHECK: arith.addi %{{.*}}, %c276_i32 : i32
// CHECK: nvvm.tcgen05.cp
// CHECK-NOT: nvvm.tcgen05.cp
// CHECK: arith.addi %{{.*}}, %c256_i32 : i32
// CHECK: arith.addi %{{.*}}, %c264_i32 : i32
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c138413184_i32, %{{.*}}, %{{.*}}, %{{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block16>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf4nvf4>}
// CHECK: arith.addi %{{.*}}, %c260_i32 : i32
// CHECK: arith.addi %{{.*}}, %c272_i32 : i32
// CHECK: nvvm.tcgen05.mma.block_scale %{{.*}}, %{{.*}}, %{{.*}}, %c138413184_i32, %true, %{{.*}}, %{{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block16>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf4nvf4>}
// CHECK-NOT: nvvm.tcgen05.mma.block_scale
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c27648_i32
// CHECK-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}} box[%c0_i32, %{{.*}}]
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: %[[SA:.*]] = llvm.load %arg7 {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: %[[SB:.*]] = llvm.load %arg8 {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: %[[S:.*]] = arith.mulf %[[SA]], %[[SB]] : f32
// CHECK: nvvm.tcgen05.ld
// CHECK: arith.mulf %{{.*}}, %[[S]] : f32
func.func @nvfp4(%a: tensor<128x512xf4E2M1FN>, %as: tensor<1x8x32x4x4xf8E4M3FN>, %b: tensor<256x512xf4E2M1FN>, %bs: tensor<2x8x32x4x4xf8E4M3FN>, %ta: tensor<f32>, %tb: tensor<f32>) -> tensor<128x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 16] tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)
      : tensor<128x512xf4E2M1FN>, tensor<1x8x32x4x4xf8E4M3FN>, tensor<256x512xf4E2M1FN>, tensor<2x8x32x4x4xf8E4M3FN> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}

// -----

// A delayed cast of the product fused into the epilogue (as on sm_90a,
// gemm-output-cast.mlir): the epilogue warpgroup converts what it reads
// from tensor memory to FP8 codes and records its amax in the CTA's slot.
// CHECK-LABEL: func.func @mx_output_cast
// CHECK: gpu.alloc () : memref<256x384xf8E5M2>
// CHECK: llvm.func @kernel
// CHECK-SAME: recipe=mx_block_scaled
// CHECK-SAME: cast=f8E5M2:0 amax_slots=16
// CHECK: nvvm.tcgen05.ld
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E5M2)
// CHECK: llvm.atomicrmw umax
func.func @mx_output_cast(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x16xf8E8M0FNU>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<384x16xf8E8M0FNU>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<384x512xf8E4M3FN>, tensor<384x16xf8E8M0FNU> -> tensor<256x384xf32>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x384xf32>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>
}
