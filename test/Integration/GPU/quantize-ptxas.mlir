// The FP8 blockwise, per-tensor and batched quantize kernels assemble with
// ptxas for Hopper (sm_90a, by hand, each kernel with no spill) and Blackwell
// (sm_100a: format=bin makes mx-opt run ptxas and fail on any error). The PTX
// shows the instructions the numerics rest on: IEEE division for `exact`
// scales (div.rn, not div.approx or div.full), the NaN-propagating max of
// amax (max.NaN), the NaN-ignoring max of the history (plain max), the CTA
// barrier, and the atomic unsigned max on the bits of the amax.
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_100a format=bin" -o /dev/null
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx --split %t.q
// RUN: FileCheck %s --check-prefix=ROWWISE < %t.q.0.ptx
// RUN: FileCheck %s --check-prefix=BLOCKWISE2D < %t.q.1.ptx
// RUN: FileCheck %s --check-prefix=AMAX < %t.q.2.ptx
// RUN: FileCheck %s --check-prefix=UPDATE < %t.q.6.ptx
// RUN: %ptxas -arch=sm_90a -v %t.q.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.2.ptx -o %t.2.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.4.ptx -o %t.4.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.5.ptx -o %t.5.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.6.ptx -o %t.6.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.7.ptx -o %t.7.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// ROWWISE: ld.global.v4.b32
// ROWWISE: shfl.sync.bfly.b32
// ROWWISE: div.rn.f32
// ROWWISE: cvt.rn.satfinite.e4m3x2.f32
// ROWWISE: st.global.v4.b32

// BLOCKWISE2D: max.NaN.f32
// BLOCKWISE2D: bar.sync
// BLOCKWISE2D: cvt.rn.satfinite.e4m3x2.f32

// AMAX: bar.sync
// AMAX: atom.global.max.u32

// UPDATE: max.f32
// UPDATE: bar.sync
// UPDATE: div.rn.f32

// PTXAS-NOT: warning
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @blockwise_1d(%x: tensor<70x208xbf16>) -> (tensor<70x208xf8E4M3FN>, tensor<70x2xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding exact : tensor<70x208xbf16> -> tensor<70x208xf8E4M3FN>, tensor<70x2xf32>
  return %d, %s : tensor<70x208xf8E4M3FN>, tensor<70x2xf32>
}

// -----

func.func @blockwise_2d(%x: tensor<2x200x272xf32>) -> (tensor<2x200x272xf8E4M3FN>, tensor<2x2x3xf32>) {
  %d, %s = mx.quantize %x block [1, 128, 128] : tensor<2x200x272xf32> -> tensor<2x200x272xf8E4M3FN>, tensor<2x2x3xf32>
  return %d, %s : tensor<2x200x272xf8E4M3FN>, tensor<2x2x3xf32>
}

// -----

// Two kernels: the amax, then the cast.
func.func @per_tensor(%x: tensor<3x70x208xbf16>) -> (tensor<3x70x208xf8E5M2>, tensor<3x1x1xf32>) {
  %d, %s = mx.quantize %x block [1, 70, 208] rounding exact : tensor<3x70x208xbf16> -> tensor<3x70x208xf8E5M2>, tensor<3x1x1xf32>
  return %d, %s : tensor<3x70x208xf8E5M2>, tensor<3x1x1xf32>
}

// -----

// Two kernels: the history copy, then the cast.
func.func @delayed(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>) -> (tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>) {
  %y, %sinv, %h1 = mx.quantize_delayed %x, %s, %h index 1 : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %sinv, %h1 : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
}

// -----

func.func @update(%h: tensor<1024x3xf32>, %s: tensor<3xf32>) -> (tensor<1024x3xf32>, tensor<3xf32>) {
  %h2, %s2 = mx.update_amax_history %h, %s element f8E4M3FN margin 1 : tensor<1024x3xf32>, tensor<3xf32> -> tensor<1024x3xf32>, tensor<3xf32>
  return %h2, %s2 : tensor<1024x3xf32>, tensor<3xf32>
}

// -----

// The strip kernel over batch slices, both outputs tiled, `exact` scales.
func.func @fused_batched(%x: tensor<2x70x96xbf16>) -> (tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf32>, tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf32>) {
  %d, %s = mx.quantize %x block [1, 1, 32] rounding exact : tensor<2x70x96xbf16> -> tensor<2x70x96xf8E4M3FN>, tensor<2x70x3xf32>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x70x3xf32> -> tensor<2x1x1x32x4x4xf32>
  %cd, %cs = mx.quantize %x block [1, 32, 1] rounding exact : tensor<2x70x96xbf16> -> tensor<2x70x96xf8E4M3FN>, tensor<2x3x96xf32>
  %ct = mx.swizzle %cs unscaled_dim 2 : tensor<2x3x96xf32> -> tensor<2x1x1x32x4x4xf32>
  return %d, %t, %cd, %ct : tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf32>, tensor<2x70x96xf8E4M3FN>, tensor<2x1x1x32x4x4xf32>
}
