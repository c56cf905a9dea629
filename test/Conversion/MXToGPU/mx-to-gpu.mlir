// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// A quantize whose scales feed only a swizzle is one kernel that writes the
// tiled scales itself: 16-byte loads, one xor-shuffle for the block amax,
// hardware FP8 conversion, 16-byte stores, and a 5-D scale store.
// CHECK-LABEL: func @quantize_swizzled
// CHECK-SAME: (%[[X:.*]]: tensor<200x512xbf16>)
// CHECK-DAG: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK-DAG: %[[DATA:.*]] = gpu.alloc () : memref<200x512xf8E4M3FN>
// CHECK-DAG: %[[TILES:.*]] = gpu.alloc () : memref<2x4x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}} = %{{.*}}, {{.*}} = %{{.*}}) threads
// CHECK:   vector.load %[[IN]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<200x512xbf16>, vector<16xbf16>
// CHECK:   gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-8: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E4M3FN)
// CHECK:   vector.store %{{.*}}, %[[DATA]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<200x512xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   memref.store %{{.*}}, %[[TILES]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x4x32x4x4xf8E8M0FNU>
// CHECK: gpu.terminator
// CHECK-NOT: mx.
// CHECK: bufferization.to_tensor %[[TILES]] restrict writable
// CHECK: bufferization.to_tensor %[[DATA]] restrict writable
func.func @quantize_swizzled(%x: tensor<200x512xbf16>) -> (tensor<200x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<200x512xbf16> -> tensor<200x512xf8E4M3FN>, tensor<200x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<200x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return %d, %t : tensor<200x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>
}

// -----

// Linear scales, f32 input, E5M2 elements, OCP rounding.
// CHECK-LABEL: func @quantize_linear
// CHECK: gpu.alloc () : memref<64x3xf32>
// CHECK: vector.load {{.*}} : memref<64x96xf32>, vector<16xf32>
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E5M2)
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x3xf32>
func.func @quantize_linear(%x: tensor<64x96xf32>) -> (tensor<64x96xf8E5M2>, tensor<64x3xf32>) {
  %d, %s = mx.quantize %x block [1, 32] rounding floor : tensor<64x96xf32> -> tensor<64x96xf8E5M2>, tensor<64x3xf32>
  return %d, %s : tensor<64x96xf8E5M2>, tensor<64x3xf32>
}

// -----

// Rowwise and columnwise quantization of one input share one kernel that
// reads the input once; both swizzles are written by it (columnwise scales
// with K as the unscaled dimension).
// CHECK-LABEL: func @fused
// CHECK-COUNT-4: gpu.alloc
// CHECK: gpu.launch
// CHECK-COUNT-16: vector.load %{{.*}} {alignment = 8 : i64} : memref<256x512xbf16>, vector<4xbf16>
// CHECK: gpu.shuffle  xor
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK-NOT: mx.
// CHECK: return
func.func @fused(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  %cd, %cs = mx.quantize %x block [32, 1] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<8x512xf8E8M0FNU>
  %ct = mx.swizzle %cs unscaled_dim 1 : tensor<8x512xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return %d, %t, %cd, %ct : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<256x512xf8E4M3FN>, tensor<4x2x32x4x4xf8E8M0FNU>
}

// -----

// Columnwise alone: two half-warps share a 32-row block (one shuffle per
// column combines their amax); linear scales are stored 4 at a time.
// CHECK-LABEL: func @columnwise
// CHECK: gpu.launch
// CHECK-COUNT-4: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<3x96xf8E8M0FNU>, vector<4xf8E8M0FNU>
func.func @columnwise(%x: tensor<70x96xf32>) -> (tensor<70x96xf8E4M3FN>, tensor<3x96xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [32, 1] : tensor<70x96xf32> -> tensor<70x96xf8E4M3FN>, tensor<3x96xf8E8M0FNU>
  return %d, %s : tensor<70x96xf8E4M3FN>, tensor<3x96xf8E8M0FNU>
}

// -----

