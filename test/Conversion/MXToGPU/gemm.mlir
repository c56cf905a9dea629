// The generated Hopper GEMM kernels of mx.scaled_matmul: the plan printed on
// each kernel (and why it is the kernel's: gemm=kernel here), the warp
// roles, the mbarrier ring, the TMA loads, the per-recipe main loops, the
// epilogues, and the host code that launches them.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu | FileCheck %s

// MX exact: bf16 wgmma on operands converted from FP8 x 2^(b-127); the E8M0
// chunks arrive by TMA next to the boxes of A and B (their tensor maps read
// the swizzled scales as rows of 128 bytes, 4 per chunk). A is
// converted in registers (one 16-byte load per 64-K half of a row and of the
// row 8 below) and fed to a register-A wgmma (inline asm); B goes through a
// bf16 buffer of shared memory (each thread one row: four 16-byte loads,
// eight 16-byte stores), its K words stored permuted like A's.
// CHECK-LABEL: func.func @mx_exact
// CHECK-COUNT-2: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c0_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK-COUNT-2: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c5_i32, %c2_i32, %{{.*}}, %{{.*}}, %c0_i32)
// CHECK: gpu.launch_func @mx_gemm_mx_exact_256x128x512::@kernel blocks in (%c2, %c1, %c1) threads in (%c384, %c1, %c1) dynamic_shared_memory_size %c218672_i32 args(%{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>)
// CHECK: gpu.module @mx_gemm_mx_exact_256x128x512
// CHECK: llvm.mlir.global external @mx_gemm_shared() {addr_space = 3 : i32, alignment = 1024 : i64}
// CHECK: llvm.func @kernel(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}) attributes {gpu.kernel
// CHECK-SAME: mx.gemm_lowering = "kernel: gemm=kernel"
// CHECK-SAME: mx.gemm_plan = "recipe=mx_exact chip=sm_90a mnk=256x128x512 tile=128x256x128 stages=3 roles=tma:1,mma:2x1 regs=40/232 wgmma=m64n256k16 ctas=2 cluster=1x1 group=8 epilogue=registers dequant=2x64 scales=128x4,128x4 smem=218672 stage0=a:0,b:16384,sa:212992,sb:213504 bf16_b=147456 barriers=217600,217624"
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK-COUNT-6: nvvm.mbarrier.init %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.setmaxregister  decrease 40
// CHECK: nvvm.elect.sync
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// CHECK-NOT: nvvm.cp.async.bulk.shared.cluster.global
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: nvvm.shfl.sync  idx
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E4M3FN)
// CHECK-COUNT-8: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $261, 0;\0Awgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {$0, {{.*}}, $127}, {$256, $257, $258, $259}, $260, p, 1, 1, 0;\0A}", "=f,
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK-COUNT-4: llvm.inline_asm has_side_effects
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
func.func @mx_exact(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

// Linear MX scales are swizzled by an inserted mx.swizzle (its own kernel)
// before the GEMM copies 128x4 chunks of them; E5M2 operands convert as such.
// CHECK-LABEL: func.func @mx_linear_scales
// CHECK: gpu.launch blocks
// CHECK: vector.store %{{.*}} : memref<1x2x32x4x4xf8E8M0FNU>, vector<16xf8E8M0FNU>
// CHECK: gpu.launch_func  @mx_gemm_mx_exact_100x72x256::@kernel
// CHECK: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E5M2)
// CHECK: llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
func.func @mx_linear_scales(%a: tensor<100x256xf8E5M2>, %as: tensor<100x8xf8E8M0FNU>, %b: tensor<72x256xf8E5M2>, %bs: tensor<72x8xf8E8M0FNU>) -> tensor<100x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<100x256xf8E5M2>, tensor<100x8xf8E8M0FNU>, tensor<72x256xf8E5M2>, tensor<72x8xf8E8M0FNU> -> tensor<100x72xf32>
  return %c : tensor<100x72xf32>
}

// -----

