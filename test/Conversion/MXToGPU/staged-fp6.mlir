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
// one address, and the kernel asks for five CTAs an SM. 272 columns are not
// whole rowwise blocks: the rowwise part reads strips here (whole blocks:
// @mxfp6_fused_whole_blocks below).
// CHECK-LABEL: func @mxfp6_fused
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>>)
// CHECK: gpu.barrier {mx.min_ctas_per_sm = 5 : i64}
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

// Rows of whole blocks (512 columns): a rowwise lane reads a whole block of
// 32 from the tile (one 64-byte vector), reduces its amax with 15 packed
// maxima and no shuffle, and stores the block's 24 packed bytes as one
// 8-byte-aligned vector of 6 words, two blocks a lane (the columnwise part
// keeps its strips, shuffles and 4-byte row stores).
// CHECK-LABEL: func @mxfp6_fused_whole_blocks
// CHECK: gpu.barrier {mx.min_ctas_per_sm = 5 : i64}
// CHECK: gpu.shuffle xor
// CHECK: } else {
// CHECK-NOT: gpu.shuffle
// CHECK: vector.load %{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>>, vector<32xbf16>
// CHECK-COUNT-15: nvvm.inline_ptx "max.NaN.xorsign.abs.bf16x2
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<64x96xi32>, vector<6xi32>
// CHECK-NOT: gpu.shuffle
// CHECK: vector.load %{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>>, vector<32xbf16>
// CHECK-COUNT-15: nvvm.inline_ptx "max.NaN.xorsign.abs.bf16x2
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<64x96xi32>, vector<6xi32>
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.terminator
func.func @mxfp6_fused_whole_blocks(%x: tensor<64x512xbf16>) -> (tensor<64x512xf6E3M2FN>, tensor<1x4x32x4x4xf8E8M0FNU>, tensor<64x512xf6E3M2FN>, tensor<2x512xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x512xbf16> -> tensor<64x512xf6E3M2FN>, tensor<64x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<64x16xf8E8M0FNU> -> tensor<1x4x32x4x4xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] : tensor<64x512xbf16> -> tensor<64x512xf6E3M2FN>, tensor<2x512xf8E8M0FNU>
  return %d, %t, %c, %cs : tensor<64x512xf6E3M2FN>, tensor<1x4x32x4x4xf8E8M0FNU>, tensor<64x512xf6E3M2FN>, tensor<2x512xf8E8M0FNU>
}

// -----

// f32 inputs are staged too (a 32 KiB tile), with saturated codes, and ask
// for no occupancy: the kernel takes 87 registers. The rowwise kernel of
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
