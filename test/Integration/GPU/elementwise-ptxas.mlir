// The vector dequantize, swizzle and unswizzle kernels assemble with ptxas
// for Hopper (sm_90a, by hand, with no spill) and Blackwell (sm_100a:
// format=bin makes mx-opt run ptxas and fail on any error), and move their
// data with 16-byte accesses (the dequantize reads 8 FP8 bytes per 16-byte
// store of bf16 results): the dequantize decodes with the hardware
// `cvt.rn.f16x2.e4m3x2` and rounds with `cvt.rn.bf16x2.f32`; the swizzle
// reads 8-byte parts of compact rows (two tiles a thread: C = 8) and
// transposes them in registers, with no byte moves.
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_100a format=bin" -o /dev/null
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx --split %t.e
// RUN: FileCheck %s --check-prefix=DEQUANTIZE < %t.e.0.ptx
// RUN: FileCheck %s --check-prefix=SWIZZLE < %t.e.1.ptx
// RUN: FileCheck %s --check-prefix=UNSWIZZLE < %t.e.2.ptx
// RUN: %ptxas -arch=sm_90a -v %t.e.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.e.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.e.2.ptx -o %t.2.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.e.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// DEQUANTIZE: ld.global.v4.b16
// DEQUANTIZE: cvt.rn.f16x2.e4m3x2
// DEQUANTIZE: cvt.rn.bf16x2.f32
// DEQUANTIZE: st.global.v4.b32

// SWIZZLE-COUNT-4: ld.global.v2.b32
// SWIZZLE-NOT: prmt
// SWIZZLE: st.global.v4.b32
// SWIZZLE-NOT: prmt

// UNSWIZZLE: ld.global.v4.b32
// UNSWIZZLE-NOT: prmt
// UNSWIZZLE: st.global.v2.b32
// UNSWIZZLE-NOT: prmt

// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @dequantize(%d: tensor<256x512xf8E4M3FN>, %s: tensor<256x16xf8E8M0FNU>) -> tensor<256x512xbf16> {
  %x = mx.dequantize %d, %s block [1, 32] : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU> -> tensor<256x512xbf16>
  return %x : tensor<256x512xbf16>
}

// -----

func.func @swizzle(%s: tensor<2x200x8xf8E8M0FNU>) -> tensor<2x2x2x32x4x4xf8E8M0FNU> {
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x200x8xf8E8M0FNU> -> tensor<2x2x2x32x4x4xf8E8M0FNU>
  return %t : tensor<2x2x2x32x4x4xf8E8M0FNU>
}

// -----

func.func @unswizzle(%t: tensor<2x2x2x32x4x4xf8E8M0FNU>) -> tensor<2x200x8xf8E8M0FNU> {
  %s = mx.unswizzle %t unscaled_dim 1 : tensor<2x2x2x32x4x4xf8E8M0FNU> -> tensor<2x200x8xf8E8M0FNU>
  return %s : tensor<2x200x8xf8E8M0FNU>
}

// -----

func.func @dequantize_columnwise(%d: tensor<96x64xf8E5M2>, %s: tensor<3x64xf32>) -> tensor<96x64xf16> {
  %x = mx.dequantize %d, %s block [32, 1] : tensor<96x64xf8E5M2>, tensor<3x64xf32> -> tensor<96x64xf16>
  return %x : tensor<96x64xf16>
}