// FP8 blockwise (1x128 x 128x128): compact 1x128 scales of A are first laid
// out GEMM-ready ([KB, M'] rows, an inserted mx.swizzle kernel), which TMA
// then loads with each stage through a tensor map of its own (f32, no
// swizzle); B's 128x128 scales are copied by the consumers into shared
// memory when a tile starts. Per stage: four e4m3 k32 wgmma into a fresh
// accumulator, then one FMA per element times sa x sb read from shared
// memory. f32 output: stores from registers.
// CHECK-LABEL: func.func @blockwise
// CHECK: gpu.launch blocks
// CHECK: llvm.call @mxrtEncodeTensorMap
// CHECK: llvm.call @mxrtEncodeTensorMap
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c4_i32, %c2_i32, %{{.*}}, %{{.*}}, %c0_i32)
// CHECK: gpu.launch_func @mx_gemm_blockwise_200x72x256::@kernel {{.*}} args({{.*}} : !llvm.array<16 x i64>, {{.*}} : !llvm.array<16 x i64>, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.array<16 x i64>)
// CHECK: llvm.func @kernel
// CHECK-SAME: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=200x72x256 tile=128x128x128 stages=6 roles=tma:1,mma:2x1 regs=40/232 wgmma=m64n128k32 ctas=2 cluster=1x1 group=8 epilogue=registers scales=rows,blocks smem=200816 stage0=a:0,b:16384,sa:196608,sb:197120 tile_scales=199680,199680 barriers=199696,199744"
// CHECK-COUNT-12: nvvm.mbarrier.init
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// CHECK-NOT: nvvm.cp.async.bulk.shared.cluster.global
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: nvvm.barrier id
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: llvm.store %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier id
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <one>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK-COUNT-64: llvm.intr.fma
// CHECK: llvm.inline_asm has_side_effects "", "=f,
// CHECK: llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
func.func @blockwise(%a: tensor<200x256xf8E4M3FN>, %as: tensor<200x2xf32>, %b: tensor<72x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<200x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
    : tensor<200x256xf8E4M3FN>, tensor<200x2xf32>, tensor<72x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<200x72xf32>
  return %c : tensor<200x72xf32>
}

// -----

// Blockwise GEMM-ready scales of A ([KB, 200'/4, 4] = [2, 50, 4]) need no
// swizzle kernel: the TMA map reads them as they are, [2, 200] f32.
// CHECK-LABEL: func.func @blockwise_gemm_ready
// CHECK-NOT: gpu.launch blocks
// CHECK: gpu.launch_func @mx_gemm_blockwise_200x72x256::@kernel
// CHECK: scales=rows,blocks
func.func @blockwise_gemm_ready(%a: tensor<200x256xf8E4M3FN>, %as: tensor<2x50x4xf32>, %b: tensor<72x256xf8E4M3FN>, %bs: tensor<1x2xf32>) -> tensor<200x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
    : tensor<200x256xf8E4M3FN>, tensor<2x50x4xf32>, tensor<72x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<200x72xf32>
  return %c : tensor<200x72xf32>
}

// -----

// Per-tensor: the promotion is a plain add; the scalar scales multiply the
// result in the epilogue. Mixed E5M2 x E4M3 operands, f16 output: the
// epilogue writes 64-column panels of the tile with stmatrix and stores
// them by TMA (a tensor map of the output, 128B-swizzled f16), after the
// previous tile's stores have read the panels.
// CHECK-LABEL: func.func @per_tensor
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c3_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK: llvm.func @kernel
// CHECK-SAME: mx.gemm_plan = "recipe=per_tensor chip=sm_90a mnk=130x264x64 tile=128x128x128 stages=6 roles=tma:1,mma:2x1 regs=40/232 wgmma=m64n128k32 ctas=6 cluster=1x1 group=8 epilogue=tma scales=scalar,scalar smem=230496 stage0=a:0,b:16384 out=196608
// CHECK: nvvm.wgmma.mma_async {{.*}} A[<e5m2>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-NOT: llvm.intr.fma
// CHECK-COUNT-64: arith.addf
// CHECK: arith.mulf
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id
// CHECK-COUNT-8: nvvm.stmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id
// CHECK-COUNT-2: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.cp.async.bulk.wait_group 0
// CHECK-NOT: {read}
func.func @per_tensor(%a: tensor<130x64xf8E5M2>, %as: tensor<1x1xf32>, %b: tensor<264x64xf8E4M3FN>, %bs: tensor<1x1xf32>) -> tensor<130x264xf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [130, 64] rhs_block [264, 64]
    : tensor<130x64xf8E5M2>, tensor<1x1xf32>, tensor<264x64xf8E4M3FN>, tensor<1x1xf32> -> tensor<130x264xf16>
  return %c : tensor<130x264xf16>
}

// -----

