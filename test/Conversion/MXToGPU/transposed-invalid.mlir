// A transposed cast (the `transposed` attribute of mx.quantize and
// mx.quantize_delayed) has a CPU lowering only for now: convert-mx-to-gpu
// names the op and the reason, and the pass fails.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu=chip=sm_90a -verify-diagnostics
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu=chip=sm_100a -verify-diagnostics

func.func @quantize(%x: tensor<256x96xbf16>) -> (tensor<96x256xf8E4M3FN>, tensor<96x8xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: no GPU kernel computes a transposed quantize yet}}
  %d, %s = mx.quantize %x transposed block [1, 32]
    : tensor<256x96xbf16> -> tensor<96x256xf8E4M3FN>, tensor<96x8xf8E8M0FNU>
  return %d, %s : tensor<96x256xf8E4M3FN>, tensor<96x8xf8E8M0FNU>
}

// -----

func.func @quantize_delayed(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>)
    -> (tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  // expected-error @+1 {{'mx.quantize_delayed' op has no GPU lowering: no GPU kernel computes a transposed quantize_delayed yet}}
  %y, %si, %h1 = mx.quantize_delayed %x, %s, %h index 1 transposed
    : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32>
    -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %si, %h1 : tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}