// Ops without a fused producer get one-thread-per-element kernels.
// CHECK-LABEL: func @elementwise
// CHECK-COUNT-3: gpu.launch
// CHECK-NOT: mx.
func.func @elementwise(%d: tensor<64x96xf8E4M3FN>, %s: tensor<64x3xf8E8M0FNU>, %t: tensor<1x1x32x4x4xf32>) -> (tensor<64x96xbf16>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<4x2xf32>) {
  %x = mx.dequantize %d, %s block [1, 32] : tensor<64x96xf8E4M3FN>, tensor<64x3xf8E8M0FNU> -> tensor<64x96xbf16>
  %w = mx.swizzle %s : tensor<64x3xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  %u = mx.unswizzle %t unscaled_dim 1 : tensor<1x1x32x4x4xf32> -> tensor<4x2xf32>
  return %x, %w, %u : tensor<64x96xbf16>, tensor<1x1x32x4x4xf8E8M0FNU>, tensor<4x2xf32>
}

// -----

// FP8 blockwise 1-D: the rowwise kernel with 8 lanes per [1, 128] block
// (three xor-shuffles); `exact` scales divide the elements by the f32 scale.
// K = 208 ends in a partial block.
// CHECK-LABEL: func @blockwise_1d_exact
// CHECK: %[[SCALES:.*]] = gpu.alloc () : memref<64x2xf32>
// CHECK: gpu.launch
// CHECK:   vector.load %{{.*}} {alignment = 16 : i64} : memref<64x208xf32>, vector<16xf32>
// CHECK:   gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK:   gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK:   gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK:   arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:   vector.store %{{.*}} {alignment = 16 : i64} : memref<64x208xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   memref.store %{{.*}}, %[[SCALES]][%{{.*}}, %{{.*}}] : memref<64x2xf32>
func.func @blockwise_1d_exact(%x: tensor<64x208xf32>) -> (tensor<64x208xf8E4M3FN>, tensor<64x2xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding exact : tensor<64x208xf32> -> tensor<64x208xf8E4M3FN>, tensor<64x2xf32>
  return %d, %s : tensor<64x208xf8E4M3FN>, tensor<64x2xf32>
}

// -----

// FP8 blockwise 2-D: one CTA of 256 threads per [128, 128] block, 4 passes
// of 16-byte loads per thread, the block amax through shared memory.
// CHECK-LABEL: func @blockwise_2d
// CHECK: %[[SCALES:.*]] = gpu.alloc () : memref<2x3xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c6, {{.*}}) threads({{.*}}) in ({{.*}} = %c256, {{.*}}) workgroup(%[[SHARED:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<200x272xbf16>, vector<16xbf16>
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK:   memref.store %{{.*}}, %[[SHARED]][%{{.*}}]
// CHECK:   gpu.barrier
// CHECK-COUNT-4: vector.store %{{.*}} {alignment = 16 : i64} : memref<200x272xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   memref.store %{{.*}}, %[[SCALES]][%{{.*}}, %{{.*}}] : memref<2x3xf32>
func.func @blockwise_2d(%x: tensor<200x272xbf16>) -> (tensor<200x272xf8E4M3FN>, tensor<2x3xf32>) {
  %d, %s = mx.quantize %x block [128, 128] : tensor<200x272xbf16> -> tensor<200x272xf8E4M3FN>, tensor<2x3xf32>
  return %d, %s : tensor<200x272xf8E4M3FN>, tensor<2x3xf32>
}

// -----

