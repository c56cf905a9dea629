// The wgrad form's scale products (a tf32 wgmma) need a third accumulator
// fragment, which only 128x128 tiles of two consumers hold, and they replace
// the FMUL that overlap=on promotes with: a gemm-config that asks for them
// where they cannot be fails with the reason. A tile chosen without asking
// for them falls back to the FMUL form (gemm-column-scales.mlir).
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3,products=on" 2>&1 | FileCheck %s --check-prefix=REGISTERS
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=products=on,overlap=on" 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=products=maybe" 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3" | FileCheck %s --check-prefix=FALLBACK
// RUN: mx-opt %s --split-input-file --convert-mx-to-gpu | FileCheck %s --check-prefix=LARGE
// RUN: not mx-opt %s --split-input-file --convert-mx-to-gpu="gemm-config=products=on" 2>&1 | FileCheck %s --check-prefix=LARGE-ON

// REGISTERS: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: a 192x128 tile needs 192 accumulator registers per consumer thread with scale products, more than the 128 that 3 consumers leave; use fewer waves or a narrower tile, or products=off
// OVERLAP: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: overlap=on promotes with an FMUL per element; it takes products=off
// VALUE: error: gemm-config: bad value 'maybe' for 'products' (expected a positive integer up to 65535, MxN for cluster, tma or registers for epilogue, staged or fused for mx, on or off for overlap and products)
// FALLBACK: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=256x256x384 tile=192x128x128
// FALLBACK-NOT: products=tf32
// FALLBACK-SAME: scales=rows,rows
// The product rows are indexed in i32: 2^31 f32 values or more of them (128
// K-blocks x 2^22 rows x 4 for A here) keep the FMUL form, one row tile
// fewer takes the products.
// LARGE: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=256x256x384 {{.*}} products=tf32
// LARGE: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=4194304x256x16384 tile=192x128x128
// LARGE-NOT: products=tf32
// LARGE-SAME: scales=rows,rows
// LARGE: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=4194176x256x16384 tile=128x128x128 {{.*}} products=tf32
// LARGE-ON: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: products=on needs fewer than 2^31 values of scale product rows (K-blocks x rows x 4 per operand); use products=off
func.func @wgrad(%a: tensor<256x384xf8E4M3FN>, %as: tensor<256x3xf32>, %b: tensor<256x384xf8E4M3FN>, %bs: tensor<256x3xf32>) -> tensor<256x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32> -> tensor<256x256xbf16>
  return %c : tensor<256x256xbf16>
}

// -----

func.func @wgrad_large(%a: tensor<4194304x16384xf8E4M3FN>, %as: tensor<4194304x128xf32>, %b: tensor<256x16384xf8E4M3FN>, %bs: tensor<256x128xf32>) -> tensor<4194304x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<4194304x16384xf8E4M3FN>, tensor<4194304x128xf32>, tensor<256x16384xf8E4M3FN>, tensor<256x128xf32> -> tensor<4194304x256xbf16>
  return %c : tensor<4194304x256xbf16>
}

// -----

func.func @wgrad_largest_with_products(%a: tensor<4194176x16384xf8E4M3FN>, %as: tensor<4194176x128xf32>, %b: tensor<256x16384xf8E4M3FN>, %bs: tensor<256x128xf32>) -> tensor<4194176x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<4194176x16384xf8E4M3FN>, tensor<4194176x128xf32>, tensor<256x16384xf8E4M3FN>, tensor<256x128xf32> -> tensor<4194176x256xbf16>
  return %c : tensor<4194176x256xbf16>
}
