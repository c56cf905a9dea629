// RUN: mx-opt %s --split-input-file --verify-diagnostics

func.func @quantize_dynamic(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op requires static shapes, got 'tensor<?x64xf32>'}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_data_shape(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op data shape [4, 32] must equal the input shape [4, 64]}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x32xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_block_rank(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op expected one block entry per input dimension (2), got block [32]}}
  %d, %s = mx.quantize %x block [32] : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_block_zero(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op block entries must be positive, got [1, 0]}}
  %d, %s = mx.quantize %x block [1, 0] : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_scales_shape(%x: tensor<4x70xf32>) {
  // expected-error @+1 {{'mx.quantize' op expected scales of shape [4, 3] (ceil of input shape [4, 70] / block [1, 32]), got [4, 2]}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x70xf32> -> tensor<4x70xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_exact_e8m0(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op rounding 'exact' needs f32 scales, got 'f8E8M0FNU' (power-of-two scales need 'ceil' or 'floor')}}
  %d, %s = mx.quantize %x block [1, 32] rounding exact : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_input_type(%x: tensor<4x64xf64>) {
  // expected-error @+1 {{'mx.quantize' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4x64xf64>'}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf64> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_element_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #0 must be ranked tensor of mx element type values, but got 'tensor<4x64xbf16>'}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xbf16>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_scale_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #1 must be ranked tensor of f8E8M0FNU type or 32-bit float or f8E4M3FN type values, but got 'tensor<4x2xf16>'}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf16>
  return
}

// -----

func.func @dequantize_result_shape(%d: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.dequantize' op result shape [64, 4] must equal the data shape [4, 64]}}
  %x = mx.dequantize %d, %s block [1, 32] : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU> -> tensor<64x4xf32>
  return
}

// -----

func.func @dequantize_scales_shape(%d: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.dequantize' op expected scales of shape [1, 64] (ceil of data shape [4, 64] / block [32, 1]), got [4, 2]}}
  %x = mx.dequantize %d, %s block [32, 1] : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x64xf32>
  return
}

// -----

func.func @swizzle_rank(%s: tensor<8xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op expected compact scales of rank >= 2 ([batch..., rows, columns]), got 'tensor<8xf8E8M0FNU>'}}
  %t = mx.swizzle %s : tensor<8xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_batch_dim(%s: tensor<2x4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op unscaled_dim must be one of the last two dimensions (1 or 2), got 0}}
  %t = mx.swizzle %s : tensor<2x4x2xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_batch_shape(%s: tensor<2x3x200x3xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op expected tiles shape [2, 3, 2, 1, 32, 4, 4] for [2, 3, 200, 3] scales with unscaled_dim 2, got [6, 2, 1, 32, 4, 4]}}
  %t = mx.swizzle %s unscaled_dim 2 : tensor<2x3x200x3xf8E8M0FNU> -> tensor<6x2x1x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_blockwise_type(%s: tensor<250x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op layout blockwise is for the f32 scales of FP8 blockwise quantization, got 'f8E8M0FNU'}}
  %t = mx.swizzle %s layout blockwise : tensor<250x4xf8E8M0FNU> -> tensor<4x63x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_blockwise_shape(%s: tensor<250x4xf32>) {
  // expected-error @+1 {{'mx.swizzle' op expected blockwise shape [4, 63, 4] for [250, 4] scales with unscaled_dim 0, got [4, 250]}}
  %t = mx.swizzle %s layout blockwise : tensor<250x4xf32> -> tensor<4x250xf32>
  return
}

// -----

func.func @swizzle_result_rank(%s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op expected tiles shape [1, 1, 32, 4, 4] for [4, 2] scales with unscaled_dim 0, got [512]}}
  %t = mx.swizzle %s : tensor<4x2xf8E8M0FNU> -> tensor<512xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_dim(%s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op unscaled_dim must be one of the last two dimensions (0 or 1), got 2}}
  %t = mx.swizzle %s unscaled_dim 2 : tensor<4x2xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_element_type(%s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op swizzled and compact scales must have one element type, got 'f32' and 'f8E8M0FNU'}}
  %t = mx.swizzle %s : tensor<4x2xf8E8M0FNU> -> tensor<1x1x32x4x4xf32>
  return
}

