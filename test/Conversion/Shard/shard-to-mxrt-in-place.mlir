// A gathered chunk whose producer allocated it (a quantize's result buffer,
// read by nothing after the gather) is produced in its own slot of the
// gathered buffer instead: its allocation becomes the bytes at
// rank x (chunk bytes) [+ the chunk's row offset] of the result, so NCCL
// gathers in place and copies no local chunk. The rank is read once per
// function (mxrtCommRank) and is 0 where the communicator's size is not the
// grid's, so that the producer still writes inside the buffer and the
// collective fails with its own message.
// RUN: mx-opt %s --convert-shard-to-mxrt --split-input-file | FileCheck %s

shard.grid @grid(shape = 2)

// CHECK-LABEL: func.func @fp8
// CHECK: %[[SIZEP:.*]] = llvm.alloca
// CHECK: %[[RANKP:.*]] = llvm.alloca
// CHECK: llvm.call @mxrtCommRank(%[[SIZEP]], %[[RANKP]])
// CHECK: %[[SIZE:.*]] = llvm.load %[[SIZEP]] : !llvm.ptr -> i32
// CHECK: %[[R:.*]] = llvm.load %[[RANKP]] : !llvm.ptr -> i32
// CHECK: %[[BELOW:.*]] = arith.cmpi ult, %[[R]], %[[TWO:.*]] : i32
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[SIZE]], %{{.*}} : i32
// CHECK: %[[FITS:.*]] = arith.andi %[[SAME]], %[[BELOW]] : i1
// CHECK: %[[SEL:.*]] = arith.select %[[FITS]], %[[R]], %{{.*}} : i32
// CHECK: %[[RANK:.*]] = arith.extui %[[SEL]] : i32 to i64
// CHECK-NOT: gpu.alloc () : memref<128x512xf8E4M3FN>
// CHECK: %[[RECV:.*]] = gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK: %[[STRIDE:.*]] = arith.constant 65536 : i64
// CHECK: %[[MUL:.*]] = llvm.mul %[[RANK]], %[[STRIDE]] : i64
// CHECK: %[[OFF:.*]] = llvm.add %[[MUL]], %{{.*}} : i64
// CHECK: memref.extract_aligned_pointer_as_index %[[RECV]]
// CHECK: llvm.getelementptr %{{.*}}[%[[OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: %[[SLOT:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<128x512xf8E4M3FN>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[SLOT]]
// CHECK: bufferization.to_tensor %[[SLOT]]
// CHECK: llvm.call @mxrtAllGather(
// CHECK: bufferization.to_tensor %[[RECV]]
// CHECK-NOT: gpu.alloc
func.func @fp8(%v: f8E4M3FN) -> tensor<256x512xf8E4M3FN> {
  %c1 = arith.constant 1 : index
  %buf = gpu.alloc () : memref<128x512xf8E4M3FN>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %buf[%tx, %ty] : memref<128x512xf8E4M3FN>
    gpu.terminator
  }
  %d = bufferization.to_tensor %buf restrict writable : memref<128x512xf8E4M3FN> to tensor<128x512xf8E4M3FN>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  return %g : tensor<256x512xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)

