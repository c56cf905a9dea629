// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file | FileCheck %s

// Fusion decisions of convert-mx-to-gpu (QuantizeFusionPlan): which kernel
// computes each quantize and which swizzles a quantize kernel writes itself.

// A rowwise and a columnwise quantize of one input with the same numerics
// share one strip kernel, and each swizzle that alone consumes its scales is
// written by it: one launch, four outputs (two of them tiled), no mx op left.
// The bf16 amaxes are reduced two elements a max: per lane 2 x 15 down its
// 16 rows and 2 across the column block's halves; 16 within rows, 8 to pair
// rows, 7 in the reduce-scatter.
// CHECK-LABEL: func @pair_both_fused
// CHECK: %[[CDATA:.*]] = gpu.alloc () : memref<96x256xf8E4M3FN>
// CHECK: %[[CTILES:.*]] = gpu.alloc () : memref<2x1x32x4x4xf8E8M0FNU>
// CHECK: %[[RDATA:.*]] = gpu.alloc () : memref<96x256xf8E4M3FN>
// CHECK: %[[RTILES:.*]] = gpu.alloc () : memref<1x2x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK-COUNT-63: nvvm.inline_ptx "max.NaN.xorsign.abs.bf16x2 $0, $1, $2;"
// CHECK-NOT: nvvm.inline_ptx
// CHECK-NOT: gpu.launch
// CHECK-NOT: mx.
// CHECK: %[[CT:.*]] = bufferization.to_tensor %[[CTILES]]
// CHECK: %[[CD:.*]] = bufferization.to_tensor %[[CDATA]]
// CHECK: %[[RT:.*]] = bufferization.to_tensor %[[RTILES]]
// CHECK: %[[RD:.*]] = bufferization.to_tensor %[[RDATA]]
// CHECK: return %[[RD]], %[[RT]], %[[CD]], %[[CT]]
func.func @pair_both_fused(%x: tensor<96x256xbf16>) -> (tensor<96x256xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU>, tensor<96x256xf8E4M3FN>, tensor<2x1x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<96x256xbf16> -> tensor<96x256xf8E4M3FN>, tensor<96x8xf8E8M0FNU>
  %cd, %cs = mx.quantize %x block [32, 1] : tensor<96x256xbf16> -> tensor<96x256xf8E4M3FN>, tensor<3x256xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<96x8xf8E8M0FNU> -> tensor<1x2x32x4x4xf8E8M0FNU>
  %ct = mx.swizzle %cs unscaled_dim 1 : tensor<3x256xf8E8M0FNU> -> tensor<2x1x32x4x4xf8E8M0FNU>
  return %d, %t, %cd, %ct : tensor<96x256xf8E4M3FN>, tensor<1x2x32x4x4xf8E8M0FNU>, tensor<96x256xf8E4M3FN>, tensor<2x1x32x4x4xf8E8M0FNU>
}

// -----

// The linear scales are also returned, so the quantize kernel writes them
// linear and the swizzle gets a kernel of its own that reads them.
// CHECK-LABEL: func @second_user
// CHECK: %[[SCALES:.*]] = gpu.alloc () : memref<256x16xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[SCALES]][%{{.*}}, %{{.*}}] : memref<256x16xf8E8M0FNU>
// CHECK: %[[TILES:.*]] = gpu.alloc () : memref<2x4x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK: vector.load %[[SCALES]]
// CHECK: vector.store %{{.*}}, %[[TILES]]
// CHECK-NOT: gpu.launch
func.func @second_user(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<256x16xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return %d, %t, %s : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<256x16xf8E8M0FNU>
}

// -----