// Current per-tensor scaling, one scale per batch slice: the amax of each
// slice by an atomic max on its bits into zeroed scratch, then the cast.
// CHECK-LABEL: func @per_tensor
// CHECK: %[[AMAX:.*]] = gpu.alloc () : memref<3xf32>
// CHECK: gpu.memset %[[AMAX]], %{{.*}} : memref<3xf32>, f32
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2]] : tensor<3x70x208xbf16> into tensor<43680xbf16>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c3, {{.*}}) threads({{.*}}) workgroup(
// CHECK:   gpu.barrier
// CHECK:   %[[BITS:.*]] = arith.bitcast %[[AMAX]] : memref<3xf32> to memref<3xi32>
// CHECK:   memref.atomic_rmw maxu %{{.*}}, %[[BITS]][%{{.*}}] : (i32, memref<3xi32>) -> i32
// CHECK: %[[DATA:.*]] = gpu.alloc () : memref<43680xf8E5M2>
// CHECK: %[[SCALES:.*]] = gpu.alloc () : memref<3xf32>
// CHECK: gpu.launch
// CHECK:   memref.load %[[AMAX]][%{{.*}}] : memref<3xf32>
// CHECK:   vector.store %{{.*}}, %[[DATA]][%{{.*}}] {alignment = 16 : i64} : memref<43680xf8E5M2>, vector<16xf8E5M2>
// CHECK:   memref.store %{{.*}}, %[[SCALES]][%{{.*}}] : memref<3xf32>
// CHECK: gpu.dealloc %[[AMAX]] : memref<3xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1, 2]] output_shape [3, 1, 1] : tensor<3xf32> into tensor<3x1x1xf32>
func.func @per_tensor(%x: tensor<3x70x208xbf16>) -> (tensor<3x70x208xf8E5M2>, tensor<3x1x1xf32>) {
  %d, %s = mx.quantize %x block [1, 70, 208] rounding exact : tensor<3x70x208xbf16> -> tensor<3x70x208xf8E5M2>, tensor<3x1x1xf32>
  return %d, %s : tensor<3x70x208xf8E5M2>, tensor<3x1x1xf32>
}

// -----

// Batch dimensions fold into rows: a rowwise quantize of [2, 3, 200, 64]
// with tiled scales pads each slice's 200 rows to 256 in the grid.
// CHECK-LABEL: func @rowwise_batched
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2], [3]] : tensor<2x3x200x64xbf16> into tensor<1200x64xbf16>
// CHECK: gpu.alloc () : memref<1200x64xf8E4M3FN>
// CHECK: gpu.alloc () : memref<12x1x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c48,
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1, 2], [3], [4], [5], [6]] output_shape [2, 3, 2, 1, 32, 4, 4]
func.func @rowwise_batched(%x: tensor<2x3x200x64xbf16>) -> (tensor<2x3x200x64xf8E4M3FN>, tensor<2x3x2x1x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 1, 1, 32] : tensor<2x3x200x64xbf16> -> tensor<2x3x200x64xf8E4M3FN>, tensor<2x3x200x2xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 2 : tensor<2x3x200x2xf8E8M0FNU> -> tensor<2x3x2x1x32x4x4xf8E8M0FNU>
  return %d, %t : tensor<2x3x200x64xf8E4M3FN>, tensor<2x3x2x1x32x4x4xf8E8M0FNU>
}

// -----

// Column blocks never span slices: the strip kernel's grid runs over
// slices x row blocks (70 rows: 3 blocks per slice, linear scales).
// CHECK-LABEL: func @columnwise_batched
// CHECK: gpu.alloc () : memref<6x96xf8E8M0FNU>
// CHECK: gpu.launch
// CHECK-COUNT-16: vector.load %{{.*}} : memref<140x96xf32>, vector<4xf32>
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<6x96xf8E8M0FNU>, vector<4xf8E8M0FNU>
func.func @columnwise_batched(%x: tensor<2x70x96xf32>) -> (tensor<2x70x96xf8E4M3FN>, tensor<2x3x96xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32, 1] : tensor<2x70x96xf32> -> tensor<2x70x96xf8E4M3FN>, tensor<2x3x96xf8E8M0FNU>
  return %d, %s : tensor<2x70x96xf8E4M3FN>, tensor<2x3x96xf8E8M0FNU>
}

// -----

func.func @unaligned_k(%x: tensor<64x72xf32>) -> tensor<64x3xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the rowwise GPU kernel needs K to be a multiple of 16 (of 4 when fused with a columnwise FP8 or MXINT8 quantize of the same input)}}
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x72xf32> -> tensor<64x72xf8E4M3FN>, tensor<64x3xf8E8M0FNU>
  return %s : tensor<64x3xf8E8M0FNU>
}

// -----

func.func @odd_k(%x: tensor<64x70xf32>) -> tensor<2x70xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the columnwise GPU kernel needs K to be a multiple of 4 for f8E4M3FN}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<64x70xf32> -> tensor<64x70xf8E4M3FN>, tensor<2x70xf8E8M0FNU>
  return %s : tensor<2x70xf8E8M0FNU>
}

// -----

func.func @blockwise_2d_odd_k(%x: tensor<256x200xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the [128, 128] GPU kernel needs K to be a multiple of 16}}
  %d, %s = mx.quantize %x block [128, 128] : tensor<256x200xf32> -> tensor<256x200xf8E4M3FN>, tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}

