// The three worked checks of the 128x4 scale layout (docs/numerics.md),
// executed on the CPU.
// RUN: mx-opt %s --mx-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @printMemrefI32(memref<*xi32>) attributes {llvm.emit_c_interface}

func.func @print(%t: tensor<*xi32>) {
  %m = bufferization.to_buffer %t : tensor<*xi32> to memref<*xi32>
  call @printMemrefI32(%m) : (memref<*xi32>) -> ()
  return
}

func.func @main() {
  // (1) scales [4, 2] = a..h (bytes 1..8): offsets 0,1 = a,b; 16,17 = c,d;
  // 32,33 = e,f; 48,49 = g,h; the other bytes of the 512-byte tile are zero.
  // Printed as 32 rows of 16 bytes.
  %small_bytes = arith.constant dense<[[1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi8>
  %small = arith.bitcast %small_bytes : tensor<4x2xi8> to tensor<4x2xf8E8M0FNU>
  %t1 = mx.swizzle %small : tensor<4x2xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  %r1 = tensor.collapse_shape %t1 [[0, 1, 2], [3, 4]] : tensor<1x1x32x4x4xf8E8M0FNU> into tensor<32x16xf8E8M0FNU>
  %i1 = arith.bitcast %r1 : tensor<32x16xf8E8M0FNU> to tensor<32x16xi8>
  %e1 = arith.extui %i1 : tensor<32x16xi8> to tensor<32x16xi32>
  %u1 = tensor.cast %e1 : tensor<32x16xi32> to tensor<*xi32>
  call @print(%u1) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [32, 16]
  // CHECK-NEXT: {{\[\[}}1,   2,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0],
  // CHECK-NEXT: [3,   4,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0],
  // CHECK-NEXT: [5,   6,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0],
  // CHECK-NEXT: [7,   8,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0],
  // CHECK-COUNT-27: [0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0],
  // CHECK-NEXT: [0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0]]

  // (2) [256, 256] MXFP8 data -> scales [256, 8] -> 4 tiles of 512 bytes in
  // the order A (rows 0-127, cols 0-3), B (rows 0-127, cols 4-7), C, D. Row r
  // of the data is scaled by 2^(r/128) and columns 128.. by 4; 1/448 rounds up
  // to 2^-8, so the quadrants A, B, C, D of the scales hold the bytes 119, 121,
  // 120, 122, and each 512-byte run of the swizzled tensor holds one of them
  // (min = max), in that order.
  %x = arith.constant dense<1.0> : tensor<256x256xf32>
  %init = tensor.empty() : tensor<256x256xf32>
  %xs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<256x256xf32>) outs(%init : tensor<256x256xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = linalg.index 0 : index
    %c = linalg.index 1 : index
    %c128 = arith.constant 128 : index
    %two = arith.constant 2.0 : f32
    %four = arith.constant 4.0 : f32
    %one = arith.constant 1.0 : f32
    %lower = arith.cmpi uge, %r, %c128 : index
    %right = arith.cmpi uge, %c, %c128 : index
    %rs = arith.select %lower, %two, %one : f32
    %cs = arith.select %right, %four, %one : f32
    %p = arith.mulf %rs, %cs : f32
    %v = arith.mulf %in, %p : f32
    linalg.yield %v : f32
  } -> tensor<256x256xf32>
  %data, %scales = mx.quantize %xs block [1, 32] : tensor<256x256xf32> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %t2 = mx.swizzle %scales : tensor<256x8xf8E8M0FNU> -> tensor<2x2x32x4x4xf8E8M0FNU>
  %r2 = tensor.collapse_shape %t2 [[0, 1], [2, 3, 4]] : tensor<2x2x32x4x4xf8E8M0FNU> into tensor<4x512xf8E8M0FNU>
  %i2 = arith.bitcast %r2 : tensor<4x512xf8E8M0FNU> to tensor<4x512xi8>
  %e2 = arith.extui %i2 : tensor<4x512xi8> to tensor<4x512xi32>
  %big = arith.constant 1000 : i32
  %zero = arith.constant 0 : i32
  %min0 = tensor.splat %big : tensor<4xi32>
  %max0 = tensor.splat %zero : tensor<4xi32>
  %mins = linalg.reduce { arith.minsi } ins(%e2 : tensor<4x512xi32>) outs(%min0 : tensor<4xi32>) dimensions = [1]
  %maxs = linalg.reduce { arith.maxsi } ins(%e2 : tensor<4x512xi32>) outs(%max0 : tensor<4xi32>) dimensions = [1]
  %minmax = tensor.concat dim(0) %mins, %maxs : (tensor<4xi32>, tensor<4xi32>) -> tensor<8xi32>
  %u2 = tensor.cast %minmax : tensor<8xi32> to tensor<*xi32>
  call @print(%u2) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [8]
  // CHECK-NEXT: [119,  121,  120,  122,  119,  121,  120,  122]

  // (3) M = 500, K = 192, block 32 -> scales [500, 6] -> padded [512, 8] =
  // 4096 bytes, of which the 3000 real scales are non-zero and the 1096
  // padding bytes zero; unswizzle gives the scales back. Printed: [non-zero
  // bytes, swizzled byte sum, unswizzled byte sum].
  %x3 = arith.constant dense<1.5> : tensor<500x192xbf16>
  %d3, %s3 = mx.quantize %x3 block [1, 32] : tensor<500x192xbf16> -> tensor<500x192xf8E4M3FN>, tensor<500x6xf8E8M0FNU>
  %t3 = mx.swizzle %s3 : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
  %r3 = tensor.collapse_shape %t3 [[0, 1, 2, 3, 4]] : tensor<4x2x32x4x4xf8E8M0FNU> into tensor<4096xf8E8M0FNU>
  %i3 = arith.bitcast %r3 : tensor<4096xf8E8M0FNU> to tensor<4096xi8>
  %e3 = arith.extui %i3 : tensor<4096xi8> to tensor<4096xi32>
  %one_i = arith.constant 1 : i32
  %nz_init = tensor.empty() : tensor<4096xi32>
  %nz = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%e3 : tensor<4096xi32>) outs(%nz_init : tensor<4096xi32>) {
  ^bb0(%in: i32, %out: i32):
    %ne = arith.cmpi ne, %in, %zero : i32
    %v = arith.extui %ne : i1 to i32
    linalg.yield %v : i32
  } -> tensor<4096xi32>
  %acc = tensor.splat %zero : tensor<i32>
  %count = linalg.reduce { arith.addi } ins(%nz : tensor<4096xi32>) outs(%acc : tensor<i32>) dimensions = [0]
  %sum = linalg.reduce { arith.addi } ins(%e3 : tensor<4096xi32>) outs(%acc : tensor<i32>) dimensions = [0]
  %u3 = mx.unswizzle %t3 : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
  %ui = arith.bitcast %u3 : tensor<500x6xf8E8M0FNU> to tensor<500x6xi8>
  %ue = arith.extui %ui : tensor<500x6xi8> to tensor<500x6xi32>
  %usum = linalg.reduce { arith.addi } ins(%ue : tensor<500x6xi32>) outs(%acc : tensor<i32>) dimensions = [0, 1]
  %c1 = tensor.expand_shape %count [] output_shape [1] : tensor<i32> into tensor<1xi32>
  %c2 = tensor.expand_shape %sum [] output_shape [1] : tensor<i32> into tensor<1xi32>
  %c3 = tensor.expand_shape %usum [] output_shape [1] : tensor<i32> into tensor<1xi32>
  %stats = tensor.concat dim(0) %c1, %c2, %c3 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %u4 = tensor.cast %stats : tensor<3xi32> to tensor<*xi32>
  call @print(%u4) : (tensor<*xi32>) -> ()
  // 1.5 / 448 rounds up to 2^-8: every scale byte is 119; 3000 * 119 = 357000.
  // CHECK: sizes = [3]
  // CHECK-NEXT: [3000,  357000,  357000]
  return
}
