// The FP4 kernels assemble with ptxas for Hopper (sm_90a) and Blackwell
// (sm_100a), keep everything in registers, and store an MXFP4 block's 16
// packed bytes at once; E2M1 is converted in software on sm_90a (in bf16x2
// arithmetic) and by the hardware cvt on sm_100a (compiled only: no SM100
// GPU ran it).
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx --split %t.sm90
// RUN: FileCheck %s --check-prefixes=PTX,PTX90 < %t.sm90.0.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.0.ptx -o %t.sm90.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx --split %t.sm100
// RUN: FileCheck %s --check-prefixes=PTX,PTX100 < %t.sm100.0.ptx
// RUN: %ptxas -arch=sm_100a -v %t.sm100.0.ptx -o %t.sm100.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=AMAX < %t.sm90.2.ptx

// BIN: gpu.binary @mxfp4_kernel
// BIN-SAME: bin = "
// BIN: gpu.binary @nvfp4_computed_kernel
// BIN-SAME: bin = "

// PTX: ld.global.v4.b32
// PTX90-NOT: e2m1x2
// PTX90: mul.rn.bf16x2
// PTX90: fma.rn.bf16x2
// PTX90: min.bf16x2
// PTX90-NOT: e2m1x2
// PTX100-COUNT-16: cvt.rn.satfinite.e2m1x2.f32
// PTX: st.global.v4.b32

// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// The second kernel (after the one that zeroes the amax word) reduces the
// finite amax.
// AMAX: shfl.sync.bfly.b32
// AMAX: atom.global.max.u32

func.func @mxfp4(%x: tensor<256x512xbf16>) -> (tensor<256x512xf4E2M1FN>, tensor<256x16xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf4E2M1FN>, tensor<256x16xf8E8M0FNU>
  return %d, %s : tensor<256x512xf4E2M1FN>, tensor<256x16xf8E8M0FNU>
}

func.func @nvfp4_computed(%x: tensor<256x512xf32>) -> (tensor<256x512xf4E2M1FN>, tensor<256x32xf8E4M3FN>, tensor<f32>) {
  %d, %s, %t = mx.quantize %x block [1, 16] : tensor<256x512xf32> -> tensor<256x512xf4E2M1FN>, tensor<256x32xf8E4M3FN>, tensor<f32>
  return %d, %s, %t : tensor<256x512xf4E2M1FN>, tensor<256x32xf8E4M3FN>, tensor<f32>
}
