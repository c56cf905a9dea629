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
// CHECK:   arith.divf
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
