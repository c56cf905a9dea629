// RUN: mx-opt %s --canonicalize --split-input-file | FileCheck %s

// unswizzle(swizzle(x)) is x: the round trip keeps every logical scale.
// CHECK-LABEL: func @round_trip
// CHECK-SAME: (%[[S:.*]]: tensor<500x6xf8E8M0FNU>)
// CHECK-NOT: mx.
// CHECK: return %[[S]]
func.func @round_trip(%s: tensor<500x6xf8E8M0FNU>) -> tensor<500x6xf8E8M0FNU> {
  %t = mx.swizzle %s : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  %u = mx.unswizzle %t : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  return %u : tensor<500x6xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func @round_trip_columnwise
// CHECK-SAME: (%[[S:.*]]: tensor<3x130xf32>)
// CHECK: return %[[S]]
func.func @round_trip_columnwise(%s: tensor<3x130xf32>) -> tensor<3x130xf32> {
  %t = mx.swizzle %s unscaled_dim 1 : tensor<3x130xf32> -> tensor<2x1x32x4x4xf32>
  %u = mx.unswizzle %t unscaled_dim 1 : tensor<2x1x32x4x4xf32> -> tensor<3x130xf32>
  return %u : tensor<3x130xf32>
}

// -----

// Reading the tiles with another unscaled dimension is a different matrix.
// CHECK-LABEL: func @different_dims
// CHECK: mx.swizzle
// CHECK: mx.unswizzle
func.func @different_dims(%s: tensor<4x4xf8E8M0FNU>) -> tensor<4x4xf8E8M0FNU> {
  %t = mx.swizzle %s : tensor<4x4xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  %u = mx.unswizzle %t unscaled_dim 1 : tensor<1x1x32x4x4xf8E8M0FNU> -> tensor<4x4xf8E8M0FNU>
  return %u : tensor<4x4xf8E8M0FNU>
}

// -----

// swizzle(unswizzle(t)) is not t: it resets t's padding bytes to zero.
// CHECK-LABEL: func @no_reverse_fold
// CHECK: mx.unswizzle
// CHECK: mx.swizzle
func.func @no_reverse_fold(%t: tensor<4x2x32x4x4xf8E8M0FNU>) -> tensor<4x2x32x4x4xf8E8M0FNU> {
  %u = mx.unswizzle %t : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  %s = mx.swizzle %u : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  return %s : tensor<4x2x32x4x4xf8E8M0FNU>
}

// -----

// Unused quantizations are pure and disappear.
// CHECK-LABEL: func @dead_quantize
// CHECK-NOT: mx.quantize
func.func @dead_quantize(%x: tensor<4x64xf32>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}