// -----

func.func @per_tensor_odd(%x: tensor<7x9xf32>) -> tensor<1x1xf32> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the per-tensor GPU kernels need the element count of each matrix to be a multiple of 16}}
  %d, %s = mx.quantize %x block [7, 9] : tensor<7x9xf32> -> tensor<7x9xf8E4M3FN>, tensor<1x1xf32>
  return %s : tensor<1x1xf32>
}

// -----

func.func @other_block(%x: tensor<64x64xf32>) -> tensor<1x2xf32> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the GPU kernels cover blocks [1, w] (w = 16 x 2^k, up to 512), [32, 1], [128, 128] and one block per matrix, over the last two dimensions}}
  %d, %s = mx.quantize %x block [64, 48] : tensor<64x64xf32> -> tensor<64x64xf8E4M3FN>, tensor<1x2xf32>
  return %s : tensor<1x2xf32>
}

// -----

// One thread per tile byte, batch index first: each slice is tiled alone.
// CHECK-LABEL: func @swizzle_batched
// CHECK: gpu.alloc () : memref<2x2x1x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c8, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK: memref.load %{{.*}}[%[[B:.*]], %{{.*}}, %{{.*}}] : memref<2x200x3xf8E8M0FNU>
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[B]], %{{.*}}, %c0, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x2x1x32x4x4xf8E8M0FNU>
func.func @swizzle_batched(%s: tensor<2x200x3xf8E8M0FNU>) -> tensor<2x2x1x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x200x3xf8E8M0FNU> -> tensor<2x2x1x32x4x4xf8E8M0FNU>
  return %t : tensor<2x2x1x32x4x4xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func @unswizzle_blockwise
// CHECK: gpu.alloc () : memref<2x250xf32>
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x63x4xf32>
// CHECK: memref.store %[[V]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x250xf32>
func.func @unswizzle_blockwise(%t: tensor<2x63x4xf32>) -> tensor<2x250xf32> {
  %s = mx.unswizzle %t unscaled_dim 1 layout blockwise : tensor<2x63x4xf32> -> tensor<2x250xf32>
  return %s : tensor<2x250xf32>
}

// -----