// -----

func.func @swizzle_shape(%s: tensor<500x6xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op expected tiles shape [4, 2, 32, 4, 4] for [500, 6] scales with unscaled_dim 0, got [4, 1, 32, 4, 4]}}
  %t = mx.swizzle %s : tensor<500x6xf8E8M0FNU> -> tensor<4x1x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_columnwise_shape(%s: tensor<16x200xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op expected tiles shape [2, 4, 32, 4, 4] for [16, 200] scales with unscaled_dim 1, got [1, 50, 32, 4, 4]}}
  %t = mx.swizzle %s unscaled_dim 1 : tensor<16x200xf8E8M0FNU> -> tensor<1x50x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @swizzle_dynamic(%s: tensor<?x6xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op requires static shapes, got 'tensor<?x6xf8E8M0FNU>'}}
  %t = mx.swizzle %s : tensor<?x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @unswizzle_shape(%t: tensor<4x2x32x4x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.unswizzle' op expected tiles shape [1, 2, 32, 4, 4] for [100, 6] scales with unscaled_dim 0, got [4, 2, 32, 4, 4]}}
  %s = mx.unswizzle %t : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<100x6xf8E8M0FNU>
  return
}

// -----

func.func @unswizzle_rank(%t: tensor<4x2x32x16xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.unswizzle' op expected tiles shape [4, 2, 32, 4, 4] for [500, 6] scales with unscaled_dim 0, got [4, 2, 32, 16]}}
  %s = mx.unswizzle %t : tensor<4x2x32x16xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  return
}

// -----

func.func @matmul_rank(%a: tensor<2x64x64xf8E4M3FN>, %as: tensor<2x64x2xf8E8M0FNU>, %b: tensor<64x64xf8E4M3FN>, %bs: tensor<64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op lhs and rhs must have one rank, got 'tensor<2x64x64xf8E4M3FN>' and 'tensor<64x64xf8E4M3FN>'}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<2x64x64xf8E4M3FN>, tensor<2x64x2xf8E8M0FNU>, tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<64x64xf8E4M3FN>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<64x128xf8E4M3FN>, %bs: tensor<64x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op lhs K (64, k_contiguous) must equal rhs K (128, k_contiguous)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_block_entries(%a: tensor<64x64xf8E4M3FN>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<64x64xf8E4M3FN>, %bs: tensor<64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected a 2-entry positive rhs_block, got [32]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [32]
      : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_k_multiple(%a: tensor<64x100xf8E4M3FN>, %as: tensor<64x4xf8E8M0FNU>, %b: tensor<64x100xf8E4M3FN>, %bs: tensor<64x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op K = 100 is not a multiple of the lhs block's K extent 32 (dimension 1 of a k_contiguous operand)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x100xf8E4M3FN>, tensor<64x4xf8E8M0FNU>, tensor<64x100xf8E4M3FN>, tensor<64x4xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_scales_shape(%a: tensor<64x256xf8E4M3FN>, %as: tensor<64x2xf32>, %b: tensor<200x256xf8E4M3FN>, %bs: tensor<1x2xf32>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected scales of shape [2, 2] (ceil of rhs shape [200, 256] / block [128, 128]), got [1, 2]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<64x256xf8E4M3FN>, tensor<64x2xf32>, tensor<200x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<64x200xf32>
  return
}

// -----

func.func @matmul_scales_rank(%a: tensor<64x64xf8E4M3FN>, %as: tensor<64x2x1x1xf8E8M0FNU>, %b: tensor<64x64xf8E4M3FN>, %bs: tensor<64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected lhs scales of rank 2 (linear), 5 (tiles) or 3 (blockwise GEMM-ready), got 'tensor<64x2x1x1xf8E8M0FNU>'}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xf8E4M3FN>, tensor<64x2x1x1xf8E8M0FNU>, tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_swizzled_block(%a: tensor<128x128xf8E4M3FN>, %as: tensor<1x1x32x4x4xf32>, %b: tensor<64x128xf8E4M3FN>, %bs: tensor<64x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op swizzled lhs scales need a block of extent 1 off K, got [128, 128]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 128] rhs_block [1, 32]
      : tensor<128x128xf8E4M3FN>, tensor<1x1x32x4x4xf32>, tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU> -> tensor<128x64xf32>
  return
}

