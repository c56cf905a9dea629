// The mx ops partitioned through upstream's sharding interface
// (mx-partition: sharding propagation, shard-partition, reduce-scatters),
// one function per rule of the spec's section 12. Arguments carry their
// shardings; the IR checked is each device's program.
// RUN: mx-opt %s --mx-partition --split-input-file | FileCheck %s

// Block-local recipes need no communication: MX rowwise split along M and
// along K on block boundaries, columnwise along M, FP8 blockwise 1x128 and
// 128x128 along M; the data and scales of each device are its shard's.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @block_local
// CHECK-SAME: (%[[A:.*]]: tensor<128x512xbf16>, %[[B:.*]]: tensor<256x256xbf16>, %[[C:.*]]: tensor<128x512xf32>, %[[D:.*]]: tensor<128x512xbf16>, %[[E:.*]]: tensor<128x512xbf16>)
// CHECK-NOT: = shard.
// CHECK: mx.quantize %[[A]] block [1, 32] : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<128x16xf8E8M0FNU>
// CHECK: mx.quantize %[[B]] block [1, 32] : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
// CHECK: mx.quantize %[[C]] block [32, 1] rounding floor : tensor<128x512xf32> -> tensor<128x512xf8E5M2>, tensor<4x512xf8E8M0FNU>
// CHECK: mx.quantize %[[D]] block [1, 128] : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<128x4xf32>
// CHECK: mx.quantize %[[E]] block [128, 128] : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<1x4xf32>
// CHECK-NOT: = shard.
func.func @block_local(%a: tensor<256x512xbf16>, %b: tensor<256x512xbf16>, %c: tensor<256x512xf32>,
                       %d: tensor<256x512xbf16>, %e: tensor<256x512xbf16>)
    -> (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>,
        tensor<256x512xf8E5M2>, tensor<8x512xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<256x4xf32>,
        tensor<256x512xf8E4M3FN>, tensor<2x4xf32>) {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a1 = shard.shard %a to %m : tensor<256x512xbf16>
  %b1 = shard.shard %b to %k : tensor<256x512xbf16>
  %c1 = shard.shard %c to %m : tensor<256x512xf32>
  %d1 = shard.shard %d to %m : tensor<256x512xbf16>
  %e1 = shard.shard %e to %m : tensor<256x512xbf16>
  %ad, %as = mx.quantize %a1 block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %bd, %bs = mx.quantize %b1 block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %cd, %cs = mx.quantize %c1 block [32, 1] rounding floor : tensor<256x512xf32> -> tensor<256x512xf8E5M2>, tensor<8x512xf8E8M0FNU>
  %dd, %ds = mx.quantize %d1 block [1, 128] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x4xf32>
  %ed, %es = mx.quantize %e1 block [128, 128] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<2x4xf32>
  return %ad, %as, %bd, %bs, %cd, %cs, %dd, %ds, %ed, %es
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>,
        tensor<256x512xf8E5M2>, tensor<8x512xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<256x4xf32>,
        tensor<256x512xf8E4M3FN>, tensor<2x4xf32>
}

// -----

