// FP8 blockwise matmul on the CPU (the DeepSeek-V3 recipe).
//
// A [4, 256] is quantized to E4M3 with one f32 scale per 1x128 block (scales [4, 2]), B [16, 256]
// with one f32 scale per 128x128 block (scales [1, 2]: N = 16 is one partial block). Then
// C = deq(A) . deq(B)^T [4, 16] comes from mx.scaled_matmul. Printed:
//   1. C from the FP8 operands
//   2. the plain f32 product A . B^T of the unquantized inputs
//   3. the largest |C - A . B^T| relative to the largest |A . B^T| (the FP8 error: 4e-3 here)
//
// Run from the repository root:
//   build/bin/mx-opt examples/blockwise_matmul.mlir --mx-lower-to-cpu \
//     | /usr/lib/llvm-22/bin/mlir-runner -e main -entry-point-result=void \
//         -shared-libs=/usr/lib/llvm-22/lib/libmlir_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so

#id = affine_map<(d0, d1) -> (d0, d1)>
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @print(%t: tensor<*xf32>) {
  %m = bufferization.to_buffer %t : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%m) : (memref<*xf32>) -> ()
  return
}

func.func @main() -> () {
  // A = rows 0..3 and B = rows 4..19 of t[i, j] = (((37 i + 11 j) mod 101) - 50) / 13: values of
  // both signs that FP8 cannot hold exactly.
  %e = tensor.empty() : tensor<20x256xf32>
  %t = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<20x256xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %ji = arith.index_cast %j : index to i32
    %c37 = arith.constant 37 : i32
    %c101 = arith.constant 101 : i32
    %c11 = arith.constant 11 : i32
    %c50 = arith.constant 50 : i32
    %p = arith.muli %ii, %c37 : i32
    %q = arith.muli %ji, %c11 : i32
    %s = arith.addi %p, %q : i32
    %m = arith.remsi %s, %c101 : i32
    %v = arith.subi %m, %c50 : i32
    %f = arith.sitofp %v : i32 to f32
    %c13 = arith.constant 13.0 : f32
    %r = arith.divf %f, %c13 : f32
    linalg.yield %r : f32
  } -> tensor<20x256xf32>
  %a = tensor.extract_slice %t[0, 0] [4, 256] [1, 1] : tensor<20x256xf32> to tensor<4x256xf32>
  %b = tensor.extract_slice %t[4, 0] [16, 256] [1, 1] : tensor<20x256xf32> to tensor<16x256xf32>

  %aq, %as = mx.quantize %a block [1, 128]
      : tensor<4x256xf32> -> tensor<4x256xf8E4M3FN>, tensor<4x2xf32>
  %bq, %bs = mx.quantize %b block [128, 128]
      : tensor<16x256xf32> -> tensor<16x256xf8E4M3FN>, tensor<1x2xf32>
  %c = mx.scaled_matmul %aq, %as, %bq, %bs lhs_block [1, 128] rhs_block [128, 128]
      : tensor<4x256xf8E4M3FN>, tensor<4x2xf32>, tensor<16x256xf8E4M3FN>, tensor<1x2xf32>
      -> tensor<4x16xf32>

  // The f32 product of the inputs, C_ref[m, n] = sum_k A[m, k] B[n, k].
  %zero = arith.constant 0.0 : f32
  %ec = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%ec : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ref = linalg.generic {indexing_maps = [#mk, #nk, #mn],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x256xf32>, tensor<16x256xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>

  // max |C - C_ref| / max |C_ref|.
  %s0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %maxes:2 = linalg.generic {indexing_maps = [#id, #id, affine_map<(d0, d1) -> ()>,
                                              affine_map<(d0, d1) -> ()>],
                             iterator_types = ["reduction", "reduction"]}
      ins(%c, %ref : tensor<4x16xf32>, tensor<4x16xf32>) outs(%init, %init : tensor<f32>, tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %err: f32, %mag: f32):
    %d = arith.subf %x, %y : f32
    %ad2 = math.absf %d : f32
    %ay = math.absf %y : f32
    %e2 = arith.maximumf %err, %ad2 : f32
    %m2 = arith.maximumf %mag, %ay : f32
    linalg.yield %e2, %m2 : f32, f32
  } -> (tensor<f32>, tensor<f32>)
  %errv = tensor.extract %maxes#0[] : tensor<f32>
  %magv = tensor.extract %maxes#1[] : tensor<f32>
  %rel = arith.divf %errv, %magv : f32
  %r1 = tensor.from_elements %rel : tensor<1xf32>

  // Printed last: @print's argument counts as written (bufferization.to_buffer), and the
  // bufferization cannot copy an unranked tensor to keep it readable after the call.
  %cu = tensor.cast %c : tensor<4x16xf32> to tensor<*xf32>
  call @print(%cu) : (tensor<*xf32>) -> ()
  %ru = tensor.cast %ref : tensor<4x16xf32> to tensor<*xf32>
  call @print(%ru) : (tensor<*xf32>) -> ()
  %r1u = tensor.cast %r1 : tensor<1xf32> to tensor<*xf32>
  call @print(%r1u) : (tensor<*xf32>) -> ()
  return
}