// -----

func.func @matmul_swizzled_shape(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<2x4x32x4x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected tiles rhs scales of shape [1, 4, 32, 4, 4], got [2, 4, 32, 4, 4]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU> -> tensor<256x128xf32>
  return
}

// -----

func.func @matmul_result_shape(%a: tensor<64x64xf8E4M3FN>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<32x64xf8E4M3FN>, %bs: tensor<32x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected result shape [64, 32] ([batch..., M, N]), got [64, 64]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_data_type(%a: tensor<64x64xbf16>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<32x64xf8E4M3FN>, %bs: tensor<32x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op operand #0 must be ranked tensor of mx element type values, but got 'tensor<64x64xbf16>'}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xbf16>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x32xf32>
  return
}

// -----

func.func @bad_rounding(%x: tensor<4x64xf32>) {
  // expected-error @+2 {{expected ::mx::ScaleRounding to be one of: ceil, floor, exact}}
  // expected-error @+1 {{failed to parse MX_ScaleRoundingAttr parameter 'value'}}
  %d, %s = mx.quantize %x block [1, 32] rounding nearest : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_rank(%x: tensor<64xf32>) {
  // expected-error @+1 {{'mx.quantize' op expected input of rank >= 2 ([batch..., rows, columns]), got 'tensor<64xf32>'}}
  %d, %s = mx.quantize %x block [32] : tensor<64xf32> -> tensor<64xf8E4M3FN>, tensor<2xf8E8M0FNU>
  return
}

// -----

func.func @quantize_batch_block(%x: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op block must be 1 on batch dimension 0 (blocks span only the last two dimensions), got [2, 1, 32]}}
  %d, %s = mx.quantize %x block [2, 1, 32] : tensor<2x64x64xf32> -> tensor<2x64x64xf8E4M3FN>, tensor<1x64x2xf8E8M0FNU>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x64x64xf8E4M3FN>, %as: tensor<2x64x2xf8E8M0FNU>, %b: tensor<3x64x64xf8E4M3FN>, %bs: tensor<3x64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op lhs and rhs batch dimensions differ: [2] and [3]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 1, 32] rhs_block [1, 1, 32]
      : tensor<2x64x64xf8E4M3FN>, tensor<2x64x2xf8E8M0FNU>, tensor<3x64x64xf8E4M3FN>, tensor<3x64x2xf8E8M0FNU> -> tensor<2x64x64xf32>
  return
}

// -----

func.func @matmul_k_outer_multiple(%a: tensor<48x64xf8E4M3FN>, %as: tensor<2x64xf8E8M0FNU>, %b: tensor<64x48xf8E4M3FN>, %bs: tensor<64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op K = 48 is not a multiple of the lhs block's K extent 32 (dimension 0 of a k_outer operand)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [32, 1] lhs_layout k_outer rhs_block [1, 32]
      : tensor<48x64xf8E4M3FN>, tensor<2x64xf8E8M0FNU>, tensor<64x48xf8E4M3FN>, tensor<64x2xf8E8M0FNU> -> tensor<64x64xf32>
  return
}

// -----

func.func @matmul_k_outer_scales(%a: tensor<64x96xf8E4M3FN>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<64x96xf8E4M3FN>, %bs: tensor<2x96xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected scales of shape [64, 3] (ceil of lhs shape [64, 96] / block [1, 32]), got [64, 2]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] lhs_layout k_outer rhs_block [32, 1] rhs_layout k_outer
      : tensor<64x96xf8E4M3FN>, tensor<64x2xf8E8M0FNU>, tensor<64x96xf8E4M3FN>, tensor<2x96xf8E8M0FNU> -> tensor<96x96xf32>
  return
}

