// Delayed scaling's cast+transpose with its history argument marked
// `mx.updated`: one kernel records the amax in the caller's history buffer
// (no copy kernel, no history buffer allocated or returned), the signature
// lists the history as updated, and the kernel's partials are freed after it.
// Without the mark, the same program copies the history first (two kernels)
// and returns the copy.
// RUN: mx-opt %s --mx-lower-to-nvvm="chip=sm_90a format=isa" | FileCheck %s

// CHECK: @_mx_signatures("{{.*}}\22name\22:\22in_place\22,{{.*}}\22results\22:[{\22kind\22:\22tensor\22,\22shape\22:[64,128],\22dtype\22:\22f8E4M3FN\22},{\22kind\22:\22tensor\22,\22shape\22:[1,1],\22dtype\22:\22f32\22},{\22kind\22:\22tensor\22,\22shape\22:[128,64],\22dtype\22:\22f8E4M3FN\22}],\22updated\22:[2]},{\22name\22:\22copied\22,{{.*}}\22shape\22:[128,64],\22dtype\22:\22f8E4M3FN\22},{\22kind\22:\22tensor\22,\22shape\22:[16,3],\22dtype\22:\22f32\22}]}]}\00")
// CHECK-LABEL: llvm.func @in_place(
// CHECK-COUNT-1: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mgpuMemFree
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: llvm.func @_mlir_ciface_in_place(
// CHECK-LABEL: llvm.func @copied(
// CHECK-COUNT-2: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK-LABEL: llvm.func @_mlir_ciface_copied(
func.func @in_place(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32> {mx.updated})
    -> (tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<16x3xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1 : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  %yt, %it, %h2 = mx.quantize_delayed %x, %s, %h1 index 1 transposed : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %i, %yt, %h2 : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<16x3xf32>
}

func.func @copied(%x: tensor<64x128xbf16>, %s: tensor<3xf32>, %h: tensor<16x3xf32>)
    -> (tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<16x3xf32>) {
  %y, %i, %h1 = mx.quantize_delayed %x, %s, %h index 1 : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  %yt, %it, %h2 = mx.quantize_delayed %x, %s, %h1 index 1 transposed : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32> -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
  return %y, %i, %yt, %h2 : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<16x3xf32>
}