// Packed FP4 (a byte buffer viewed as FP4) and a per-tensor shard (a flat
// buffer reshaped): the byte and flat allocations become the slots, and
// their views and reshapes stay. One rank read serves both.
// CHECK-LABEL: func.func @packed_and_reshaped
// CHECK-COUNT-1: llvm.call @mxrtCommRank(
// CHECK-NOT: llvm.call @mxrtCommRank(
// CHECK-NOT: gpu.alloc () : memref<1024xi8>
// CHECK: %[[BYTES:.*]] = gpu.alloc () {mx.collective_buffer} : memref<2048xi8>
// CHECK: %[[RECV:.*]] = memref.view %[[BYTES]]
// CHECK: arith.constant 1024 : i64
// CHECK: %[[SLOT:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<1024xi8>
// CHECK-NOT: gpu.alloc () : memref<4096xf8E4M3FN>
// CHECK: gpu.alloc () {mx.collective_buffer} : memref<128x64xf8E4M3FN>
// CHECK: arith.constant 4096 : i64
// CHECK: %[[FLAT:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<4096xf8E4M3FN>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[SLOT]]
// CHECK: memref.store %{{.*}}, %[[FLAT]]
// CHECK: memref.view %[[SLOT]][%{{.*}}][] : memref<1024xi8> to memref<64x32xf4E2M1FN>
// CHECK: bufferization.to_tensor %[[FLAT]]
// CHECK: tensor.expand_shape
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtAllGather(
func.func @packed_and_reshaped(%v: i8, %w: f8E4M3FN) -> (tensor<128x32xf4E2M1FN>, tensor<128x64xf8E4M3FN>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = gpu.alloc () : memref<1024xi8>
  %flat = gpu.alloc () : memref<4096xf8E4M3FN>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %bytes[%tx] : memref<1024xi8>
    memref.store %w, %flat[%tx] : memref<4096xf8E4M3FN>
    gpu.terminator
  }
  %view = memref.view %bytes[%c0][] : memref<1024xi8> to memref<64x32xf4E2M1FN>
  %q = bufferization.to_tensor %view restrict writable : memref<64x32xf4E2M1FN> to tensor<64x32xf4E2M1FN>
  %f = bufferization.to_tensor %flat restrict writable : memref<4096xf8E4M3FN> to tensor<4096xf8E4M3FN>
  %d = tensor.expand_shape %f [[0, 1]] output_shape [64, 64] : tensor<4096xf8E4M3FN> into tensor<64x64xf8E4M3FN>
  %h = shard.all_gather %q on @grid grid_axes = [0] gather_axis = 0 : tensor<64x32xf4E2M1FN> -> tensor<128x32xf4E2M1FN>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<64x64xf8E4M3FN> -> tensor<128x64xf8E4M3FN>
  return %h, %g : tensor<128x32xf4E2M1FN>, tensor<128x64xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)

// A chunk that is also read after its gather, or returned, keeps its own
// buffer (the gather copies it); so do a function argument and a buffer
// that a view of it is written through after the gather.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: mxrtCommRank
// CHECK: gpu.alloc () : memref<128x512xf8E4M3FN>
// CHECK: gpu.alloc () : memref<128x512xf8E4M3FN>
// CHECK: gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK-NEXT: gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK-NEXT: gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtAllGather(
// CHECK: llvm.call @mxrtAllGather(
func.func @kept(%v: f8E4M3FN, %arg: tensor<128x512xf8E4M3FN>) -> (tensor<256x512xf8E4M3FN>, tensor<128x512xf8E4M3FN>, tensor<256x512xf8E4M3FN>, tensor<256x512xf8E4M3FN>) {
  %c1 = arith.constant 1 : index
  %buf = gpu.alloc () : memref<128x512xf8E4M3FN>
  %late = gpu.alloc () : memref<128x512xf8E4M3FN>
  %half = memref.subview %late[0, 0] [64, 512] [1, 1] : memref<128x512xf8E4M3FN> to memref<64x512xf8E4M3FN, strided<[512, 1]>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %buf[%tx, %ty] : memref<128x512xf8E4M3FN>
    memref.store %v, %late[%tx, %ty] : memref<128x512xf8E4M3FN>
    gpu.terminator
  }
  %d = bufferization.to_tensor %buf restrict writable : memref<128x512xf8E4M3FN> to tensor<128x512xf8E4M3FN>
  %e = bufferization.to_tensor %late restrict writable : memref<128x512xf8E4M3FN> to tensor<128x512xf8E4M3FN>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  %h = shard.all_gather %arg on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  %k = shard.all_gather %e on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %half[%tx, %ty] : memref<64x512xf8E4M3FN, strided<[512, 1]>>
    gpu.terminator
  }
  return %g, %d, %h, %k : tensor<256x512xf8E4M3FN>, tensor<128x512xf8E4M3FN>, tensor<256x512xf8E4M3FN>, tensor<256x512xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)

