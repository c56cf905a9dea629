// mx.column_sum executed on the CPU: special values propagate as f32
// addition does (NaN, +Inf with -Inf), a column of -0 sums to -0, and
// bf16 widens exactly.
// RUN: mx-opt %s --mx-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | FileCheck %s

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  // Columns: 1 + 2 + 3 = 6; -0 x 3 = -0; NaN; +Inf + -Inf = NaN; +Inf;
  // 2^-149 x 3 (subnormals); max finite + max finite = +Inf; 0.5 + 0.25.
  %x = arith.constant dense<[
      [1.0, -0.0, 0x7FC00000, 0x7F800000, 0x7F800000, 0x00000001, 0x7F7FFFFF, 0.5],
      [2.0, -0.0, 1.0,        0xFF800000, 1.0,        0x00000001, 0x7F7FFFFF, 0.25],
      [3.0, -0.0, 2.0,        0.0,        -1.0,       0x00000001, 0.0,        0.0]]> : tensor<3x8xf32>
  %s = mx.column_sum %x : tensor<3x8xf32> -> tensor<8xf32>
  %u = tensor.cast %s : tensor<8xf32> to tensor<*xf32>
  %m = bufferization.to_buffer %u : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%m) : (memref<*xf32>) -> ()
  // CHECK: sizes = [8]
  // CHECK-NEXT: [6,  -0,  nan,  {{-?}}nan,  inf,  4.2039e-45,  inf,  0.75]
  %b = arith.constant dense<[[1.5, -2.0], [0.0078125, 4096.0]]> : tensor<2x2xbf16>
  %sb = mx.column_sum %b : tensor<2x2xbf16> -> tensor<2xf32>
  %ub = tensor.cast %sb : tensor<2xf32> to tensor<*xf32>
  %mb = bufferization.to_buffer %ub : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%mb) : (memref<*xf32>) -> ()
  // CHECK: sizes = [2]
  // CHECK-NEXT: [1.50781,  4094]
  return
}
