// A gemm-config that cannot be read, or that asks for a kernel the
// generator cannot build, fails the pass with the key, the value or the
// limit and what is expected, on the op where it is the op's.
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=tile=1" 2>&1 | FileCheck %s --check-prefix=KEY
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=waves=two" 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=waves=65536" 2>&1 | FileCheck %s --check-prefix=LARGE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=waves=144115188075855872" 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=waves=1,waves=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3,waves=2" 2>&1 | FileCheck %s --check-prefix=REGISTERS
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=4" 2>&1 | FileCheck %s --check-prefix=CONSUMERS
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=tile_n=100" 2>&1 | FileCheck %s --check-prefix=TILE-N
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=2,waves=1,cluster=2x1" 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=stages=9" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=overlap=2" 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=consumers=3,tile_n=128,overlap=on" 2>&1 | FileCheck %s --check-prefix=OVERLAP-REGISTERS
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=epilogue=tma" --split-input-file 2>&1 | FileCheck %s --check-prefix=EPILOGUE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=products=on" 2>&1 | FileCheck %s --check-prefix=PRODUCTS-RECIPE

// KEY: error: gemm-config has no key 'tile' (expected consumers, waves, tile_n, overlap, products, stages, cluster, epilogue, mx)
// VALUE: error: gemm-config: bad value 'two' for 'waves' (expected a positive integer up to 65535, MxN for cluster, tma or registers for epilogue, staged or fused for mx, on or off for overlap and products)
// LARGE: error: gemm-config: bad value '65536' for 'waves' (expected a positive integer up to 65535,
// HUGE: error: gemm-config: bad value '144115188075855872' for 'waves' (expected a positive integer up to 65535,
// TWICE: error: gemm-config sets 'waves' twice
// REGISTERS: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: a 384x128 tile needs 192 accumulator registers per consumer thread, more than the 128 that 3 consumers leave; use fewer waves or a narrower tile
// CONSUMERS: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: consumers must be 2 or 3
// TILE-N: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: tile_n must be a multiple of 8 up to 256 (wgmma N)
// CLUSTER: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: a 2x1 cluster does not fit 1x1 tiles (expected 1x1, 2x1 with an even number of tile rows or 1x2 with an even number of tile columns; SM90 only)
// STAGES: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: the tile needs {{[0-9]+}} bytes of shared memory per stage and {{[0-9]+}} more; 9 stages do not fit in 232448 (at least 2 must)
// OVERLAP: error: gemm-config: bad value '2' for 'overlap' (expected a positive integer up to 65535, MxN for cluster, tma or registers for epilogue, staged or fused for mx, on or off for overlap and products)
// OVERLAP-REGISTERS: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: a 192x128 tile needs 192 accumulator registers per consumer thread with overlap, more than the 128 that 3 consumers leave; use fewer waves or a narrower tile
// PRODUCTS-RECIPE: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: products=on needs 1x128 scales on both operands (the wgrad form)
// EPILOGUE-COUNT-2: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: the TMA-store epilogue needs a bf16 or f16 output (or a fused cast's FP8 codes) whose rows are multiples of 16 bytes, a tile of whole panels (128 bytes; 64 of codes), an FP8 recipe or staged MX, and no accumulate operand
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=tile_n=128" --split-input-file 2>&1 | FileCheck %s --check-prefix=MX-TILE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=overlap=on" --split-input-file 2>&1 | FileCheck %s --check-prefix=MX-TILE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=mx=both" 2>&1 | FileCheck %s --check-prefix=MX-VALUE
// RUN: not mx-opt %s --convert-mx-to-gpu="gemm-config=mx=staged" --split-input-file 2>&1 | FileCheck %s --check-prefix=MX-FORM
// MX-VALUE: error: gemm-config: bad value 'both' for 'mx' (expected a positive integer up to 65535, MxN for cluster, tma or registers for epilogue, staged or fused for mx, on or off for overlap and products)
// MX-FORM: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: mx=staged|fused chooses how SM90 runs MX operands (E8M0 scales of [1, 32] blocks); this op has none there
// MX-TILE: error: 'mx.scaled_matmul' op has no generated kernel on sm_90a: gemm-config: the MX kernels have a fixed 128x256 tile and one wgmma chain per stage
func.func @per_tensor_f32(%a: tensor<100x256xf8E4M3FN>, %as: tensor<1x1xf32>, %b: tensor<72x256xf8E4M3FN>, %bs: tensor<1x1xf32>) -> tensor<100x72xf32> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [100, 256] rhs_block [72, 256]
    : tensor<100x256xf8E4M3FN>, tensor<1x1xf32>, tensor<72x256xf8E4M3FN>, tensor<1x1xf32> -> tensor<100x72xf32>
  return %c : tensor<100x72xf32>
}

// -----

func.func @mx(%a: tensor<256x512xf8E4M3FN>, %as: tensor<2x4x32x4x4xf8E8M0FNU>, %b: tensor<128x512xf8E4M3FN>, %bs: tensor<1x4x32x4x4xf8E8M0FNU>) -> tensor<256x128xbf16> {
  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [1, 32] rhs_block [1, 32]
    : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>, tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU> -> tensor<256x128xbf16>
  return %c : tensor<256x128xbf16>
}

