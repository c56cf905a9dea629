// The epilogue operands of mx.scaled_matmul in the generated kernels: the
// kernel takes the bias and the accumulated output as two more pointers and
// adds them in f32 before the rounding (an accumulated output is stored from
// registers; a bias alone also goes through the TMA-store epilogue); gemm=auto takes the generated kernel
// where cuBLASLt (which takes no epilogue operand) would run the recipe.
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu | FileCheck %s
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu="gemm=auto" | FileCheck %s --check-prefix=AUTO
// RUN: mx-opt %s --split-input-file --convert-mx-to-cublas="gemm=cublas" -verify-diagnostics

// CHECK-LABEL: func.func @bias_and_accumulate
// CHECK: gpu.launch_func @{{.*}}::@kernel {{.*}} args(%{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr)
// CHECK: llvm.func @kernel
// CHECK-SAME: epilogue=registers bias=bf16 accumulate
// D's pairs are loaded ahead of the stores, 16 at a time, outside the
// bounds checks (an element outside the matrix reads D[0]):
// CHECK: %[[D:.*]] = llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// CHECK-COUNT-15: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// CHECK-NOT: llvm.store
// CHECK: scf.if
// CHECK:   %[[BIAS:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xbf16>
// CHECK:   %[[B32:.*]] = arith.extf %[[BIAS]] : vector<2xbf16> to vector<2xf32>
// CHECK:   %[[SUM:.*]] = arith.addf %{{.*}}, %[[B32]] : vector<2xf32>
// CHECK:   %[[ALL:.*]] = arith.addf %[[SUM]], %[[D]] : vector<2xf32>
// CHECK:   llvm.store %[[ALL]], %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT: nvvm.cp.async.bulk.tensor.global.shared.cta
// AUTO-LABEL: func.func @bias_and_accumulate
// AUTO: mx.gemm_lowering = "kernel: faster on sm_90a
func.func @bias_and_accumulate(%a: tensor<128x256xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<256x256xf8E4M3FN>, %bs: tensor<1x1xf32>, %bias: tensor<256xbf16>, %d: tensor<128x256xf32>) -> tensor<128x256xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: the cuBLASLt lowering takes no bias or accumulate operand; the generated kernel runs it (mx-lower-to-nvvm gemm=kernel or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [128, 256] rhs_block [256, 256]
      bias(%bias : tensor<256xbf16>) accumulate(%d : tensor<128x256xf32>)
      : tensor<128x256xf8E4M3FN>, tensor<1x1xf32>, tensor<256x256xf8E4M3FN>, tensor<1x1xf32> -> tensor<128x256xf32>
  return %c : tensor<128x256xf32>
}

// -----

// The weight gradient into an f32 main gradient ([1, 128] x [1, 128]: its
// scale products from a tf32 wgmma).
// CHECK-LABEL: func.func @wgrad_main_grad
// CHECK: mx.gemm_plan = "recipe=blockwise{{.*}} products=tf32 {{.*}} epilogue=registers accumulate
// AUTO-LABEL: func.func @wgrad_main_grad
// AUTO: mx.gemm_lowering = "kernel: faster on sm_90a
func.func @wgrad_main_grad(%dy: tensor<256x512xf8E4M3FN>, %dys: tensor<256x4xf32>, %x: tensor<128x512xf8E4M3FN>, %xs: tensor<128x4xf32>, %main: tensor<256x128xf32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: the cuBLASLt lowering takes no bias or accumulate operand; the generated kernel runs it (mx-lower-to-nvvm gemm=kernel or gemm=auto)}}
  %c = mx.scaled_matmul %dy, %dys, %x, %xs lhs_block [1, 128] rhs_block [1, 128]
      accumulate(%main : tensor<256x128xf32>)
      : tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<128x512xf8E4M3FN>, tensor<128x4xf32> -> tensor<256x128xf32>
  return %c : tensor<256x128xf32>
}

// -----

// fprop with a bias and a bf16 output: the TMA-store epilogue adds the bias
// of each column pair (columns past N read bias[0], which TMA clips) before
// the rounding and the stmatrix.
// CHECK-LABEL: func.func @fprop_bias
// CHECK: llvm.func @kernel
// CHECK-SAME: epilogue=tma bias=bf16
// CHECK: %[[INSIDE:.*]] = arith.cmpi ult, %[[C:.*]], %c200_i32 : i32
// CHECK-NEXT: %[[COL:.*]] = arith.select %[[INSIDE]], %[[C]], %c0_i32 : i32
// CHECK-NEXT: %[[BASE:.*]] = llvm.addrspacecast
// CHECK-NEXT: %[[PTR:.*]] = llvm.getelementptr %[[BASE]][%[[COL]]] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: %[[BIAS:.*]] = llvm.load %[[PTR]] {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xbf16>
// CHECK: %[[B32:.*]] = arith.extf %[[BIAS]] : vector<2xbf16> to vector<2xf32>
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %[[B32]] : vector<2xf32>
// CHECK: arith.truncf %[[SUM]] : vector<2xf32> to vector<2xbf16>
// CHECK: nvvm.stmatrix
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
// AUTO-LABEL: func.func @fprop_bias
// AUTO: mx.gemm_lowering = "kernel: faster on sm_90a
func.func @fprop_bias(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<200x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %bias: tensor<200xbf16>) -> tensor<256x200xbf16> {
  // expected-error @+1 {{'mx.scaled_matmul' op has no cuBLASLt lowering: the cuBLASLt lowering takes no bias or accumulate operand; the generated kernel runs it (mx-lower-to-nvvm gemm=kernel or gemm=auto)}}
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [200, 512]
      bias(%bias : tensor<200xbf16>)
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<200x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x200xbf16>
  return %c : tensor<256x200xbf16>
}
