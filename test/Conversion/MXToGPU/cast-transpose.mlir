// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// The cast+transpose kernel (PerTensorScaling.cpp): a transposed per-tensor
// cast, and the plain cast of the same input with it, in one kernel of CTAs
// of 64 x 64 tiles (one a CTA for current scaling, two for delayed) that
// stage the codes in workgroup memory.

// Current scaling: the amax kernel, then one kernel writing both outputs
// (2 slices x 2 x 3 tiles).
// CHECK-LABEL: func @current_scaling_pair
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}) threads{{.*}} workgroup({{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c12{{.*}}) threads{{.*}} workgroup(%[[STAGE:.*]] : memref<64x64xi8, #gpu.address_space<workgroup>>)
// CHECK:   vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<192x160xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   vector.store %{{.*}}, %[[STAGE]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x64xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// CHECK:   gpu.barrier
// CHECK-COUNT-16: memref.load %[[STAGE]]
// CHECK:   vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<320x96xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @current_scaling_pair(%x: tensor<2x96x160xbf16>) -> (tensor<2x96x160xf8E4M3FN>, tensor<2x1x1xf32>, tensor<2x160x96xf8E4M3FN>, tensor<2x1x1xf32>) {
  %d, %s = mx.quantize %x block [1, 96, 160] rounding exact : tensor<2x96x160xbf16> -> tensor<2x96x160xf8E4M3FN>, tensor<2x1x1xf32>
  %t, %ts = mx.quantize %x transposed block [1, 160, 96] rounding exact : tensor<2x96x160xbf16> -> tensor<2x160x96xf8E4M3FN>, tensor<2x1x1xf32>
  return %d, %s, %t, %ts : tensor<2x96x160xf8E4M3FN>, tensor<2x1x1xf32>, tensor<2x160x96xf8E4M3FN>, tensor<2x1x1xf32>
}

// -----

// Delayed scaling: the history copy, then one kernel that casts, transposes
// and records the amax; the transposed cast's history is the same buffer.
// A CTA casts two tiles side by side (3 tile columns: 2 CTAs, the second
// tile of the last one past the matrix): both loads before the casts, both
// tiles staged before the one barrier, one CTA max and recording.
// CHECK-LABEL: func @delayed_pair
// CHECK: gpu.launch
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}) threads{{.*}} workgroup(%[[STAGE:.*]] : memref<128x64xi8, #gpu.address_space<workgroup>>, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-2: vector.load {{.*}} : memref<64x192xbf16>, vector<16xbf16>
// CHECK-NOT: gpu.barrier
// CHECK:   vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x192xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   vector.store %{{.*}}, %[[STAGE]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<128x64xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// CHECK-NOT: gpu.barrier
// CHECK:   vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x192xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   vector.store %{{.*}}, %[[STAGE]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<128x64xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// CHECK:   gpu.barrier
// CHECK-COUNT-16: memref.load %[[STAGE]]
// CHECK:   vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<192x64xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK-COUNT-16: memref.load %[[STAGE]]
// CHECK:   vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<192x64xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   gpu.barrier
// CHECK:   memref.atomic_rmw maxu
// CHECK-NOT: gpu.launch
// CHECK: %[[H:.*]] = bufferization.to_tensor %{{.*}} : memref<16x3xf32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[H]]
func.func @delayed_pair(%x: tensor<64x192xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) -> (tensor<64x192xf8E4M3FN>, tensor<1x1xf32>, tensor<192x64xf8E4M3FN>, tensor<16x3xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1 : tensor<64x192xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x192xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  %yt, %i2, %h2 = mx.quantize_delayed %x, %s, %h1 index 1 transposed : tensor<64x192xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<192x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %i, %yt, %h2 : tensor<64x192xf8E4M3FN>, tensor<1x1xf32>, tensor<192x64xf8E4M3FN>, tensor<16x3xf32>
}

// -----

// A transposed cast alone writes the transposed data only.
// CHECK-LABEL: func @transposed_alone
// CHECK: gpu.launch
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<64x64xi8, #gpu.address_space<workgroup>>)
// CHECK-COUNT-1: vector.store {{.*}} : memref<48x32xf8E5M2>, vector<16xf8E5M2>
// CHECK-NOT: gpu.launch
func.func @transposed_alone(%x: tensor<32x48xf32>) -> (tensor<48x32xf8E5M2>, tensor<1x1xf32>) {
  %t, %ts = mx.quantize %x transposed block [48, 32] rounding exact : tensor<32x48xf32> -> tensor<48x32xf8E5M2>, tensor<1x1xf32>
  return %t, %ts : tensor<48x32xf8E5M2>, tensor<1x1xf32>
}

// -----

func.func @transposed_blocks(%x: tensor<64x128xbf16>) -> (tensor<128x64xf8E4M3FN>, tensor<128x1xf32>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernels write transposed data for one block per matrix (per-tensor scaling) and for [1, 32] and [1, 128] blocks of the data only}}
  %t, %ts = mx.quantize %x transposed block [1, 64] rounding exact : tensor<64x128xbf16> -> tensor<128x64xf8E4M3FN>, tensor<128x1xf32>
  return %t, %ts : tensor<128x64xf8E4M3FN>, tensor<128x1xf32>
}

