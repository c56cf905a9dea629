// One linear-layer training step in MXFP8 on the CPU, as Transformer Engine does it.
//
// X [32, 64] (tokens x in_features), W [32, 64] (out_features x in_features) and the output
// gradient dY [32, 32] are each quantized twice, rowwise (1x32 blocks along the row) and
// columnwise (32x1 blocks down the column); X and W to E4M3, dY to E5M2. The three GEMMs read
// those quantizations as they are, no FP8 data transposed: a columnwise operand is "k_outer"
// (its contraction dimension K is the first one, blocks [32, 1]).
//   fprop  Y  [32, 32] = X . W^T      X rowwise,  W rowwise
//   dgrad  dX [32, 64] = dY . W       dY rowwise, W columnwise (k_outer)
//   wgrad  dW [32, 64] = dY^T . X     dY columnwise (k_outer), X columnwise (k_outer)
// Printed: the top-left 2x8 corner of Y, dX and dW, then each product's largest error relative
// to the same product of the unquantized f32 tensors: [fprop, dgrad, wgrad] (1e-2 for fprop;
// 3e-2 to 5e-2 for the two that read E5M2, which has one mantissa bit fewer than E4M3).
//
// Run from the repository root:
//   build/bin/mx-opt examples/linear_step.mlir --mx-lower-to-cpu \
//     | /usr/lib/llvm-22/bin/mlir-runner -e main -entry-point-result=void \
//         -shared-libs=/usr/lib/llvm-22/lib/libmlir_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so

#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @print_corner(%t: tensor<?x?xf32>) {
  %c = tensor.extract_slice %t[0, 0] [2, 8] [1, 1] : tensor<?x?xf32> to tensor<2x8xf32>
  %u = tensor.cast %c : tensor<2x8xf32> to tensor<*xf32>
  %m = bufferization.to_buffer %u : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%m) : (memref<*xf32>) -> ()
  return
}

