// What mx-pipeline-gathers cannot split into chunks that compute the bytes
// of the whole quantize: each is an error that names the op.
// RUN: mx-opt %s --mx-pipeline-gathers=chunks=4 -split-input-file -verify-diagnostics
// RUN: not mx-opt %s --mx-pipeline-gathers=chunks=0 -split-input-file 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: mx-pipeline-gathers: chunks must be at least 1, got 0
// RUN: not mx-opt %s --mx-pipeline-gathers=min-bytes=-1 -split-input-file 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: mx-pipeline-gathers: min-bytes must not be negative, got -1
// One chunk is the whole quantize, which is always right: each is pipelined.
// RUN: mx-opt %s --mx-pipeline-gathers=chunks=1 -split-input-file | FileCheck %s --check-prefix=ONE
// ONE-COUNT-5: mx.gather_join

shard.grid @grid(shape = 2)
func.func @rows_do_not_split(%x: tensor<96x256xbf16>) -> tensor<192x256xf8E4M3FN> {
  // expected-error @+1 {{'mx.quantize' op cannot be pipelined in 4 chunks: its 96 rows do not split into chunks of whole blocks of 32 rows (mx-pipeline-gathers)}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<96x256xbf16> -> tensor<96x256xf8E4M3FN>, tensor<3x256xf8E8M0FNU>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<96x256xf8E4M3FN> -> tensor<192x256xf8E4M3FN>
  %h = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<3x256xf8E8M0FNU> -> tensor<6x256xf8E8M0FNU>
  return %g : tensor<192x256xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)
func.func @rows_not_divisible(%x: tensor<90x256xbf16>) -> tensor<180x256xf8E4M3FN> {
  // expected-error @+1 {{'mx.quantize' op cannot be pipelined in 4 chunks: its 90 rows do not split into chunks of whole blocks of 1 rows (mx-pipeline-gathers)}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<90x256xbf16> -> tensor<90x256xf8E4M3FN>, tensor<90x8xf8E8M0FNU>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<90x256xf8E4M3FN> -> tensor<180x256xf8E4M3FN>
  %h = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<90x8xf8E8M0FNU> -> tensor<180x8xf8E8M0FNU>
  return %g : tensor<180x256xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)
func.func @whole_block_without_amax(%x: tensor<128x256xbf16>) -> tensor<256x256xf8E4M3FN> {
  // expected-error @+1 {{'mx.quantize' op cannot be pipelined: its block spans the whole input, and it has no amax operand that chunks could share (mx-pipeline-gathers)}}
  %d, %s = mx.quantize %x block [128, 256] : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<1x1xf32>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf8E4M3FN> -> tensor<256x256xf8E4M3FN>
  return %g : tensor<256x256xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)
func.func @tensor_scale_without_amax(%x: tensor<128x256xbf16>) -> (tensor<256x256xf4E2M1FN>, tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op cannot be pipelined: its tensor scale is computed from the whole input, and it has no amax operand that chunks could share (mx-pipeline-gathers)}}
  %d, %s, %t = mx.quantize %x block [1, 16] : tensor<128x256xbf16> -> tensor<128x256xf4E2M1FN>, tensor<128x16xf8E4M3FN>, tensor<f32>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x256xf4E2M1FN> -> tensor<256x256xf4E2M1FN>
  %h = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<128x16xf8E4M3FN> -> tensor<256x16xf8E4M3FN>
  return %g, %t : tensor<256x256xf4E2M1FN>, tensor<f32>
}

// -----

// Scales swizzled before their gather: 256 rows of scales in 4 chunks of
// 64 would split the 128-row tiles.
shard.grid @grid(shape = 2)
func.func @tiles_do_not_split(%x: tensor<256x256xbf16>) -> (tensor<512x256xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.quantize' op cannot be pipelined in 4 chunks: its 256 rows of scales, swizzled before their gather, do not split into chunks of whole 128-row tiles (mx-pipeline-gathers)}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
  %h = shard.all_gather %t on @grid grid_axes = [0] gather_axis = 0 : tensor<2x2x32x4x4xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<256x256xf8E4M3FN> -> tensor<512x256xf8E4M3FN>
  return %g, %h : tensor<512x256xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>
}