// Per-tensor current scaling: each device reduces its shard's amax, the
// amaxes are all-reduced (max) and every device casts with the whole
// tensor's amax. NVFP4's computed tensor scale derives from the finite
// amax the same way; MXFP4 is block-local.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @amax_reduced
// CHECK-SAME: (%[[X:.*]]: tensor<128x512xbf16>, %[[Y:.*]]: tensor<128x512xf32>, %[[Z:.*]]: tensor<128x512xbf16>)
// CHECK: %[[LOCAL:.*]] = mx.amax %[[X]] : tensor<128x512xbf16> -> tensor<f32>
// CHECK: %[[AMAX:.*]] = shard.all_reduce %[[LOCAL]] on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
// CHECK: mx.quantize %[[X]] block [256, 512] amax(%[[AMAX]] : tensor<f32>) : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<1x1xf32>
// CHECK: %[[FLOCAL:.*]] = mx.amax %[[Y]] finite : tensor<128x512xf32> -> tensor<f32>
// CHECK: %[[FAMAX:.*]] = shard.all_reduce %[[FLOCAL]] on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
// CHECK: mx.quantize %[[Y]] block [1, 16] amax(%[[FAMAX]] : tensor<f32>) : tensor<128x512xf32> -> tensor<128x512xf4E2M1FN>, tensor<128x32xf8E4M3FN>, tensor<f32>
// CHECK-NOT: = shard.
// CHECK: mx.quantize %[[Z]] block [1, 32] : tensor<128x512xbf16> -> tensor<128x512xf4E2M1FN>, tensor<128x16xf8E8M0FNU>
func.func @amax_reduced(%x: tensor<256x512xbf16>, %y: tensor<256x512xf32>, %z: tensor<256x512xbf16>)
    -> (tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<256x512xf4E2M1FN>, tensor<256x32xf8E4M3FN>, tensor<f32>,
        tensor<256x512xf4E2M1FN>, tensor<256x16xf8E8M0FNU>) {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %m : tensor<256x512xbf16>
  %y1 = shard.shard %y to %m : tensor<256x512xf32>
  %z1 = shard.shard %z to %m : tensor<256x512xbf16>
  %xd, %xs = mx.quantize %x1 block [256, 512] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<1x1xf32>
  %yd, %ys, %yt = mx.quantize %y1 block [1, 16] : tensor<256x512xf32> -> tensor<256x512xf4E2M1FN>, tensor<256x32xf8E4M3FN>, tensor<f32>
  %zd, %zs = mx.quantize %z1 block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf4E2M1FN>, tensor<256x16xf8E8M0FNU>
  return %xd, %xs, %yd, %ys, %yt, %zd, %zs
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<256x512xf4E2M1FN>, tensor<256x32xf8E4M3FN>, tensor<f32>,
        tensor<256x512xf4E2M1FN>, tensor<256x16xf8E8M0FNU>
}

// -----

// mx.amax itself: the shard amaxes all-reduced (max).
shard.grid @grid(shape = 4)
// CHECK-LABEL: func.func @amax
// CHECK: %[[LOCAL:.*]] = mx.amax %{{.*}} : tensor<64x128xf16> -> tensor<f32>
// CHECK: shard.all_reduce %[[LOCAL]] on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
func.func @amax(%x: tensor<64x512xf16>) -> tensor<f32> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %k : tensor<64x512xf16>
  %a = mx.amax %x1 : tensor<64x512xf16> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

// Delayed scaling: the casts use the shared scales and record their shard's
// amax in the history; the update all-reduces (max) the history once for
// both casts, before the scales are computed.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @delayed
// CHECK-SAME: (%[[X:.*]]: tensor<128x512xbf16>, %[[Y:.*]]: tensor<512x64xbf16>, %[[S:.*]]: tensor<2xf32>, %[[H:.*]]: tensor<16x2xf32>)
// CHECK: %{{.*}}, %{{.*}}, %[[H1:.*]] = mx.quantize_delayed %[[X]], %[[S]], %[[H]] index 0 : tensor<128x512xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<128x512xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
// CHECK-NOT: = shard.
// CHECK: %{{.*}}, %{{.*}}, %[[H2:.*]] = mx.quantize_delayed %[[Y]], %[[S]], %[[H1]] index 1 : tensor<512x64xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<512x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
// CHECK: %[[R:.*]] = shard.all_reduce %[[H2]] on @grid grid_axes = [0] reduction = max : tensor<16x2xf32> -> tensor<16x2xf32>
// CHECK: mx.update_amax_history %[[R]], %[[S]] element f8E4M3FN : tensor<16x2xf32>, tensor<2xf32> -> tensor<16x2xf32>, tensor<2xf32>
func.func @delayed(%x: tensor<256x512xbf16>, %y: tensor<512x128xbf16>, %s: tensor<2xf32>, %h: tensor<16x2xf32>)
    -> (tensor<256x512xf8E4M3FN>, tensor<512x128xf8E4M3FN>, tensor<16x2xf32>, tensor<2xf32>) {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %n = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %m : tensor<256x512xbf16>
  %y1 = shard.shard %y to %n : tensor<512x128xbf16>
  %xd, %xi, %h1 = mx.quantize_delayed %x1, %s, %h index 0
      : tensor<256x512xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  %yd, %yi, %h2 = mx.quantize_delayed %y1, %s, %h1 index 1
      : tensor<512x128xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<512x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  %h3, %s3 = mx.update_amax_history %h2, %s element f8E4M3FN
      : tensor<16x2xf32>, tensor<2xf32> -> tensor<16x2xf32>, tensor<2xf32>
  return %xd, %yd, %h3, %s3 : tensor<256x512xf8E4M3FN>, tensor<512x128xf8E4M3FN>, tensor<16x2xf32>, tensor<2xf32>
}