// -----

func.func @matmul_blockwise_ready_shape(%a: tensor<250x512xf8E4M3FN>, %as: tensor<4x250x1xf32>, %b: tensor<64x512xf8E4M3FN>, %bs: tensor<64x4xf32>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected blockwise lhs scales of shape [4, 63, 4], got [4, 250, 1]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
      : tensor<250x512xf8E4M3FN>, tensor<4x250x1xf32>, tensor<64x512xf8E4M3FN>, tensor<64x4xf32> -> tensor<250x64xf32>
  return
}

// -----

func.func @amax_rank(%x: tensor<64xf32>) {
  // expected-error @+1 {{'mx.amax' op expected input of rank >= 2 ([batch..., rows, columns]), got 'tensor<64xf32>'}}
  %a = mx.amax %x : tensor<64xf32> -> tensor<f32>
  return
}

// -----

func.func @delayed_scale_inv(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op expected scale_inv of shape [1, 1] (one scale for the whole tensor), got [1]}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @delayed_scale_inv_unranked(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      // expected-error @+1 {{custom op 'mx.quantize_delayed' invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<*xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @delayed_history_columns(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x2xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op history 'tensor<16x2xf32>' must have one column per scale of 'tensor<3xf32>'}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x2xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  return
}

// -----

func.func @delayed_index(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op index 3 is out of range for 3 scales}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 3
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return
}

// -----

// Delayed scaling casts to FP8 only (the odd innermost extent would not even pack).
func.func @quantize_delayed_fp4(%x: tensor<4x33xf32>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op casts to FP8 (f8E4M3FN or f8E5M2) only, got 'f4E2M1FN' data: the other formats are quantized with block scales (mx.quantize)}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      : tensor<4x33xf32>, tensor<3xf32>, tensor<16x3xf32> -> tensor<4x33xf4E2M1FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @delayed_new_history(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op new_history must have the history's type 'tensor<16x3xf32>', got 'tensor<8x3xf32>'}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 0
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<8x3xf32>
  return
}

// -----

func.func @delayed_data_shape(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op data shape [128, 64] must equal the input shape [64, 128]}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 0
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @history_rows(%h: tensor<0x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'mx.update_amax_history' op requires non-empty tensors, got 'tensor<0x3xf32>'}}
  %h1, %s1 = mx.update_amax_history %h, %s element f8E4M3FN
      : tensor<0x3xf32>, tensor<3xf32> -> tensor<0x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @history_margin(%h: tensor<4x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'mx.update_amax_history' op margin must lie in -126..127 (2^margin a normal f32), got 200}}
  %h1, %s1 = mx.update_amax_history %h, %s element f8E4M3FN margin 200
      : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @history_result_types(%h: tensor<4x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'mx.update_amax_history' op results must have the types of history and scales ('tensor<4x3xf32>', 'tensor<3xf32>'), got 'tensor<4x3xf32>', 'tensor<4xf32>'}}
  %h1, %s1 = mx.update_amax_history %h, %s element f8E4M3FN
      : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @history_element(%h: tensor<4x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'mx.update_amax_history' op attribute 'element' failed to satisfy constraint}}
  %h1, %s1 = mx.update_amax_history %h, %s element bf16
      : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @fp4_e4m3_scales_need_fp4(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op f8E4M3FN scales are NVFP4's and need f4E2M1FN data, got 'f8E4M3FN'}}
  %d, %s, %t = mx.quantize %x block [1, 16] : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x4xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @fp4_f32_scales(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op 'f4E2M1FN' data takes f8E8M0FNU scales (MXFP4, block 32) or f8E4M3FN scales (NVFP4, block 16), got f32}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x2xf32>
  return
}

// -----

func.func @mxfp4_block(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op MXFP4 needs a block of 32 along one of the last two dimensions and 1 elsewhere, got [1, 16]}}
  %d, %s = mx.quantize %x block [1, 16] : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x4xf8E8M0FNU>
  return
}

// -----