// -----

func.func @transposed_columns_odd(%x: tensor<40x64xbf16>) -> (tensor<64x40xf8E4M3FN>, tensor<64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the transposed columnwise GPU kernel needs the input's rows to be a multiple of 16 and its columns a multiple of 4}}
  %t, %ts = mx.quantize %x transposed block [1, 32] : tensor<40x64xbf16> -> tensor<64x40xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
  return %t, %ts : tensor<64x40xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
}

// -----

func.func @transposed_odd(%x: tensor<40x24xbf16>) -> (tensor<24x40xf8E4M3FN>, tensor<1x1xf32>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the cast+transpose GPU kernel needs both matrix dimensions to be multiples of 16}}
  %t, %ts = mx.quantize %x transposed block [24, 40] rounding exact : tensor<40x24xbf16> -> tensor<24x40xf8E4M3FN>, tensor<1x1xf32>
  return %t, %ts : tensor<24x40xf8E4M3FN>, tensor<1x1xf32>
}

// -----

func.func @delayed_transposed_odd(%x: tensor<40x24xbf16>, %s: tensor<1xf32>, %h: tensor<4x1xf32>) -> tensor<24x40xf8E4M3FN> {
  // expected-error @+1 {{'mx.quantize_delayed' op has no GPU lowering: the cast+transpose GPU kernel needs both matrix dimensions to be multiples of 16}}
  %yt, %i, %h1 = mx.quantize_delayed %x, %s, %h index 0 transposed : tensor<40x24xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<24x40xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
  return %yt : tensor<24x40xf8E4M3FN>
}

// -----

// MXFP8's columnwise operand written GEMM-ready by the strip kernel fused
// with the rowwise quantize: each lane stores a column's 16 codes as one
// 16-byte chunk of a transposed row, and its scales at [column, row block].
// CHECK-LABEL: func @mx_columns_transposed
// CHECK: gpu.launch
// CHECK-COUNT-4: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<192x96xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<192x3xf8E8M0FNU>
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @mx_columns_transposed(%x: tensor<96x192xbf16>) -> (tensor<96x192xf8E4M3FN>, tensor<96x6xf8E8M0FNU>, tensor<192x96xf8E4M3FN>, tensor<192x3xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<96x192xbf16> -> tensor<96x192xf8E4M3FN>, tensor<96x6xf8E8M0FNU>
  %t, %ts = mx.quantize %x transposed block [1, 32] : tensor<96x192xbf16> -> tensor<192x96xf8E4M3FN>, tensor<192x3xf8E8M0FNU>
  return %d, %s, %t, %ts : tensor<96x192xf8E4M3FN>, tensor<96x6xf8E8M0FNU>, tensor<192x96xf8E4M3FN>, tensor<192x3xf8E8M0FNU>
}

// -----

