// Which lowering mx-lower-to-nvvm picks for each mx.scaled_matmul: gemm=auto
// (the default) takes, for each op, the lowering that runs its recipe faster
// on the chip (GemmLowering.h; both passes ask the same function), or the
// other one where that one cannot run the op; gemm=kernel and gemm=cublas
// force one lowering for every op.
// RUN: mx-opt %s --mx-lower-to-nvvm="format=isa" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefixes=AUTO90,KERNELS90
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a gemm=kernel format=isa" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefixes=KERNEL90,KERNELS90
// RUN: not mx-opt %s --mx-lower-to-nvvm="chip=sm_90a gemm=cublas" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=CUBLAS90
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a format=isa" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=AUTO100
// RUN: not mx-opt %s --mx-lower-to-nvvm="chip=sm_100a gemm=kernel" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=KERNEL100
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a gemm=cublas" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=CUBLAS100

// sm_90a: the generated kernels are the faster ones for MX and 1x128 x
// 128x128 blockwise, so gemm=auto calls no cuBLASLt; the host asks the
// runtime for the MX kernel's two TMA tensor maps, and for the blockwise
// kernel's four (A, B, A's GEMM-ready scale rows, which an inserted
// swizzle kernel lays out first, and the output of its TMA-store epilogue).
// AUTO90: convert-mx-to-cublas{chip=sm_90a gemm=auto gemm-config=}
// AUTO90-NEXT: convert-mx-to-gpu{chip=sm_90a gemm=auto gemm-config= staged-variant=0}
// KERNEL90-NOT: convert-mx-to-cublas
// KERNEL90: convert-mx-to-gpu{chip=sm_90a gemm=kernel gemm-config= staged-variant=0}
// KERNELS90-NOT: mxrtScaledMatmul
// KERNELS90: llvm.func @mxrtEncodeTensorMap
// KERNELS90-LABEL: llvm.func @mx_gemm
// KERNELS90-COUNT-2: llvm.call @mxrtEncodeTensorMap
// KERNELS90: gpu.launch_func {{.*}} @mx_gemm_mx_exact_256x128x512::@kernel
// KERNELS90-LABEL: llvm.func @blockwise_gemm
// KERNELS90: gpu.launch_func {{.*}} @blockwise_gemm_kernel::@blockwise_gemm_kernel
// KERNELS90-COUNT-4: llvm.call @mxrtEncodeTensorMap
// KERNELS90: gpu.launch_func {{.*}} @mx_gemm_blockwise_256x128x512::@kernel
// KERNELS90-DAG: gpu.binary @mx_gemm_mx_exact_256x128x512 {{.*}}chip = "sm_90a", features = "+ptx86"
// KERNELS90-DAG: gpu.binary @mx_gemm_blockwise_256x128x512

// cuBLASLt has no MX GEMM on sm_90a: rejected when compiling.
// CUBLAS90: convert-mx-to-cublas{chip=sm_90a gemm=cublas gemm-config=}
// CUBLAS90-NEXT: convert-mx-to-gpu{chip=sm_90a gemm=auto gemm-config= staged-variant=0}
// CUBLAS90: error: 'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt has no block-scaled MX or NVFP4 GEMM (VEC32_UE8M0, VEC16_UE4M3) before SM100, so none on sm_90a; for MXFP8 use the generated kernel instead (mx-lower-to-nvvm gemm=kernel)

// sm_100a: MX runs on the generated tcgen05 kernel (PTX ISA 8.8), FP8
// blockwise on cuBLASLt (VEC128_32F = 2, BLK128x128_32F = 3).
// AUTO100: convert-mx-to-cublas{chip=sm_100a gemm=auto gemm-config=}
// AUTO100: llvm.func @mxrtScaledMatmul
// AUTO100-LABEL: llvm.func @mx_gemm
// AUTO100-NOT: llvm.call @mxrtScaledMatmul
// AUTO100: gpu.launch_func {{.*}} @mx_gemm_mx_block_scaled_256x128x512::@kernel
// AUTO100-LABEL: llvm.func @blockwise_gemm
// AUTO100-DAG: %[[VEC128:.*]] = llvm.mlir.constant(2 : i32) : i32
// AUTO100-DAG: %[[BLK128:.*]] = llvm.mlir.constant(3 : i32) : i32
// AUTO100: llvm.call @mxrtScaledMatmul(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[VEC128]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[BLK128]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})
// AUTO100: gpu.binary @mx_gemm_mx_block_scaled_256x128x512 {{.*}}chip = "sm_100a", features = "+ptx88"

// KERNEL100-NOT: convert-mx-to-cublas
// KERNEL100: convert-mx-to-gpu{chip=sm_100a gemm=kernel gemm-config= staged-variant=0}
// KERNEL100: error: 'mx.scaled_matmul' op has no generated kernel on sm_100a: the sm_100a kernel takes MX or NVFP4 operands only (E8M0 scales of [1, 32] blocks, E4M3 of [1, 16]); cuBLASLt runs it (mx-lower-to-nvvm gemm=cublas or gemm=auto)

// gemm=cublas on sm_100a: both through cuBLASLt; VEC32_UE8M0 is 1.
// CUBLAS100: convert-mx-to-cublas{chip=sm_100a gemm=cublas gemm-config=}
// CUBLAS100-NEXT: convert-mx-to-gpu{chip=sm_100a gemm=auto gemm-config= staged-variant=0}
// CUBLAS100: llvm.func @mxrtScaledMatmul
// CUBLAS100-LABEL: llvm.func @mx_gemm
// CUBLAS100: %[[VEC32:.*]] = llvm.mlir.constant(1 : i32) : i32
// CUBLAS100: llvm.call @mxrtScaledMatmul(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[VEC32]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[VEC32]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})
// CUBLAS100-LABEL: llvm.func @blockwise_gemm
// CUBLAS100: llvm.call @mxrtScaledMatmul
// CUBLAS100-NOT: gpu.binary @mx_gemm

func.func @mx_gemm(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

func.func @blockwise_gemm(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x4xf32>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4xf32>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<128x512xf8E4M3FN>, tensor<1x4xf32> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}
