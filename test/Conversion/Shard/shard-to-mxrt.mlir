// The collectives of a partitioned GPU program become NCCL calls of the mx
// runtime on device buffers; a max reduces order keys of the floats.
// RUN: mx-opt %s --convert-shard-to-mxrt --split-input-file | FileCheck %s

// CHECK-NOT: shard.grid
shard.grid @grid(shape = 2)
shard.grid @one(shape = 1)

// The compact formats cross the wire as bytes: FP8 data, packed FP4 (a byte
// buffer viewed as the FP4 result); the two independent gathers are one NCCL
// group, their result buffers allocated before it starts (a failed
// allocation is then seen by the call guard before the group opens; nothing
// but the calls lies inside it). What a gather writes is marked for the
// runtime's memory registered with NCCL (mx.collective_buffer).
// CHECK-LABEL: func.func @gather
// CHECK-NEXT: %[[RECV:.*]] = gpu.alloc () {mx.collective_buffer} : memref<256x512xf8E4M3FN>
// CHECK-NEXT: %[[PACKED:.*]] = gpu.alloc () {mx.collective_buffer} : memref<2048xi8>
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: %[[VIEW:.*]] = memref.view %[[PACKED]][%{{.*}}][] : memref<2048xi8> to memref<128x32xf4E2M1FN>
// CHECK-NEXT: llvm.call @mxrtGroupStart() : () -> i32
// CHECK-NOT: gpu.alloc
// CHECK: %[[SEND:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<128x512xf8E4M3FN>
// CHECK: %[[BYTES:.*]] = arith.constant 65536 : i64
// CHECK: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @mxrtAllGather(%{{.*}}, %{{.*}}, %[[BYTES]], %[[TWO]], %[[NULL]])
// CHECK: bufferization.to_tensor %[[RECV]] restrict writable
// CHECK-NOT: gpu.alloc
// CHECK: memref.extract_aligned_pointer_as_index %[[VIEW]]
// CHECK: %[[HALF:.*]] = arith.constant 1024 : i64
// CHECK: llvm.call @mxrtAllGather(%{{.*}}, %{{.*}}, %[[HALF]],
// CHECK-NOT: gpu.alloc
// CHECK: llvm.call @mxrtGroupEnd() : () -> i32
// CHECK-NEXT: return
func.func @gather(%d: tensor<128x512xf8E4M3FN>, %q: tensor<64x32xf4E2M1FN>) -> (tensor<256x512xf8E4M3FN>, tensor<128x32xf4E2M1FN>) {
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  %h = shard.all_gather %q on @grid grid_axes = [0] gather_axis = 0 : tensor<64x32xf4E2M1FN> -> tensor<128x32xf4E2M1FN>
  return %g, %h : tensor<256x512xf8E4M3FN>, tensor<128x32xf4E2M1FN>
}

// A sum of f32 reduced and scattered (16384 elements a device, F32 = 4,
// SUM = 0), then rounded to bf16 by a kernel.
// CHECK-LABEL: func.func @sum
// CHECK-NOT: mxrtGroup
// CHECK-DAG: %[[COUNT:.*]] = arith.constant 16384 : i64
// CHECK-DAG: %[[F32:.*]] = arith.constant 4 : i32
// CHECK-DAG: %[[SUM:.*]] = arith.constant 0 : i32
// CHECK: llvm.call @mxrtReduceScatter(%{{.*}}, %{{.*}}, %[[COUNT]], %[[F32]], %[[SUM]], %{{.*}}, %{{.*}})
// CHECK: gpu.launch
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @sum(%p: tensor<256x128xf32>) -> tensor<128x128xbf16> {
  %s = shard.reduce_scatter %p on @grid grid_axes = [0] scatter_axis = 0 : tensor<256x128xf32> -> tensor<128x128xf32>
  %t = arith.truncf %s : tensor<128x128xf32> to tensor<128x128xbf16>
  return %t : tensor<128x128xbf16>
}