// FP8 blockwise's 1x128 blocks along M, read in place, with the rowwise
// [1, 128] quantize of the same input: one strip kernel reads the input once
// for both. The columnwise part has 128-row column blocks stacked over 8 lane
// groups of 4 lanes (3 xor shuffles per amax word: 4, 8, 16), a column's 16
// codes one 16-byte chunk of a transposed row and the f32 scales at [column,
// row block], as the rowwise [1, 128] kernel writes them for the transposed
// input. A rowwise block's 128 columns are the 8 warps of a CTA: the 4 lanes
// of a group reduce-scatter their 8 words of row amax pairs (xor 2, then 1),
// each lane stores its 4 rows' amaxes in workgroup memory; after a barrier
// 128 threads take a row's max over the 8 warps, store its scale and its
// factor, and after a second one each lane loads its 16 rows' factors (four
// 16-byte loads) and stages 4 codes per row in workgroup memory; after a
// third, each thread copies 4 16-byte chunks of the tile's rows out (208
// columns: whole chunks). Grid: 3 row blocks (the last one partial) x 64
// strips (208 / 4 = 52, rounded up to whole CTAs of 32) x 8 groups = 1536
// threads, 6 CTAs.
// CHECK-LABEL: func @blockwise_pair
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c6, {{.*}}) threads({{.*}}) workgroup(%[[PARTIAL:.*]] : memref<8x128xf32, #gpu.address_space<workgroup>>, %[[FACTORS:.*]] : memref<128xf32, #gpu.address_space<workgroup>>, %[[CODES:.*]] : memref<128x128xi8, #gpu.address_space<workgroup>>)
// CHECK-COUNT-16: vector.load %{{.*}} {alignment = 8 : i64} : memref<272x208xbf16>, vector<4xbf16>
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : i32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : i32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : i32
// CHECK-COUNT-4: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<208x272xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK-COUNT-4: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : i32
// CHECK-COUNT-2: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : i32
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}}, %[[PARTIAL]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<8x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK-COUNT-8: memref.load %[[PARTIAL]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<272x2xf32>
// CHECK: memref.store %{{.*}}, %[[FACTORS]]
// CHECK: gpu.barrier
// CHECK-COUNT-4: vector.load %[[FACTORS]][%{{.*}}] {alignment = 16 : i64} : memref<128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-16: vector.store %{{.*}}, %[[CODES]][%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<128x128xi8, #gpu.address_space<workgroup>>, vector<4xi8>
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<272x208xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK-NOT: gpu.barrier
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @blockwise_pair(%x: tensor<272x208xbf16>) -> (tensor<272x208xf8E4M3FN>, tensor<272x2xf32>, tensor<208x272xf8E4M3FN>, tensor<208x3xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<272x208xbf16> -> tensor<272x208xf8E4M3FN>, tensor<272x2xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<272x208xbf16> -> tensor<208x272xf8E4M3FN>, tensor<208x3xf32>
  return %d, %s, %t, %ts : tensor<272x208xf8E4M3FN>, tensor<272x2xf32>, tensor<208x272xf8E4M3FN>, tensor<208x3xf32>
}

// -----

// The same pair with 204 columns (a multiple of 4, not of 16): the rows of
// codes are not whole 16-byte chunks, so each lane stores its 4 codes of a
// row itself, and the CTA stages nothing.
// CHECK-LABEL: func @blockwise_pair_narrow
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, %[[FACTORS:.*]] : memref<128xf32, #gpu.address_space<workgroup>>) {
// CHECK-COUNT-4: vector.load %[[FACTORS]][%{{.*}}] {alignment = 16 : i64} : memref<128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-16: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<272x204xf8E4M3FN>, vector<4xf8E4M3FN>
// CHECK-NOT: gpu.barrier
// CHECK: return
func.func @blockwise_pair_narrow(%x: tensor<272x204xbf16>) -> (tensor<272x204xf8E4M3FN>, tensor<272x2xf32>, tensor<204x272xf8E4M3FN>, tensor<204x3xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<272x204xbf16> -> tensor<272x204xf8E4M3FN>, tensor<272x2xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<272x204xbf16> -> tensor<204x272xf8E4M3FN>, tensor<204x3xf32>
  return %d, %s, %t, %ts : tensor<272x204xf8E4M3FN>, tensor<272x2xf32>, tensor<204x272xf8E4M3FN>, tensor<204x3xf32>
}

// -----

// Batched f32 input, E5M2: the slices are more row blocks of the grid (2 x 1
// x 8 strips x 8 groups = 128 threads), the scales [slice * column, row
// block] of the folded [2 * 32, 1] buffer, stored by the first lane group.
// CHECK-LABEL: func @blockwise_batched
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads
// CHECK-COUNT-16: vector.load %{{.*}} {alignment = 16 : i64} : memref<96x32xf32>, vector<4xf32>
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x48xf8E5M2>, vector<16xf8E5M2>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x1xf32>
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @blockwise_batched(%x: tensor<2x48x32xf32>) -> (tensor<2x32x48xf8E5M2>, tensor<2x32x1xf32>) {
  %t, %ts = mx.quantize %x transposed block [1, 1, 128] rounding ceil : tensor<2x48x32xf32> -> tensor<2x32x48xf8E5M2>, tensor<2x32x1xf32>
  return %t, %ts : tensor<2x32x48xf8E5M2>, tensor<2x32x1xf32>
}

// -----

func.func @blockwise_odd(%x: tensor<136x20xbf16>) -> (tensor<20x136xf8E4M3FN>, tensor<20x2xf32>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the transposed columnwise GPU kernel needs the input's rows to be a multiple of 16 and its columns a multiple of 4}}
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<136x20xbf16> -> tensor<20x136xf8E4M3FN>, tensor<20x2xf32>
  return %t, %ts : tensor<20x136xf8E4M3FN>, tensor<20x2xf32>
}
