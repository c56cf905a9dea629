// A grouped all-gather after the whole GPU pipeline: the call guard opens
// first, both result buffers are allocated (mxrtCollectiveAlloc, the
// runtime's NCCL-registered memory, which fails the call when the memory is
// not there) before mxrtGroupStart, and the group
// holds only the collectives, so that the runtime knows of a failed
// allocation before any collective of the group is called (and then runs
// none of them, MXRuntime.h).
// RUN: mx-opt %s --mx-lower-to-nvvm="format=isa" | FileCheck %s

// CHECK-LABEL: llvm.func @gather(
// CHECK: llvm.call @mxrtCallBegin(
// CHECK: llvm.call @mxrtCheckArgument(
// CHECK: llvm.call @mxrtCheckArgument(
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: llvm.call @mxrtCollectiveAlloc(
// CHECK-NOT: llvm.call @mxrtGroupStart
// CHECK: llvm.call @mxrtCollectiveAlloc(
// CHECK-NOT: llvm.call @mxrtAllGather
// CHECK: llvm.call @mxrtGroupStart()
// CHECK-NOT: llvm.call @mgpu
// CHECK: llvm.call @mxrtAllGather(
// CHECK-NOT: llvm.call @mgpu
// CHECK: llvm.call @mxrtAllGather(
// CHECK-NEXT: llvm.call @mxrtGroupEnd()
// CHECK-NEXT: llvm.call @mxrtCallEnd()
shard.grid @grid(shape = 2)
func.func @gather(%d: tensor<128x512xf8E4M3FN>, %s: tensor<128x16xf8E8M0FNU>) -> (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>) {
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  %h = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<128x16xf8E8M0FNU> -> tensor<256x16xf8E8M0FNU>
  return %g, %h : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
}
