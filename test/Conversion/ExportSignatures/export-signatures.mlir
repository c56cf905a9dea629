// mx-export-signatures: one JSON global describing the public, defined
// functions, in module order; private functions and declarations are left
// out; no global without a public function; an existing `_mx_signatures`
// is an error.
// RUN: mx-opt %s --split-input-file --mx-export-signatures --verify-diagnostics | FileCheck %s

// CHECK-LABEL: module
// CHECK-NEXT: llvm.mlir.global external constant @_mx_signatures("{\22version\22:1,\22functions\22:[{\22name\22:\22scale\22,\22args\22:[{\22kind\22:\22tensor\22,\22shape\22:[-1,64],\22dtype\22:\22bf16\22},{\22kind\22:\22scalar\22,\22shape\22:[],\22dtype\22:\22f32\22}],\22results\22:[{\22kind\22:\22tensor\22,\22shape\22:[-1,64],\22dtype\22:\22f8E4M3FN\22}]},{\22name\22:\22amax\22,\22args\22:[{\22kind\22:\22tensor\22,\22shape\22:[4,32],\22dtype\22:\22f8E8M0FNU\22},{\22kind\22:\22tensor\22,\22shape\22:[8],\22dtype\22:\22f4E2M1FN\22},{\22kind\22:\22scalar\22,\22shape\22:[],\22dtype\22:\22index\22},{\22kind\22:\22other\22,\22shape\22:[],\22dtype\22:\22tensor<*xf32>\22},{\22kind\22:\22tensor\22,\22shape\22:[2,-1],\22dtype\22:\22i8\22}],\22results\22:[{\22kind\22:\22tensor\22,\22shape\22:[],\22dtype\22:\22f32\22},{\22kind\22:\22scalar\22,\22shape\22:[],\22dtype\22:\22i64\22}]}]}\00") {addr_space = 0 : i32}
// CHECK-NOT: _mx_signatures
func.func @scale(%x: tensor<?x64xbf16>, %s: f32) -> tensor<?x64xf8E4M3FN> {
  %y = call @helper(%x, %s) : (tensor<?x64xbf16>, f32) -> tensor<?x64xf8E4M3FN>
  return %y : tensor<?x64xf8E4M3FN>
}

func.func private @helper(%x: tensor<?x64xbf16>, %s: f32) -> tensor<?x64xf8E4M3FN> {
  %y = call @external(%x) : (tensor<?x64xbf16>) -> tensor<?x64xf8E4M3FN>
  return %y : tensor<?x64xf8E4M3FN>
}

func.func private @external(tensor<?x64xbf16>) -> tensor<?x64xf8E4M3FN>

func.func @amax(%a: tensor<4x32xf8E8M0FNU>, %b: tensor<8xf4E2M1FN>, %i: index,
                %u: tensor<*xf32>, %m: memref<2x?xi8>) -> (tensor<f32>, i64) {
  %c = arith.constant dense<0.0> : tensor<f32>
  %n = arith.constant 0 : i64
  return %c, %n : tensor<f32>, i64
}

// -----

// Nothing public: no global.
// CHECK: // -----
// CHECK-NOT: _mx_signatures
// CHECK: func.func private @only_private
func.func private @only_private() {
  return
}

// -----

// expected-error @+1 {{symbol '_mx_signatures' is reserved for the function signatures that mx-export-signatures records; rename it}}
llvm.mlir.global external constant @_mx_signatures("mine\00")

func.func @f() {
  return
}

// -----

// The arguments that a function updates in place (mx.updated, after
// mx-drop-in-place-results) are listed after its results, and lose the mark,
// which the LLVM functions that follow could not carry.
// CHECK: @_mx_signatures("{\22version\22:1,\22functions\22:[{\22name\22:\22record\22,\22args\22:[{\22kind\22:\22tensor\22,\22shape\22:[64],\22dtype\22:\22bf16\22},{\22kind\22:\22tensor\22,\22shape\22:[16,3],\22dtype\22:\22f32\22}],\22results\22:[{\22kind\22:\22tensor\22,\22shape\22:[64],\22dtype\22:\22f8E4M3FN\22}],\22updated\22:[1]}]}\00")
// CHECK: func.func @record(%{{.*}}: memref<64xbf16>, %{{.*}}: memref<16x3xf32>) -> memref<64xf8E4M3FN>
func.func @record(%x: memref<64xbf16>, %h: memref<16x3xf32> {mx.updated}) -> memref<64xf8E4M3FN> {
  %y = memref.alloc() : memref<64xf8E4M3FN>
  return %y : memref<64xf8E4M3FN>
}
