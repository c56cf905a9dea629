// The column-sum kernels assemble with ptxas for Hopper (sm_90a, by hand,
// each kernel with no spill) and Blackwell (sm_100a: format=bin makes mx-opt
// run ptxas and fail on any error): the standalone tile kernel (bf16, M not
// a multiple of 64), the cast+transpose kernels of current (f32) and delayed
// (bf16) scaling and FP8 blockwise's strip kernel (bf16) that also write the
// tiles' column sums, and the partials kernel. The PTX shows the
// reduce-scatter of a tile's columns: 14 xor shuffles a lane (the delayed
// kernel's, 14 for each of its two tiles, and 5 for the amax), two sums a
// lane into shared memory, one barrier, and no atomics in the partials
// kernel.
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_100a format=bin" -o /dev/null
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx --split %t.q
// RUN: FileCheck %s --check-prefix=TILES < %t.q.0.ptx
// RUN: FileCheck %s --check-prefix=PARTIALS < %t.q.1.ptx
// RUN: FileCheck %s --check-prefix=CURRENT < %t.q.3.ptx
// RUN: FileCheck %s --check-prefix=DELAYED < %t.q.6.ptx
// RUN: %ptxas -arch=sm_90a -v %t.q.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.4.ptx -o %t.4.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.6.ptx -o %t.6.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.q.7.ptx -o %t.7.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=BLOCKWISE < %t.q.8.ptx
// RUN: %ptxas -arch=sm_90a -v %t.q.8.ptx -o %t.8.cubin 2>&1 | FileCheck %s --check-prefixes=PTXAS,TWO-CTAS

// TILES-COUNT-2: ld.global.v4.b32
// TILES-COUNT-14: shfl.sync.bfly.b32
// TILES-NOT: shfl.sync
// TILES: st.shared.v2.b32
// TILES: bar.sync
// TILES: st.global.b32

// PARTIALS: ld.global.b32
// PARTIALS: bar.sync
// PARTIALS-NOT: atom
// PARTIALS: st.global.b32

// CURRENT-COUNT-4: ld.global.v4.b32
// CURRENT-COUNT-14: shfl.sync.bfly.b32
// CURRENT-NOT: shfl.sync
// CURRENT: st.shared.v2.b32
// CURRENT: div.rn.f32
// CURRENT: cvt.rn.satfinite.e4m3x2.f32
// CURRENT: bar.sync
// CURRENT-NOT: bar.sync

// DELAYED-COUNT-33: shfl.sync.bfly.b32
// DELAYED-NOT: shfl.sync
// DELAYED: atom.global.max.u32

// FP8 blockwise's strip kernel with the column sums (bf16, 8192 x 4096, the
// gradient of bench/linear's smallest step): 12 shuffles up, 4 partials a
// lane in one store, no occupancy request, and within the 128 registers of
// two CTAs an SM.
// BLOCKWISE-NOT: .minnctapersm
// BLOCKWISE-COUNT-12: shfl.sync.up.b32
// BLOCKWISE: st.global.v4.b32

// PTXAS-NOT: warning
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// TWO-CTAS: Used {{([0-9]|[0-9][0-9]|1[01][0-9]|12[0-8])}} registers

func.func @standalone(%x: tensor<4160x144xbf16>) -> tensor<144xf32> {
  %s = mx.column_sum %x : tensor<4160x144xbf16> -> tensor<144xf32>
  return %s : tensor<144xf32>
}

// -----

func.func @current(%x: tensor<192x128xf32>) -> (tensor<192x128xf8E4M3FN>, tensor<1x1xf32>, tensor<128x192xf8E4M3FN>, tensor<1x1xf32>, tensor<128xf32>) {
  %d, %s = mx.quantize %x block [192, 128] rounding exact : tensor<192x128xf32> -> tensor<192x128xf8E4M3FN>, tensor<1x1xf32>
  %t, %ts = mx.quantize %x transposed block [128, 192] rounding exact : tensor<192x128xf32> -> tensor<128x192xf8E4M3FN>, tensor<1x1xf32>
  %db = mx.column_sum %x : tensor<192x128xf32> -> tensor<128xf32>
  return %d, %s, %t, %ts, %db : tensor<192x128xf8E4M3FN>, tensor<1x1xf32>, tensor<128x192xf8E4M3FN>, tensor<1x1xf32>, tensor<128xf32>
}

// -----

func.func @delayed(%x: tensor<1024x1024xbf16>, %s: tensor<1xf32>, %h: tensor<16x1xf32>) -> (tensor<1024x1024xf8E5M2>, tensor<1x1xf32>, tensor<1024x1024xf8E5M2>, tensor<16x1xf32>, tensor<1024xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 0 : tensor<1024x1024xbf16>, tensor<1xf32>, tensor<16x1xf32> -> tensor<1024x1024xf8E5M2>, tensor<1x1xf32>, tensor<16x1xf32>
  %yt, %i2, %h2 = mx.quantize_delayed %x, %s, %h1 index 0 transposed : tensor<1024x1024xbf16>, tensor<1xf32>, tensor<16x1xf32> -> tensor<1024x1024xf8E5M2>, tensor<1x1xf32>, tensor<16x1xf32>
  %db = mx.column_sum %x : tensor<1024x1024xbf16> -> tensor<1024xf32>
  return %y, %i, %yt, %h2, %db : tensor<1024x1024xf8E5M2>, tensor<1x1xf32>, tensor<1024x1024xf8E5M2>, tensor<16x1xf32>, tensor<1024xf32>
}

// -----

func.func @blockwise(%x: tensor<8192x4096xbf16>) -> (tensor<8192x4096xf8E4M3FN>, tensor<8192x32xf32>, tensor<4096x8192xf8E4M3FN>, tensor<4096x64xf32>, tensor<4096xf32>) {
  %d, %s = mx.quantize %x block [1, 128] rounding ceil : tensor<8192x4096xbf16> -> tensor<8192x4096xf8E4M3FN>, tensor<8192x32xf32>
  %t, %ts = mx.quantize %x transposed block [1, 128] rounding ceil : tensor<8192x4096xbf16> -> tensor<4096x8192xf8E4M3FN>, tensor<4096x64xf32>
  %db = mx.column_sum %x : tensor<8192x4096xbf16> -> tensor<4096xf32>
  return %d, %s, %t, %ts, %db : tensor<8192x4096xf8E4M3FN>, tensor<8192x32xf32>, tensor<4096x8192xf8E4M3FN>, tensor<4096x64xf32>, tensor<4096xf32>
}