// Fused with its columnwise sibling, a rowwise quantize whose K (72) is not
// a multiple of 16 has a kernel. Its swizzle is fused; the columnwise
// scales are also returned, so their swizzle is a kernel of its own. f32
// amaxes are f32 maxima (no packed max).
// CHECK-LABEL: func @pair_one_fused
// CHECK: %[[CSCALES:.*]] = gpu.alloc () : memref<2x72xf8E8M0FNU>
// CHECK: %[[RTILES:.*]] = gpu.alloc () : memref<1x1x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK-NOT: nvvm.inline_ptx
// CHECK: memref.store %{{.*}}, %[[RTILES]]
// CHECK: %[[CTILES:.*]] = gpu.alloc () : memref<1x1x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK: memref.load %[[CSCALES]]
// CHECK: memref.store %{{.*}}, %[[CTILES]]
// CHECK-NOT: gpu.launch
func.func @pair_one_fused(%x: tensor<64x72xf32>) -> (tensor<64x72xf8E4M3FN>, tensor<2x72xf8E8M0FNU>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<64x72xf8E4M3FN>, tensor<1x1x32x4x4xf8E8M0FNU>) {
  %cd, %cs = mx.quantize %x block [32, 1] : tensor<64x72xf32> -> tensor<64x72xf8E4M3FN>, tensor<2x72xf8E8M0FNU>
  %ct = mx.swizzle %cs unscaled_dim 1 : tensor<2x72xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x72xf32> -> tensor<64x72xf8E4M3FN>, tensor<64x3xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<64x3xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  return %cd, %cs, %ct, %d, %t : tensor<64x72xf8E4M3FN>, tensor<2x72xf8E8M0FNU>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<64x72xf8E4M3FN>, tensor<1x1x32x4x4xf8E8M0FNU>
}

// -----

// Different element types: no shared kernel. A swizzle that tiles rowwise
// scales along the other dimension is not fused either: three kernels.
// CHECK-LABEL: func @not_fused
// CHECK: gpu.alloc () : memref<64x4xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK: gpu.alloc () : memref<2x128xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK: gpu.alloc () : memref<1x16x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
func.func @not_fused(%x: tensor<64x128xbf16>) -> (tensor<64x128xf8E4M3FN>, tensor<64x128xf8E5M2>, tensor<2x128xf8E8M0FNU>, tensor<1x16x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x128xbf16> -> tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU>
  %cd, %cs = mx.quantize %x block [32, 1] : tensor<64x128xbf16> -> tensor<64x128xf8E5M2>, tensor<2x128xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<64x4xf8E8M0FNU> -> tensor<1x16x32x4x4xf8E8M0FNU>
  return %d, %cd, %cs, %t : tensor<64x128xf8E4M3FN>, tensor<64x128xf8E5M2>, tensor<2x128xf8E8M0FNU>, tensor<1x16x32x4x4xf8E8M0FNU>
}

// -----

// Batch dimensions do not stand in the way: the [1, 1, 32] and [1, 32, 1]
// quantizations of one input share the strip kernel, both swizzles fused,
// each batch slice tiled alone.
// CHECK-LABEL: func @pair_batched
// CHECK-COUNT-4: gpu.alloc
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK-NOT: mx.
// CHECK: return
func.func @pair_batched(%x: tensor<2x70x96xbf16>) -> (tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf8E8M0FNU>, tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x70x96xbf16> -> tensor<2x70x96xf8E4M3FN>, tensor<2x70x3xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x70x3xf8E8M0FNU> -> tensor<2x1x1x32x4x4xf8E8M0FNU>
  %cd, %cs = mx.quantize %x block [1, 32, 1] : tensor<2x70x96xbf16> -> tensor<2x70x96xf8E4M3FN>, tensor<2x3x96xf8E8M0FNU>
  %ct = mx.swizzle %cs unscaled_dim 2 : tensor<2x3x96xf8E8M0FNU> -> tensor<2x1x1x32x4x4xf8E8M0FNU>
  return %d, %t, %cd, %ct : tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf8E8M0FNU>, tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf8E8M0FNU>
}

// -----

