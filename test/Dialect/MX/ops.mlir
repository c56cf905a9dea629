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

// CHECK-LABEL: func @attention_shapes
// CHECK: mx.quantize %{{.*}} block [1, 1, 1, 32] : tensor<2x3x200x72xbf16> -> tensor<2x3x200x72xf8E4M3FN>, tensor<2x3x200x3xf8E8M0FNU>
// CHECK: mx.quantize %{{.*}} block [1, 1, 32, 1] : tensor<2x3x200x72xbf16> -> tensor<2x3x200x72xf8E4M3FN>, tensor<2x3x7x72xf8E8M0FNU>
// CHECK: mx.swizzle %{{.*}} unscaled_dim 2 : tensor<2x3x200x3xf8E8M0FNU> -> tensor<2x3x2x1x32x4x4xf8E8M0FNU>
// CHECK: mx.swizzle %{{.*}} unscaled_dim 3 : tensor<2x3x7x72xf8E8M0FNU> -> tensor<2x3x1x2x32x4x4xf8E8M0FNU>
func.func @attention_shapes(%q: tensor<2x3x200x72xbf16>) {
  %qd, %qs = mx.quantize %q block [1, 1, 1, 32] : tensor<2x3x200x72xbf16> -> tensor<2x3x200x72xf8E4M3FN>, tensor<2x3x200x3xf8E8M0FNU>
  %vd, %vs = mx.quantize %q block [1, 1, 32, 1] : tensor<2x3x200x72xbf16> -> tensor<2x3x200x72xf8E4M3FN>, tensor<2x3x7x72xf8E8M0FNU>
  %qt = mx.swizzle %qs unscaled_dim 2 : tensor<2x3x200x3xf8E8M0FNU> -> tensor<2x3x2x1x32x4x4xf8E8M0FNU>
  %vt = mx.swizzle %vs unscaled_dim 3 : tensor<2x3x7x72xf8E8M0FNU> -> tensor<2x3x1x2x32x4x4xf8E8M0FNU>
  return
}

// CHECK-LABEL: func @blockwise_gemm_ready
// CHECK: mx.swizzle %{{.*}} layout blockwise : tensor<250x4xf32> -> tensor<4x63x4xf32>
// CHECK: mx.unswizzle %{{.*}} unscaled_dim 1 layout blockwise : tensor<2x63x4xf32> -> tensor<2x250xf32>
func.func @blockwise_gemm_ready(%s: tensor<250x4xf32>, %t: tensor<2x63x4xf32>) {
  %g = mx.swizzle %s layout blockwise : tensor<250x4xf32> -> tensor<4x63x4xf32>
  %c = mx.unswizzle %t unscaled_dim 1 layout blockwise : tensor<2x63x4xf32> -> tensor<2x250xf32>
  return
}

// CHECK-LABEL: func @layouts
// CHECK: mx.scaled_matmul %{{.*}} lhs_block [1, 1, 32] rhs_block [1, 32, 1] rhs_layout k_outer : tensor<2x64x128xf8E4M3FN>, tensor<2x64x4xf8E8M0FNU>, tensor<2x128x48xf8E4M3FN>, tensor<2x4x48xf8E8M0FNU> -> tensor<2x64x48xbf16>
// CHECK: mx.scaled_matmul %{{.*}} lhs_block [1, 128] rhs_block [128, 128] : tensor<250x512xf8E4M3FN>, tensor<4x63x4xf32>, tensor<64x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<250x64xf32>
func.func @layouts(%a: tensor<2x64x128xf8E4M3FN>, %as: tensor<2x64x4xf8E8M0FNU>, %b: tensor<2x128x48xf8E4M3FN>, %bs: tensor<2x4x48xf8E8M0FNU>,
                   %c: tensor<250x512xf8E4M3FN>, %cs: tensor<4x63x4xf32>, %d: tensor<64x512xf8E4M3FN>, %ds: tensor<1x4xf32>) {
  %0 = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 1, 32] lhs_layout k_contiguous rhs_block [1, 32, 1] rhs_layout k_outer
      : tensor<2x64x128xf8E4M3FN>, tensor<2x64x4xf8E8M0FNU>, tensor<2x128x48xf8E4M3FN>, tensor<2x4x48xf8E8M0FNU> -> tensor<2x64x48xbf16>
  %1 = mx.scaled_matmul %c, %cs, %d, %ds lhs_block [1, 128] rhs_block [128, 128]
      : tensor<250x512xf8E4M3FN>, tensor<4x63x4xf32>, tensor<64x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<250x64xf32>
  return
}

