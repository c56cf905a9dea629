// The generated GEMM kernels assemble for sm_90a with no spill and no
// serialized wgmma (ptxas C7514): ptxas runs
// on the PTX of all three recipes, which must use the Hopper instructions
// the kernels are built on (TMA, mbarrier parity waits, setmaxnreg, wgmma on
// FP8 and on bf16, the FP8 -> f16 cvt of the MX dequantization).
// REQUIRES: ptxas
// RUN: mx-opt %s --split-input-file --mx-lower-to-nvvm="chip=sm_90a format=isa gemm=kernel" | %python -m mx.ptx --split %t.gemm
// RUN: FileCheck %s --check-prefix=MX < %t.gemm.0.ptx
// RUN: FileCheck %s --check-prefix=FP8 < %t.gemm.1.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.0.ptx -o %t.0.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.gemm.1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=PRODUCTS < %t.gemm.2.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.2.ptx -o %t.2.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.gemm.3.ptx -o %t.3.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=EPILOGUE < %t.gemm.4.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.4.ptx -o %t.4.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=STAGED < %t.gemm.5.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.5.ptx -o %t.5.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=STAGING < %t.gemm.6.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.6.ptx -o %t.6.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.gemm.7.ptx -o %t.7.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// The tensor maps are __grid_constant__ parameters: 128 bytes each, 64-byte
// aligned, read by TMA in the parameter space (no device copy of them).
// MX: .entry kernel(
// MX-NEXT: .param .align 64 .b8 kernel_param_0[128],
// MX-NEXT: .param .align 64 .b8 kernel_param_1[128],
// MX: .maxntid 384, 1, 1
// MX: .minnctapersm 1
// MX: setmaxnreg.dec.sync.aligned.u32 {{.*}}40;
// MX: mbarrier.try_wait.parity.shared.b64
// MX: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// MX: setmaxnreg.inc.sync.aligned.u32 {{.*}}232;
// MX: cvt.rn.f16x2.e4m3x2
// MX: fence.proxy.async.shared::cta
// MX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16

// The wgrad form takes its scale products from a tf32 wgmma after each
// K-block's chain, on operand rows that the stage loads by TMA (written
// before the GEMM by the two kernels after it: A's rows [h, h, l, l], B's
// [h, l, h, l], one 16-byte store a scale); no shared load of the column
// scales is left.
// FP8: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// FP8-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// FP8: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32
// FP8: wgmma.wait_group.sync.aligned 0;
// FP8-NOT: ld.shared.v2
// PRODUCTS: .entry kernel(
// PRODUCTS: ld.global.b32
// PRODUCTS: and.b32 {{.*}}, -8192;
// PRODUCTS: st.global.v4.b32 {{.*}}, {[[HI:%r[0-9]+]], [[HI]], [[LO:%r[0-9]+]], [[LO]]};

// The TMA-store epilogue of the f16 per-tensor kernel.
// EPILOGUE: wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3
// EPILOGUE: cp.async.bulk.wait_group.read 0;
// EPILOGUE: stmatrix.sync.aligned.m8n8.x4.shared.b16
// EPILOGUE: fence.proxy.async.shared::cta;
// EPILOGUE: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group
// EPILOGUE: cp.async.bulk.commit_group;
// EPILOGUE: cp.async.bulk.wait_group 0;

// The staged form of MX (bf16 GEMM) keeps one wgmma group in flight; the staging
// kernels (E4M3, then E2M3) convert with the cvt of FP8 and store 16 bytes.
// STAGED: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// STAGED: wgmma.wait_group.sync.aligned 1;
// STAGED: stmatrix.sync.aligned.m8n8.x4.shared.b16
// STAGING: ld.global.v4.b32
// STAGING: cvt.rn.f16x2.e4m3x2
// STAGING: st.global.v4.b32

// PTXAS-NOT: warning
// PTXAS-NOT: Potential Performance Loss
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @mx(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

// -----

func.func @blockwise(%a: tensor<200x1024xf8E4M3FN>, %as: tensor<8x50x4xf32>, %b: tensor<72x1024xf8E4M3FN>, %bs: tensor<8x18x4xf32>) -> tensor<200x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<200x1024xf8E4M3FN>, tensor<8x50x4xf32>, tensor<72x1024xf8E4M3FN>, tensor<8x18x4xf32> -> tensor<200x72xf32>
  return %c : tensor<200x72xf32>
}

// -----

func.func @per_tensor(%a: tensor<130x1024xf8E5M2>, %as: tensor<1x1xf32>, %b: tensor<264x1024xf8E4M3FN>, %bs: tensor<1x1xf32>) -> tensor<130x264xf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [130, 1024] rhs_block [264, 1024]
    : tensor<130x1024xf8E5M2>, tensor<1x1xf32>, tensor<264x1024xf8E4M3FN>, tensor<1x1xf32> -> tensor<130x264xf16>
  return %c : tensor<130x264xf16>
}

// -----

func.func @mx_staged(%a: tensor<4096x640xf8E4M3FN>, %as: tensor<32x5x32x4x4xf8E8M0FNU>, %b: tensor<2048x640xf6E2M3FN>, %bs: tensor<16x5x32x4x4xf8E8M0FNU>) -> tensor<4096x2048xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<4096x640xf8E4M3FN>, tensor<32x5x32x4x4xf8E8M0FNU>, tensor<2048x640xf6E2M3FN>, tensor<16x5x32x4x4xf8E8M0FNU> -> tensor<4096x2048xbf16>
  return %c : tensor<4096x2048xbf16>
}