func.func @nvfp4_block(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op NVFP4 needs a block of 16 along one of the last two dimensions and 1 elsewhere, got [1, 32]}}
  %d, %s, %t = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x2xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @fp4_odd_innermost(%x: tensor<64x5xf32>) {
  // expected-error @+1 {{'mx.quantize' op 'f4E2M1FN' data stores 2 elements in 1 byte: its innermost extent must be a multiple of 2, got 'tensor<64x5xf4E2M1FN>'}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<64x5xf32> -> tensor<64x5xf4E2M1FN>, tensor<2x5xf8E8M0FNU>
  return
}

// -----

func.func @fp6_partial_group(%x: tensor<64x6xf32>) {
  // expected-error @+1 {{'mx.quantize' op 'f6E3M2FN' data stores 4 elements in 3 bytes: its innermost extent must be a multiple of 4, got 'tensor<64x6xf6E3M2FN>'}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<64x6xf32> -> tensor<64x6xf6E3M2FN>, tensor<2x6xf8E8M0FNU>
  return
}

// -----

func.func @fp6_f32_scales(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op 'f6E2M3FN' data takes f8E8M0FNU scales (MXFP6, block 32), got f32}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf6E2M3FN>, tensor<4x2xf32>
  return
}

// -----

func.func @fp6_e4m3_scales(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op f8E4M3FN scales are NVFP4's and need f4E2M1FN data, got 'f6E3M2FN'}}
  %d, %s, %t = mx.quantize %x block [1, 16] : tensor<4x64xf32> -> tensor<4x64xf6E3M2FN>, tensor<4x4xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @mxint8_block(%x: tensor<64x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op MXINT8 needs a block of 32 along one of the last two dimensions and 1 elsewhere, got [32, 32]}}
  %d, %s = mx.quantize %x block [32, 32] : tensor<64x64xf32> -> tensor<64x64xi8>, tensor<2x2xf8E8M0FNU>
  return
}

// -----

func.func @mxint8_exact(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op 'i8' data takes f8E8M0FNU scales (MXINT8, block 32), got f32}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xi8>, tensor<4x2xf32>
  return
}

// -----

func.func @mxfp6_matmul_f32_scales(%a: tensor<64x128xf6E3M2FN>, %as: tensor<64x1xf32>, %b: tensor<32x128xf8E4M3FN>, %bs: tensor<32x1xf32>) {
  // expected-error @+1 {{'mx.scaled_matmul' op 'f6E3M2FN' lhs takes f8E8M0FNU scales (MXFP6, block 32), got f32}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
      : tensor<64x128xf6E3M2FN>, tensor<64x1xf32>, tensor<32x128xf8E4M3FN>, tensor<32x1xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @quantize_delayed_not_fp8(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op casts to FP8 (f8E4M3FN or f8E5M2) only, got 'i8' data: the other formats are quantized with block scales (mx.quantize)}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xi8>, tensor<1x1xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @history_element_not_fp8(%h: tensor<4x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'mx.update_amax_history' op attribute 'element' failed to satisfy constraint}}
  %h1, %s1 = mx.update_amax_history %h, %s element f6E3M2FN
      : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @tensor_scale_not_nvfp4(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op a tensor scale is for NVFP4 (f8E4M3FN scales) only, got 'f8E8M0FNU' scales}}
  %d, %s, %t = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU>, tensor<f32>
  return
}

// -----

func.func @nvfp4_tensor_scale_twice(%x: tensor<4x64xf32>, %t: tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op NVFP4 takes its f32 tensor scale either as the tensor_scale operand or as a third result, got both}}
  %d, %s, %t2 = mx.quantize %x block [1, 16] tensor_scale(%t : tensor<f32>) : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @nvfp4_no_tensor_scale(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op NVFP4 takes its f32 tensor scale either as the tensor_scale operand or as a third result, got neither}}
  %d, %s = mx.quantize %x block [1, 16] : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>
  return
}

// -----

func.func @nvfp4_rounding(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op NVFP4 scales follow their own rule; rounding 'floor' does not apply}}
  %d, %s, %t = mx.quantize %x block [1, 16] rounding floor : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>, tensor<f32>
  return
}

// -----