// CHECK-LABEL: func @delayed_scaling
// CHECK: mx.amax %{{.*}} : tensor<64x128xbf16> -> tensor<f32>
// CHECK: mx.quantize_delayed %{{.*}}, %{{.*}}, %{{.*}} index 1 : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
// CHECK: mx.update_amax_history %{{.*}}, %{{.*}} element f8E4M3FN : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
// CHECK: mx.update_amax_history %{{.*}}, %{{.*}} element f8E5M2 algorithm most_recent margin 2 : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
func.func @delayed_scaling(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  %a = mx.amax %x : tensor<64x128xbf16> -> tensor<f32>
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  %h2, %s2 = mx.update_amax_history %h1, %s element f8E4M3FN algorithm max margin 0
      : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
  %h3, %s3 = mx.update_amax_history %h2, %s2 element f8E5M2 algorithm most_recent margin 2
      : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
  return
}

// CHECK-LABEL: func @fp4
// CHECK: mx.quantize %{{.*}} block [1, 32] : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>
// CHECK: mx.quantize %{{.*}} block [1, 16] : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<f32>
// CHECK: mx.quantize %{{.*}} block [1, 16] tensor_scale(%{{.*}} : tensor<f32>) : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>
// CHECK: mx.dequantize %{{.*}}, %{{.*}} block [1, 16] tensor_scale(%{{.*}} : tensor<f32>) : tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN> -> tensor<128x64xf32>
// CHECK: mx.scaled_matmul %{{.*}} lhs_block [1, 32] rhs_block [1, 16] tensor_scales(%{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>) : tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>, tensor<128x64xf4E2M1FN>, tensor<1x1x32x4x4xf8E4M3FN> -> tensor<128x128xbf16>
func.func @fp4(%x: tensor<128x64xbf16>, %one: tensor<f32>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>
  %q, %qs, %t = mx.quantize %x block [1, 16] : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>, tensor<f32>
  %q2, %qs2 = mx.quantize %x block [1, 16] tensor_scale(%t : tensor<f32>) : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN>
  %y = mx.dequantize %q, %qs block [1, 16] tensor_scale(%t : tensor<f32>) : tensor<128x64xf4E2M1FN>, tensor<128x4xf8E4M3FN> -> tensor<128x64xf32>
  %tiles = mx.swizzle %qs : tensor<128x4xf8E4M3FN> -> tensor<1x1x32x4x4xf8E4M3FN>
  %c = mx.scaled_matmul %d, %s, %q, %tiles lhs_block [1, 32] rhs_block [1, 16] tensor_scales(%one, %t : tensor<f32>, tensor<f32>)
      : tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>, tensor<128x64xf4E2M1FN>, tensor<1x1x32x4x4xf8E4M3FN> -> tensor<128x128xbf16>
  return
}

