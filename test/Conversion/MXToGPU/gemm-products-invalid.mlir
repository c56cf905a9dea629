// The wgrad form's scale products (a tf32 wgmma) need a third accumulator
// fragment, which only 128x128 tiles of two consumers hold, and they replace
// the FMUL that overlap=on promotes with: a gemm-config that asks for them
// where they cannot be fails with the reason. A tile chosen without asking
// for them falls back to the FMUL form (gemm-column-scales.mlir).
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3,products=on" 2>&1 | FileCheck %s --check-prefix=REGISTERS
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=products=on,overlap=on" 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=products=maybe" 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3" | FileCheck %s --check-prefix=FALLBACK

// REGISTERS: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: a 192x128 tile needs 192 accumulator registers per consumer thread with scale products, more than the 128 that 3 consumers leave; use fewer waves or a narrower tile, or products=off
// OVERLAP: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: overlap=on promotes with an FMUL per element; it takes products=off
// VALUE: error: gemm-config: bad value 'maybe' for 'products' (expected a positive integer, MxN for cluster, tma or registers for epilogue, staged or fused for mx, on or off for overlap and products)
// FALLBACK: mx.gemm_plan = "recipe=blockwise chip=sm_90a mnk=256x256x384 tile=192x128x128
// FALLBACK-NOT: products=tf32
// FALLBACK-SAME: scales=rows,rows
func.func @wgrad(%a: tensor<256x384xf8E4M3FN>, %as: tensor<256x3xf32>, %b: tensor<256x384xf8E4M3FN>, %bs: tensor<256x3xf32>) -> tensor<256x256xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 128] rhs_block [1, 128]
    : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32> -> tensor<256x256xbf16>
  return %c : tensor<256x256xbf16>
}
