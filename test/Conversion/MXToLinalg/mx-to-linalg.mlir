// RUN: mx-opt %s --convert-mx-to-linalg --split-input-file | FileCheck %s

// Blocks become tensor dimensions: pad to whole blocks, expand, reduce.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[BLOCK:.*]] = affine_map<(d0, d1) -> (d0, d1 floordiv 32)>
// CHECK-LABEL: func @quantize_rowwise
// CHECK-SAME: (%[[X:.*]]: tensor<70x33xbf16>)
// CHECK: %[[PAD:.*]] = tensor.pad %[[X]] low[0, 0] high[0, 31]
// CHECK: %[[EXP:.*]] = tensor.expand_shape %[[PAD]] {{\[\[}}0, 1], [2, 3]] output_shape [70, 1, 2, 32]
// CHECK: %[[AMAX:.*]] = linalg.reduce ins(%[[EXP]] : tensor<70x1x2x32xbf16>) outs(%{{.*}} : tensor<70x2xf32>) dimensions = [1, 3]
// CHECK:   math.absf
// CHECK:   arith.maximumf
// CHECK: %[[SCALES:.*]]:2 = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ID]]]
// CHECK-SAME: ins(%[[AMAX]] : tensor<70x2xf32>)
// The `ceil` exponent from amax's bits, no division (CeilScaleExponent.h):
// E4M3's offset 2^30 - bits(448) - 1 and zero limit bits(448 2^-127) + 1.
// CHECK-NOT: arith.divf
// CHECK:   %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK:   %[[SUM:.*]] = arith.addi %[[BITS]], %c-65011713_i32 : i32
// CHECK:   %[[SHIFTED:.*]] = arith.shrui %[[SUM]], %c23_i32 : i32
// CHECK:   %[[ZERO:.*]] = arith.cmpi ule, %[[BITS]], %c73400321_i32 : i32
// CHECK:   arith.select %[[ZERO]], %c0_i32, %[[SHIFTED]] : i32
// CHECK-NOT: arith.divf
// CHECK:   arith.bitcast %{{.*}} : i8 to f8E8M0FNU
// CHECK: %[[DATA:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[BLOCK]], #[[ID]]]
// CHECK-SAME: ins(%[[X]], %[[SCALES]]#1 : tensor<70x33xbf16>, tensor<70x2xf32>)
// CHECK:   arith.mulf
// CHECK:   arith.bitcast %{{.*}} : i8 to f8E4M3FN
// CHECK: return %[[DATA]], %[[SCALES]]#0
func.func @quantize_rowwise(%x: tensor<70x33xbf16>) -> (tensor<70x33xf8E4M3FN>, tensor<70x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<70x33xbf16> -> tensor<70x33xf8E4M3FN>, tensor<70x2xf8E8M0FNU>
  return %d, %s : tensor<70x33xf8E4M3FN>, tensor<70x2xf8E8M0FNU>
}

// -----

// Exact scales divide instead of multiplying by an inverse power of two; a
// shape that the block divides needs no padding.
// CHECK-LABEL: func @quantize_exact_columnwise
// CHECK-NOT: tensor.pad
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] output_shape [2, 32, 16, 1]
// CHECK: linalg.reduce
// CHECK: linalg.generic
// CHECK-NOT: arith.bitcast %{{.*}} : i8 to f8E8M0FNU
// CHECK: linalg.generic
// CHECK:   arith.divf
func.func @quantize_exact_columnwise(%x: tensor<64x16xf32>) -> tensor<64x16xf8E5M2> {
  %d, %s = mx.quantize %x block [32, 1] rounding exact : tensor<64x16xf32> -> tensor<64x16xf8E5M2>, tensor<2x16xf32>
  return %d : tensor<64x16xf8E5M2>
}

// -----

// CHECK-DAG: #[[BLOCK:.*]] = affine_map<(d0, d1) -> (d0 floordiv 128, d1 floordiv 128)>
// CHECK-LABEL: func @dequantize
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[BLOCK]], #{{.*}}]
// CHECK:   arith.mulf
// CHECK:   arith.truncf %{{.*}} : f32 to bf16
func.func @dequantize(%d: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) -> tensor<200x300xbf16> {
  %x = mx.dequantize %d, %s block [128, 128] : tensor<200x300xf8E4M3FN>, tensor<2x3xf32> -> tensor<200x300xbf16>
  return %x : tensor<200x300xbf16>
}

// -----