// A shard quantized with the amax of the whole tensor: per-tensor current
// scaling and NVFP4's computed tensor scale.
// CHECK-LABEL: func @given_amax
// CHECK: mx.amax %{{.*}} finite : tensor<64x128xbf16> -> tensor<f32>
// CHECK: mx.quantize %{{.*}} block [64, 128] amax(%{{.*}} : tensor<f32>) : tensor<64x128xbf16> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>
// CHECK: mx.quantize %{{.*}} block [1, 16] amax(%{{.*}} : tensor<f32>) : tensor<64x128xbf16> -> tensor<64x128xf4E2M1FN>, tensor<64x8xf8E4M3FN>, tensor<f32>
func.func @given_amax(%x: tensor<64x128xbf16>, %a: tensor<f32>) {
  %f = mx.amax %x finite : tensor<64x128xbf16> -> tensor<f32>
  %d, %s = mx.quantize %x block [64, 128] amax(%a : tensor<f32>) : tensor<64x128xbf16> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>
  %q, %qs, %t = mx.quantize %x block [1, 16] amax(%f : tensor<f32>) : tensor<64x128xbf16> -> tensor<64x128xf4E2M1FN>, tensor<64x8xf8E4M3FN>, tensor<f32>
  return
}

// MXFP6 and MXINT8: E8M0 scales per 32 elements along either of the last two
// dimensions, any mix of element types in a product.
// CHECK-LABEL: func @mxfp6_mxint8
// CHECK: mx.quantize %{{.*}} block [1, 32] : tensor<64x128xbf16> -> tensor<64x128xf6E3M2FN>, tensor<64x4xf8E8M0FNU>
// CHECK: mx.quantize %{{.*}} block [32, 1] rounding floor : tensor<64x128xbf16> -> tensor<64x128xf6E2M3FN>, tensor<2x128xf8E8M0FNU>
// CHECK: mx.quantize %{{.*}} block [1, 32] : tensor<64x128xbf16> -> tensor<64x128xi8>, tensor<64x4xf8E8M0FNU>
// CHECK: mx.dequantize %{{.*}}, %{{.*}} block [1, 32] : tensor<64x128xi8>, tensor<64x4xf8E8M0FNU> -> tensor<64x128xf16>
// CHECK: mx.scaled_matmul %{{.*}} lhs_block [1, 32] rhs_block [1, 32] : tensor<64x128xf6E3M2FN>, tensor<64x4xf8E8M0FNU>, tensor<64x128xi8>, tensor<64x4xf8E8M0FNU> -> tensor<64x64xf32>
func.func @mxfp6_mxint8(%x: tensor<64x128xbf16>) -> tensor<64x64xf32> {
  %a, %as = mx.quantize %x block [1, 32] : tensor<64x128xbf16> -> tensor<64x128xf6E3M2FN>, tensor<64x4xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] rounding floor : tensor<64x128xbf16> -> tensor<64x128xf6E2M3FN>, tensor<2x128xf8E8M0FNU>
  %b, %bs = mx.quantize %x block [1, 32] : tensor<64x128xbf16> -> tensor<64x128xi8>, tensor<64x4xf8E8M0FNU>
  %y = mx.dequantize %b, %bs block [1, 32] : tensor<64x128xi8>, tensor<64x4xf8E8M0FNU> -> tensor<64x128xf16>
  %p = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x128xf6E3M2FN>, tensor<64x4xf8E8M0FNU>, tensor<64x128xi8>, tensor<64x4xf8E8M0FNU> -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}

// CHECK-LABEL: func @quantize_transposed
// CHECK: mx.quantize %{{.*}} transposed block [1, 32] : tensor<256x96xbf16> -> tensor<96x256xf8E4M3FN>, tensor<96x8xf8E8M0FNU>
// CHECK: mx.quantize %{{.*}} transposed block [1, 64, 128] rounding exact : tensor<2x128x64xf32> -> tensor<2x64x128xf8E4M3FN>, tensor<2x1x1xf32>
// CHECK: mx.quantize_delayed %{{.*}}, %{{.*}}, %{{.*}} index 1 transposed : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
func.func @quantize_transposed(%x: tensor<256x96xbf16>, %b: tensor<2x128x64xf32>, %d: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  %xt, %xts = mx.quantize %x transposed block [1, 32]
      : tensor<256x96xbf16> -> tensor<96x256xf8E4M3FN>, tensor<96x8xf8E8M0FNU>
  %bt, %bts = mx.quantize %b transposed block [1, 64, 128] rounding exact
      : tensor<2x128x64xf32> -> tensor<2x64x128xf8E4M3FN>, tensor<2x1x1xf32>
  %y, %i, %h1 = mx.quantize_delayed %d, %s, %h index 1 transposed
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return
}