// The chunks of a pipelined gather: chunk c of 32 rows lands at
// rank x 65536 + c x 16384 bytes (a device's part is 128 rows of 512).
// CHECK-LABEL: func.func @chunks
// CHECK: %[[RANK:.*]] = arith.extui
// CHECK: %[[RECV:.*]] = gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK: %[[M0:.*]] = llvm.mul %[[RANK]], %[[S0:.*]] : i64
// CHECK: llvm.add %[[M0]], %[[Z:.*]] : i64
// CHECK: %[[C0:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<32x512xf8E4M3FN>
// CHECK: memref.store %{{.*}}, %[[C0]]
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK-NOT: gpu.alloc
// CHECK: %[[ROW:.*]] = arith.constant 16384 : i64
// CHECK: %[[M1:.*]] = llvm.mul %[[RANK]], %{{.*}} : i64
// CHECK: llvm.add %[[M1]], %[[ROW]] : i64
// CHECK: %[[C1:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<32x512xf8E4M3FN>
// CHECK: memref.store %{{.*}}, %[[C1]]
// CHECK: llvm.call @mxrtAllGatherPlaced(
// CHECK: llvm.call @mxrtCollectivesJoin(
// CHECK-NOT: gpu.alloc
func.func @chunks(%v: f8E4M3FN) -> tensor<256x512xf8E4M3FN> {
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<256x512xf8E4M3FN>
  %b0 = gpu.alloc () : memref<32x512xf8E4M3FN>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %b0[%tx, %ty] : memref<32x512xf8E4M3FN>
    gpu.terminator
  }
  %t0 = bufferization.to_tensor %b0 restrict writable : memref<32x512xf8E4M3FN> to tensor<32x512xf8E4M3FN>
  %g0 = mx.gather_chunk %t0 into %e at row 0 of 2 devices : tensor<32x512xf8E4M3FN> into tensor<256x512xf8E4M3FN>
  %b1 = gpu.alloc () : memref<32x512xf8E4M3FN>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %b1[%tx, %ty] : memref<32x512xf8E4M3FN>
    gpu.terminator
  }
  %t1 = bufferization.to_tensor %b1 restrict writable : memref<32x512xf8E4M3FN> to tensor<32x512xf8E4M3FN>
  %g1 = mx.gather_chunk %t1 into %g0 at row 32 of 2 devices : tensor<32x512xf8E4M3FN> into tensor<256x512xf8E4M3FN>
  %g = mx.gather_join %g1 : tensor<256x512xf8E4M3FN>
  return %g : tensor<256x512xf8E4M3FN>
}

// -----

shard.grid @grid(shape = 2)

// A module whose mxrtCommRank is some other function cannot read the rank:
// the gather runs out of place, and nothing is reported.
// CHECK-LABEL: func.func @rank_taken
// CHECK-NOT: llvm.call @mxrtCommRank
// CHECK: gpu.alloc () : memref<128x512xf8E4M3FN>
// CHECK: gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK: llvm.call @mxrtAllGather(
func.func private @mxrtCommRank(i32) -> i32
func.func @rank_taken(%v: f8E4M3FN) -> tensor<256x512xf8E4M3FN> {
  %c1 = arith.constant 1 : index
  %buf = gpu.alloc () : memref<128x512xf8E4M3FN>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %buf[%tx, %ty] : memref<128x512xf8E4M3FN>
    gpu.terminator
  }
  %d = bufferization.to_tensor %buf restrict writable : memref<128x512xf8E4M3FN> to tensor<128x512xf8E4M3FN>
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  return %g : tensor<256x512xf8E4M3FN>
}
