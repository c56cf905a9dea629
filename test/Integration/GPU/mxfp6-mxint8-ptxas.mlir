// The MXFP6 and MXINT8 kernels assemble with ptxas for Hopper (sm_90a) and
// Blackwell (sm_100a) and keep everything in registers. FP6 is rounded by
// E5M2's cvt on sm_90a (E3M2 embeds in it) and by E3M2's own on sm_100a
// (compiled only: no SM100 GPU ran it); packed rows leave as 32-bit words,
// three a lane of 16 elements in the rowwise kernel, one a lane in the strip
// kernel's columns; the dequantize loads the two words that hold a chunk of
// 8 elements and stores its 8 bf16 at once. Every kernel declares its
// 256 threads (`.maxntid`, from gpu-kernel-outlining's known block size),
// the bound ptxas budgets the registers by. The fused MXFP6 kernel stages
// its 32 x 256 tile in 16 KiB of shared memory, and its columnwise and
// rowwise warps each hold one quantization's state: at most 48 registers on
// sm_90a with no spill (five CTAs an SM; the register kernel it replaced
// took 128).
// REQUIRES: ptxas
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa" | %python -m mx.ptx --split %t.sm90
// RUN: FileCheck %s --check-prefixes=ROW,ROW90 < %t.sm90.0.ptx
// RUN: FileCheck %s --check-prefixes=STRIP,STRIP90 < %t.sm90.1.ptx
// RUN: FileCheck %s --check-prefix=INT8 < %t.sm90.2.ptx
// RUN: FileCheck %s --check-prefix=DEQ90 < %t.sm90.3.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.sm90.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefixes=PTXAS,FUSED90
// RUN: %ptxas -arch=sm_90a -v %t.sm90.2.ptx -o %t.2.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.sm90.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" | %python -m mx.ptx --split %t.sm100
// RUN: FileCheck %s --check-prefixes=ROW,ROW100 < %t.sm100.0.ptx
// RUN: FileCheck %s --check-prefix=DEQ100 < %t.sm100.3.ptx
// RUN: %ptxas -arch=sm_100a -v %t.sm100.0.ptx -o %t.4.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_100a -v %t.sm100.1.ptx -o %t.5.cubin 2>&1 | FileCheck %s --check-prefixes=PTXAS,FUSED
// RUN: %ptxas -arch=sm_100a -v %t.sm100.2.ptx -o %t.6.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_100a -v %t.sm100.3.ptx -o %t.7.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// FUSED90: Used {{([1-3]?[0-9]|4[0-8])}} registers, used 1 barriers, 16384 bytes smem
// FUSED: used 1 barriers, 16384 bytes smem

// ROW: ld.global.v4.b32
// ROW90-COUNT-8: cvt.rn.satfinite.e5m2x2.f32
// ROW100-COUNT-8: cvt.rn.satfinite.e3m2x2.f32
// ROW-COUNT-3: st.global.b32
func.func @mxfp6_rowwise(%x: tensor<256x512xbf16>) -> (tensor<256x512xf6E3M2FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf6E3M2FN>, tensor<256x16xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return %d, %t : tensor<256x512xf6E3M2FN>, tensor<2x4x32x4x4xf8E8M0FNU>
}

// STRIP: .maxntid 256, 1, 1
// STRIP: .shared .align 16 .b8 {{.*}}[16384];
// STRIP-COUNT-4: ld.global.v4.b32
// STRIP-COUNT-4: st.shared.v4.b32
// STRIP: cp.async.bulk.prefetch.L2.global
// STRIP: bar.sync 0;
// STRIP: ld.shared.v2.b32
// STRIP90: cvt.rn.satfinite.e4m3x2.f32
// STRIP: shfl.sync.down.b32
// STRIP: st.global.b32
func.func @mxfp6_fused(%x: tensor<256x512xbf16>) -> (tensor<256x512xf6E2M3FN>, tensor<256x16xf8E8M0FNU>, tensor<256x512xf6E2M3FN>, tensor<8x512xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf6E2M3FN>, tensor<256x16xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] : tensor<256x512xbf16> -> tensor<256x512xf6E2M3FN>, tensor<8x512xf8E8M0FNU>
  return %d, %s, %c, %cs : tensor<256x512xf6E2M3FN>, tensor<256x16xf8E8M0FNU>, tensor<256x512xf6E2M3FN>, tensor<8x512xf8E8M0FNU>
}

// INT8-NOT: cvt.rn.satfinite
// INT8: fma.rn.f32 {{.*}}, 0f42800000, 0f4B400000;
// INT8-NOT: cvt.rn.satfinite
func.func @mxint8_fused(%x: tensor<256x512xf32>) -> (tensor<256x512xi8>, tensor<256x16xf8E8M0FNU>, tensor<256x512xi8>, tensor<8x512xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] rounding floor : tensor<256x512xf32> -> tensor<256x512xi8>, tensor<256x16xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] rounding floor : tensor<256x512xf32> -> tensor<256x512xi8>, tensor<8x512xf8E8M0FNU>
  return %d, %s, %c, %cs : tensor<256x512xi8>, tensor<256x16xf8E8M0FNU>, tensor<256x512xi8>, tensor<8x512xf8E8M0FNU>
}

// DEQ90: .maxntid 256, 1, 1
// DEQ90: ld.global.b32 [[LO:%rd[0-9]+]], [[[ADDR:%rd[0-9]+]]];
// DEQ90-NEXT: ld.global.b32 [[HI:%rd[0-9]+]], [[[ADDR]]+4];
// DEQ90: cvt.rn.f16x2.e5m2x2
// DEQ90: st.global.v4.b32
// DEQ100: cvt.rn.f16x2.e3m2x2
func.func @mxfp6_dequantize(%d: tensor<256x512xf6E3M2FN>, %s: tensor<256x16xf8E8M0FNU>) -> tensor<256x512xbf16> {
  %y = mx.dequantize %d, %s block [1, 32] : tensor<256x512xf6E3M2FN>, tensor<256x16xf8E8M0FNU> -> tensor<256x512xbf16>
  return %y : tensor<256x512xbf16>
}