func.func @dequantize_nvfp4_needs_tensor_scale(%d: tensor<4x64xf4E2M1FN>, %s: tensor<4x4xf8E4M3FN>) {
  // expected-error @+1 {{'mx.dequantize' op NVFP4 data needs its f32 tensor_scale}}
  %x = mx.dequantize %d, %s block [1, 16] : tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN> -> tensor<4x64xf32>
  return
}

// -----

func.func @dequantize_tensor_scale_not_nvfp4(%d: tensor<4x64xf4E2M1FN>, %s: tensor<4x2xf8E8M0FNU>, %t: tensor<f32>) {
  // expected-error @+1 {{'mx.dequantize' op a tensor scale is for NVFP4 (f8E4M3FN scales) only}}
  %x = mx.dequantize %d, %s block [1, 32] tensor_scale(%t : tensor<f32>) : tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x64xf32>
  return
}

// -----

func.func @matmul_tensor_scales(%a: tensor<64x64xf4E2M1FN>, %as: tensor<64x4xf8E4M3FN>, %b: tensor<32x64xf4E2M1FN>, %bs: tensor<32x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected 2 tensor_scales (lhs and rhs, for NVFP4 operands), got 0}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 16] rhs_block [1, 32]
      : tensor<64x64xf4E2M1FN>, tensor<64x4xf8E4M3FN>, tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x32xf32>
  return
}

// -----

func.func @matmul_tensor_scales_mx(%a: tensor<64x64xf4E2M1FN>, %as: tensor<64x2xf8E8M0FNU>, %b: tensor<32x64xf4E2M1FN>, %bs: tensor<32x2xf8E8M0FNU>, %t: tensor<f32>) {
  // expected-error @+1 {{'mx.scaled_matmul' op expected 0 tensor_scales (only NVFP4 operands have them), got 2}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32] tensor_scales(%t, %t : tensor<f32>, tensor<f32>)
      : tensor<64x64xf4E2M1FN>, tensor<64x2xf8E8M0FNU>, tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x32xf32>
  return
}

// -----

func.func @matmul_fp4_f32_scales(%a: tensor<64x256xf4E2M1FN>, %as: tensor<64x2xf32>, %b: tensor<32x256xf8E4M3FN>, %bs: tensor<32x2xf32>) {
  // expected-error @+1 {{'mx.scaled_matmul' op 'f4E2M1FN' lhs takes f8E8M0FNU scales (MXFP4, block 32) or f8E4M3FN scales (NVFP4, block 16), got f32}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
      : tensor<64x256xf4E2M1FN>, tensor<64x2xf32>, tensor<32x256xf8E4M3FN>, tensor<32x2xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @matmul_blockwise_ready_type(%a: tensor<64x64xf8E4M3FN>, %as: tensor<2x16x4xf8E8M0FNU>, %b: tensor<32x64xf8E4M3FN>, %bs: tensor<32x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.scaled_matmul' op blockwise GEMM-ready lhs scales must be f32, got 'f8E8M0FNU'}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<64x64xf8E4M3FN>, tensor<2x16x4xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU> -> tensor<64x32xf32>
  return
}

// -----

func.func @empty_tensor(%x: tensor<0x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op requires non-empty tensors, got 'tensor<0x64xf32>'}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<0x64xf32> -> tensor<0x64xf8E4M3FN>, tensor<0x2xf8E8M0FNU>
  return
}

// -----

// Padded sizes near 2^62 would wrap in the lowerings.
func.func @huge_tensor(%x: tensor<4611686018427387904x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op requires tensors of fewer than 2^48 elements, got 'tensor<4611686018427387904x64xf32>'}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<4611686018427387904x64xf32> -> tensor<4611686018427387904x64xf8E4M3FN>, tensor<4611686018427387904x2xf8E8M0FNU>
  return
}

// -----

func.func @huge_product(%s: tensor<16777216x16777216xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.swizzle' op requires tensors of fewer than 2^48 elements, got 'tensor<16777216x16777216xf8E8M0FNU>'}}
  %t = mx.swizzle %s : tensor<16777216x16777216xf8E8M0FNU> -> tensor<131072x4194304x32x4x4xf8E8M0FNU>
  return
}