// An odd N cannot store column pairs as one aligned vector, nor by TMA:
// scalar stores from registers. 1x128 scales on both operands (the wgrad
// form) take their products sa x sb from a tf32 wgmma: two kernels write
// the tf32 operand rows of A and B (K-blocks x P rows, P the rows rounded
// up to whole tiles), the stages load them by TMA in place of the scales,
// and the chain of each K-block is followed by one m64n128k8 tf32 wgmma;
// the promotion is one FMA an element. The rows are freed after the GEMM.
// The rows' kernels read the compact [R, KB] scales as they are (row stride
// KB, K-block stride 1): no swizzle kernel runs before them.
// CHECK-LABEL: func.func @odd_n
// CHECK-NOT: gpu.launch
// CHECK: gpu.alloc  () : memref<128x4xf32>
// CHECK-NOT: gpu.launch blocks
// CHECK: gpu.launch_func  @mx_scale_products_lhs_1x64_1_1_128::@kernel blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: gpu.alloc  () : memref<128x4xf32>
// CHECK: gpu.launch_func  @mx_scale_products_rhs_1x35_1_1_128::@kernel
// CHECK: gpu.launch_func  @mx_gemm_blockwise_64x35x128::@kernel
// CHECK-COUNT-2: gpu.dealloc  %{{.*}} : memref<128x4xf32>
// CHECK: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=64x35x128 tile=128x128x128 stages=6 roles=tma:1,mma:2x1 regs=40/232 wgmma=m64n128k32 products=tf32
// CHECK-SAME: epilogue=registers scales=rows,rows smem=224352 stage0=a:0,b:16384,sa:196608,sb:198656 zeros=221184
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, {{.*}}A[<e4m3>
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 8>, D[<f32>, <zero>], A[<tf32>, <one>, <row>], B[<tf32>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK-COUNT-64: llvm.intr.fma
// CHECK-NOT: llvm.fmul
// CHECK: llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK: gpu.module @mx_scale_products_lhs_1x64_1_1_128
// CHECK: arith.andi %{{.*}}, %c-8192_i32 : i32
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
func.func @odd_n(%a: tensor<64x128xf8E4M3FN>, %as: tensor<64x1xf32>, %b: tensor<35x128xf8E4M3FN>, %bs: tensor<35x1xf32>) -> tensor<64x35xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<64x128xf8E4M3FN>, tensor<64x1xf32>, tensor<35x128xf8E4M3FN>, tensor<35x1xf32> -> tensor<64x35xbf16>
  return %c : tensor<64x35xbf16>
}

// -----

// The same form on GEMM-ready [KB, R'/4, 4] scales: the rows' kernels read
// them with row stride 1 and K-block stride R' (the padded rows are zeros).
// CHECK-LABEL: func.func @wgrad_gemm_ready
// CHECK: gpu.launch_func  @mx_scale_products_lhs_2x64_1_64_128::@kernel
// CHECK: gpu.launch_func  @mx_scale_products_rhs_2x36_1_36_128::@kernel
// CHECK: gpu.launch_func  @mx_gemm_blockwise_64x35x256::@kernel
func.func @wgrad_gemm_ready(%a: tensor<64x256xf8E4M3FN>, %as: tensor<2x16x4xf32>, %b: tensor<35x256xf8E4M3FN>, %bs: tensor<2x9x4xf32>) -> tensor<64x35xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<64x256xf8E4M3FN>, tensor<2x16x4xf32>, tensor<35x256xf8E4M3FN>, tensor<2x9x4xf32> -> tensor<64x35xf32>
  return %c : tensor<64x35xf32>
}

// -----

// The swizzle that linear MX scales need is inserted before the quantize
// fusion plan is made, so the quantize kernel writes the 128x4 tiles itself:
// one quantize launch, no swizzle launch, then the GEMM.
// CHECK-LABEL: func.func @quantize_then_gemm
// CHECK: gpu.alloc  () : memref<1x2x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks
// CHECK: memref.store %{{.*}} : memref<1x2x32x4x4xf8E8M0FNU>
// CHECK-NOT: gpu.launch blocks
// CHECK: gpu.launch_func  @mx_gemm_mx_exact_128x64x256::@kernel
func.func @quantize_then_gemm(%x: tensor<128x256xbf16>, %b: tensor<64x256xf8E4M3FN>, %bs: tensor<1x2x32x4x4xf8E8M0FNU>) -> tensor<128x64xf32> {
  %d, %s = mx.quantize %x block [1, 32] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %c = mx.scaled_matmul %d, %s, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<64x256xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU> -> tensor<128x64xf32>
  return %c : tensor<128x64xf32>
}

