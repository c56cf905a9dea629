// What a GPU-compiled library offers its callers: the public functions'
// signatures in `_mx_signatures`, recorded before the types become device
// buffers, a C interface `_mlir_ciface_<name>` for each public function, and
// guarded calls: the arguments are checked before the call's stream exists,
// and the guard ends after the call's last synchronization.
// abi-cpu.mlir: the CPU side.
// RUN: mx-opt %s --mx-lower-to-nvvm="format=isa" | FileCheck %s

// CHECK: llvm.mlir.global external constant @_mx_signatures("{\22version\22:1,\22functions\22:[{\22name\22:\22quantize\22,\22args\22:[{\22kind\22:\22tensor\22,\22shape\22:[256,512],\22dtype\22:\22bf16\22}],\22results\22:[{\22kind\22:\22tensor\22,\22shape\22:[256,512],\22dtype\22:\22f8E4M3FN\22},{\22kind\22:\22tensor\22,\22shape\22:[256,16],\22dtype\22:\22f8E8M0FNU\22}]}]}\00")
// CHECK-LABEL: llvm.func @quantize(
// CHECK: llvm.call @mxrtCallBegin(
// CHECK-NOT: llvm.call @mgpu
// CHECK: llvm.call @mxrtCheckArgument(
// CHECK: llvm.call @mgpuStreamCreate()
// CHECK: gpu.launch_func
// CHECK: llvm.call @mgpuStreamDestroy(
// CHECK-NEXT: llvm.call @mxrtCallEnd()
// CHECK-LABEL: llvm.func @_mlir_ciface_quantize(
func.func @quantize(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  return %d, %s : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
}
