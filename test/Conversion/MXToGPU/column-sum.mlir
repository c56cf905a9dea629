// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// mx.column_sum on the GPU (ColumnSums.h): the column sums of 64-row tiles
// into f32 partials [ceil(M / 64), N], then a kernel adding the partials.
// Where a transposed per-tensor cast of the same input has a cast+transpose
// kernel, or FP8 blockwise's transposed [1, 128] quantize a strip kernel,
// that kernel writes the partials (the input is read once).

// Alone: a kernel that only sums the tiles' columns (any M; 2 x 3 tiles of
// 80 x 144), then the partials kernel (5 CTAs of 32 columns).
// CHECK-LABEL: func @standalone
// CHECK: %[[P:.*]] = gpu.alloc () : memref<2x144xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c6{{.*}}) threads{{.*}} workgroup(%[[S:.*]] : memref<8x64xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-14: gpu.shuffle xor
// CHECK:   vector.store %{{.*}}, %[[S]][%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<8x64xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK:   gpu.barrier
// CHECK:   memref.store %{{.*}}, %[[P]][%{{.*}}, %{{.*}}] : memref<2x144xf32>
// CHECK: %[[R:.*]] = gpu.alloc () : memref<144xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c5{{.*}}) threads{{.*}} workgroup
// CHECK:   scf.for
// CHECK:   memref.load %[[P]]
// CHECK:   gpu.barrier
// CHECK:   memref.store %{{.*}}, %[[R]][%{{.*}}] : memref<144xf32>
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[R]]
// CHECK: return %[[T]]
func.func @standalone(%x: tensor<80x144xbf16>) -> tensor<144xf32> {
  %s = mx.column_sum %x : tensor<80x144xbf16> -> tensor<144xf32>
  return %s : tensor<144xf32>
}

// -----

// Current scaling: the amax kernel, then the cast+transpose kernel, which
// also stages and stores the tiles' column sums, then the partials kernel.
// CHECK-LABEL: func @current_scaling_fused
// CHECK: gpu.launch {{.*}} workgroup({{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[P:.*]] = gpu.alloc () : memref<2x256xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c8{{.*}}) threads{{.*}} workgroup(%[[STAGE:.*]] : memref<64x64xi8, #gpu.address_space<workgroup>>, %[[S:.*]] : memref<8x64xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-14: gpu.shuffle xor
// CHECK:   vector.store %{{.*}}, %[[S]]
// CHECK:   vector.store %{{.*}} : memref<128x256xf8E5M2>, vector<16xf8E5M2>
// CHECK:   vector.store %{{.*}}, %[[STAGE]]
// CHECK:   gpu.barrier
// CHECK:   memref.store %{{.*}}, %[[P]][%{{.*}}, %{{.*}}] : memref<2x256xf32>
// CHECK-COUNT-16: memref.load %[[STAGE]]
// CHECK:   vector.store %{{.*}} : memref<256x128xf8E5M2>, vector<16xf8E5M2>
// CHECK: gpu.launch
// CHECK:   memref.load %[[P]]
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @current_scaling_fused(%x: tensor<128x256xbf16>) -> (tensor<128x256xf8E5M2>, tensor<1x1xf32>, tensor<256x128xf8E5M2>, tensor<1x1xf32>, tensor<256xf32>) {
  %d, %s = mx.quantize %x block [128, 256] rounding exact : tensor<128x256xbf16> -> tensor<128x256xf8E5M2>, tensor<1x1xf32>
  %t, %ts = mx.quantize %x transposed block [256, 128] rounding exact : tensor<128x256xbf16> -> tensor<256x128xf8E5M2>, tensor<1x1xf32>
  %db = mx.column_sum %x : tensor<128x256xbf16> -> tensor<256xf32>
  return %d, %s, %t, %ts, %db : tensor<128x256xf8E5M2>, tensor<1x1xf32>, tensor<256x128xf8E5M2>, tensor<1x1xf32>, tensor<256xf32>
}

// -----

