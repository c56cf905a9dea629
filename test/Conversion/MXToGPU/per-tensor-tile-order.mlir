// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file | FileCheck %s

// The tile order of current scaling's casts (QuantizePlan::reversedTiles): a
// cast that follows its own amax pass in the program visits its CTAs last to
// first (block id b becomes blocks - 1 - b), so that it reads first the end
// of the input, which the amax pass read last.

// The flat cast, 10 CTAs of 16 Ki elements.
// CHECK-LABEL: func @plain
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c10{{.*}}) threads({{.*}}) in ({{.*}}) workgroup
// CHECK: gpu.launch blocks(%[[B:[^,]*]], {{.*}}) in ({{.*}} = %c10{{.*}}) threads({{.*}}) in ({{.*}}) {
// CHECK-NEXT: arith.subi %c9, %[[B]] : index
func.func @plain(%x: tensor<300x500xbf16>) -> (tensor<300x500xf8E4M3FN>, tensor<1x1xf32>) {
  %d, %s = mx.quantize %x block [300, 500] rounding exact : tensor<300x500xbf16> -> tensor<300x500xf8E4M3FN>, tensor<1x1xf32>
  return %d, %s : tensor<300x500xf8E4M3FN>, tensor<1x1xf32>
}

// -----

// The cast+transpose kernel of both outputs, 2 slices x 2 x 3 tiles.
// CHECK-LABEL: func @pair
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}) threads({{.*}}) in ({{.*}}) workgroup
// CHECK: gpu.launch blocks(%[[B:[^,]*]], {{.*}}) in ({{.*}} = %c12{{.*}}) threads({{.*}}) in ({{.*}}) workgroup
// CHECK-NEXT: arith.subi %c11, %[[B]] : index
func.func @pair(%x: tensor<2x96x160xbf16>) -> (tensor<2x96x160xf8E4M3FN>, tensor<2x1x1xf32>, tensor<2x160x96xf8E4M3FN>, tensor<2x1x1xf32>) {
  %d, %s = mx.quantize %x block [1, 96, 160] rounding exact : tensor<2x96x160xbf16> -> tensor<2x96x160xf8E4M3FN>, tensor<2x1x1xf32>
  %t, %ts = mx.quantize %x transposed block [1, 160, 96] rounding exact : tensor<2x96x160xbf16> -> tensor<2x160x96xf8E4M3FN>, tensor<2x1x1xf32>
  return %d, %s, %t, %ts : tensor<2x96x160xf8E4M3FN>, tensor<2x1x1xf32>, tensor<2x160x96xf8E4M3FN>, tensor<2x1x1xf32>
}

// -----

// A given amax (a shard's, all-reduced by the caller): no amax pass in the
// program, so nothing of the input is in L2 to start from; forward order.
// CHECK-LABEL: func @given_amax
// CHECK: gpu.launch blocks(%[[B:[^,]*]], {{.*}}) in ({{.*}} = %c10{{.*}})
// CHECK-NOT: arith.subi {{.*}}, %[[B]] : index
// CHECK: return
func.func @given_amax(%x: tensor<300x500xbf16>, %a: tensor<f32>) -> (tensor<300x500xf8E4M3FN>, tensor<1x1xf32>) {
  %d, %s = mx.quantize %x block [300, 500] rounding exact amax(%a : tensor<f32>) : tensor<300x500xbf16> -> tensor<300x500xf8E4M3FN>, tensor<1x1xf32>
  return %d, %s : tensor<300x500xf8E4M3FN>, tensor<1x1xf32>
}
