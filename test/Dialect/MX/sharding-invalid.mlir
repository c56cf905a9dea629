// Every diagnostic of the mx ops' sharding rules met by propagation
// (mx-partition); partition-invalid.mlir has them from partitioning alone.
// RUN: mx-opt %s --mx-partition --split-input-file -verify-diagnostics

// A split along a blocked dimension must fall on block boundaries.
shard.grid @grid(shape = 2)
func.func @off_block(%x: tensor<128x96xbf16>) -> (tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>) {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %k annotate_for_users : tensor<128x96xbf16>
  // expected-error @+2 {{'mx.quantize' op splits dimension 1 of its input (96 elements) over grid axes [0] of @grid (2 devices) into shards of 48 elements, which do not fall on its blocks of 32 elements: a shard must be a multiple of 32 elements}}
  // expected-error @+1 {{fail to get sharding option}}
  %d, %s = mx.quantize %x1 block [1, 32] : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %d1 = shard.shard %d to %k : tensor<128x96xf8E4M3FN>
  %s1 = shard.shard %s to %k : tensor<128x3xf8E8M0FNU>
  return %d1, %s1 : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
}

// -----

// A split must divide the dimension.
shard.grid @grid(shape = 3)
func.func @not_dividing(%x: tensor<256x64xbf16>) -> tensor<256x64xf8E4M3FN> {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %m annotate_for_users : tensor<256x64xbf16>
  // expected-error @+2 {{'mx.quantize' op splits dimension 0 of its input (256 elements) over grid axes [0] of @grid (3 devices), which does not divide it}}
  // expected-error @+1 {{fail to get sharding option}}
  %d, %s = mx.quantize %x1 block [1, 32] : tensor<256x64xbf16> -> tensor<256x64xf8E4M3FN>, tensor<256x2xf8E8M0FNU>
  return %d : tensor<256x64xf8E4M3FN>
}

// -----

// Grids of dynamic size cannot be checked, hence not partitioned.
shard.grid @grid(shape = ?)
func.func @dynamic_grid(%x: tensor<256x64xbf16>) -> tensor<256x64xf8E4M3FN> {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %m annotate_for_users : tensor<256x64xbf16>
  // expected-error @+2 {{'mx.quantize' op splits dimension 0 of its input (256 elements) over grid axes [0] of @grid, whose size is dynamic: mx ops partition over static grids}}
  // expected-error @+1 {{fail to get sharding option}}
  %d, %s = mx.quantize %x1 block [1, 32] : tensor<256x64xbf16> -> tensor<256x64xf8E4M3FN>, tensor<256x2xf8E8M0FNU>
  return %d : tensor<256x64xf8E4M3FN>
}

// -----

// A grid axis of size 0 (the shard dialect takes it) holds no device.
shard.grid @grid(shape = 0)
func.func @empty_grid(%x: tensor<64x512xf16>) -> tensor<f32> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %k : tensor<64x512xf16>
  // expected-error @+2 {{'mx.amax' op splits dimension 1 of its input (512 elements) over grid axes [0] of @grid, which hold no device (an axis of size 0)}}
  // expected-error @+1 {{fail to get sharding option}}
  %a = mx.amax %x1 : tensor<64x512xf16> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

// Dequantize reads a scale per block: its splits too fall on blocks.
shard.grid @grid(shape = 2)
func.func @dequantize_off_block(%d: tensor<64x96xf8E4M3FN>, %s: tensor<64x3xf8E8M0FNU>) -> tensor<64x96xf32> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %d1 = shard.shard %d to %k annotate_for_users : tensor<64x96xf8E4M3FN>
  // expected-error @+2 {{'mx.dequantize' op splits dimension 1 of its data (96 elements) over grid axes [0] of @grid (2 devices) into shards of 48 elements, which do not fall on its blocks of 32 elements: a shard must be a multiple of 32 elements}}
  // expected-error @+1 {{fail to get sharding option}}
  %x = mx.dequantize %d1, %s block [1, 32] : tensor<64x96xf8E4M3FN>, tensor<64x3xf8E8M0FNU> -> tensor<64x96xf32>
  return %x : tensor<64x96xf32>
}

// -----