// Swizzling is pad + reshape to [R'/128, 4, 32, C'/4, 4] + a transpose that
// swaps dims 1 and 3.
// CHECK-LABEL: func @swizzle
// CHECK: %[[PAD:.*]] = tensor.pad %{{.*}} low[0, 0] high[12, 2]
// CHECK: %[[EXP:.*]] = tensor.expand_shape %[[PAD]] {{\[\[}}0, 1, 2], [3, 4]] output_shape [4, 4, 32, 2, 4]
// CHECK: linalg.transpose ins(%[[EXP]] : tensor<4x4x32x2x4xf8E8M0FNU>) outs(%{{.*}} : tensor<4x2x32x4x4xf8E8M0FNU>) permutation = [0, 3, 2, 1, 4]
func.func @swizzle(%s: tensor<500x6xf8E8M0FNU>) -> tensor<4x2x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return %t : tensor<4x2x32x4x4xf8E8M0FNU>
}

// -----

// Columnwise scales swizzle their transpose.
// CHECK-LABEL: func @swizzle_columnwise
// CHECK: linalg.transpose ins(%{{.*}} : tensor<2x200xf8E8M0FNU>) outs(%{{.*}} : tensor<200x2xf8E8M0FNU>) permutation = [1, 0]
// CHECK: tensor.pad
// CHECK: linalg.transpose {{.*}} permutation = [0, 3, 2, 1, 4]
func.func @swizzle_columnwise(%s: tensor<2x200xf8E8M0FNU>) -> tensor<2x1x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x200xf8E8M0FNU> -> tensor<2x1x32x4x4xf8E8M0FNU>
  return %t : tensor<2x1x32x4x4xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func @unswizzle
// CHECK: %[[T:.*]] = linalg.transpose {{.*}} permutation = [0, 3, 2, 1, 4]
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[\[}}0, 1, 2], [3, 4]] : tensor<4x4x32x2x4xf8E8M0FNU> into tensor<512x8xf8E8M0FNU>
// CHECK: tensor.extract_slice %[[C]][0, 0] [500, 6] [1, 1]
func.func @unswizzle(%t: tensor<4x2x32x4x4xf8E8M0FNU>) -> tensor<500x6xf8E8M0FNU> {
  %s = mx.unswizzle %t : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  return %s : tensor<500x6xf8E8M0FNU>
}

// -----

// The reference GEMM: unswizzle, dequantize both operands to f32, contract
// over K in f32, round once to the result type.
// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @scaled_matmul
// CHECK: tensor.extract_slice
// CHECK: %[[LHS:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<256x64xf8E4M3FN>, tensor<256x2xf8E8M0FNU>) outs(%{{.*}} : tensor<256x64xf32>)
// CHECK: %[[RHS:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<128x64xf8E5M2>, tensor<128x2xf8E8M0FNU>) outs(%{{.*}} : tensor<128x64xf32>)
// CHECK: %[[ACC:.*]] = linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[LHS]], %[[RHS]] : tensor<256x64xf32>, tensor<128x64xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[ACC]] : tensor<256x128xf32>)
// CHECK:   arith.truncf %{{.*}} : f32 to bf16
func.func @scaled_matmul(%a: tensor<256x64xf8E4M3FN>, %as: tensor<2x1x32x4x4xf8E8M0FNU>,
                         %b: tensor<128x64xf8E5M2>, %bs: tensor<128x2xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x64xf8E4M3FN>, tensor<2x1x32x4x4xf8E8M0FNU>, tensor<128x64xf8E5M2>, tensor<128x2xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

// Batch dimensions are kept; each slice is padded to whole tiles on its own.
// CHECK-LABEL: func @swizzle_batched
// CHECK: tensor.pad %{{.*}} low[0, 0, 0] high[0, 56, 1]
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2, 3], [4, 5]] output_shape [2, 2, 4, 32, 1, 4]
// CHECK: linalg.transpose {{.*}} permutation = [0, 1, 4, 3, 2, 5]
func.func @swizzle_batched(%s: tensor<2x200x3xf8E8M0FNU>) -> tensor<2x2x1x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x200x3xf8E8M0FNU> -> tensor<2x2x1x32x4x4xf8E8M0FNU>
  return %t : tensor<2x2x1x32x4x4xf8E8M0FNU>
}

// -----

// Blockwise GEMM-ready: transposed so the unscaled dimension is innermost,
// padded to a multiple of 4.
// CHECK-LABEL: func @swizzle_blockwise
// CHECK: linalg.transpose {{.*}} permutation = [1, 0]
// CHECK: tensor.pad %{{.*}} low[0, 0] high[0, 2]
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [4, 63, 4] : tensor<4x252xf32> into tensor<4x63x4xf32>
func.func @swizzle_blockwise(%s: tensor<250x4xf32>) -> tensor<4x63x4xf32> {
  %g = mx.swizzle %s layout blockwise : tensor<250x4xf32> -> tensor<4x63x4xf32>
  return %g : tensor<4x63x4xf32>
}