// Blocks of other recipes share nothing: a [1, 128] and a [128, 128]
// quantize of one input are two kernels.
// CHECK-LABEL: func @blockwise_pair
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
func.func @blockwise_pair(%x: tensor<256x256xbf16>) -> (tensor<256x2xf32>, tensor<2x2xf32>) {
  %d, %s = mx.quantize %x block [1, 128] : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %wd, %ws = mx.quantize %x block [128, 128] : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<2x2xf32>
  return %s, %ws : tensor<256x2xf32>, tensor<2x2xf32>
}

// -----

// FP8 blockwise's both usages of one input (the "both" program of
// mx.torch's activations and gradients): the [1, 1, 128] quantize and the
// transposed one, the 1x128 blocks along the rows, share the strip kernel,
// here with K = 100, which the rowwise kernel alone would not take: one
// launch, whose CTAs exchange the rowwise amaxes and factors through
// workgroup memory (2 slices x 1 row block x 32 strips x 8 groups = 2 CTAs).
// CHECK-LABEL: func @blockwise_both_fused
// CHECK: gpu.alloc () : memref<200x48xf8E5M2>
// CHECK: gpu.alloc () : memref<200x1xf32>
// CHECK: gpu.alloc () : memref<96x100xf8E5M2>
// CHECK: gpu.alloc () : memref<96x1xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}}) threads({{.*}}) workgroup({{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<128xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-2: gpu.barrier
// CHECK-NOT: gpu.launch
// CHECK-NOT: mx.
// CHECK: return
func.func @blockwise_both_fused(%x: tensor<2x48x100xf32>) -> (tensor<2x48x100xf8E5M2>, tensor<2x48x1xf32>, tensor<2x100x48xf8E5M2>, tensor<2x100x1xf32>) {
  %d, %s = mx.quantize %x block [1, 1, 128] rounding floor : tensor<2x48x100xf32> -> tensor<2x48x100xf8E5M2>, tensor<2x48x1xf32>
  %t, %ts = mx.quantize %x transposed block [1, 1, 128] rounding floor : tensor<2x48x100xf32> -> tensor<2x100x48xf8E5M2>, tensor<2x100x1xf32>
  return %d, %s, %t, %ts : tensor<2x48x100xf8E5M2>, tensor<2x48x1xf32>, tensor<2x100x48xf8E5M2>, tensor<2x100x1xf32>
}

// -----

// Unpaired: a rowwise [1, 128] quantize pairs only with the transposed
// [1, 128] one (128-row column blocks) of the same numerics. Another
// rounding, and MX's transposed [1, 32] beside a [1, 128], leave each
// quantize its own kernel: the rowwise kernel (no workgroup memory), the
// strip kernel.
// CHECK-LABEL: func @blockwise_not_fused
// CHECK-COUNT-4: gpu.launch {{.*}} = %c1) {{{$}}
// CHECK-NOT: gpu.launch
func.func @blockwise_not_fused(%x: tensor<256x256xbf16>) -> (tensor<256x2xf32>, tensor<256x2xf32>, tensor<256x2xf32>, tensor<256x8xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding floor : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %d2, %s2 = mx.quantize %x block [1, 128] rounding exact : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %t2, %ts2 = mx.quantize %x transposed block [1, 32] : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  return %s, %ts, %s2, %ts2 : tensor<256x2xf32>, tensor<256x2xf32>, tensor<256x2xf32>, tensor<256x8xf8E8M0FNU>
}

// -----

// unswizzle(swizzle(s)) folds to s before the fusion plan is made, so the
// quantize writes linear scales and no dangling swizzle is planned; a swizzle
// nobody reads is erased.
// CHECK-LABEL: func @unswizzle_of_fused_swizzle
// CHECK-COUNT-1: gpu.launch
// CHECK-NOT: gpu.launch
func.func @unswizzle_of_fused_swizzle(%x: tensor<500x192xbf16>) -> tensor<500x6xf8E8M0FNU> {
  %d, %s = mx.quantize %x block [1, 32] : tensor<500x192xbf16> -> tensor<500x192xf8E4M3FN>, tensor<500x6xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  %u = mx.unswizzle %t : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  %dead = mx.swizzle %u : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return %u : tensor<500x6xf8E8M0FNU>
}
