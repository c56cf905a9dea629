// The buffers that gathers write (mx.collective_buffer, set by
// convert-shard-to-mxrt) come from the runtime's NCCL-registered memory:
// mxrtCollectiveAlloc of their bytes on the call stream (null), the memref's
// descriptor built around the pointer, and their frees mxrtCollectiveFree.
// RUN: mx-opt %s --convert-collective-buffers-to-mxrt --split-input-file -verify-diagnostics | FileCheck %s

// CHECK-DAG: llvm.func @mxrtCollectiveAlloc(i64, !llvm.ptr) -> !llvm.ptr
// CHECK-DAG: llvm.func @mxrtCollectiveFree(!llvm.ptr, !llvm.ptr)
// CHECK-LABEL: func.func @gathered
// CHECK-NEXT: %[[BYTES:.*]] = arith.constant 131072 : i64
// CHECK-NEXT: %[[STREAM:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[PTR:.*]] = llvm.call @mxrtCollectiveAlloc(%[[BYTES]], %[[STREAM]]) : (i64, !llvm.ptr) -> !llvm.ptr
// CHECK: llvm.insertvalue %[[PTR]], %{{.*}}[0]
// CHECK-NEXT: llvm.insertvalue %[[PTR]], %{{.*}}[1]
// CHECK: %[[RECV:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<256x512xf8E4M3FN>
// The buffer an ordinary allocation stays one.
// CHECK: %[[OWN:.*]] = gpu.alloc () : memref<16xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[RECV]]
// CHECK-NOT: gpu.dealloc %[[RECV]]
// CHECK: %[[FREESTREAM:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @mxrtCollectiveFree(%[[PTR]], %[[FREESTREAM]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: gpu.dealloc %[[OWN]]
// CHECK-NEXT: return
func.func @gathered() -> index {
  %recv = gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
  %own = gpu.alloc () : memref<16xf32>
  %p = memref.extract_aligned_pointer_as_index %recv : memref<256x512xf8E4M3FN> -> index
  gpu.dealloc %recv : memref<256x512xf8E4M3FN>
  gpu.dealloc %own : memref<16xf32>
  return %p : index
}

// Packed FP4 is gathered as bytes under a view: the byte buffer is the
// runtime's. A returned buffer has no free here (its caller frees it, which
// the runtime's frees route back to its cache).
// CHECK-LABEL: func.func @packed
// CHECK: arith.constant 2048 : i64
// CHECK: llvm.call @mxrtCollectiveAlloc
// CHECK: %[[BYTES:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<2048xi8>
// CHECK: memref.view %[[BYTES]]
// CHECK-NOT: mxrtCollectiveFree
// CHECK: return
func.func @packed() -> memref<128x32xf4E2M1FN> {
  %bytes = gpu.alloc () {mx.collective_buffer} : memref<2048xi8>
  %c0 = arith.constant 0 : index
  %view = memref.view %bytes[%c0][] : memref<2048xi8> to memref<128x32xf4E2M1FN>
  return %view : memref<128x32xf4E2M1FN>
}

// -----

// What the runtime's allocation cannot take stays an ordinary allocation: a
// dynamic size, an asynchronous allocation. Nothing is declared then.
// CHECK-NOT: llvm.func @mxrtCollectiveAlloc
// CHECK-LABEL: func.func @kept
// CHECK: gpu.alloc (%{{.*}}) {mx.collective_buffer} : memref<?xi8>
// CHECK: gpu.alloc async [%{{.*}}] () {mx.collective_buffer} : memref<64xi8>
// CHECK-NOT: mxrtCollective
func.func @kept(%n: index, %t: !gpu.async.token) -> (memref<?xi8>, memref<64xi8>, !gpu.async.token) {
  %dynamic = gpu.alloc (%n) {mx.collective_buffer} : memref<?xi8>
  %async, %done = gpu.alloc async [%t] () {mx.collective_buffer} : memref<64xi8>
  return %dynamic, %async, %done : memref<?xi8>, memref<64xi8>, !gpu.async.token
}

// -----

// A module whose mxrtCollectiveFree is something else is reported on the
// first marked allocation, and nothing is rewritten or declared.
// CHECK-NOT: mxrtCollectiveAlloc
llvm.func @mxrtCollectiveFree(i64) -> i32

func.func @clash() -> memref<64xi8> {
  // expected-error @below {{'gpu.alloc' op is marked mx.collective_buffer, but the module defines @mxrtCollectiveFree as !llvm.func<i32 (i64)>, not the runtime's !llvm.func<void (ptr, ptr)>}}
  %b = gpu.alloc () {mx.collective_buffer} : memref<64xi8>
  return %b : memref<64xi8>
}
