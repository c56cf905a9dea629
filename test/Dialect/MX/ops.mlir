// RUN: mx-opt %s | mx-opt | FileCheck %s
// RUN: mx-opt %s --mlir-print-op-generic | mx-opt | FileCheck %s

// CHECK-LABEL: func @quantize_rowwise
// CHECK: mx.quantize %{{.*}} block [1, 32] : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
func.func @quantize_rowwise(%x: tensor<128x96xbf16>) -> (tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  return %d, %s : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
}

// CHECK-LABEL: func @quantize_modes
// CHECK: mx.quantize %{{.*}} block [32, 1] rounding floor : tensor<70x33xf32> -> tensor<70x33xf8E5M2>, tensor<3x33xf8E8M0FNU>
// CHECK: mx.quantize %{{.*}} block [128, 128] rounding exact : tensor<70x33xf32> -> tensor<70x33xf8E4M3FN>, tensor<1x1xf32>
// CHECK: mx.quantize %{{.*}} block [70, 33] : tensor<70x33xf32> -> tensor<70x33xf8E4M3FN>, tensor<1x1xf32>
// CHECK: mx.quantize %{{.*}} block [1, 128] : tensor<70x33xf16> -> tensor<70x33xf8E4M3FN>, tensor<70x1xf32>
func.func @quantize_modes(%x: tensor<70x33xf32>, %h: tensor<70x33xf16>) {
  %0:2 = mx.quantize %x block [32, 1] rounding floor : tensor<70x33xf32> -> tensor<70x33xf8E5M2>, tensor<3x33xf8E8M0FNU>
  %1:2 = mx.quantize %x block [128, 128] rounding exact : tensor<70x33xf32> -> tensor<70x33xf8E4M3FN>, tensor<1x1xf32>
  %2:2 = mx.quantize %x block [70, 33] rounding ceil : tensor<70x33xf32> -> tensor<70x33xf8E4M3FN>, tensor<1x1xf32>
  %3:2 = mx.quantize %h block [1, 128] : tensor<70x33xf16> -> tensor<70x33xf8E4M3FN>, tensor<70x1xf32>
  return
}

// CHECK-LABEL: func @quantize_rank3
// CHECK: mx.quantize %{{.*}} block [1, 1, 32] : tensor<2x3x64xf32> -> tensor<2x3x64xf8E4M3FN>, tensor<2x3x2xf8E8M0FNU>
func.func @quantize_rank3(%x: tensor<2x3x64xf32>) -> tensor<2x3x2xf8E8M0FNU> {
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x3x64xf32> -> tensor<2x3x64xf8E4M3FN>, tensor<2x3x2xf8E8M0FNU>
  return %s : tensor<2x3x2xf8E8M0FNU>
}

// CHECK-LABEL: func @dequantize
// CHECK: mx.dequantize %{{.*}}, %{{.*}} block [1, 32] : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU> -> tensor<128x96xbf16>
func.func @dequantize(%d: tensor<128x96xf8E4M3FN>, %s: tensor<128x3xf8E8M0FNU>) -> tensor<128x96xbf16> {
  %x = mx.dequantize %d, %s block [1, 32] : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU> -> tensor<128x96xbf16>
  return %x : tensor<128x96xbf16>
}

// CHECK-LABEL: func @swizzle
// CHECK: mx.swizzle %{{.*}} : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
// CHECK: mx.unswizzle %{{.*}} : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
// CHECK: mx.swizzle %{{.*}} unscaled_dim 1 : tensor<16x200xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
func.func @swizzle(%s: tensor<500x6xf8E8M0FNU>, %c: tensor<16x200xf8E8M0FNU>) {
  %t = mx.swizzle %s : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  %u = mx.unswizzle %t : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  %v = mx.swizzle %c unscaled_dim 1 : tensor<16x200xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return
}

// CHECK-LABEL: func @scaled_matmul
// CHECK: mx.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lhs_block [1, 32] rhs_block [1, 32] : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E5M2>, tensor<128x16xf8E8M0FNU> -> tensor<256x128xbf16>
// CHECK: mx.scaled_matmul %{{.*}} lhs_block [1, 128] rhs_block [128, 128] : tensor<200x256xf8E4M3FN>, tensor<200x2xf32>, tensor<136x256xf8E4M3FN>, tensor<2x2xf32> -> tensor<200x136xf32>
func.func @scaled_matmul(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>,
                         %b: tensor<128x512xf8E5M2>, %bs: tensor<128x16xf8E8M0FNU>,
                         %c: tensor<200x256xf8E4M3FN>, %cs: tensor<200x2xf32>,
                         %d: tensor<136x256xf8E4M3FN>, %ds: tensor<2x2xf32>) {
  %0 = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E5M2>, tensor<128x16xf8E8M0FNU> -> tensor<256x128xbf16>
  %1 = mx.scaled_matmul %c, %cs, %d, %ds lhs_block [1, 128] rhs_block [128, 128]
      : tensor<200x256xf8E4M3FN>, tensor<200x2xf32>, tensor<136x256xf8E4M3FN>, tensor<2x2xf32> -> tensor<200x136xf32>
  return
}
