// The mx ops' sharding rules met by shard-partition alone, on annotations
// written by hand (no propagation to drop or report them first).
// RUN: mx-opt %s --pass-pipeline='builtin.module(func.func(shard-partition))' --split-input-file -verify-diagnostics

shard.grid @grid(shape = 2)
func.func @off_block(%x: tensor<128x96xbf16>) -> (tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>) {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %k annotate_for_users : tensor<128x96xbf16>
  // expected-error @+1 {{'mx.quantize' op splits dimension 1 of its input (96 elements) over grid axes [0] of @grid (2 devices) into shards of 48 elements, which do not fall on its blocks of 32 elements: a shard must be a multiple of 32 elements}}
  %d, %s = mx.quantize %x1 block [1, 32] : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %d1 = shard.shard %d to %k : tensor<128x96xf8E4M3FN>
  %s1 = shard.shard %s to %k : tensor<128x3xf8E8M0FNU>
  return %d1, %s1 : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
}

// -----

// Propagation would gather these scales before the swizzle; annotated by
// hand to be swizzled split, the shards of 192 rows would split a tile.
shard.grid @grid(shape = 2)
func.func @swizzle_off_tiles(%s: tensor<384x16xf8E8M0FNU>) -> tensor<3x4x32x4x4xf8E8M0FNU> {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %s1 = shard.shard %s to %m annotate_for_users : tensor<384x16xf8E8M0FNU>
  // expected-error @+1 {{'mx.swizzle' op splits dimension 0 of its compact scales (384 elements) over grid axes [0] of @grid (2 devices) into shards of 192 elements, which do not fall on the 128-row tiles of the swizzled layout: a shard must be a multiple of 128 elements}}
  %t = mx.swizzle %s1 : tensor<384x16xf8E8M0FNU> -> tensor<3x4x32x4x4xf8E8M0FNU>
  %t1 = shard.shard %t to %m : tensor<3x4x32x4x4xf8E8M0FNU>
  return %t1 : tensor<3x4x32x4x4xf8E8M0FNU>
}

// -----

shard.grid @grid(shape = 2)
func.func @delayed_history(%x: tensor<64x64xbf16>, %s: tensor<2xf32>, %h: tensor<16x2xf32>) -> tensor<16x2xf32> {
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %x1 = shard.shard %x to %whole annotate_for_users : tensor<64x64xbf16>
  %s1 = shard.shard %s to %whole annotate_for_users : tensor<2xf32>
  %h1 = shard.shard %h to %rows annotate_for_users : tensor<16x2xf32>
  // expected-error @+1 {{'mx.quantize_delayed' op splits dimension 0 of its history (16 elements) over grid axes [0] of @grid (2 devices), which must not be split: every device keeps the whole amax history and scales}}
  %d, %i, %h2 = mx.quantize_delayed %x1, %s1, %h1 index 0
      : tensor<64x64xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<64x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  %h3 = shard.shard %h2 to %rows : tensor<16x2xf32>
  return %h3 : tensor<16x2xf32>
}