// -----

func.func @amax_not_per_tensor(%x: tensor<64x128xf32>, %a: tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op amax stands for the amax of a single block over the whole input (per-tensor scaling), got [64, 4] scales}}
  %d, %s = mx.quantize %x block [1, 32] amax(%a : tensor<f32>) : tensor<64x128xf32> -> tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU>
  return
}

// -----

func.func @amax_given_tensor_scale(%x: tensor<64x128xf32>, %t: tensor<f32>, %a: tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op amax is what NVFP4's computed tensor scale derives from; a given tensor_scale needs none}}
  %q, %s = mx.quantize %x block [1, 16] tensor_scale(%t : tensor<f32>) amax(%a : tensor<f32>) : tensor<64x128xf32> -> tensor<64x128xf4E2M1FN>, tensor<64x8xf8E4M3FN>
  return
}

// -----

func.func @quantize_transposed_shape(%x: tensor<256x96xbf16>) {
  // expected-error @+1 {{'mx.quantize' op transposed data shape [256, 96] must be the input shape with its last two dimensions swapped, [96, 256]}}
  %d, %s = mx.quantize %x transposed block [1, 32]
      : tensor<256x96xbf16> -> tensor<256x96xf8E4M3FN>, tensor<256x3xf8E8M0FNU>
  return
}

// -----

func.func @quantize_transposed_scales(%x: tensor<256x96xbf16>) {
  // expected-error @+1 {{'mx.quantize' op expected scales of shape [96, 8] (ceil of data shape [96, 256] / block [1, 32]), got [256, 3]}}
  %d, %s = mx.quantize %x transposed block [1, 32]
      : tensor<256x96xbf16> -> tensor<96x256xf8E4M3FN>, tensor<256x3xf8E8M0FNU>
  return
}

// -----

func.func @quantize_delayed_transposed_shape(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op transposed data shape [64, 128] must be the input shape with its last two dimensions swapped, [128, 64]}}
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1 transposed
      : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @scaled_matmul_bias_shape(%a: tensor<128x256xf8E4M3FN>, %as: tensor<128x8xf8E8M0FNU>, %b: tensor<64x256xf8E4M3FN>, %bs: tensor<64x8xf8E8M0FNU>, %bias: tensor<128xf32>) -> tensor<128x64xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op expected bias of shape [64] (one value per column N), got [128]}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32] bias(%bias : tensor<128xf32>)
      : tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU> -> tensor<128x64xf32>
  return %c : tensor<128x64xf32>
}

// -----

func.func @scaled_matmul_accumulate_type(%a: tensor<128x256xf8E4M3FN>, %as: tensor<128x8xf8E8M0FNU>, %b: tensor<64x256xf8E4M3FN>, %bs: tensor<64x8xf8E8M0FNU>, %d: tensor<128x64xbf16>) -> tensor<128x64xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op accumulate operand must have the result type 'tensor<128x64xf32>', got 'tensor<128x64xbf16>'}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32] accumulate(%d : tensor<128x64xbf16>)
      : tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>, tensor<64x256xf8E4M3FN>, tensor<64x8xf8E8M0FNU> -> tensor<128x64xf32>
  return %c : tensor<128x64xf32>
}

// -----

func.func @column_sum_rank(%x: tensor<2x64x32xbf16>) {
  // expected-error @+1 {{'mx.column_sum' op expected an input of rank 2 ([rows, columns]), got 'tensor<2x64x32xbf16>'}}
  %s = mx.column_sum %x : tensor<2x64x32xbf16> -> tensor<32xf32>
  return
}

// -----

func.func @column_sum_result_type(%x: tensor<64x32xbf16>) {
  // expected-error @+1 {{'mx.column_sum' op sums in f32: expected an f32 result, got 'tensor<32xbf16>'}}
  %s = mx.column_sum %x : tensor<64x32xbf16> -> tensor<32xbf16>
  return
}

// -----