// CHECK-LABEL: func @scaled_matmul_epilogue
// CHECK: mx.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lhs_block [1, 32] rhs_block [1, 32] bias(%{{.*}} : tensor<64xbf16>) accumulate(%{{.*}} : tensor<128x64xf32>)
func.func @scaled_matmul_epilogue(%a: tensor<128x256xf8E4M3FN>, %as: tensor<128x8xf8E8M0FNU>, %b: tensor<64x256xf8E4M3FN>, %bs: tensor<64x8xf8E8M0FNU>, %bias: tensor<64xbf16>, %d: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      bias(%bias : tensor<64xbf16>) accumulate(%d : tensor<128x64xf32>)
      : tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU> -> tensor<128x64xf32>
  return %c : tensor<128x64xf32>
}

// CHECK-LABEL: func @column_sum
// CHECK: mx.column_sum %{{.*}} : tensor<256x96xbf16> -> tensor<96xf32>
// CHECK: mx.column_sum %{{.*}} : tensor<48x16xf32> -> tensor<16xf32>
// CHECK: mx.column_sum %{{.*}} : tensor<80x144xf16> -> tensor<144xf32>
func.func @column_sum(%a: tensor<256x96xbf16>, %b: tensor<48x16xf32>, %c: tensor<80x144xf16>)
    -> (tensor<96xf32>, tensor<16xf32>, tensor<144xf32>) {
  %sa = mx.column_sum %a : tensor<256x96xbf16> -> tensor<96xf32>
  %sb = mx.column_sum %b : tensor<48x16xf32> -> tensor<16xf32>
  %sc = mx.column_sum %c : tensor<80x144xf16> -> tensor<144xf32>
  return %sa, %sb, %sc : tensor<96xf32>, tensor<16xf32>, tensor<144xf32>
}

// CHECK-LABEL: func @gather_chunks
// CHECK: %[[G0:.*]] = mx.gather_chunk %{{.*}} into %{{.*}} at row 0 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
// CHECK: %[[G1:.*]] = mx.gather_chunk %{{.*}} into %[[G0]] at row 32 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
// CHECK: mx.gather_join %[[G1]] : tensor<128x64xf8E4M3FN>
func.func @gather_chunks(%c0: tensor<32x64xf8E4M3FN>, %c1: tensor<32x64xf8E4M3FN>) -> tensor<128x64xf8E4M3FN> {
  %e = tensor.empty() : tensor<128x64xf8E4M3FN>
  %g0 = mx.gather_chunk %c0 into %e at row 0 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %g1 = mx.gather_chunk %c1 into %g0 at row 32 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %g = mx.gather_join %g1 : tensor<128x64xf8E4M3FN>
  return %g : tensor<128x64xf8E4M3FN>
}

// The dialect's argument attribute: mx.updated on a ranked tensor or memref
// argument of a function, a definition or a declaration.
// CHECK-LABEL: func @updated_arguments
// CHECK-SAME: %{{.*}}: tensor<16x3xf32> {mx.updated}, %{{.*}}: memref<4xf32> {mx.updated}, %{{.*}}: f32)
// CHECK-LABEL: func private @updated_declaration(tensor<2xbf16> {mx.updated})
func.func @updated_arguments(%h: tensor<16x3xf32> {mx.updated}, %m: memref<4xf32> {mx.updated}, %s: f32) -> tensor<16x3xf32> {
  return %h : tensor<16x3xf32>
}
func.func private @updated_declaration(tensor<2xbf16> {mx.updated})
