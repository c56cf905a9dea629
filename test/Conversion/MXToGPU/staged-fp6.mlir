// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file | FileCheck %s
// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file | FileCheck %s --check-prefix=STORES
// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file | FileCheck %s --check-prefix=SPLIT

// How the staged fused FP6 kernel rounds on sm_90a (mxfp6-mxint8.mlir has
// its tile and strips): E3M2 codes come from E5M2's cvt with the values
// unclamped, and the wide codes are narrowed, saturated (a wide code above
// E3M2's range, an exponent bit above its 3, becomes 0x1F), NaN-masked and
// packed in one recipe, three lop3 a strip row, instead of two f32 steps
// per element before the cvt. Each packed
// row's word (16 rows in each part) is stored at an immediate offset from
// one address, and the kernel asks for four CTAs an SM.
// CHECK-LABEL: func @mxfp6_fused
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>>)
// CHECK: gpu.barrier {mx.min_ctas_per_sm = 4 : i64}
// CHECK-NOT: arith.minnumf
// CHECK-COUNT-96: nvvm.inline_ptx "lop3.b32 $0, $1, $2, $3, 0xE4;"
// CHECK-NOT: lop3.b32
// CHECK-NOT: arith.minnumf
// CHECK: gpu.terminator
// A strip's 4 column scales are split between the 2 lane groups of its
// column block: 2 column and 2 row scales a lane (their `ceil` exponents'
// compares with E3M2's zero limit, bits(28 2^-127) + 1), where computing
// all 4 column scales in each lane took 6. No scale divides.
// SPLIT-LABEL: func @mxfp6_fused
// SPLIT: gpu.barrier
// SPLIT-NOT: arith.divf
// SPLIT-COUNT-4: arith.cmpi ule, %{{.*}}, %c39845889_i32{{.*}} : i32
// SPLIT-NOT: arith.cmpi ule, %{{.*}}, %c39845889_i32
// SPLIT-NOT: arith.divf
// SPLIT: gpu.terminator
// STORES-LABEL: func @mxfp6_fused
// STORES: gpu.barrier
// STORES-COUNT-32: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// STORES-NOT: llvm.store
// STORES: gpu.terminator
func.func @mxfp6_fused(%x: tensor<2x40x272xbf16>) -> (tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x40x9xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x40x9xf8E8M0FNU> -> tensor<2x1x3x32x4x4xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [1, 32, 1] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
  return %d, %t, %c, %cs : tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
}

// -----

// f32 inputs are staged too (a 32 KiB tile), with saturated codes, and ask
// for no occupancy: f32 strips take 107-122 registers. The rowwise kernel of
// FP6 saturates codes too (convertToPackedFP6): no kernel clamps values.
// CHECK-LABEL: func @mxfp6_fused_f32
// CHECK: workgroup(%{{.*}} : memref<32x256xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: mx.min_ctas_per_sm
// CHECK-NOT: arith.minnumf
// CHECK: nvvm.inline_ptx "lop3.b32 $0, $1, $2, $3, 0xE4;"
// CHECK-NOT: arith.minnumf
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-NOT: arith.minnumf
// CHECK: nvvm.inline_ptx "lop3.b32 $0, $1, $2, $3, 0xE4;"
// CHECK-NOT: arith.minnumf
// CHECK: gpu.terminator
func.func @mxfp6_fused_f32(%x: tensor<64x256xf32>, %y: tensor<32x64xf32>) -> (tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>, tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>, tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x256xf32> -> tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] : tensor<64x256xf32> -> tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>
  %r, %rs = mx.quantize %y block [1, 32] : tensor<32x64xf32> -> tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>
  return %d, %s, %c, %cs, %r, %rs : tensor<64x256xf6E2M3FN>, tensor<64x8xf8E8M0FNU>, tensor<64x256xf6E2M3FN>, tensor<2x256xf8E8M0FNU>, tensor<32x64xf6E2M3FN>, tensor<32x2xf8E8M0FNU>
}
