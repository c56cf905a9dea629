// Which lowering mx-lower-to-nvvm picks for mx.scaled_matmul (gemm=auto
// resolves per chip in Target.h) and what comes of an MX GEMM on each path.
// RUN: mx-opt %s --mx-lower-to-nvvm="format=isa" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=KERNEL90
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a gemm=kernel format=isa" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=KERNEL90
// RUN: not mx-opt %s --mx-lower-to-nvvm="chip=sm_100a gemm=kernel" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=KERNEL100
// RUN: not mx-opt %s --mx-lower-to-nvvm="chip=sm_90a gemm=cublas" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=CUBLAS90
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=CUBLAS100
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_100a gemm=cublas" --dump-pass-pipeline 2>&1 | FileCheck %s --check-prefix=CUBLAS100

// The default on sm_90a is the generated kernel: cuBLASLt is never called;
// the host asks the runtime for the two TMA tensor maps and launches the
// generated kernel.
// KERNEL90-NOT: convert-mx-to-cublas
// KERNEL90: convert-mx-to-gpu{chip=sm_90a}
// KERNEL90-NOT: mxrtScaledMatmul
// KERNEL90: llvm.func @mxrtTensorMap
// KERNEL90-COUNT-2: llvm.call @mxrtTensorMap
// KERNEL90: gpu.launch_func {{.*}} @mx_gemm_mx_exact_256x128x512::@kernel blocks in ({{.*}}) threads in ({{.*}}) : i64 dynamic_shared_memory_size
// KERNEL90: gpu.binary @mx_gemm_mx_exact_256x128x512

// KERNEL100-NOT: convert-mx-to-cublas
// KERNEL100: convert-mx-to-gpu{chip=sm_100a}
// KERNEL100: error: 'mx.scaled_matmul' op has no GPU lowering: no generated GEMM kernel for sm_100a yet (its tcgen05 kernel is not written); cuBLASLt may run it instead (mx-lower-to-nvvm gemm=cublas)

// cuBLASLt has no MX GEMM on sm_90a: rejected when compiling.
// CUBLAS90: convert-mx-to-cublas{chip=sm_90a}
// CUBLAS90-NEXT: convert-mx-to-gpu{chip=sm_90a}
// CUBLAS90: error: 'mx.scaled_matmul' op has no cuBLASLt lowering: cuBLASLt has no MX (VEC32_UE8M0) block-scaled GEMM before SM100, so none on sm_90a; use the generated kernel instead (mx-lower-to-nvvm gemm=kernel)

// On sm_100a (default and explicit) MX goes to cuBLASLt; VEC32_UE8M0 is 1.
// CUBLAS100: convert-mx-to-cublas{chip=sm_100a}
// CUBLAS100-NEXT: convert-mx-to-gpu{chip=sm_100a}
// CUBLAS100: llvm.func @mxrtScaledMatmul
// CUBLAS100: llvm.func @mx_gemm
// CUBLAS100: %[[VEC32:.*]] = llvm.mlir.constant(1 : i32) : i32
// CUBLAS100: llvm.call @mxrtScaledMatmul(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[VEC32]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[VEC32]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})

func.func @mx_gemm(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}
