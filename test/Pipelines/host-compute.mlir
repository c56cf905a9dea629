// Tensor computations left on the host of a GPU program are compile-time
// errors naming the op, not host code over device memory.
// RUN: mx-opt %s --split-input-file --mx-reject-host-compute --verify-diagnostics
// RUN: not mx-opt %s --split-input-file --mx-lower-to-nvvm 2>&1 | FileCheck %s

// CHECK: error: 'linalg.transpose' op would run on the host over device memory
func.func @transpose(%x: tensor<64x32xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  // expected-error @+1 {{'linalg.transpose' op would run on the host over device memory: mx-lower-to-nvvm compiles mx ops into GPU kernels; express this computation with mx ops, or compile the program with mx-lower-to-cpu}}
  %t = linalg.transpose ins(%x : tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  return %t : tensor<32x64xf32>
}

// -----

// CHECK: error: 'arith.addf' op would run on the host over device memory
func.func @elementwise(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'arith.addf' op would run on the host over device memory}}
  %y = arith.addf %x, %x : tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// -----

// CHECK: error: 'tensor.extract' op would run on the host over device memory
func.func @extract(%x: tensor<64x32xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tensor.extract' op would run on the host over device memory}}
  %v = tensor.extract %x[%c0, %c0] : tensor<64x32xf32>
  return %v : f32
}

// -----

// A tensor constant would be host memory that a kernel reads.
// CHECK: error: 'arith.constant' op would run on the host over device memory
func.func @constant() -> tensor<4x2xf8E8M0FNU> {
  // expected-error @+1 {{'arith.constant' op would run on the host over device memory}}
  %s = arith.constant dense<1.0> : tensor<4x2xf8E8M0FNU>
  return %s : tensor<4x2xf8E8M0FNU>
}

// -----

// Views, calls, control flow and kernels are fine.
func.func private @consume(tensor<2x64x32xf32>)

func.func @views(%x: tensor<128x32xf32>, %n: index) {
  %v = tensor.expand_shape %x [[0, 1], [2]] output_shape [2, 64, 32] : tensor<128x32xf32> into tensor<2x64x32xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    func.call @consume(%v) : (tensor<2x64x32xf32>) -> ()
  }
  return
}