// Delayed scaling, the column sum first in the block: the history copy, the
// cast+transpose kernel with the amax's and the column sums' workgroup
// buffers (one a tile: a delayed cast's CTA casts two), then the partials
// kernel.
// CHECK-LABEL: func @delayed_fused
// CHECK: gpu.launch
// CHECK: %[[P:.*]] = gpu.alloc () : memref<1x128xf32>
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<128x64xi8, #gpu.address_space<workgroup>>, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>)
// CHECK:   memref.store %{{.*}}, %[[P]]
// CHECK:   memref.store %{{.*}}, %[[P]]
// CHECK:   memref.atomic_rmw maxu
// CHECK: gpu.launch
// CHECK:   memref.load %[[P]]
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @delayed_fused(%x: tensor<64x128xf32>, %s: tensor<1xf32>, %h: tensor<16x1xf32>) -> (tensor<128xf32>, tensor<64x128xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<16x1xf32>) {
  %db = mx.column_sum %x : tensor<64x128xf32> -> tensor<128xf32>
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 0 : tensor<64x128xf32>, tensor<1xf32>, tensor<16x1xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x1xf32>
  %yt, %i2, %h2 = mx.quantize_delayed %x, %s, %h1 index 0 transposed : tensor<64x128xf32>, tensor<1xf32>, tensor<16x1xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x1xf32>
  return %db, %y, %yt, %h2 : tensor<128xf32>, tensor<64x128xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<16x1xf32>
}

// -----

// A column sum used before the cast+transpose kernel would define it, or of
// an input that no transposed cast reads, runs alone; the cast+transpose
// kernel has no column sums then.
// CHECK-LABEL: func @not_fused
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>)
// CHECK: gpu.launch
// CHECK: arith.negf
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<128x64xi8, #gpu.address_space<workgroup>>, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: memref<8x64xf32
// CHECK: return
func.func @not_fused(%x: tensor<64x128xbf16>, %s: tensor<1xf32>, %h: tensor<16x1xf32>) -> (tensor<128xf32>, tensor<128x64xf8E4M3FN>, tensor<16x1xf32>) {
  %db = mx.column_sum %x : tensor<64x128xbf16> -> tensor<128xf32>
  %n = arith.negf %db : tensor<128xf32>
  %yt, %i, %h1 = mx.quantize_delayed %x, %s, %h index 0 transposed : tensor<64x128xbf16>, tensor<1xf32>, tensor<16x1xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x1xf32>
  return %n, %yt, %h1 : tensor<128xf32>, tensor<128x64xf8E4M3FN>, tensor<16x1xf32>
}

// -----

// FP8 blockwise, the rowwise and transposed [1, 128] quantizes of one strip
// kernel: its lanes sum each 8 rows of their 16-row strips as a tree, add
// a 64-row tile's sums down the chain of its 4 lane groups (3 steps of 4
// shuffles up by 4 lanes) and the last group stores 4 partials; then the
// partials kernel. The rows end inside a 128-row block (M = 192): a strip
// past them adds -0 (one select a group) and the kernel asks for two CTAs
// an SM (KernelOccupancy).
// CHECK-LABEL: func @blockwise_fused
// CHECK: %[[P:.*]] = gpu.alloc () : memref<3x256xf32>
// CHECK: gpu.launch
// CHECK:   vector.load {{.*}} {alignment = 8 : i64, mx.min_ctas_per_sm = 2 : i64} : memref<192x256xbf16>, vector<4xbf16>
// CHECK-NOT: gpu.shuffle xor
// CHECK-COUNT-12: gpu.shuffle  up
// CHECK:   vector.store %{{.*}}, %[[P]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<3x256xf32>, vector<4xf32>
// CHECK: gpu.launch
// CHECK:   memref.load %[[P]]
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @blockwise_fused(%x: tensor<192x256xbf16>) -> (tensor<192x256xf8E4M3FN>, tensor<192x2xf32>, tensor<256x192xf8E4M3FN>, tensor<256x2xf32>, tensor<256xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<192x256xbf16> -> tensor<192x256xf8E4M3FN>, tensor<192x2xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<192x256xbf16> -> tensor<256x192xf8E4M3FN>, tensor<256x2xf32>
  %db = mx.column_sum %x : tensor<192x256xbf16> -> tensor<256xf32>
  return %d, %s, %t, %ts, %db : tensor<192x256xf8E4M3FN>, tensor<192x2xf32>, tensor<256x192xf8E4M3FN>, tensor<256x2xf32>, tensor<256xf32>
}

