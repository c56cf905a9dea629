// The strip kernel writing transposed (GEMM-ready) data assembles with ptxas
// for Hopper (sm_90a, by hand, each kernel with no spill) and Blackwell
// (sm_100a: format=bin makes mx-opt run ptxas and fail on any error): FP8
// blockwise's [1, 128] blocks of the transposed input (bf16 with `ceil`
// scales, batched f32 with `exact` ones), and MXFP8's [1, 32] fused with the
// rowwise quantize of the same input. The PTX shows what the kernel is built
// for: one 8- or 16-byte load per strip row, the packed bf16 amax
// (max.NaN.xorsign.abs), the xor shuffles across the lane groups (three for
// 128-row blocks), the hardware conversion, and a column's 16 codes as one
// 16-byte store.
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_100a format=bin" -o /dev/null
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx --split %t.q
// RUN: FileCheck %s --check-prefix=BF16 < %t.q.0.ptx
// RUN: FileCheck %s --check-prefix=F32 < %t.q.1.ptx
// RUN: FileCheck %s --check-prefix=MX < %t.q.2.ptx
// RUN: %ptxas -arch=sm_90a -v %t.q.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.2.ptx -o %t.2.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// BF16-COUNT-16: ld.global.v2.b32
// BF16: max.NaN.xorsign.abs.bf16x2
// BF16-COUNT-6: shfl.sync.bfly.b32
// BF16-NOT: shfl.sync
// BF16: cvt.rn.satfinite.e4m3x2.f32
// BF16: st.global.v4.b32

// F32-COUNT-16: ld.global.v4.b32
// F32: max.NaN.f32
// F32-COUNT-12: shfl.sync.bfly.b32
// F32-NOT: shfl.sync
// F32: div.rn.f32
// F32: cvt.rn.satfinite.e5m2x2.f32
// F32: st.global.v4.b32

// MX: ld.global.v2.b32
// MX: shfl.sync.bfly.b32
// MX: cvt.rn.satfinite.e4m3x2.f32
// MX: st.global.v4.b32

// PTXAS-NOT: warning
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @blockwise_bf16(%x: tensor<272x208xbf16>) -> (tensor<208x272xf8E4M3FN>, tensor<208x3xf32>) {
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<272x208xbf16> -> tensor<208x272xf8E4M3FN>, tensor<208x3xf32>
  return %t, %ts : tensor<208x272xf8E4M3FN>, tensor<208x3xf32>
}

// -----

func.func @blockwise_f32_batched(%x: tensor<2x48x32xf32>) -> (tensor<2x32x48xf8E5M2>, tensor<2x32x1xf32>) {
  %t, %ts = mx.quantize %x transposed block [1, 1, 128] rounding exact : tensor<2x48x32xf32> -> tensor<2x32x48xf8E5M2>, tensor<2x32x1xf32>
  return %t, %ts : tensor<2x32x48xf8E5M2>, tensor<2x32x1xf32>
}

// -----

func.func @mx_fused(%x: tensor<96x192xbf16>) -> (tensor<96x192xf8E4M3FN>, tensor<96x6xf8E8M0FNU>, tensor<192x96xf8E4M3FN>, tensor<192x3xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<96x192xbf16> -> tensor<96x192xf8E4M3FN>, tensor<96x6xf8E8M0FNU>
  %t, %ts = mx.quantize %x transposed block [1, 32] : tensor<96x192xbf16> -> tensor<192x96xf8E4M3FN>, tensor<192x3xf8E8M0FNU>
  return %d, %s, %t, %ts : tensor<96x192xf8E4M3FN>, tensor<96x6xf8E8M0FNU>, tensor<192x96xf8E4M3FN>, tensor<192x3xf8E8M0FNU>
}