// -----

// Columnwise blockwise scales are already K-block-major: no transpose.
// CHECK-LABEL: func @unswizzle_blockwise_columnwise
// CHECK-NOT: linalg.transpose
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<2x63x4xf32> into tensor<2x252xf32>
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [2, 250] [1, 1]
func.func @unswizzle_blockwise_columnwise(%t: tensor<2x63x4xf32>) -> tensor<2x250xf32> {
  %s = mx.unswizzle %t unscaled_dim 1 layout blockwise : tensor<2x63x4xf32> -> tensor<2x250xf32>
  return %s : tensor<2x250xf32>
}

// -----

// K-outer operands are read through transposed indexing maps; batch
// dimensions are parallel.
// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func @matmul_batched_k_outer
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
func.func @matmul_batched_k_outer(%a: tensor<2x64x48xf8E4M3FN>, %as: tensor<2x2x48xf8E8M0FNU>, %b: tensor<2x64x40xf8E4M3FN>, %bs: tensor<2x2x40xf8E8M0FNU>) -> tensor<2x48x40xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32, 1] lhs_layout k_outer rhs_block [1, 32, 1] rhs_layout k_outer
      : tensor<2x64x48xf8E4M3FN>, tensor<2x2x48xf8E8M0FNU>, tensor<2x64x40xf8E4M3FN>, tensor<2x2x40xf8E8M0FNU> -> tensor<2x48x40xf32>
  return %c : tensor<2x48x40xf32>
}

// -----

// Tiled scales of a K-outer operand are unswizzled along its M dimension.
// CHECK-LABEL: func @matmul_k_outer_tiles
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [48, 2] [1, 1] : tensor<128x4xf8E8M0FNU> to tensor<48x2xf8E8M0FNU>
// CHECK: linalg.transpose ins(%{{.*}} : tensor<48x2xf8E8M0FNU>) outs(%{{.*}} : tensor<2x48xf8E8M0FNU>) permutation = [1, 0]
func.func @matmul_k_outer_tiles(%a: tensor<64x48xf8E4M3FN>, %as: tensor<1x1x32x4x4xf8E8M0FNU>, %b: tensor<40x64xf8E4M3FN>, %bs: tensor<40x2xf8E8M0FNU>) -> tensor<48x40xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [32, 1] lhs_layout k_outer rhs_block [1, 32]
      : tensor<64x48xf8E4M3FN>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<40x64xf8E4M3FN>, tensor<40x2xf8E8M0FNU> -> tensor<48x40xf32>
  return %c : tensor<48x40xf32>
}

// -----

