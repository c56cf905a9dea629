// mx-guard-device-calls brackets each public function with the runtime's call
// guard: mxrtCallBegin with the function's name, one mxrtCheckArgument per
// memref argument (index, base pointer, 16-byte alignment), mxrtCallEnd before
// every return. Private functions and declarations are left alone; clashing
// symbols are reported before anything changes.
// RUN: mx-opt %s --split-input-file --mx-guard-device-calls --verify-diagnostics | FileCheck %s

// CHECK-DAG: llvm.mlir.global internal constant @__mx_call_name_two_returns("two_returns\00")
// CHECK-DAG: llvm.mlir.global internal constant @__mx_call_name_quantize("quantize\00")
// CHECK-DAG: llvm.func @mxrtCallBegin(!llvm.ptr)
// CHECK-DAG: llvm.func @mxrtCallEnd() -> i32
// CHECK-DAG: llvm.func @mxrtCheckArgument(i32, !llvm.ptr, i64)
// CHECK-LABEL: func.func @quantize(
// CHECK-SAME: %[[X:.*]]: memref<64x64xbf16>, %[[N:.*]]: index, %[[S:.*]]: memref<64x2xf8E8M0FNU>)
// CHECK: %[[NAME:.*]] = llvm.mlir.addressof @__mx_call_name_quantize
// CHECK: llvm.call @mxrtCallBegin(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK: %[[I0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[ALIGN:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK: %[[P0:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: llvm.call @mxrtCheckArgument(%[[I0]], %{{.*}}, %[[ALIGN]]) : (i32, !llvm.ptr, i64) -> ()
// CHECK: %[[I2:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: %[[ALIGN2:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK: memref.extract_aligned_pointer_as_index %[[S]]
// CHECK: llvm.call @mxrtCheckArgument(%[[I2]], %{{.*}}, %[[ALIGN2]])
// CHECK-NOT: mxrtCheckArgument
// CHECK: llvm.call @mxrtCallEnd() : () -> i32
// CHECK-NEXT: return
func.func @quantize(%x: memref<64x64xbf16>, %n: index, %s: memref<64x2xf8E8M0FNU>) -> memref<64x64xbf16> {
  return %x : memref<64x64xbf16>
}

// CHECK-LABEL: func.func @two_returns(
// CHECK: llvm.call @mxrtCallBegin
// CHECK-NEXT: cf.cond_br
// CHECK: llvm.call @mxrtCallEnd() : () -> i32
// CHECK-NEXT: return
// CHECK: llvm.call @mxrtCallEnd() : () -> i32
// CHECK-NEXT: return
func.func @two_returns(%c: i1) -> i32 {
  cf.cond_br %c, ^a, ^b
^a:
  %one = arith.constant 1 : i32
  return %one : i32
^b:
  %two = arith.constant 2 : i32
  return %two : i32
}

// CHECK-LABEL: func.func private @helper(
// CHECK-NOT: mxrtCall
// CHECK: return
func.func private @helper(%x: memref<4xf32>) -> memref<4xf32> {
  return %x : memref<4xf32>
}

// -----

// A module that defines a runtime function with another type.
// expected-error @below {{mx-guard-device-calls: the module defines @mxrtCallEnd as !llvm.func<void ()>, not the runtime's !llvm.func<i32 ()>}}
module {
  llvm.func @mxrtCallEnd()
  func.func @f(%x: memref<4xf32>) {
    return
  }
}

// -----

// expected-error @below {{symbol @__mx_call_name_f is reserved for the name of @f in the runtime's call guard}}
llvm.mlir.global internal constant @__mx_call_name_f("x\00")
func.func @f(%x: memref<4xf32>) {
  return
}