// Swizzled scales split on whole tiles only, never inside one.
shard.grid @grid(shape = 2)
func.func @inside_tiles(%s: tensor<256x16xf8E8M0FNU>) -> tensor<2x4x32x4x4xf8E8M0FNU> {
  // expected-error @+2 {{'mx.swizzle' op splits dimension 2 of its swizzled scales (32 elements) over grid axes [0] of @grid (2 devices), which must not be split: it indexes inside the tiles of the swizzled layout}}
  // expected-error @+1 {{fail to get sharding option}}
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  %inside = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %t1 = shard.shard %t to %inside : tensor<2x4x32x4x4xf8E8M0FNU>
  return %t1 : tensor<2x4x32x4x4xf8E8M0FNU>
}

// -----

// A K split of a product with tiled scales keeps whole 4-column tiles: with
// 32-element blocks, K shards of a multiple of 128.
shard.grid @grid(shape = 2)
func.func @matmul_k_tiles(%a: tensor<128x192xf8E4M3FN>, %as: tensor<1x2x32x4x4xf8E8M0FNU>,
                          %b: tensor<128x192xf8E4M3FN>, %bs: tensor<1x2x32x4x4xf8E8M0FNU>) -> tensor<128x128xf32> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a1 = shard.shard %a to %k annotate_for_users : tensor<128x192xf8E4M3FN>
  // expected-error @+2 {{'mx.scaled_matmul' op splits K (192 elements) over grid axes [0] of @grid (2 devices) into shards of 96 elements, which do not fall on the 4-column tiles of its lhs scales: a shard must be a multiple of 128 elements}}
  // expected-error @+1 {{fail to get sharding option}}
  %c = mx.scaled_matmul %a1, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<128x192xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU>, tensor<128x192xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU> -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}

// -----

// Every device keeps the whole amax history.
shard.grid @grid(shape = 2)
func.func @history_split(%h: tensor<16x4xf32>, %s: tensor<4xf32>) -> tensor<4xf32> {
  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %h1 = shard.shard %h to %cols annotate_for_users : tensor<16x4xf32>
  // expected-error @+2 {{'mx.update_amax_history' op splits dimension 1 of its history (4 elements) over grid axes [0] of @grid (2 devices), which must not be split: every device keeps the whole amax history and scales}}
  // expected-error @+1 {{fail to get sharding option}}
  %h2, %s2 = mx.update_amax_history %h1, %s element f8E4M3FN : tensor<16x4xf32>, tensor<4xf32> -> tensor<16x4xf32>, tensor<4xf32>
  return %s2 : tensor<4xf32>
}

// -----

// A split K gives each device a partial product: each would add the bias.
shard.grid @grid(shape = 2)
func.func @matmul_k_bias(%a: tensor<256x1024xf8E4M3FN>, %as: tensor<2x8x32x4x4xf8E8M0FNU>,
                         %b: tensor<128x1024xf8E4M3FN>, %bs: tensor<1x8x32x4x4xf8E8M0FNU>, %bias: tensor<128xf32>) -> tensor<256x128xbf16> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a1 = shard.shard %a to %k : tensor<256x1024xf8E4M3FN>
  %as1 = shard.shard %as to %k : tensor<2x8x32x4x4xf8E8M0FNU>
  %b1 = shard.shard %b to %k : tensor<128x1024xf8E4M3FN>
  %bs1 = shard.shard %bs to %k : tensor<1x8x32x4x4xf8E8M0FNU>
  // expected-error @+1 {{'mx.scaled_matmul' op cannot split K over devices with a bias or accumulate operand (each partial product would add it)}}
  %c = mx.scaled_matmul %a1, %as1, %b1, %bs1 lhs_block [1, 32] rhs_block [1, 32] bias(%bias : tensor<128xf32>)
      : tensor<256x1024xf8E4M3FN>, tensor<2x8x32x4x4xf8E8M0FNU>, tensor<128x1024xf8E4M3FN>, tensor<1x8x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

// The shard dialect does not bound a sharding's axes by its grid's rank
// (found by test_fuzz.py: mx-partition divided by zero here).
shard.grid @grid(shape = 2)
func.func @axis_past_grid(%x: tensor<128x96xbf16>) -> tensor<128x96xf8E4M3FN> {
  %k = shard.sharding @grid split_axes = [[], [1024]] : !shard.sharding
  %x1 = shard.shard %x to %k annotate_for_users : tensor<128x96xbf16>
  // expected-error @+2 {{'mx.quantize' op splits dimension 1 of its input (96 elements) over grid axes [1024] of @grid, which has 1 axis}}
  // expected-error @+1 {{fail to get sharding option}}
  %d, %s = mx.quantize %x1 block [1, 32] : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  return %d : tensor<128x96xf8E4M3FN>
}