// CHECK-LABEL: func @amax
// CHECK: linalg.reduce ins(%{{.*}} : tensor<1x64x1x128xbf16>) outs(%{{.*}} : tensor<1x1xf32>) dimensions = [1, 3]
// CHECK: math.absf
// CHECK: arith.maximumf
// CHECK: %[[AMAX:.*]] = tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<1x1xf32>
// CHECK: tensor.from_elements %[[AMAX]] : tensor<f32>
func.func @amax(%x: tensor<64x128xbf16>) -> tensor<f32> {
  %a = mx.amax %x : tensor<64x128xbf16> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

// CHECK-LABEL: func @quantize_delayed
// CHECK: %[[SCALE:.*]] = tensor.extract %{{.*}}[%c1] : tensor<3xf32>
// CHECK: linalg.generic
// CHECK:   arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[INV]], %[[INV]] : f32
// CHECK: %[[CANONICAL:.*]] = arith.select %[[NAN]], %{{.*}}, %[[INV]] : f32
// CHECK: tensor.splat %[[CANONICAL]] : tensor<1x1xf32>
// CHECK: %[[AMAX:.*]] = tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<1x1xf32>
// CHECK: tensor.insert %[[AMAX]] into %{{.*}}[%{{.*}}, %{{.*}}] : tensor<16x3xf32>
func.func @quantize_delayed(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) -> (tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %i, %h1 : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// The column max (no |.|, NaN ignored, from 0), the scale rule, then the
// rotation: rows 2.. move up one, row 0 goes last, row 0 becomes zero.
// CHECK-LABEL: func @update_amax_history
// CHECK: linalg.reduce
// CHECK-NOT: math.absf
// CHECK: arith.maxnumf
// CHECK: linalg.generic
// CHECK:   arith.divf
// CHECK:   arith.divf
// CHECK:   arith.select
// CHECK: tensor.extract_slice %{{.*}}[2, 0] [14, 3] [1, 1]
// CHECK: tensor.insert_slice %{{.*}}[1, 0] [14, 3] [1, 1]
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [1, 3] [1, 1]
// CHECK: tensor.insert_slice %{{.*}}[15, 0] [1, 3] [1, 1]
func.func @update_amax_history(%h: tensor<16x3xf32>, %s: tensor<3xf32>) -> (tensor<16x3xf32>, tensor<3xf32>) {
  %h1, %s1 = mx.update_amax_history %h, %s element f8E4M3FN margin 1 : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
  return %h1, %s1 : tensor<16x3xf32>, tensor<3xf32>
}

// -----

// most_recent reads row 0 only.
// CHECK-LABEL: func @update_most_recent
// CHECK-NOT: linalg.reduce
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [1, 3] [1, 1] : tensor<16x3xf32> to tensor<3xf32>
func.func @update_most_recent(%h: tensor<16x3xf32>, %s: tensor<3xf32>) -> (tensor<16x3xf32>, tensor<3xf32>) {
  %h1, %s1 = mx.update_amax_history %h, %s element f8E5M2 algorithm most_recent : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
  return %h1, %s1 : tensor<16x3xf32>, tensor<3xf32>
}

// -----

// A block longer than its dimension is one partial block: the input is
// padded to the dimension (here not at all), never to the block.
// CHECK-LABEL: func @block_longer_than_dimension
// CHECK-NOT: tensor.pad
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] output_shape [4, 1, 1, 64] : tensor<4x64xf32> into tensor<4x1x1x64xf32>
func.func @block_longer_than_dimension(%x: tensor<4x64xf32>) -> tensor<4x1xf32> {
  %d, %s = mx.quantize %x block [1, 4611686018427387904] rounding exact : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x1xf32>
  return %s : tensor<4x1xf32>
}

// -----

// A transposed quantize quantizes the transposed input: the blocks, the amax
// and the cast all read the transpose.
// CHECK-LABEL: func @quantize_transposed
// CHECK: %[[T:.*]] = linalg.transpose ins(%{{.*}} : tensor<64x32xbf16>) outs(%{{.*}} : tensor<32x64xbf16>) permutation = [1, 0]
// CHECK: tensor.expand_shape %[[T]]
// CHECK: linalg.generic {{.*}} ins(%[[T]], %{{.*}} : tensor<32x64xbf16>, tensor<32x2xf32>)
func.func @quantize_transposed(%x: tensor<64x32xbf16>) -> (tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x transposed block [1, 32] : tensor<64x32xbf16> -> tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>
  return %d, %s : tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func @quantize_delayed_transposed
// CHECK: %[[T:.*]] = linalg.transpose ins(%{{.*}} : tensor<64x128xbf16>) outs(%{{.*}} : tensor<128x64xbf16>) permutation = [1, 0]
// CHECK: linalg.generic {{.*}} ins(%[[T]] : tensor<128x64xbf16>) outs(%{{.*}} : tensor<128x64xf8E4M3FN>)
func.func @quantize_delayed_transposed(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) -> (tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1 transposed
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %i, %h1 : tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// The epilogue: the f32 product + bias[n] + D[m, n], then one rounding.
// CHECK-DAG: #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func @scaled_matmul_epilogue
// CHECK: linalg.generic {indexing_maps = [#[[ID2]], #[[COL]], #[[ID2]], #[[ID2]]], {{.*}}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<16xf32>, tensor<32x16xbf16>) outs(%{{.*}} : tensor<32x16xbf16>)
// CHECK:   %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK:   %[[D:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:   %[[ALL:.*]] = arith.addf %[[SUM]], %[[D]] : f32
// CHECK:   arith.truncf %[[ALL]] : f32 to bf16
func.func @scaled_matmul_epilogue(%a: tensor<32x64xf8E4M3FN>, %as: tensor<32x2xf8E8M0FNU>, %b: tensor<16x64xf8E4M3FN>, %bs: tensor<16x2xf8E8M0FNU>, %bias: tensor<16xf32>, %d: tensor<32x16xbf16>) -> tensor<32x16xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      bias(%bias : tensor<16xf32>) accumulate(%d : tensor<32x16xbf16>)
      : tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU> -> tensor<32x16xbf16>
  return %c : tensor<32x16xbf16>
}

// -----

// A column sum is a reduction over the rows in f32, from -0.
// CHECK-LABEL: func @column_sum
// CHECK: %[[ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<96xf32>) -> tensor<96xf32>
// CHECK: linalg.reduce ins(%{{.*}} : tensor<80x96xbf16>) outs(%[[INIT]] : tensor<96xf32>) dimensions = [0]
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.addf
func.func @column_sum(%x: tensor<80x96xbf16>) -> tensor<96xf32> {
  %s = mx.column_sum %x : tensor<80x96xbf16> -> tensor<96xf32>
  return %s : tensor<96xf32>
}
