// The pipelined gathers of mx-pipeline-gathers on the GPU: a chain of
// mx.gather_chunk becomes one buffer, allocated before the first chunk's
// group, and an mxrtAllGatherPlaced per chunk (bytes of the chunk, of a
// device's part, of the chunk's offset in it); chunks next to each other are
// one NCCL group; the join is mxrtCollectivesJoin, after which the buffer is
// the gathered value. Whole rows of a tensor are a view of its buffer's bytes.
// RUN: mx-opt %s --convert-shard-to-mxrt --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[C0:.*]]: tensor<32x64xf8E4M3FN>, %[[C1:.*]]: tensor<32x64xf8E4M3FN>, %[[S0:.*]]: tensor<32x2xf8E8M0FNU>)
// CHECK-NEXT: %[[D:.*]] = gpu.alloc () {mx.collective_buffer} : memref<128x64xf8E4M3FN>
// CHECK-NEXT: %[[S:.*]] = gpu.alloc () {mx.collective_buffer} : memref<128x2xf8E8M0FNU>
// CHECK-NEXT: llvm.call @mxrtGroupStart()
// CHECK: bufferization.to_buffer %[[C0]]
// CHECK-DAG: %[[CHUNK:.*]] = arith.constant 2048 : i64
// CHECK-DAG: %[[PART:.*]] = arith.constant 4096 : i64
// CHECK-DAG: %[[AT0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK: llvm.call @mxrtAllGatherPlaced(%{{.*}}, %{{.*}}, %[[CHUNK]], %[[PART]], %[[AT0]], %[[TWO]], %{{.*}})
// CHECK: bufferization.to_buffer %[[S0]]
// CHECK-DAG: %[[SCHUNK:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[SPART:.*]] = arith.constant 128 : i64
// CHECK: llvm.call @mxrtAllGatherPlaced(%{{.*}}, %{{.*}}, %[[SCHUNK]], %[[SPART]],
// CHECK-NEXT: llvm.call @mxrtGroupEnd()
// CHECK-NEXT: arith.constant 1
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: bufferization.to_buffer %[[C1]]
// CHECK: arith.constant 2048 : i64
// CHECK-NEXT: arith.constant 4096 : i64
// CHECK-NEXT: %[[AT1:.*]] = arith.constant 2048 : i64
// CHECK: llvm.call @mxrtAllGatherPlaced(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[AT1]],
// CHECK-NOT: llvm.call @mxrtGroupEnd
// CHECK: llvm.call @mxrtCollectivesJoin(%{{.*}}) : (!llvm.ptr) -> i32
// CHECK-NEXT: %[[GD:.*]] = bufferization.to_tensor %[[D]] restrict writable
// CHECK-NEXT: %[[GS:.*]] = bufferization.to_tensor %[[S]] restrict writable
// CHECK-NEXT: return %[[GD]], %[[GS]]
func.func @chain(%c0: tensor<32x64xf8E4M3FN>, %c1: tensor<32x64xf8E4M3FN>, %s0: tensor<32x2xf8E8M0FNU>) -> (tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>) {
  %e = tensor.empty() : tensor<128x64xf8E4M3FN>
  %es = tensor.empty() : tensor<128x2xf8E8M0FNU>
  %g0 = mx.gather_chunk %c0 into %e at row 0 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %s = mx.gather_chunk %s0 into %es at row 0 of 2 devices : tensor<32x2xf8E8M0FNU> into tensor<128x2xf8E8M0FNU>
  %one = arith.constant 1 : index
  %g1 = mx.gather_chunk %c1 into %g0 at row 32 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %j:2 = mx.gather_join %g1, %s : tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  return %j#0, %j#1 : tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
}

// -----

// Packed FP4: bytes are half the elements.
// CHECK-LABEL: func.func @fp4
// CHECK: gpu.alloc () {mx.collective_buffer} : memref<8192xi8>
// CHECK-DAG: %[[CHUNK:.*]] = arith.constant 2048 : i64
// CHECK-DAG: %[[PART:.*]] = arith.constant 4096 : i64
// CHECK-DAG: %[[AT:.*]] = arith.constant 2048 : i64
// CHECK: llvm.call @mxrtAllGatherPlaced(%{{.*}}, %{{.*}}, %[[CHUNK]], %[[PART]], %[[AT]],
func.func @fp4(%c: tensor<64x64xf4E2M1FN>) -> tensor<256x64xf4E2M1FN> {
  %e = tensor.empty() : tensor<256x64xf4E2M1FN>
  %g = mx.gather_chunk %c into %e at row 64 of 2 devices : tensor<64x64xf4E2M1FN> into tensor<256x64xf4E2M1FN>
  %j = mx.gather_join %g : tensor<256x64xf4E2M1FN>
  return %j : tensor<256x64xf4E2M1FN>
}

// -----

// Rows [32, 64) of a [128, 64] bf16 tensor: its buffer's address + 4096
// bytes, as an identity-layout [32, 64] buffer.
// CHECK-LABEL: func.func @rows
// CHECK: %[[B:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<128x64xbf16> to memref<128x64xbf16>
// CHECK: %[[SHIFT:.*]] = llvm.mlir.constant(4096 : i64) : i64
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[FIRST:.*]] = llvm.getelementptr %{{.*}}[%[[SHIFT]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: llvm.insertvalue %[[FIRST]], %{{.*}}[0]
// CHECK: llvm.insertvalue %[[FIRST]], %{{.*}}[1]
// CHECK: %[[VIEW:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<32x64xbf16>
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[VIEW]] restrict : memref<32x64xbf16>
// CHECK: return %[[T]]
// A slice that is not whole rows stays.
// CHECK-LABEL: func.func @columns
// CHECK: tensor.extract_slice
func.func @rows(%x: tensor<128x64xbf16>) -> tensor<32x64xbf16> {
  %s = tensor.extract_slice %x[32, 0] [32, 64] [1, 1] : tensor<128x64xbf16> to tensor<32x64xbf16>
  return %s : tensor<32x64xbf16>
}
func.func @columns(%x: tensor<128x64xbf16>) -> tensor<128x32xbf16> {
  %s = tensor.extract_slice %x[0, 32] [128, 32] [1, 1] : tensor<128x64xbf16> to tensor<128x32xbf16>
  return %s : tensor<128x32xbf16>
}