// Independent collectives that are one call each form a group: the sum
// (2048 f32) moves up next to the first gather, past the max, which has
// kernels around its call and stays out, as does the gather of a gathered
// value (which needs the group's result). The first gather's result, which
// only the second reads, is its slot of the second's (in place;
// shard-to-mxrt-in-place.mlir).
// CHECK-LABEL: func.func @group
// CHECK: gpu.alloc () {mx.collective_buffer} : memref<512x512xf8E4M3FN>
// CHECK: builtin.unrealized_conversion_cast %{{.*}} to memref<256x512xf8E4M3FN>
// CHECK-NEXT: gpu.alloc () : memref<2048xf32>
// CHECK-NEXT: llvm.call @mxrtGroupStart()
// CHECK-NOT: gpu.alloc
// CHECK-NOT: gpu.launch
// CHECK: llvm.call @mxrtAllGather(
// CHECK-NOT: gpu.launch
// CHECK: arith.constant 2048 : i64
// CHECK-NOT: gpu.launch
// CHECK: llvm.call @mxrtAllReduce(
// CHECK-NEXT: bufferization.to_tensor
// CHECK-NEXT: llvm.call @mxrtGroupEnd()
// CHECK: gpu.launch
// CHECK: llvm.call @mxrtAllReduce(
// CHECK: gpu.launch
// CHECK-NOT: mxrtGroup
// CHECK: llvm.call @mxrtAllGather(
// CHECK-NOT: mxrtGroup
// CHECK: return
func.func @group(%d: tensor<128x512xf8E4M3FN>, %a: tensor<f32>, %p: tensor<2048xf32>) -> (tensor<512x512xf8E4M3FN>, tensor<f32>, tensor<2048xf32>) {
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  %m = shard.all_reduce %a on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  %s = shard.all_reduce %p on @grid grid_axes = [0] : tensor<2048xf32> -> tensor<2048xf32>
  %gg = shard.all_gather %g on @grid grid_axes = [0] gather_axis = 0 : tensor<256x512xf8E4M3FN> -> tensor<512x512xf8E4M3FN>
  return %gg, %m, %s : tensor<512x512xf8E4M3FN>, tensor<f32>, tensor<2048xf32>
}

// A max: keys of the input (NaN all ones), a U32 (7) max (1) in place, the
// floats back (the NaN key as 0x7FC00000).
// CHECK-LABEL: func.func @max
// CHECK: %[[KEYS:.*]] = gpu.alloc () : memref<1xi32>
// CHECK: gpu.launch
// CHECK: arith.cmpf uno
// CHECK: memref.store %{{.*}}, %[[KEYS]]
// CHECK-DAG: %[[U32:.*]] = arith.constant 7 : i32
// CHECK-DAG: %[[MAX:.*]] = arith.constant 1 : i32
// CHECK: llvm.call @mxrtAllReduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[U32]], %[[MAX]],
// CHECK: gpu.launch
// CHECK: memref.load %[[KEYS]]
// CHECK: arith.constant 2143289344 : i32
// CHECK: gpu.dealloc %[[KEYS]]
// A max reduce-scatter of bf16 keys into a buffer of its own.
// CHECK: %[[IN:.*]] = gpu.alloc () : memref<512xi32>
// CHECK: %[[OUT:.*]] = gpu.alloc () : memref<256xi32>
// CHECK: llvm.call @mxrtReduceScatter(
// CHECK: memref.load %[[OUT]]
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: gpu.dealloc %[[IN]]
// CHECK: gpu.dealloc %[[OUT]]
// A group of one device is local.
// CHECK: return %{{.*}}, %{{.*}}, %arg0
func.func @max(%a: tensor<f32>, %b: tensor<64x8xbf16>) -> (tensor<f32>, tensor<32x8xbf16>, tensor<f32>) {
  %m = shard.all_reduce %a on @grid grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  %n = shard.reduce_scatter %b on @grid grid_axes = [0] reduction = max scatter_axis = 0 : tensor<64x8xbf16> -> tensor<32x8xbf16>
  %l = shard.all_reduce %a on @one grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
  return %m, %n, %l : tensor<f32>, tensor<32x8xbf16>, tensor<f32>
}
