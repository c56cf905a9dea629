// The GPU kernels assemble with ptxas for Hopper (sm_90a) and Blackwell
// (sm_100a): format=bin makes mx-opt run ptxas itself and fail on any error;
// the PTX is also assembled by hand to check that the quantize kernel keeps
// everything in registers and uses 16-byte loads and the hardware FP8 cvt.
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx > %t.sm90.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.sm90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.ptx -o %t.sm90.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx > %t.sm100.ptx
// RUN: %ptxas -arch=sm_100a -v %t.sm100.ptx -o %t.sm100.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// BIN90: gpu.binary @quantize_swizzled_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">
// BIN90-SAME: bin = "
// BIN100: gpu.binary @quantize_swizzled_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_100a", features = "+ptx88">
// BIN100-SAME: bin = "

// PTX: .target sm_90a
// PTX: ld.global.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: cvt.rn.satfinite.e4m3x2.f32
// PTX: st.global.v4.b32

// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @quantize_swizzled(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return %d, %t : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>
}