// max |got - want| / max |want|
func.func @relative_error(%got: tensor<?x?xf32>, %want: tensor<?x?xf32>) -> f32 {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r:2 = linalg.generic {indexing_maps = [#id, #id, #scalar, #scalar],
                         iterator_types = ["reduction", "reduction"]}
      ins(%got, %want : tensor<?x?xf32>, tensor<?x?xf32>) outs(%init, %init : tensor<f32>, tensor<f32>) {
  ^bb0(%g: f32, %w: f32, %err: f32, %mag: f32):
    %d = arith.subf %g, %w : f32
    %ad = math.absf %d : f32
    %aw = math.absf %w : f32
    %err2 = arith.maximumf %err, %ad : f32
    %mag2 = arith.maximumf %mag, %aw : f32
    linalg.yield %err2, %mag2 : f32, f32
  } -> (tensor<f32>, tensor<f32>)
  %err = tensor.extract %r#0[] : tensor<f32>
  %mag = tensor.extract %r#1[] : tensor<f32>
  %rel = arith.divf %err, %mag : f32
  return %rel : f32
}

func.func @main() -> () {
  // X, W and dY are slices of t[i, j] = (((37 i + 11 j) mod 101) - 50) / 13.
  %e = tensor.empty() : tensor<96x64xf32>
  %t = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<96x64xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %ji = arith.index_cast %j : index to i32
    %c37 = arith.constant 37 : i32
    %c11 = arith.constant 11 : i32
    %c101 = arith.constant 101 : i32
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
  } -> tensor<96x64xf32>
  %x = tensor.extract_slice %t[0, 0] [32, 64] [1, 1] : tensor<96x64xf32> to tensor<32x64xf32>
  %w = tensor.extract_slice %t[32, 0] [32, 64] [1, 1] : tensor<96x64xf32> to tensor<32x64xf32>
  %dy = tensor.extract_slice %t[64, 0] [32, 32] [1, 1] : tensor<96x64xf32> to tensor<32x32xf32>

  // Rowwise and columnwise quantizations.
  %xr, %xrs = mx.quantize %x block [1, 32]
      : tensor<32x64xf32> -> tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>
  %xc, %xcs = mx.quantize %x block [32, 1]
      : tensor<32x64xf32> -> tensor<32x64xf8E4M3FN>, tensor<1x64xf8E8M0FNU>
  %wr, %wrs = mx.quantize %w block [1, 32]
      : tensor<32x64xf32> -> tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>
  %wc, %wcs = mx.quantize %w block [32, 1]
      : tensor<32x64xf32> -> tensor<32x64xf8E4M3FN>, tensor<1x64xf8E8M0FNU>
  %gr, %grs = mx.quantize %dy block [1, 32]
      : tensor<32x32xf32> -> tensor<32x32xf8E5M2>, tensor<32x1xf8E8M0FNU>
  %gc, %gcs = mx.quantize %dy block [32, 1]
      : tensor<32x32xf32> -> tensor<32x32xf8E5M2>, tensor<1x32xf8E8M0FNU>

  // fprop, dgrad, wgrad.
  %y = mx.scaled_matmul %xr, %xrs, %wr, %wrs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>
      -> tensor<32x32xf32>
  %dx = mx.scaled_matmul %gr, %grs, %wc, %wcs lhs_block [1, 32] rhs_block [32, 1] rhs_layout k_outer
      : tensor<32x32xf8E5M2>, tensor<32x1xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<1x64xf8E8M0FNU>
      -> tensor<32x64xf32>
  %dw = mx.scaled_matmul %gc, %gcs, %xc, %xcs lhs_block [32, 1] lhs_layout k_outer
      rhs_block [32, 1] rhs_layout k_outer
      : tensor<32x32xf8E5M2>, tensor<1x32xf8E8M0FNU>, tensor<32x64xf8E4M3FN>, tensor<1x64xf8E8M0FNU>
      -> tensor<32x64xf32>

  // The same products in f32.
  %zero = arith.constant 0.0 : f32
  %e32 = tensor.empty() : tensor<32x32xf32>
  %e64 = tensor.empty() : tensor<32x64xf32>
  %z32 = linalg.fill ins(%zero : f32) outs(%e32 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %z64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<32x64xf32>) -> tensor<32x64xf32>
  %y_ref = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                          affine_map<(m, n, k) -> (n, k)>,
                                          affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<32x64xf32>, tensor<32x64xf32>) outs(%z32 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %dx_ref = linalg.matmul ins(%dy, %w : tensor<32x32xf32>, tensor<32x64xf32>)
      outs(%z64 : tensor<32x64xf32>) -> tensor<32x64xf32>
  %dw_ref = linalg.matmul indexing_maps = [affine_map<(n, k, m) -> (m, n)>,
                                           affine_map<(n, k, m) -> (m, k)>,
                                           affine_map<(n, k, m) -> (n, k)>]
      ins(%dy, %x : tensor<32x32xf32>, tensor<32x64xf32>) outs(%z64 : tensor<32x64xf32>) -> tensor<32x64xf32>

  %yd = tensor.cast %y : tensor<32x32xf32> to tensor<?x?xf32>
  %dxd = tensor.cast %dx : tensor<32x64xf32> to tensor<?x?xf32>
  %dwd = tensor.cast %dw : tensor<32x64xf32> to tensor<?x?xf32>
  %yrd = tensor.cast %y_ref : tensor<32x32xf32> to tensor<?x?xf32>
  %dxrd = tensor.cast %dx_ref : tensor<32x64xf32> to tensor<?x?xf32>
  %dwrd = tensor.cast %dw_ref : tensor<32x64xf32> to tensor<?x?xf32>
  %e0 = call @relative_error(%yd, %yrd) : (tensor<?x?xf32>, tensor<?x?xf32>) -> f32
  %e1 = call @relative_error(%dxd, %dxrd) : (tensor<?x?xf32>, tensor<?x?xf32>) -> f32
  %e2 = call @relative_error(%dwd, %dwrd) : (tensor<?x?xf32>, tensor<?x?xf32>) -> f32
  %errors = tensor.from_elements %e0, %e1, %e2 : tensor<3xf32>

  call @print_corner(%yd) : (tensor<?x?xf32>) -> ()
  call @print_corner(%dxd) : (tensor<?x?xf32>) -> ()
  call @print_corner(%dwd) : (tensor<?x?xf32>) -> ()
  %eu = tensor.cast %errors : tensor<3xf32> to tensor<*xf32>
  %em = bufferization.to_buffer %eu : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%em) : (memref<*xf32>) -> ()
  return
}
