// RUN: mx-opt %s --mx-readonly-arguments | FileCheck %s
// RUN: mx-opt %s --mx-lower-to-cpu | FileCheck %s --check-prefix=CPU

// Public tensor arguments become read-only; scalars, private functions and
// declarations are left alone.
// CHECK-LABEL: func.func @double
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {bufferization.writable = false}, %{{.*}}: index)
// The in-place update of %x gets a fresh buffer (a malloc) in the CPU pipeline.
// CPU-LABEL: llvm.func @double
// CPU: llvm.call @malloc
func.func @double(%x: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// CHECK: func.func private @external(tensor<4xf32>)
func.func private @external(tensor<4xf32>)

// An argument that the source marks mx.updated stays writable: the function
// updates it in place, and its result is dropped (mx-drop-in-place-results):
// one result left, %x's copy.
// CHECK-LABEL: func.func @update
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {bufferization.writable = true, mx.updated}, %{{.*}}: tensor<4xf32> {bufferization.writable = false}, %{{.*}}: f32)
// CPU-LABEL: llvm.func @update
// CPU-SAME: -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> attributes
func.func @update(%h: tensor<4xf32> {mx.updated}, %x: tensor<4xf32>, %v: f32) -> (tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %y = tensor.insert %v into %h[%c0] : tensor<4xf32>
  %z = tensor.insert %v into %x[%c0] : tensor<4xf32>
  return %y, %z : tensor<4xf32>, tensor<4xf32>
}
