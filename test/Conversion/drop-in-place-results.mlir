// RUN: mx-opt %s --mx-drop-in-place-results --split-input-file | FileCheck %s

// A result that is an `mx.updated` argument's buffer is dropped. A result that
// is another argument, and one of a buffer of its own, stay.
// CHECK-LABEL: func.func @record
// CHECK-SAME: (%{{.*}}: memref<4x2xf32> {mx.updated}, %[[X:.*]]: memref<4xf32>, %{{.*}}: f32) -> (memref<4xf32>, memref<4xf32>)
// CHECK: return %[[X]], %{{.*}} : memref<4xf32>, memref<4xf32>
func.func @record(%h: memref<4x2xf32> {mx.updated}, %x: memref<4xf32>, %v: f32)
    -> (memref<4x2xf32>, memref<4xf32>, memref<4xf32>) {
  %c0 = arith.constant 0 : index
  memref.store %v, %h[%c0, %c0] : memref<4x2xf32>
  %fresh = memref.alloc() : memref<4xf32>
  return %h, %x, %fresh : memref<4x2xf32>, memref<4xf32>, memref<4xf32>
}

// -----

// An `mx.updated` argument whose new value bufferization put in a buffer of
// its own (a copy) loses the mark and the result stays; private functions are
// left alone.
// CHECK-LABEL: func.func @copied
// CHECK-SAME: (%{{.*}}: memref<4xf32>) -> memref<4xf32>
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%{{.*}}: memref<4xf32> {mx.updated}) -> memref<4xf32>
func.func @copied(%h: memref<4xf32> {mx.updated}) -> memref<4xf32> {
  %copy = memref.alloc() : memref<4xf32>
  memref.copy %h, %copy : memref<4xf32> to memref<4xf32>
  return %copy : memref<4xf32>
}
func.func private @helper(%h: memref<4xf32> {mx.updated}) -> memref<4xf32> {
  return %h : memref<4xf32>
}

// -----

// Returns that give different arguments for a result keep it.
// CHECK-LABEL: func.func @branches
// CHECK-SAME: (%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: i1) -> memref<4xf32>
func.func @branches(%a: memref<4xf32> {mx.updated}, %b: memref<4xf32> {mx.updated}, %c: i1) -> memref<4xf32> {
  cf.cond_br %c, ^left, ^right
^left:
  return %a : memref<4xf32>
^right:
  return %b : memref<4xf32>
}