// -----

// A cast whose history leaves the function (no update here) reduces it
// itself, so that every device returns the same history.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @delayed_returned
// CHECK: %{{.*}}, %{{.*}}, %[[H1:.*]] = mx.quantize_delayed
// CHECK: %[[R:.*]] = shard.all_reduce %[[H1]] on @grid grid_axes = [0] reduction = max : tensor<16x1xf32> -> tensor<16x1xf32>
// CHECK: return %{{.*}}, %[[R]]
func.func @delayed_returned(%x: tensor<256x512xbf16>, %s: tensor<1xf32>, %h: tensor<16x1xf32>)
    -> (tensor<256x512xf8E5M2>, tensor<16x1xf32>) {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %m : tensor<256x512xbf16>
  %xd, %xi, %h1 = mx.quantize_delayed %x1, %s, %h index 0
      : tensor<256x512xbf16>, tensor<1xf32>, tensor<16x1xf32> -> tensor<256x512xf8E5M2>, tensor<1x1xf32>, tensor<16x1xf32>
  return %xd, %h1 : tensor<256x512xf8E5M2>, tensor<16x1xf32>
}

// -----

// Data and scales that a consumer needs whole cross the wire in the compact
// format (FP8 bytes, linear E8M0 scales) and the swizzle comes after the
// gather, on every device.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @gather_then_swizzle
// CHECK: %[[D:.*]], %[[S:.*]] = mx.quantize %{{.*}} block [1, 32] : tensor<128x512xbf16> -> tensor<128x512xf8E4M3FN>, tensor<128x16xf8E8M0FNU>
// CHECK-DAG: %[[GS:.*]] = shard.all_gather %[[S]] on @grid grid_axes = [0] gather_axis = 0 : tensor<128x16xf8E8M0FNU> -> tensor<256x16xf8E8M0FNU>
// CHECK-DAG: %[[GD:.*]] = shard.all_gather %[[D]] on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
// CHECK: %[[T:.*]] = mx.swizzle %[[GS]] : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
// CHECK: return %[[GD]], %[[T]]
func.func @gather_then_swizzle(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %x1 = shard.shard %x to %m : tensor<256x512xbf16>
  %d, %s = mx.quantize %x1 block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %d1 = shard.shard %d to %whole annotate_for_users : tensor<256x512xf8E4M3FN>
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  %t1 = shard.shard %t to %whole : tensor<2x4x32x4x4xf8E8M0FNU>
  return %d1, %t1 : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>
}

// -----

