// The sm_90a MX exact kernel on every MX element type: FP6 and FP4 stage
// rows are their packed bytes (96 and 64 per 128 K; TMA maps of bytes,
// MXRT_TYPE_I8 = 10, FP4's rows 64B-swizzled, FP6's dense), each thread's
// 16-element unit of a 64-K half of A is one load (12 or 8 bytes; B's rows
// are loaded 16 bytes at a time, a whole row a thread), its four-code
// groups are widened into E4M3 bytes (a funnel shift where a group crosses a
// word), converted by the FP8 cvt and rescaled by 2^(7 - bias) in f16; INT8
// codes become f16 by the 1024 + byte trick and one f16 multiply-add.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu | FileCheck %s

// CHECK-LABEL: func.func @fp6_fp4
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c0_i32)
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c64_i32)
// CHECK: mx.gemm_plan = "recipe=mx_exact chip=sm_90a mnk=256x128x512 tile=128x256x128 stages=5 {{.*}} scales=128x4,128x4 rows=96B/sw0,64B/sw64 smem=217680 stage0=a:0,b:12288,
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c30208_i32
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> vector<3xi32>
// CHECK: llvm.intr.fshr(%{{.*}}, %{{.*}}, %c24_i32)
// CHECK: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E4M3FN)
// CHECK-NEXT: arith.mulf %{{.*}}, %[[FP6SHIFT:.*]] : vector<2xf16>
// CHECK: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E4M3FN)
// CHECK-NEXT: arith.mulf %{{.*}} : vector<2xf16>
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
func.func @fp6_fp4(%a: tensor<256x512xf6E3M2FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf4E2M1FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf6E3M2FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf4E2M1FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

// CHECK-LABEL: func.func @int8_e5m2
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c10_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK: llvm.call @mxrtEncodeTensorMap(%{{.*}}, %{{.*}}, %c1_i32, %c2_i32, %{{.*}}, %{{.*}}, %c128_i32)
// CHECK: mx.gemm_plan = "recipe=mx_exact chip=sm_90a mnk=200x72x256 tile=128x256x128 stages=3 {{.*}} scales=128x4,128x4 smem=
// CHECK-NOT: rows=
// CHECK: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E5M2)
// CHECK-NOT: arith.mulf %{{.*}} : vector<2xf16>
// CHECK: arith.xori %{{.*}}, %c-2139062144_i32 : i32
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 4, 1, 4] : vector<4xi8>, vector<4xi8>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<2xf16>
// CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} : vector<2xf16>
func.func @int8_e5m2(%a: tensor<200x256xi8>, %as: tensor<200x8xf8E8M0FNU>, %b: tensor<72x256xf8E5M2>, %bs: tensor<72x8xf8E8M0FNU>) -> tensor<200x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<200x256xi8>, tensor<200x8xf8E8M0FNU>, tensor<72x256xf8E5M2>, tensor<72x8xf8E8M0FNU> -> tensor<200x72xf32>
  return %c : tensor<200x72xf32>
}
