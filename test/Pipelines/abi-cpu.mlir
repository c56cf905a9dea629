// What a CPU-compiled library offers its callers: the public functions'
// signatures in `_mx_signatures` and a C interface `_mlir_ciface_<name>` for
// each public function, in output that translates to LLVM IR. Results are
// fresh heap buffers: a returned argument or constant is cloned (malloc +
// copy), and no clone is left unlowered. abi-nvvm.mlir: the GPU side.
// RUN: mx-opt %s --mx-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: mx-opt %s --mx-lower-to-cpu | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM

// CPU: llvm.mlir.global external constant @_mx_signatures("{\22version\22:1,\22functions\22:[{\22name\22:\22quantize\22,\22args\22:[{\22kind\22:\22tensor\22,\22shape\22:[128,96],\22dtype\22:\22bf16\22}],\22results\22:[{\22kind\22:\22tensor\22,\22shape\22:[128,96],\22dtype\22:\22f8E4M3FN\22},{\22kind\22:\22tensor\22,\22shape\22:[128,3],\22dtype\22:\22f8E8M0FNU\22}]}
// CPU-LABEL: llvm.func @quantize(
// CPU-LABEL: llvm.func @_mlir_ciface_quantize(
// CPU-LABEL: llvm.func @identity(
// CPU: llvm.call @malloc
// CPU-LABEL: llvm.func @_mlir_ciface_identity(
// CPU-LABEL: llvm.func @constant(
// CPU: llvm.call @malloc
// CPU-LABEL: llvm.func @_mlir_ciface_constant(

// LLVM: @_mx_signatures = constant [{{[0-9]+}} x i8] c"{\22version\22:1,\22functions\22:[{\22name\22:\22quantize\22,
// LLVM-SAME: \00"
// LLVM: define void @_mlir_ciface_quantize(ptr
// LLVM: define void @_mlir_ciface_identity(ptr
// LLVM: define void @_mlir_ciface_constant(ptr

func.func @quantize(%x: tensor<128x96xbf16>) -> (tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  return %d, %s : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
}

func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

func.func @constant() -> tensor<4xf32> {
  %c = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  return %c : tensor<4xf32>
}