// Shards of whole 128-row tiles swizzle locally; shards of 192 rows would
// split a tile, so propagation gathers the compact scales and swizzles
// after the gather. The blockwise GEMM-ready layout needs groups of 4 rows.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @swizzle_tiles
// CHECK: %{{.*}}, %[[S:.*]] = mx.quantize %{{.*}} block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
// CHECK-NOT: = shard.
// CHECK: mx.swizzle %[[S]] : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
// CHECK: %{{.*}}, %[[S2:.*]] = mx.quantize %{{.*}} block [1, 32] : tensor<192x512xbf16> -> tensor<192x512xf8E4M3FN>, tensor<192x16xf8E8M0FNU>
// CHECK: %[[G:.*]] = shard.all_gather %[[S2]] on @grid grid_axes = [0] gather_axis = 0 : tensor<192x16xf8E8M0FNU> -> tensor<384x16xf8E8M0FNU>
// CHECK: mx.swizzle %[[G]] : tensor<384x16xf8E8M0FNU> -> tensor<3x4x32x4x4xf8E8M0FNU>
// CHECK: %{{.*}}, %[[S3:.*]] = mx.quantize %{{.*}} block [1, 128] : tensor<6x512xbf16> -> tensor<6x512xf8E4M3FN>, tensor<6x4xf32>
// CHECK: %[[G3:.*]] = shard.all_gather %[[S3]] on @grid grid_axes = [0] gather_axis = 0 : tensor<6x4xf32> -> tensor<12x4xf32>
// CHECK: mx.swizzle %[[G3]] layout blockwise : tensor<12x4xf32> -> tensor<4x3x4xf32>
func.func @swizzle_tiles(%x: tensor<512x512xbf16>, %y: tensor<384x512xbf16>, %z: tensor<12x512xbf16>)
    -> (tensor<4x4x32x4x4xf8E8M0FNU>, tensor<3x4x32x4x4xf8E8M0FNU>, tensor<4x3x4xf32>) {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %m : tensor<512x512xbf16>
  %y1 = shard.shard %y to %m : tensor<384x512xbf16>
  %z1 = shard.shard %z to %m : tensor<12x512xbf16>
  %xd, %xs = mx.quantize %x1 block [1, 32] : tensor<512x512xbf16> -> tensor<512x512xf8E4M3FN>, tensor<512x16xf8E8M0FNU>
  %xt = mx.swizzle %xs : tensor<512x16xf8E8M0FNU> -> tensor<4x4x32x4x4xf8E8M0FNU>
  %yd, %ys = mx.quantize %y1 block [1, 32] : tensor<384x512xbf16> -> tensor<384x512xf8E4M3FN>, tensor<384x16xf8E8M0FNU>
  %yt = mx.swizzle %ys : tensor<384x16xf8E8M0FNU> -> tensor<3x4x32x4x4xf8E8M0FNU>
  %zd, %zs = mx.quantize %z1 block [1, 128] : tensor<12x512xbf16> -> tensor<12x512xf8E4M3FN>, tensor<12x4xf32>
  %zt = mx.swizzle %zs layout blockwise : tensor<12x4xf32> -> tensor<4x3x4xf32>
  return %xt, %yt, %zt : tensor<4x4x32x4x4xf8E8M0FNU>, tensor<3x4x32x4x4xf8E8M0FNU>, tensor<4x3x4xf32>
}

// -----