// -----

// Staged MX (the default where M and N are large enough for converting
// once to pay for the copies): a staging kernel per operand type and shape writes a bf16 copy of
// each operand (one 16-byte load, the scale byte of the 128x4 tiles, two
// 16-byte stores per unit of 16 codes, each lane pair trading halves by
// shuffles so that a warp's store is 512 contiguous bytes), the GEMM streams the copies by TMA
// (64 K of bf16 per 128-byte row) into a chained f32 accumulator with one
// wgmma group in flight, releasing each stage when the next one's group is
// issued, and the copies are freed after it.
// CHECK-LABEL: func.func @mx_staged
// CHECK: %[[A16:.*]] = gpu.alloc () : memref<4096x640xbf16>
// CHECK: gpu.launch_func @mx_stage_bf16_f8E4M3FN_4096x640_tiled::@kernel blocks in (%c640, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: %[[B16:.*]] = gpu.alloc () : memref<2048x640xbf16>
// CHECK: gpu.launch_func @mx_stage_bf16_f6E2M3FN_2048x640_tiled::@kernel blocks in (%c320, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-COUNT-3: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c{{.*}}_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK: gpu.launch_func @mx_gemm_mx_staged_4096x2048x640::@kernel blocks in (%c132, %c1, %c1) threads in (%c384, %c1, %c1)
// CHECK: gpu.dealloc %[[A16]] : memref<4096x640xbf16>
// CHECK: gpu.dealloc %[[B16]] : memref<2048x640xbf16>
// CHECK: gpu.module @mx_gemm_mx_staged_4096x2048x640
// CHECK: mx.gemm_plan = "recipe=mx_staged chip=sm_90a mnk=4096x2048x640 tile=128x256x64 stages=3 roles=tma:1,mma:2x1 regs=40/232 wgmma=m64n256k16 ctas=132 cluster=1x1 group=8 epilogue=tma staged=f8E4M3FN,f6E2M3FN scales=staged,staged smem=214064 stage0=a:0,b:16384 out=147456 barriers=212992,213016"
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.stmatrix
// CHECK: gpu.module @mx_stage_bf16_f8E4M3FN_4096x640_tiled
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i8
// CHECK: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E4M3FN)
// CHECK-COUNT-8: nvvm.shfl.sync  idx
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK-COUNT-8: nvvm.shfl.sync  idx
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: gpu.module @mx_stage_bf16_f6E2M3FN_2048x640_tiled
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> vector<3xi32>
func.func @mx_staged(%a: tensor<4096x640xf8E4M3FN>, %as: tensor<32x5x32x4x4xf8E8M0FNU>, %b: tensor<2048x640xf6E2M3FN>, %bs: tensor<16x5x32x4x4xf8E8M0FNU>) -> tensor<4096x2048xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<4096x640xf8E4M3FN>, tensor<32x5x32x4x4xf8E8M0FNU>, tensor<2048x640xf6E2M3FN>, tensor<16x5x32x4x4xf8E8M0FNU> -> tensor<4096x2048xbf16>
  return %c : tensor<4096x2048xbf16>
}

// -----

// Staged MX with compact [R, K/32] scales: the staging kernels read them as
// they are (row * K/32 + block), so no swizzle kernel is inserted.
// CHECK-LABEL: func.func @mx_staged_compact_scales
// CHECK-NOT: gpu.launch blocks
// CHECK: gpu.launch_func @mx_stage_bf16_f8E4M3FN_4096x256::@kernel
// CHECK-NOT: gpu.launch blocks
// CHECK: gpu.launch_func @mx_stage_bf16_f8E4M3FN_2048x256::@kernel
// CHECK: gpu.launch_func @mx_gemm_mx_staged_4096x2048x256::@kernel
func.func @mx_staged_compact_scales(%a: tensor<4096x256xf8E4M3FN>, %as: tensor<4096x8xf8E8M0FNU>, %b: tensor<2048x256xf8E4M3FN>, %bs: tensor<2048x8xf8E8M0FNU>) -> tensor<4096x2048xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<4096x256xf8E4M3FN>, tensor<4096x8xf8E8M0FNU>, tensor<2048x256xf8E4M3FN>, tensor<2048x8xf8E8M0FNU> -> tensor<4096x2048xf32>
  return %c : tensor<4096x2048xf32>
}