// mx.amax: one kernel, an atomic max on the bits of the zeroed result, a
// buffer of magnitudes (mx.magnitude_bits) for a collective.
// CHECK-LABEL: func @amax
// CHECK: %[[RESULT:.*]] = gpu.alloc () {mx.magnitude_bits} : memref<f32>
// CHECK: gpu.memset %[[RESULT]], %{{.*}} : memref<f32>, f32
// CHECK: gpu.launch
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<8192xbf16>, vector<16xbf16>
// CHECK:   %[[BITS:.*]] = arith.bitcast %[[RESULT]] : memref<f32> to memref<i32>
// CHECK:   memref.atomic_rmw maxu %{{.*}}, %[[BITS]][] : (i32, memref<i32>) -> i32
// CHECK-NOT: gpu.launch
func.func @amax(%x: tensor<64x128xbf16>) -> tensor<f32> {
  %a = mx.amax %x : tensor<64x128xbf16> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

func.func @amax_odd(%x: tensor<7x9xbf16>) -> tensor<f32> {
  // expected-error @+1 {{'mx.amax' op has no GPU lowering: the per-tensor GPU kernels need the element count of the tensor to be a multiple of 16}}
  %a = mx.amax %x : tensor<7x9xbf16> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

// Delayed scaling: one read of the input that casts and records its amax in
// the history. Here the history argument is not mx.updated (the caller keeps
// it): a copy with [0, index] zeroed first. The kernel has one CTA, which is
// its only reducer: it counts in the history entry (atomic max with 2^31),
// waits for a count of 0 other CTAs (an atomic read, a sleep), reduces the
// partials (none: all dropped), and stores the max there.
// CHECK-LABEL: func @quantize_delayed
// CHECK: %[[INV:.*]] = gpu.alloc () : memref<1xf32>
// CHECK: %[[HISTORY:.*]] = gpu.alloc () : memref<16x3xf32>
// CHECK: gpu.launch
// CHECK:   memref.store %{{.*}}, %[[HISTORY]][%{{.*}}, %{{.*}}] : memref<16x3xf32>
// CHECK: %[[PARTIALS:.*]] = gpu.alloc () : memref<4xf32>
// CHECK: gpu.launch
// CHECK:   memref.load %{{.*}}[%c1] : memref<3xf32>
// CHECK-COUNT-4: vector.store %{{.*}} {alignment = 16 : i64} : memref<8192xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK:   memref.store %{{.*}}, %[[INV]][%c0] : memref<1xf32>
// CHECK:   %[[BITS:.*]] = arith.bitcast %[[HISTORY]] : memref<16x3xf32> to memref<16x3xi32>
// CHECK:   scf.if
// CHECK:     memref.store %{{.*}}, %[[PARTIALS]][%{{.*}}] : memref<4xf32>
// CHECK:     llvm.fence syncscope("device") release
// CHECK:     memref.atomic_rmw maxu %c-2147483648_i32, %[[BITS]][%c0, %c1]
// CHECK:     memref.atomic_rmw addi %c1_i32, %[[BITS]][%c0, %c1]
// CHECK:   } else {
// CHECK:     memref.atomic_rmw maxu %c-2147483648_i32, %[[BITS]][%c0, %c1]
// CHECK:     scf.while
// CHECK:       %[[SEEN:.*]] = memref.atomic_rmw ori %c0_i32, %[[BITS]][%c0, %c1]
// CHECK:       %[[PENDING:.*]] = arith.cmpi ult, %[[SEEN]], %c-2147483648_i32 : i32
// CHECK:       scf.condition(%[[PENDING]])
// CHECK:       nvvm.nanosleep
// CHECK:     llvm.fence syncscope("device") acquire
// CHECK:     gpu.barrier
// CHECK-COUNT-8: vector.load %[[PARTIALS]][%{{.*}}] {alignment = 16 : i64} : memref<4xf32>, vector<4xf32>
// CHECK:     gpu.barrier
// CHECK:     arith.select %{{.*}}, %c2143289344_i32, %{{.*}} : i32
// CHECK:     memref.store %{{.*}}, %[[BITS]][%c0, %c1] : memref<16x3xi32>
// CHECK-NOT: gpu.launch
func.func @quantize_delayed(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) -> (tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %sinv, %h1 = mx.quantize_delayed %x, %s, %h index 1 : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %sinv, %h1 : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// A history argument that the source marks mx.updated is updated in place: the
// cast records its amax in the argument's buffer, one kernel and no copy.
// CHECK-LABEL: func @quantize_delayed_in_place
// CHECK-SAME: %[[H:[^:]*]]: tensor<16x3xf32> {mx.updated}
// CHECK: %[[BUFFER:.*]] = bufferization.to_buffer %[[H]] : tensor<16x3xf32> to memref<16x3xf32>
// CHECK-NOT: gpu.alloc () : memref<16x3xf32>
// CHECK: gpu.launch
// CHECK:   arith.bitcast %[[BUFFER]] : memref<16x3xf32> to memref<16x3xi32>
// CHECK-NOT: gpu.launch
// CHECK: %[[NEW:.*]] = bufferization.to_tensor %[[BUFFER]]
// CHECK: return %{{.*}}, %{{.*}}, %[[NEW]]
func.func @quantize_delayed_in_place(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32> {mx.updated}) -> (tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %sinv, %h1 = mx.quantize_delayed %x, %s, %h index 1 : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %sinv, %h1 : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// 8217 CTAs (16 Ki elements each): two reducers, the last two CTAs. The other
// 8215 store a partial and count; both reducers wait for that count and reduce
// a slice of the partials in one round (8 loads of 16 bytes a thread, in an
// scf.for of one iteration that canonicalization folds); the
// first stores its max as a level-2 partial (at 8220, after the others,
// aligned) and counts; the last waits for 8216, reduces the level-2 partials
// [8220, 8221) with its own and stores the max.
// CHECK-LABEL: func @quantize_delayed_two_reducers
// CHECK: %[[PARTIALS:.*]] = gpu.alloc () : memref<8224xf32>
// CHECK: gpu.launch
// CHECK:   %[[BITS:.*]] = arith.bitcast %{{.*}} : memref<16x3xf32> to memref<16x3xi32>
// CHECK:   %[[PUBLISHES:.*]] = arith.cmpi ult, %[[BLOCK:[^,]*]], %c8215 : index
// CHECK:   scf.if %[[PUBLISHES]] {
// CHECK:     memref.store %{{.*}}, %[[PARTIALS]][%[[BLOCK]]] : memref<8224xf32>
// CHECK:     llvm.fence syncscope("device") release
// CHECK:     memref.atomic_rmw addi %c1_i32, %[[BITS]][%c0, %c2]
// CHECK:   } else {
// CHECK:     %[[REDUCER:.*]] = arith.subi %[[BLOCK]], %c8215 : index
// CHECK:       arith.cmpi ult, %{{.*}}, %c-2147475433_i32 : i32
// CHECK:     arith.muli %[[REDUCER]], %c8192 : index
// CHECK:     scf.for %{{.*}} = %c0 to %c1 step %c1 iter_args
// CHECK-COUNT-8: vector.load %[[PARTIALS]]
// CHECK:     %[[LAST:.*]] = arith.cmpi eq, %[[REDUCER]], %c1 : index
// CHECK:     scf.if %[[LAST]] {
// CHECK:         arith.cmpi ult, %{{.*}}, %c-2147475432_i32 : i32
// CHECK:       gpu.barrier
// CHECK:       arith.addi %{{.*}}, %c2055 : index
// CHECK:       vector.load %[[PARTIALS]]
// CHECK:       memref.store %{{.*}}, %[[BITS]][%c0, %c2] : memref<16x3xi32>
// CHECK:     } else {
// CHECK:       %[[SLOT:.*]] = arith.addi %[[REDUCER]], %c8220 : index
// CHECK:       memref.store %{{.*}}, %[[PARTIALS]][%[[SLOT]]] : memref<8224xf32>
// CHECK:       llvm.fence syncscope("device") release
// CHECK:       memref.atomic_rmw addi %c1_i32, %[[BITS]][%c0, %c2]
func.func @quantize_delayed_two_reducers(%x: tensor<8208x16400xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32> {mx.updated}) -> (tensor<8208x16400xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %sinv, %h1 = mx.quantize_delayed %x, %s, %h index 2 : tensor<8208x16400xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<8208x16400xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %sinv, %h1 : tensor<8208x16400xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// 512 x 1026 tiles of the cast+transpose kernel, two a CTA (262656 CTAs): kMaxReducers (32)
// reducers, the last 32 CTAs, each reducing a slice of 2 rounds (16384
// partials); the level-2 partials at [262656, 262688).
// CHECK-LABEL: func @quantize_delayed_rounds
// CHECK: gpu.alloc () : memref<262688xf32>
// CHECK:   arith.cmpi ult, %{{.*}}, %c262624 : index
// CHECK:     %[[REDUCER:.*]] = arith.subi %{{.*}}, %c262624 : index
// CHECK:     arith.muli %[[REDUCER]], %c16384 : index
// CHECK:     scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args
// CHECK:     arith.cmpi eq, %[[REDUCER]], %c31 : index
// CHECK:       arith.addi %[[REDUCER]], %c262656 : index
func.func @quantize_delayed_rounds(%x: tensor<32768x65664xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32> {mx.updated}) -> (tensor<65664x32768xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %sinv, %h1 = mx.quantize_delayed %x, %s, %h index 0 transposed : tensor<32768x65664xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<65664x32768xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %sinv, %h1 : tensor<65664x32768xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// 65536 x 65538 tiles of the cast+transpose kernel, two a CTA: more CTAs
// than the history entry's 31 bits count.
func.func @quantize_delayed_too_many_ctas(%x: tensor<4194304x4194432xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) -> (tensor<4194432x4194304xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op has no GPU lowering: the delayed cast's kernel would have 2147549184 CTAs; the history entry counts at most 2^31}}
  %y, %sinv, %h1 = mx.quantize_delayed %x, %s, %h index 0 transposed : tensor<4194304x4194432xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<4194432x4194304xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %sinv, %h1 : tensor<4194432x4194304xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

// The history update: one launch, a CTA per column whose threads stride over
// the rows and reduce their max ignoring NaN.
// CHECK-LABEL: func @update_amax_history
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c3, {{.*}}) threads({{.*}}) in ({{.*}} = %c256, {{.*}}) workgroup(
// CHECK:   scf.for %{{.*}} = %{{.*}} to %c1024 step %c256 iter_args(%{{.*}} = %{{.*}}) -> (f32)
// CHECK:     arith.maxnumf
// CHECK:   gpu.shuffle  xor
// CHECK:   arith.maxnumf
// CHECK-NOT: gpu.launch
func.func @update_amax_history(%h: tensor<1024x3xf32>, %s: tensor<3xf32>) -> (tensor<1024x3xf32>, tensor<3xf32>) {
  %h2, %s2 = mx.update_amax_history %h, %s element f8E4M3FN margin 1 : tensor<1024x3xf32>, tensor<3xf32> -> tensor<1024x3xf32>, tensor<3xf32>
  return %h2, %s2 : tensor<1024x3xf32>, tensor<3xf32>
}

// -----

// A step's updates of several states (each its element, algorithm, margin and
// history length) share one launch: a CTA per column of all of them, each
// CTA taking the branch of the update its index falls in. An update that reads
// another's result waits for it: a launch of its own.
// CHECK-LABEL: func @update_states
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c3, {{.*}}) threads(
// CHECK:   scf.if
// CHECK:     scf.for %{{.*}} = %{{.*}} to %c16 step %c256
// CHECK:     gpu.barrier
// CHECK:     arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:   scf.if
// CHECK:     arith.subi %{{.*}}, %c2 : index
// CHECK:     scf.for %{{.*}} = %{{.*}} to %c4 step %c256
// CHECK-NOT: gpu.barrier
// CHECK:     arith.divf %cst{{.*}}, %{{.*}} : f32
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}}) threads(
// CHECK-NOT: gpu.launch
func.func @update_states(%hf: tensor<16x2xf32>, %sf: tensor<2xf32>, %hb: tensor<4x1xf32>, %sb: tensor<1xf32>)
    -> (tensor<16x2xf32>, tensor<2xf32>, tensor<4x1xf32>, tensor<1xf32>, tensor<16x2xf32>, tensor<2xf32>) {
  %h1, %s1 = mx.update_amax_history %hf, %sf element f8E4M3FN : tensor<16x2xf32>, tensor<2xf32> -> tensor<16x2xf32>, tensor<2xf32>
  %h2, %s2 = mx.update_amax_history %hb, %sb element f8E5M2 algorithm most_recent margin 1 : tensor<4x1xf32>, tensor<1xf32> -> tensor<4x1xf32>, tensor<1xf32>
  %h3, %s3 = mx.update_amax_history %h1, %s1 element f8E4M3FN : tensor<16x2xf32>, tensor<2xf32> -> tensor<16x2xf32>, tensor<2xf32>
  return %h1, %s1, %h2, %s2, %h3, %s3 : tensor<16x2xf32>, tensor<2xf32>, tensor<4x1xf32>, tensor<1xf32>, tensor<16x2xf32>, tensor<2xf32>
}


// -----

// Dequantize with rows of whole chunks: a chunk is what one 16-byte store
// of results holds (8 bf16), two chunks per thread (1024 chunks, two CTAs),
// both loaded first; each an 8-byte load, the hardware FP8 -> f16x2
// conversion, the block's scale loaded once, one f32 multiply, the rounding
// two elements at a time, one 16-byte store.
// CHECK-LABEL: func @dequantize_vector
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK:   vector.load %{{.*}} {alignment = 8 : i64} : memref<64x128xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK-COUNT-4: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK:   arith.extf %{{.*}} : vector<8xf16> to vector<8xf32>
// CHECK:   memref.load %{{.*}} : memref<64x4xf8E8M0FNU>
// CHECK:   vector.load %{{.*}} {alignment = 8 : i64} : memref<64x128xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK:   arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-COUNT-4: nvvm.convert.f32x2.to.bf16x2 %{{.*}}, %{{.*}} {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xbf16>
// CHECK:   vector.store %{{.*}} {alignment = 16 : i64} : memref<64x128xbf16>, vector<8xbf16>
// CHECK:   arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK:   vector.store %{{.*}} {alignment = 16 : i64} : memref<64x128xbf16>, vector<8xbf16>
// CHECK-NOT: memref.store
func.func @dequantize_vector(%d: tensor<64x128xf8E4M3FN>, %s: tensor<64x4xf8E8M0FNU>) -> tensor<64x128xbf16> {
  %x = mx.dequantize %d, %s block [1, 32] : tensor<64x128xf8E4M3FN>, tensor<64x4xf8E8M0FNU> -> tensor<64x128xbf16>
  return %x : tensor<64x128xbf16>
}

// -----

// [32, 1] blocks: the 4 elements of an f32 chunk have 4 consecutive scales,
// one vector load.
// CHECK-LABEL: func @dequantize_columnwise
// CHECK:   vector.load %{{.*}} {alignment = 4 : i64} : memref<2x70x96xf8E5M2>, vector<4xf8E5M2>
// CHECK:   nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E5M2) -> vector<2xf16>
// CHECK:   vector.load %{{.*}} {alignment = 16 : i64} : memref<2x3x96xf32>, vector<4xf32>
// CHECK:   vector.store %{{.*}} {alignment = 16 : i64} : memref<2x70x96xf32>, vector<4xf32>
func.func @dequantize_columnwise(%d: tensor<2x70x96xf8E5M2>, %s: tensor<2x3x96xf32>) -> tensor<2x70x96xf32> {
  %x = mx.dequantize %d, %s block [1, 32, 1] : tensor<2x70x96xf8E5M2>, tensor<2x3x96xf32> -> tensor<2x70x96xf32>
  return %x : tensor<2x70x96xf32>
}

// -----

// Rows that are not whole chunks: one thread per element.
// CHECK-LABEL: func @dequantize_scalar
// CHECK-NOT: nvvm.convert
// CHECK:   memref.load %{{.*}} : memref<33x100xf8E4M3FN>
// CHECK:   memref.store %{{.*}} : memref<33x100xf16>
func.func @dequantize_scalar(%d: tensor<33x100xf8E4M3FN>, %s: tensor<33x4xf8E8M0FNU>) -> tensor<33x100xf16> {
  %x = mx.dequantize %d, %s block [1, 32] : tensor<33x100xf8E4M3FN>, tensor<33x4xf8E8M0FNU> -> tensor<33x100xf16>
  return %x : tensor<33x100xf16>
}

// -----

// Whole 4-column groups: a thread takes one row of both tiles of a row of
// tiles (two 4-column groups), four 8-element loads of compact rows 32
// apart, and one store per tile (3 x 32 threads, one CTA).
// CHECK-LABEL: func @swizzle_vector
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK: arith.cmpi ult, %{{.*}}, %c96 : index
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 8 : i64} : memref<300x8xf8E8M0FNU>, vector<8xf8E8M0FNU>
// CHECK-NOT: scf.if
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %c0, %{{.*}}, %c0, %c0] {alignment = 16 : i64} : memref<3x2x32x4x4xf8E8M0FNU>, vector<16xf8E8M0FNU>
// CHECK-NOT: scf.if
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %c1, %{{.*}}, %c0, %c0] {alignment = 16 : i64} : memref<3x2x32x4x4xf8E8M0FNU>, vector<16xf8E8M0FNU>
// CHECK-NOT: memref.store
func.func @swizzle_vector(%s: tensor<300x8xf8E8M0FNU>) -> tensor<3x2x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s : tensor<300x8xf8E8M0FNU> -> tensor<3x2x32x4x4xf8E8M0FNU>
  return %t : tensor<3x2x32x4x4xf8E8M0FNU>
}

// -----

// The reverse: one load of a tile row, four stores, skipped past the rows.
// CHECK-LABEL: func @unswizzle_vector
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<2x2x1x32x4x4xf32>, vector<16xf32>
// CHECK-COUNT-4: vector.store %{{.*}} {alignment = 16 : i64} : memref<2x200x4xf32>, vector<4xf32>
func.func @unswizzle_vector(%t: tensor<2x2x1x32x4x4xf32>) -> tensor<2x200x4xf32> {
  %s = mx.unswizzle %t unscaled_dim 1 : tensor<2x2x1x32x4x4xf32> -> tensor<2x200x4xf32>
  return %s : tensor<2x200x4xf32>
}