// A scaled_matmul split along M needs no communication. Split along K (data
// and scales on K-block boundaries, tiled scales on whole tiles), each
// device computes an f32 partial product of its K slice; the partial
// products are summed by an all-reduce and rounded to bf16 after it.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @matmul_m
// CHECK-NOT: = shard.
// CHECK: mx.scaled_matmul %{{.*}} lhs_block [1, 32] rhs_block [1, 32] : tensor<128x512xf8E4M3FN>, tensor<128x16xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<128x128xbf16>
// CHECK-NOT: = shard.
func.func @matmul_m(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x16xf8E8M0FNU>,
                    %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %a1 = shard.shard %a to %m : tensor<256x512xf8E4M3FN>
  %as1 = shard.shard %as to %m : tensor<256x16xf8E8M0FNU>
  %c = mx.scaled_matmul %a1, %as1, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// CHECK-LABEL: func.func @matmul_k
// CHECK: %[[P:.*]] = mx.scaled_matmul %{{.*}} lhs_block [1, 32] rhs_block [1, 32] : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xf32>
// CHECK: %[[S:.*]] = shard.all_reduce %[[P]] on @grid grid_axes = [0] : tensor<256x128xf32> -> tensor<256x128xf32>
// CHECK: %[[C:.*]] = arith.truncf %[[S]] : tensor<256x128xf32> to tensor<256x128xbf16>
// CHECK: return %[[C]]
func.func @matmul_k(%a: tensor<256x1024xf8E4M3FN>, %as: tensor<2x8x32x4x4xf8E8M0FNU>,
                    %b: tensor<128x1024xf8E4M3FN>, %bs: tensor<1x8x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %kt = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a1 = shard.shard %a to %k : tensor<256x1024xf8E4M3FN>
  %as1 = shard.shard %as to %kt : tensor<2x8x32x4x4xf8E8M0FNU>
  %b1 = shard.shard %b to %k : tensor<128x1024xf8E4M3FN>
  %bs1 = shard.shard %bs to %kt : tensor<1x8x32x4x4xf8E8M0FNU>
  %c = mx.scaled_matmul %a1, %as1, %b1, %bs1 lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x1024xf8E4M3FN>, tensor<2x8x32x4x4xf8E8M0FNU>, tensor<128x1024xf8E4M3FN>, tensor<1x8x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// A consumer that takes the product split along M gets a reduce-scatter of
// the partial products instead (mx-combine-collectives), rounded after it.
// CHECK-LABEL: func.func @matmul_k_scatter
// CHECK: %[[P:.*]] = mx.scaled_matmul %{{.*}} lhs_block [1, 128] rhs_block [128, 128] : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<256x128xf32>
// CHECK: %[[S:.*]] = shard.reduce_scatter %[[P]] on @grid grid_axes = [0] scatter_axis = 0 : tensor<256x128xf32> -> tensor<128x128xf32>
// CHECK: %[[C:.*]] = arith.truncf %[[S]] : tensor<128x128xf32> to tensor<128x128xbf16>
// CHECK: return %[[C]]
func.func @matmul_k_scatter(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x4xf32>,
                            %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4xf32>) -> tensor<256x128xbf16> {
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %a1 = shard.shard %a to %k : tensor<256x512xf8E4M3FN>
  %as1 = shard.shard %as to %k : tensor<256x4xf32>
  %b1 = shard.shard %b to %k : tensor<128x512xf8E4M3FN>
  %bs1 = shard.shard %bs to %k : tensor<1x4xf32>
  %c = mx.scaled_matmul %a1, %as1, %b1, %bs1 lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<128x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<256x128xbf16>
  %c1 = shard.shard %c to %whole : tensor<256x128xbf16>
  %c2 = shard.shard %c1 to %m annotate_for_users : tensor<256x128xbf16>
  return %c2 : tensor<256x128xbf16>
}

// -----

// Dequantize and unswizzle compute their shards.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @dequantize_unswizzle
// CHECK-NOT: = shard.
// CHECK: mx.unswizzle %{{.*}} : tensor<2x2x32x4x4xf8E8M0FNU> -> tensor<256x8xf8E8M0FNU>
// CHECK: mx.dequantize %{{.*}}, %{{.*}} block [1, 32] : tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU> -> tensor<256x256xbf16>
func.func @dequantize_unswizzle(%d: tensor<512x256xf8E4M3FN>, %t: tensor<4x2x32x4x4xf8E8M0FNU>) -> tensor<512x256xbf16> {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %d1 = shard.shard %d to %m : tensor<512x256xf8E4M3FN>
  %t1 = shard.shard %t to %m : tensor<4x2x32x4x4xf8E8M0FNU>
  %s = mx.unswizzle %t1 : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<512x8xf8E8M0FNU>
  %x = mx.dequantize %d1, %s block [1, 32] : tensor<512x256xf8E4M3FN>, tensor<512x8xf8E8M0FNU> -> tensor<512x256xbf16>
  return %x : tensor<512x256xbf16>
}

// -----

// mx.column_sum: split rows (the tokens of a sequence-parallel output
// gradient) give each device the f32 sums of its rows, all-reduced (sum);
// split columns are local.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @column_sum_rows
// CHECK: %[[LOCAL:.*]] = mx.column_sum %{{.*}} : tensor<128x96xbf16> -> tensor<96xf32>
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[LOCAL]] on @grid grid_axes = [0] : tensor<96xf32> -> tensor<96xf32>
// CHECK: return %[[SUM]]
func.func @column_sum_rows(%x: tensor<256x96xbf16>) -> tensor<96xf32> {
  %m = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %m : tensor<256x96xbf16>
  %s = mx.column_sum %x1 : tensor<256x96xbf16> -> tensor<96xf32>
  return %s : tensor<96xf32>
}

// CHECK-LABEL: func.func @column_sum_columns
// CHECK-NOT: shard.all_reduce
// CHECK: mx.column_sum %{{.*}} : tensor<256x48xf32> -> tensor<48xf32>
// CHECK-NOT: shard.all_reduce
func.func @column_sum_columns(%x: tensor<256x96xf32>) -> tensor<96xf32> {
  %n = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %n : tensor<256x96xf32>
  %s = mx.column_sum %x1 : tensor<256x96xf32> -> tensor<96xf32>
  return %s : tensor<96xf32>
}
