// MXFP8 quantize + swizzle on the CPU.
//
// x [128, 64] f32 holds x[r, c] = (c - 32) / (r + 1), so each row's two blocks of 32 have a
// different amax, plus an all-zero block (row 0, columns 0..31) and one large value
// (x[1, 40] = 1000). It is quantized to E4M3 with one E8M0 scale per 1x32 block, and the
// [128, 2] scales are swizzled into the 128x4 tile the GEMM reads. Printed:
//   1. the E4M3 bits of rows 0..3 (FP8 cannot be printed directly: bitcast to i8, extend to i32)
//   2. the E8M0 bytes of the scales of rows 0..3 (byte b means 2^(b-127); 0 for the zero block)
//   3. rows 0..3 dequantized back to f32 (mx.dequantize, printMemrefF32)
//   4. the swizzled tile [1, 1, 32, 4, 4] as 32 rows of 16 bytes (row r holds the scales of
//      rows r, r+32, r+64, r+96; columns 2 and 3 of each group of 4 are padding)
//
// Run from the repository root:
//   build/bin/mx-opt examples/mxfp8_quantize.mlir --mx-lower-to-cpu \
//     | /usr/lib/llvm-22/bin/mlir-runner -e main -entry-point-result=void \
//         -shared-libs=/usr/lib/llvm-22/lib/libmlir_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @printMemrefI32(memref<*xi32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

// Prints FP8 bits (E4M3 data or E8M0 scales, already bitcast to i8) as i32.
func.func @print_bytes(%bytes: tensor<4x64xi8>) {
  %wide = arith.extui %bytes : tensor<4x64xi8> to tensor<4x64xi32>
  %u = tensor.cast %wide : tensor<4x64xi32> to tensor<*xi32>
  %m = bufferization.to_buffer %u : tensor<*xi32> to memref<*xi32>
  call @printMemrefI32(%m) : (memref<*xi32>) -> ()
  return
}

func.func @main() -> () {
  // x[r, c] = (c - 32) / (r + 1), then the zero block and the large value.
  %init = tensor.empty() : tensor<128x64xf32>
  %ramp = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<128x64xf32>) {
  ^bb0(%out: f32):
    %r = linalg.index 0 : index
    %c = linalg.index 1 : index
    %ri = arith.index_cast %r : index to i32
    %ci = arith.index_cast %c : index to i32
    %rf = arith.sitofp %ri : i32 to f32
    %cf = arith.sitofp %ci : i32 to f32
    %one = arith.constant 1.0 : f32
    %c32 = arith.constant 32.0 : f32
    %num = arith.subf %cf, %c32 : f32
    %den = arith.addf %rf, %one : f32
    %v = arith.divf %num, %den : f32
    linalg.yield %v : f32
  } -> tensor<128x64xf32>
  %zeros = arith.constant dense<0.0> : tensor<1x32xf32>
  %x0 = tensor.insert_slice %zeros into %ramp[0, 0] [1, 32] [1, 1] : tensor<1x32xf32> into tensor<128x64xf32>
  %big = arith.constant 1000.0 : f32
  %i1 = arith.constant 1 : index
  %i40 = arith.constant 40 : index
  %x = tensor.insert %big into %x0[%i1, %i40] : tensor<128x64xf32>

  %data, %scales = mx.quantize %x block [1, 32]
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %tiles = mx.swizzle %scales : tensor<128x2xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>

  // 1. E4M3 bits of rows 0..3.
  %d4 = tensor.extract_slice %data[0, 0] [4, 64] [1, 1] : tensor<128x64xf8E4M3FN> to tensor<4x64xf8E4M3FN>
  %db = arith.bitcast %d4 : tensor<4x64xf8E4M3FN> to tensor<4x64xi8>
  call @print_bytes(%db) : (tensor<4x64xi8>) -> ()

  // 2. E8M0 scale bytes of rows 0..3.
  %s4 = tensor.extract_slice %scales[0, 0] [4, 2] [1, 1] : tensor<128x2xf8E8M0FNU> to tensor<4x2xf8E8M0FNU>
  %sb = arith.bitcast %s4 : tensor<4x2xf8E8M0FNU> to tensor<4x2xi8>
  %sw = arith.extui %sb : tensor<4x2xi8> to tensor<4x2xi32>
  %su = tensor.cast %sw : tensor<4x2xi32> to tensor<*xi32>
  %sm = bufferization.to_buffer %su : tensor<*xi32> to memref<*xi32>
  call @printMemrefI32(%sm) : (memref<*xi32>) -> ()

  // 3. Rows 0..3 dequantized: float(data) * scale.
  %back = mx.dequantize %d4, %s4 block [1, 32]
      : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x64xf32>
  %bu = tensor.cast %back : tensor<4x64xf32> to tensor<*xf32>
  %bm = bufferization.to_buffer %bu : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%bm) : (memref<*xf32>) -> ()

  // 4. The swizzled tile, 32 rows of 16 bytes.
  %t2 = tensor.collapse_shape %tiles [[0, 1, 2], [3, 4]]
      : tensor<1x1x32x4x4xf8E8M0FNU> into tensor<32x16xf8E8M0FNU>
  %tb = arith.bitcast %t2 : tensor<32x16xf8E8M0FNU> to tensor<32x16xi8>
  %tw = arith.extui %tb : tensor<32x16xi8> to tensor<32x16xi32>
  %tu = tensor.cast %tw : tensor<32x16xi32> to tensor<*xi32>
  %tm = bufferization.to_buffer %tu : tensor<*xi32> to memref<*xi32>
  call @printMemrefI32(%tm) : (memref<*xi32>) -> ()
  return
}
