// A delayed cast of a product (mx.quantize_delayed, its only use) fused into
// the generated GEMM's epilogue: the kernel rounds the product to its type,
// stores the cast's FP8 codes (pairs into the TMA store's panels, or from
// registers: gemm-output-cast-config.mlir), and each CTA keeps the
// amax of what it stored in its slot of the amax partials (zeroed by the CTA
// at entry, an atomic max a warp and tile); a delayed cast of the partials
// then records their max in the history and writes the scale's inverse.
// Not fused: a product with another use, a transposed cast, an odd number
// of columns, a cast in another block, a GEMM that cuBLASLt runs
// (MXToCublas/gemm-output-cast.mlir).
// The tcgen05 kernel's epilogue does the same (gemm-sm100.mlir).
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu | FileCheck %s

// fprop with a bias into FP8 (Transformer Engine's FP8 output), the history
// updated in place.
// CHECK-LABEL: func.func @fprop_fp8
// CHECK-SAME: %[[SCALES:[^:]*]]: tensor<2xf32>, %[[HIST:[^:]*]]: tensor<16x2xf32> {mx.updated}
// CHECK: %[[CODES:.*]] = gpu.alloc () : memref<256x384xf8E4M3FN>
// CHECK: %[[PARTIALS:.*]] = gpu.alloc () : memref<1x16xf32>
// CHECK: gpu.launch_func @mx_gemm_per_tensor_256x384x512::@kernel blocks in (%c6, %c1, %c1)
// CHECK-SAME: args({{.*}} : !llvm.array<16 x i64>, {{.*}} : !llvm.array<16 x i64>, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr)
// The cast of the partials records into the history's own buffer:
// CHECK: %[[HBUF:.*]] = bufferization.to_buffer %[[HIST]] : tensor<16x2xf32> to memref<16x2xf32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1)
// CHECK-NOT: gpu.launch
// CHECK: %[[Y:[0-9]+]] = bufferization.to_tensor %[[CODES]] restrict
// CHECK: return %[[Y]]
// CHECK: llvm.func @kernel
// CHECK-SAME: epilogue=tma bias=bf16 cast=f8E4M3FN:1 amax_slots=16
// CTA c zeroes partials c (and c + 6, c + 12 where below 16) before the CTAs' barrier:
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: llvm.store %c0_i32, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr
// CHECK: nvvm.barrier0
// The cast's scale, column 1:
// CHECK: %[[SCALE:.*]] = llvm.getelementptr %{{.*}}[1] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK-NEXT: llvm.load %[[SCALE]] {alignment = 4 : i64} : !llvm.ptr -> f32
// Each pair: + bias, rounded to bf16, widened, times the scale, converted,
// its two bytes into the swizzled 128-byte panel row:
// CHECK: arith.addf %{{.*}} : vector<2xf32>
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: %[[WIDE:.*]] = arith.extf %{{.*}} : vector<2xbf16> to vector<2xf32>
// CHECK: arith.mulf %[[WIDE]], %{{.*}} : vector<2xf32>
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK: arith.xori %{{.*}}, %{{.*}} : i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : i16, !llvm.ptr<3>
// Its amax, left out outside the matrix:
// CHECK: arith.bitcast %[[WIDE]] : vector<2xf32> to vector<2xi32>
// CHECK: arith.select %{{.*}}, %{{.*}}, %c0_i32 : i32
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK-COUNT-5: nvvm.shfl.sync  bfly
// CHECK: llvm.atomicrmw umax %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, i32
// CHECK-NOT: nvvm.stmatrix
func.func @fprop_fp8(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %bias: tensor<384xbf16>, %scales: tensor<2xf32>, %history: tensor<16x2xf32> {mx.updated}) -> (tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      bias(%bias : tensor<384xbf16>)
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 1
      : tensor<256x384xbf16>, tensor<2xf32>, tensor<16x2xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
  return %y, %sinv, %h : tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<16x2xf32>
}

// -----

// MX operands, an f32 product into E5M2, a history of the function's own
// (the cast of the partials writes a copy).
// CHECK-LABEL: func.func @mx_fp8
// CHECK: gpu.alloc () : memref<256x384xf8E5M2>
// CHECK: llvm.func @kernel
// CHECK-SAME: cast=f8E5M2:0 amax_slots=16
// CHECK: llvm.atomicrmw umax
func.func @mx_fp8(%a: tensor<256x512xf8E4M3FN>, %as: tensor<256x16xf8E8M0FNU>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<384x16xf8E8M0FNU>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
      : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>, tensor<384x512xf8E4M3FN>, tensor<384x16xf8E8M0FNU> -> tensor<256x384xf32>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x384xf32>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<256x384xf8E5M2>, tensor<1x1xf32>, tensor<4x1xf32>
}

// -----

// The product is also returned: the kernel stores it, the cast reads it.
// CHECK-LABEL: func.func @product_returned
// CHECK: gpu.alloc () : memref<256x384xbf16>
// CHECK: llvm.func @kernel
// CHECK-NOT: cast=
// CHECK-SAME: epilogue=tma
func.func @product_returned(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x384xbf16>, tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x384xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
  return %c, %y, %sinv, %h : tensor<256x384xbf16>, tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
}

// -----

// A transposed cast (a K-outer operand for the next GEMM) is the
// cast+transpose kernel's.
// CHECK-LABEL: func.func @transposed_cast
// CHECK: llvm.func @kernel
// CHECK-NOT: cast=
// CHECK-SAME: epilogue=tma
func.func @transposed_cast(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0 transposed
      : tensor<256x384xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<384x256xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<384x256xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
}

// -----

// An odd number of columns: the codes would not pair up.
// CHECK-LABEL: func.func @odd_columns
// CHECK: llvm.func @kernel
// CHECK-NOT: cast=
// CHECK-SAME: epilogue=registers
func.func @odd_columns(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<9x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>) -> (tensor<256x9xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>) {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [9, 512]
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<9x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x9xbf16>
  %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
      : tensor<256x9xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x9xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
  return %y, %sinv, %h : tensor<256x9xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
}

// -----

// A cast in another block (here a branch of an scf.if) is not fused: the
// fused kernel would run where the cast is, as often as it is.
// CHECK-LABEL: func.func @cast_in_region
// CHECK: gpu.alloc () : memref<256x384xbf16>
// CHECK: scf.if
// CHECK: llvm.func @kernel
// CHECK-NOT: cast=
// CHECK-SAME: epilogue=tma
func.func @cast_in_region(%a: tensor<256x512xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<384x512xf8E4M3FN>, %bs: tensor<1x1xf32>, %scales: tensor<1xf32>, %history: tensor<4x1xf32>, %flag: i1) -> tensor<256x384xf8E4M3FN> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [256, 512] rhs_block [384, 512]
      : tensor<256x512xf8E4M3FN>, tensor<1x1xf32>, tensor<384x512xf8E4M3FN>, tensor<1x1xf32> -> tensor<256x384xbf16>
  %r = scf.if %flag -> tensor<256x384xf8E4M3FN> {
    %y, %sinv, %h = mx.quantize_delayed %c, %scales, %history index 0
        : tensor<256x384xbf16>, tensor<1xf32>, tensor<4x1xf32> -> tensor<256x384xf8E4M3FN>, tensor<1x1xf32>, tensor<4x1xf32>
    scf.yield %y : tensor<256x384xf8E4M3FN>
  } else {
    %z = tensor.empty() : tensor<256x384xf8E4M3FN>
    scf.yield %z : tensor<256x384xf8E4M3FN>
  }
  return %r : tensor<256x384xf8E4M3FN>
}