func.func @column_sum_result_length(%x: tensor<64x32xbf16>) {
  // expected-error @+1 {{'mx.column_sum' op expected a result of shape [32] (one sum per column of 'tensor<64x32xbf16>'), got [64]}}
  %s = mx.column_sum %x : tensor<64x32xbf16> -> tensor<64xf32>
  return
}

// -----

func.func @column_sum_result_rank(%x: tensor<64x32xf32>) {
  // expected-error @+1 {{'mx.column_sum' op expected a result of shape [32] (one sum per column of 'tensor<64x32xf32>'), got [1, 32]}}
  %s = mx.column_sum %x : tensor<64x32xf32> -> tensor<1x32xf32>
  return
}

// -----

func.func @column_sum_dynamic(%x: tensor<?x32xf32>) {
  // expected-error @+1 {{'mx.column_sum' op requires static shapes, got 'tensor<?x32xf32>'}}
  %s = mx.column_sum %x : tensor<?x32xf32> -> tensor<32xf32>
  return
}

// -----

func.func @column_sum_input_type(%x: tensor<64x32xf64>) {
  // expected-error @+1 {{'mx.column_sum' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<64x32xf64>'}}
  %s = mx.column_sum %x : tensor<64x32xf64> -> tensor<32xf32>
  return
}

// -----

func.func @gather_chunk_columns(%c: tensor<32x32xf8E4M3FN>, %e: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{'mx.gather_chunk' op expected a chunk of rows of the gathered tensor (the same element type and dimensions but the first), got 'tensor<32x32xf8E4M3FN>' into 'tensor<128x64xf8E4M3FN>'}}
  %g = mx.gather_chunk %c into %e at row 0 of 2 devices : tensor<32x32xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  return
}

// -----

func.func @gather_chunk_devices(%c: tensor<32x64xf8E4M3FN>, %e: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{'mx.gather_chunk' op expected 3 devices to hold equal parts of the 128 rows of 'tensor<128x64xf8E4M3FN>'}}
  %g = mx.gather_chunk %c into %e at row 0 of 3 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  return
}

// -----

func.func @gather_chunk_past_part(%c: tensor<32x64xf8E4M3FN>, %e: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{'mx.gather_chunk' op places rows [48, 80) of each device's part, which has 64 rows}}
  %g = mx.gather_chunk %c into %e at row 48 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  return
}

// -----

func.func @gather_chunk_dynamic(%c: tensor<?x64xf8E4M3FN>, %e: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{'mx.gather_chunk' op expected static shapes, got 'tensor<?x64xf8E4M3FN>' into 'tensor<128x64xf8E4M3FN>'}}
  %g = mx.gather_chunk %c into %e at row 0 of 2 devices : tensor<?x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  return
}

// -----

func.func @gather_join_not_a_chain(%t: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{'mx.gather_join' op expected every operand to end a chain of mx.gather_chunk, got one of 'tensor<128x64xf8E4M3FN>'}}
  %g = mx.gather_join %t : tensor<128x64xf8E4M3FN>
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 1 has 'mx.updated': expected a unit attribute, got 'true'}}
func.func @updated_not_unit(%x: tensor<4xf32>, %h: tensor<16x3xf32> {mx.updated = true}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0 has 'mx.updated': expected a ranked tensor or memref argument, got 'f32'}}
func.func @updated_scalar(%s: f32 {mx.updated}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0 has 'mx.updated': expected a ranked tensor or memref argument, got 'tensor<*xf32>'}}
func.func private @updated_unranked(tensor<*xf32> {mx.updated})

// -----

// expected-error @+1 {{'llvm.func' op argument 0 has 'mx.updated': expected a ranked tensor or memref argument, got '!llvm.ptr'}}
llvm.func @updated_pointer(!llvm.ptr {mx.updated})

// -----

// expected-error @+1 {{'func.func' op argument 2 has the unknown attribute 'mx.update': the mx dialect's argument attribute is 'mx.updated'}}
func.func @unknown_argument_attribute(%x: tensor<4xf32>, %y: tensor<4xf32>, %h: tensor<16x3xf32> {mx.update}) {
  return
}
