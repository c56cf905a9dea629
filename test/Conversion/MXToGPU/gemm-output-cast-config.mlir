// gemm-config=epilogue=registers: the fused cast's codes are stored from
// registers, a pair (2 bytes) a store, each thread keeping the amax of what
// it stored (the default stores them through the TMA panels,
// gemm-output-cast.mlir).
// RUN: mx-opt %s --convert-mx-to-gpu="gemm-config=epilogue=registers" | FileCheck %s

// CHECK-LABEL: func.func @fprop_fp8
// CHECK: gpu.alloc () : memref<256x384xf8E4M3FN>
// CHECK: llvm.func @kernel
// CHECK-SAME: epilogue=registers bias=bf16 cast=f8E4M3FN:1 amax_slots=16
// CHECK: scf.if %{{.*}} -> (i32) {
// CHECK:   arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:   %[[WIDE:.*]] = arith.extf %{{.*}} : vector<2xbf16> to vector<2xf32>
// CHECK:   arith.mulf %[[WIDE]], %{{.*}} : vector<2xf32>
// CHECK:   nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E4M3FN)
// CHECK:   llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : vector<2xi8>, !llvm.ptr<1>
// CHECK:   arith.bitcast %[[WIDE]] : vector<2xf32> to vector<2xi32>
// CHECK:   scf.yield %{{.*}} : i32
// CHECK: } else {
// CHECK:   scf.yield %c0_i32 : i32
// CHECK-COUNT-5: nvvm.shfl.sync  bfly
// CHECK: llvm.atomicrmw umax
// CHECK-NOT: nvvm.cp.async.bulk.tensor.global.shared.cta
func.func @fprop_fp8(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %bias: tensor<384xbf16>, %scales: tensor<2xf32>, %history: tensor<16x2xf32> {mx.updated}) -> (tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      bias(%bias : tensor<384xbf16>)
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 1
      : tensor<256x384xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  return %y, %sinv, %h : tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
}