// -----

// M a multiple of 128 and a 16-bit input: no select, no occupancy request.
// CHECK-LABEL: func @blockwise_fused_whole_blocks
// CHECK: gpu.launch
// CHECK-NOT: mx.min_ctas_per_sm
// CHECK-COUNT-12: gpu.shuffle  up
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @blockwise_fused_whole_blocks(%x: tensor<256x128xf16>) -> (tensor<256x128xf8E4M3FN>, tensor<256x1xf32>, tensor<128x256xf8E4M3FN>, tensor<128x2xf32>, tensor<128xf32>) {
  %db = mx.column_sum %x : tensor<256x128xf16> -> tensor<128xf32>
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<256x128xf16> -> tensor<256x128xf8E4M3FN>, tensor<256x1xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<256x128xf16> -> tensor<128x256xf8E4M3FN>, tensor<128x2xf32>
  return %d, %s, %t, %ts, %db : tensor<256x128xf8E4M3FN>, tensor<256x1xf32>, tensor<128x256xf8E4M3FN>, tensor<128x2xf32>, tensor<128xf32>
}

// -----

// An f32 input asks for two CTAs an SM with whole row blocks too.
// CHECK-LABEL: func @blockwise_fused_f32
// CHECK: gpu.launch
// CHECK:   vector.load {{.*}} {alignment = 16 : i64, mx.min_ctas_per_sm = 2 : i64} : memref<128x128xf32>, vector<4xf32>
// CHECK-COUNT-12: gpu.shuffle  up
func.func @blockwise_fused_f32(%x: tensor<128x128xf32>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>, tensor<128x128xf8E4M3FN>, tensor<128x1xf32>, tensor<128xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<128x128xf32> -> tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<128x128xf32> -> tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  %db = mx.column_sum %x : tensor<128x128xf32> -> tensor<128xf32>
  return %d, %s, %t, %ts, %db : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>, tensor<128x128xf8E4M3FN>, tensor<128x1xf32>, tensor<128xf32>
}

// -----

// The transposed [1, 128] quantize alone (no rowwise sibling) has the same
// strip kernel, which sums the columns too.
// CHECK-LABEL: func @blockwise_transposed_alone
// CHECK: gpu.launch
// CHECK-COUNT-12: gpu.shuffle  up
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @blockwise_transposed_alone(%x: tensor<128x128xbf16>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>, tensor<128xf32>) {
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<128x128xbf16> -> tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  %db = mx.column_sum %x : tensor<128x128xbf16> -> tensor<128xf32>
  return %t, %ts, %db : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>, tensor<128xf32>
}

// -----

// MXFP8's strip kernel (32-row column blocks: a 64-row tile spans two
// warps) does not sum the columns: the tile kernel does, after it.
// CHECK-LABEL: func @mxfp8_not_fused
// CHECK: gpu.launch
// CHECK-NOT: gpu.shuffle  up
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>)
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @mxfp8_not_fused(%x: tensor<64x128xbf16>) -> (tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>, tensor<128xf32>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x128xbf16> -> tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU>
  %t, %ts = mx.quantize %x transposed block [1, 32] : tensor<64x128xbf16> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %db = mx.column_sum %x : tensor<64x128xbf16> -> tensor<128xf32>
  return %d, %s, %t, %ts, %db : tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>, tensor<128xf32>
}

// -----

func.func @columns(%x: tensor<64x40xbf16>) -> tensor<40xf32> {
  // expected-error @+1 {{'mx.column_sum' op has no GPU lowering: the column-sum GPU kernel needs the column count to be a multiple of 16}}
  %s = mx.column_sum %x : tensor<64x40xbf16> -> tensor<40xf32>
  return %s : tensor<40xf32>
}
