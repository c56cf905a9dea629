// The forward GEMM of a linear layer between sequence and tensor parallelism,
// as Transformer Engine runs it with MXFP8 on 2 GPUs: the activations X
// [M, K] arrive split along M (the sequence) and the weights W [N, K] split
// along N (column parallel). Each GPU quantizes its shards; X's FP8 data and
// E8M0 scales are all-gathered in the compact format and the scales swizzled
// after the gather, on every GPU; each GPU then multiplies all of X by its
// rows of W and keeps Y [M, N] split along N. Nothing but the annotations
// says how: mx-partition derives each GPU's program and its collectives.
// See examples/distributed.py for how to compile and run it.

shard.grid @grid(shape = 2)

func.func @linear(%x: tensor<512x1024xbf16>, %w: tensor<512x1024xbf16>) -> tensor<512x512xbf16> {
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %columns = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %rows : tensor<512x1024xbf16>
  %w1 = shard.shard %w to %rows : tensor<512x1024xbf16>
  %xd, %xs = mx.quantize %x1 block [1, 32] : tensor<512x1024xbf16> -> tensor<512x1024xf8E4M3FN>, tensor<512x32xf8E8M0FNU>
  %wd, %ws = mx.quantize %w1 block [1, 32] : tensor<512x1024xbf16> -> tensor<512x1024xf8E4M3FN>, tensor<512x32xf8E8M0FNU>
  // The GEMM reads all of X: its data and its swizzled scales are whole.
  %xd1 = shard.shard %xd to %whole annotate_for_users : tensor<512x1024xf8E4M3FN>
  %xt = mx.swizzle %xs : tensor<512x32xf8E8M0FNU> -> tensor<4x8x32x4x4xf8E8M0FNU>
  %xt1 = shard.shard %xt to %whole : tensor<4x8x32x4x4xf8E8M0FNU>
  %wt = mx.swizzle %ws : tensor<512x32xf8E8M0FNU> -> tensor<4x8x32x4x4xf8E8M0FNU>
  %y = mx.scaled_matmul %xd1, %xt1, %wd, %wt lhs_block [1, 32] rhs_block [1, 32]
      : tensor<512x1024xf8E4M3FN>, tensor<4x8x32x4x4xf8E8M0FNU>, tensor<512x1024xf8E4M3FN>,
        tensor<4x8x32x4x4xf8E8M0FNU> -> tensor<512x512xbf16>
  %y1 = shard.shard %y to %columns : tensor<512x512xbf16>
  return %y1 : tensor<512x512xbf16>
}
