"""GPU kernels of `mx-lower-to-nvvm` against mx.reference, bit for bit, on a real GPU.

Skipped without a GPU. The programs below are compiled ahead of time (mx-opt -> mlir-translate -> llc ->
shared library linked with libmx_runtime): on a machine with both MLIR and a GPU the fixture compiles
them, and on a GPU machine without MLIR it loads them from $MX_GPU_ARTIFACTS, built elsewhere with
`python python/tests/test_gpu_kernels.py DIR`. Outputs land in memory that was filled with 0xA5 just
before the call (the allocator hands the same blocks back), so an element a kernel forgets to write
shows up as a mismatch rather than as a lucky zero.
"""

import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import (assert_bits_equal, build_gpu_programs, ceil_boundary_input, exact_matmul, load_gpu_programs,
                      matmul_operands, random_input, run_gpu_program)

from mx import reference, runtime, tools

ROW, COL, ROW128, TILE128 = (1, 32), (32, 1), (1, 128), (128, 128)
TRANSPOSED, COL_T, COL128_T = "transposed", "columns transposed", "128 columns transposed"
WRITTEN_TRANSPOSED = (TRANSPOSED, COL_T, COL128_T)
BF16, F16, F32 = ml_dtypes.bfloat16, np.float16, np.float32
# Quantize programs: input shape and dtype, element type, scale type, rounding, and the outputs as
# (block, swizzled) pairs; a block of None is one block per matrix (per-tensor scaling). Blocks name the
# last two dimensions; leading (batch) dimensions get 1. Two outputs on one input are computed by one
# fused kernel.
QUANTIZE = {
    "rowwise_swizzled_bf16": ((256, 512), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, True)]),
    "rowwise_swizzled_odd": ((200, 272), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, True)]),
    "rowwise_f32_e5m2_floor": ((130, 96), F32, "f8E5M2", "f32", "floor", [(ROW, False)]),
    "rowwise_f16": ((64, 144), F16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, False)]),
    "rowwise_exact": ((70, 208), BF16, "f8E4M3FN", "f32", "exact", [(ROW, False)]),
    "rowwise_batched_swizzled": ((2, 3, 70, 96), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, True)]),
    "columnwise_odd": ((70, 100), F32, "f8E4M3FN", "f8E8M0FNU", "ceil", [(COL, False)]),
    "columnwise_swizzled": ((96, 200), BF16, "f8E5M2", "f8E8M0FNU", "floor", [(COL, True)]),
    "columnwise_exact": ((70, 100), F16, "f8E4M3FN", "f32", "exact", [(COL, False)]),
    "columnwise_batched": ((3, 70, 100), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(COL, False)]),
    "columnwise_batched_swizzled": ((2, 40, 200), F32, "f8E5M2", "f8E8M0FNU", "floor", [(COL, True)]),
    "fused_swizzled": ((256, 512), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, True), (COL, True)]),
    "fused_odd_linear": ((100, 72), F32, "f8E4M3FN", "f32", "ceil", [(ROW, False), (COL, False)]),
    "fused_exact": ((100, 72), BF16, "f8E5M2", "f32", "exact", [(ROW, False), (COL, False)]),
    "fused_batched_swizzled": ((2, 70, 96), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil",
                               [(ROW, True), (COL, True)]),
    "fused_f16_floor": ((70, 160), F16, "f8E5M2", "f8E8M0FNU", "floor", [(ROW, False), (COL, True)]),
    "blockwise_1d_ceil": ((70, 208), BF16, "f8E4M3FN", "f32", "ceil", [(ROW128, False)]),
    "blockwise_1d_floor": ((33, 400), F32, "f8E5M2", "f32", "floor", [(ROW128, False)]),
    "blockwise_1d_exact": ((130, 272), BF16, "f8E4M3FN", "f32", "exact", [(ROW128, False)]),
    "blockwise_1d_exact_f16": ((64, 48), F16, "f8E5M2", "f32", "exact", [(ROW128, False)]),
    "blockwise_1d_batched": ((2, 50, 256), F32, "f8E4M3FN", "f32", "ceil", [(ROW128, False)]),
    "blockwise_1d_swizzled": ((200, 384), BF16, "f8E4M3FN", "f32", "ceil", [(ROW128, True)]),
    "rowwise_64_floor": ((64, 192), F32, "f8E4M3FN", "f8E8M0FNU", "floor", [((1, 64), False)]),
    "blockwise_2d_ceil": ((200, 272), BF16, "f8E4M3FN", "f32", "ceil", [(TILE128, False)]),
    "blockwise_2d_exact": ((300, 400), F32, "f8E5M2", "f32", "exact", [(TILE128, False)]),
    "blockwise_2d_floor": ((128, 128), F16, "f8E4M3FN", "f32", "floor", [(TILE128, False)]),
    "blockwise_2d_batched": ((2, 130, 144), BF16, "f8E4M3FN", "f32", "exact", [(TILE128, False)]),
    "per_tensor_ceil": ((70, 208), BF16, "f8E4M3FN", "f32", "ceil", [(None, False)]),
    "per_tensor_exact": ((300, 500), F32, "f8E5M2", "f32", "exact", [(None, False)]),
    "per_tensor_floor_f16": ((48, 40), F16, "f8E4M3FN", "f32", "floor", [(None, False)]),
    "per_tensor_batched": ((3, 70, 208), BF16, "f8E4M3FN", "f32", "exact", [(None, False)]),
    # The cast+transpose kernel: TRANSPOSED is one block per matrix, written transposed.
    "cast_transpose_bf16": ((192, 320), BF16, "f8E4M3FN", "f32", "exact", [(None, False), (TRANSPOSED, False)]),
    "cast_transpose_partial_tiles": ((2, 80, 48), F32, "f8E5M2", "f32", "exact",
                                     [(None, False), (TRANSPOSED, False)]),
    "transposed_alone_f16": ((48, 208), F16, "f8E4M3FN", "f32", "ceil", [(TRANSPOSED, False)]),
    # Many CTAs (10 of the flat cast, 48 tiles): current scaling's casts visit them last to first.
    "per_tensor_many_ctas": ((2, 300, 272), BF16, "f8E4M3FN", "f32", "ceil", [(None, False)]),
    "cast_transpose_many_tiles": ((2, 208, 336), BF16, "f8E5M2", "f32", "floor",
                                  [(None, False), (TRANSPOSED, False)]),
    # MXFP8's columnwise quantization written transposed by the strip kernel (COL_T: [1, 32] blocks
    # of the transposed data), with and without the rowwise one, tiled or linear scales.
    "columns_transposed_fused": ((96, 200), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, False), (COL_T, False)]),
    "columns_transposed_swizzled": ((2, 80, 72), F32, "f8E5M2", "f8E8M0FNU", "floor",
                                    [(ROW, True), (COL_T, True)]),
    "columns_transposed_alone": ((48, 100), F16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(COL_T, False)]),
    # FP8 blockwise's 1x128 blocks along the input's rows, written transposed by the strip kernel
    # (COL128_T: [1, 128] blocks of the transposed data, the input read in place): the bytes of the
    # rowwise [1, 128] quantize of the transposed input. Rows a multiple of 16 (partial last blocks
    # here), columns of 4. With the rowwise [1, 128] quantize of the same input ("pair", "both"),
    # one kernel computes both, each rowwise block over the 8 warps of a CTA; K need not be a
    # multiple of 16 then (100, 260: partial last blocks, and CTAs with no column at all).
    "blockwise_transposed_pair": ((272, 208), BF16, "f8E4M3FN", "f32", "ceil", [(ROW128, False), (COL128_T, False)]),
    "blockwise_transposed_both_odd": ((144, 100), F32, "f8E5M2", "f32", "floor",
                                      [(ROW128, False), (COL128_T, False)]),
    "blockwise_transposed_both_exact_f16": ((2, 48, 260), F16, "f8E4M3FN", "f32", "exact",
                                            [(ROW128, False), (COL128_T, False)]),
    "blockwise_transposed_both_large": ((1040, 516), BF16, "f8E5M2", "f32", "ceil",
                                        [(ROW128, False), (COL128_T, False)]),
    "blockwise_transposed_both_swizzled": ((2, 272, 392), BF16, "f8E4M3FN", "f32", "ceil",
                                           [(ROW128, True), (COL128_T, True)]),
    # Columns a multiple of 16: the rowwise codes go out through workgroup memory, whole 16-byte
    # chunks of a row (rows ending inside a block, a last column block of 16 or 16 x 9 columns).
    "blockwise_transposed_both_staged_batched": ((2, 144, 400), F32, "f8E4M3FN", "f32", "floor",
                                                 [(ROW128, False), (COL128_T, False)]),
    "blockwise_transposed_both_staged_large": ((1040, 528), BF16, "f8E5M2", "f32", "ceil",
                                               [(ROW128, False), (COL128_T, False)]),
    "blockwise_transposed_both_staged_swizzled": ((2, 272, 400), F16, "f8E4M3FN", "f32", "ceil",
                                                  [(ROW128, True), (COL128_T, True)]),
    "blockwise_transposed_e5m2": ((2, 144, 100), F32, "f8E5M2", "f32", "ceil", [(COL128_T, False)]),
    "blockwise_transposed_large": ((1040, 516), BF16, "f8E5M2", "f32", "ceil", [(COL128_T, False)]),
    "blockwise_transposed_exact_f16": ((48, 36), F16, "f8E4M3FN", "f32", "exact", [(COL128_T, False)]),
    "blockwise_transposed_floor": ((256, 132), F32, "f8E4M3FN", "f32", "floor", [(COL128_T, False)]),
    "blockwise_transposed_swizzled": ((2, 144, 72), BF16, "f8E4M3FN", "f32", "ceil", [(COL128_T, True)]),
    # Room for every `ceil` boundary amax of the input type in each [1, 32] and [32, 1] part
    # (test_quantize_ceil_boundaries): the fused, rowwise and columnwise kernels, each input type.
    "boundaries_fused_e4m3_f32": ((704, 64), F32, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, False), (COL, False)]),
    "boundaries_fused_e5m2_bf16": ((704, 64), BF16, "f8E5M2", "f8E8M0FNU", "ceil", [(ROW, True), (COL, True)]),
    "boundaries_rowwise_e4m3_bf16": ((704, 64), BF16, "f8E4M3FN", "f8E8M0FNU", "ceil", [(ROW, True)]),
    "boundaries_rowwise_e5m2_f16": ((704, 64), F16, "f8E5M2", "f8E8M0FNU", "ceil", [(ROW, False)]),
    "boundaries_columnwise_e5m2_f32": ((704, 64), F32, "f8E5M2", "f32", "ceil", [(COL, False)]),
}
AMAX = {  # input shape and dtype
    "amax_bf16": ((70, 208), BF16),
    "amax_f32_large": ((1000, 1040), F32),
    "amax_f16_batched": ((3, 5, 64, 48), F16),
}
DELAYED = {  # input shape and dtype, element type, history rows and columns, index, transposed copy
    "delayed_bf16": ((70, 208), BF16, "f8E4M3FN", 16, 3, 1, False),
    "delayed_f32_e5m2": ((300, 500), F32, "f8E5M2", 1, 5, 4, False),
    "delayed_f16_batched": ((2, 64, 48), F16, "f8E4M3FN", 7, 2, 0, False),
    "delayed_cast_transpose": ((208, 96), BF16, "f8E4M3FN", 16, 3, 1, True),
    "delayed_cast_transpose_batched": ((2, 64, 48), F32, "f8E5M2", 4, 2, 0, True),
}
UPDATE = {  # history rows and columns, element type, algorithm, margin
    "update_max": (16, 8, "f8E4M3FN", "max", 0),
    "update_max_long": (1024, 8, "f8E5M2", "max", 3),
    "update_most_recent": (7, 8, "f8E4M3FN", "most_recent", -2),
    "update_one_row": (1, 8, "f8E4M3FN", "max", 1),
}
# Dequantize programs: data shape, element type, block (every dimension), scale type, output dtype. Rows
# of whole 16-element chunks with blocks of width 1 or a multiple of 16 take the vector kernel, the rest
# (here K = 260 and 100) the scalar one.
DEQUANTIZE = {
    "dequantize_bf16": ((70, 96), "f8E4M3FN", (1, 32), "f8E8M0FNU", BF16),
    "dequantize_f32_blockwise": ((200, 260), "f8E5M2", (128, 128), "f32", F32),
    "dequantize_f16_e5m2": ((64, 160), "f8E5M2", (1, 32), "f8E8M0FNU", F16),
    "dequantize_partial_block": ((33, 80), "f8E4M3FN", (1, 32), "f8E8M0FNU", BF16),
    "dequantize_columnwise_f32": ((70, 96), "f8E4M3FN", (32, 1), "f8E8M0FNU", F32),
    "dequantize_columnwise_f32_scales": ((96, 48), "f8E5M2", (32, 1), "f32", BF16),
    "dequantize_blockwise_1d_f16": ((64, 256), "f8E4M3FN", (1, 128), "f32", F16),
    "dequantize_batched": ((2, 3, 40, 64), "f8E4M3FN", (1, 1, 1, 32), "f8E8M0FNU", BF16),
    "dequantize_batched_columnwise": ((2, 40, 32), "f8E5M2", (1, 32, 1), "f8E8M0FNU", F16),
    "dequantize_odd": ((33, 100), "f8E4M3FN", (1, 32), "f8E8M0FNU", F16),
}
# cuBLASLt calls through mxrt. cuBLASLt runs MX only from SM100, and mx-opt rejects it for sm_90a, so
# the MX program is compiled for sm_100a: it holds no kernel, so it loads on any GPU, and before SM100
# the runtime reports that it cannot run it.
MX_CUBLAS_CHIP = "sm_100a"
MATMUL = {  # M, N, K, A block, B block, scale type, swizzled, output dtype
    "matmul_blockwise": (256, 384, 512, (1, 128), (128, 128), "f32", False, ml_dtypes.bfloat16),
    "matmul_blockwise_f32": (132, 136, 256, (128, 128), (1, 128), "f32", False, np.float32),
    "matmul_per_tensor": (64, 32, 128, (64, 128), (32, 128), "f32", False, np.float32),
    "matmul_mx": (256, 128, 512, (1, 32), (1, 32), "f8E8M0FNU", True, ml_dtypes.bfloat16),
}
# The generated GEMM kernels' epilogue operands (gemm=kernel): M, N, K, A block, B block, scale type,
# output dtype, bias dtype (None: no bias), accumulate (an output D added: C += A B^T).
EPILOGUE = {
    "epilogue_wgrad_main_grad": (256, 384, 512, (1, 128), (1, 128), "f32", F32, None, True),
    "epilogue_fprop_bias": (200, 136, 256, (200, 256), (136, 256), "f32", BF16, BF16, False),
    # A bias alone with a bf16 output takes the TMA-store epilogue: N = 264 ends in a partial tile.
    "epilogue_blockwise_bias": (256, 264, 512, (1, 128), (128, 128), "f32", BF16, F32, False),
    "epilogue_mx_bias_accumulate": (256, 128, 512, ROW, ROW, "f8E8M0FNU", BF16, F32, True),
    # dgrad's form into an existing bf16 gradient (C += dY W): 1x128 x 128x128 and per-tensor, N = 264
    # and M = 200 ending in partial tiles.
    "epilogue_dgrad_accumulate": (256, 264, 512, (1, 128), (128, 128), "f32", BF16, None, True),
    "epilogue_per_tensor_accumulate": (200, 136, 256, (200, 256), (136, 256), "f32", BF16, None, True),
}
# Swizzle programs: linear scales shape, unscaled dim, scale dtype. Scales tiled along their
# second-to-last dimension with C a multiple of 4 take the vector kernels, the rest the scalar ones.
# The vector kernels give a thread 4, 2 or 1 tiles (the most that divide C / 4 and fit 16 bytes)
# and put lanes on consecutive groups of tiles: [200, 48] has 3 groups of 4 over 4 lanes (the last
# lane idle), [300, 8] 1 group of 2, [2, 200, 12] 3 groups of 1 over 4 lanes, f32 1 of 1.
SWIZZLE = {
    "swizzle_rows": ((500, 6), 0, ml_dtypes.float8_e8m0fnu),
    "swizzle_columns": ((3, 130), 1, ml_dtypes.float8_e8m0fnu),
    "swizzle_rows_vector": ((300, 8), 0, ml_dtypes.float8_e8m0fnu),
    "swizzle_wide_vector": ((200, 48), 0, ml_dtypes.float8_e8m0fnu),
    "swizzle_batched_vector": ((2, 200, 12), 1, ml_dtypes.float8_e8m0fnu),
    "swizzle_f32_vector": ((130, 8), 0, F32),
}


def _type(shape, dtype):
    return tools.mlir_type(shape, dtype)


def _full_block(shape, block):
    """The block of every dimension of data of `shape`: 1 on batch dimensions, the whole matrix for
    None or TRANSPOSED, [1, 32] for COL_T, [1, 128] for COL128_T."""
    block = {None: tuple(shape[-2:]), TRANSPOSED: tuple(shape[-2:]), COL_T: ROW, COL128_T: ROW128}.get(block, block)
    return (1,) * (len(shape) - 2) + block


def _output_shape(shape, block):
    return reference.transposed_shape(shape) if block in WRITTEN_TRANSPOSED else shape


def _unscaled_dim(shape, block):
    return len(shape) - (2 if block[-2] == 1 else 1)


def _attribute(values):
    return "[" + ", ".join(map(str, values)) + "]"


def quantize_source(name):
    shape, dtype, elem, scale_type, rounding, outputs = QUANTIZE[name]
    body, results = [], []
    for index, (block, swizzled) in enumerate(outputs):
        transposed = " transposed" if block in WRITTEN_TRANSPOSED else ""
        data_shape = _output_shape(shape, block)
        block = _full_block(data_shape, block)
        data_type = _type(data_shape, reference.ELEMENT_TYPES[elem])
        scales_shape = reference.scales_shape(data_shape, block)
        scales_type = _type(scales_shape, reference.SCALE_TYPES[scale_type])
        body.append(f"  %d{index}, %s{index} = mx.quantize %x{transposed} block {_attribute(block)} rounding "
                    f"{rounding} : {_type(shape, dtype)} -> {data_type}, {scales_type}")
        results += [(f"%d{index}", data_type)]
        if swizzled:
            dim = _unscaled_dim(shape, block)
            tiled = _type(reference.swizzled_shape(scales_shape, dim), reference.SCALE_TYPES[scale_type])
            body.append(f"  %t{index} = mx.swizzle %s{index} unscaled_dim {dim} : {scales_type} -> {tiled}")
            results += [(f"%t{index}", tiled)]
        else:
            results += [(f"%s{index}", scales_type)]
    return tools.function_source(name, [f"%x: {_type(shape, dtype)}"], body, results)


def amax_source(name):
    shape, dtype = AMAX[name]
    body = [f"  %a = mx.amax %x : {_type(shape, dtype)} -> tensor<f32>"]
    return tools.function_source(name, [f"%x: {_type(shape, dtype)}"], body, [("%a", "tensor<f32>")])


def delayed_source(name):
    """The cast, and with a transposed copy the transposed cast reading its history (one kernel)."""
    shape, dtype, elem, rows, columns, index, transposed = DELAYED[name]
    x, s, h = _type(shape, dtype), _type((columns,), F32), _type((rows, columns), F32)
    data, inverse = _type(shape, reference.ELEMENT_TYPES[elem]), _type((1,) * len(shape), F32)
    body = [f"  %d, %i, %h1 = mx.quantize_delayed %x, %s, %h index {index} : {x}, {s}, {h} -> "
            f"{data}, {inverse}, {h}"]
    results = [("%d", data), ("%i", inverse), ("%h1", h)]
    if transposed:
        data_t = _type(reference.transposed_shape(shape), reference.ELEMENT_TYPES[elem])
        body.append(f"  %dt, %it, %h2 = mx.quantize_delayed %x, %s, %h1 index {index} transposed : "
                    f"{x}, {s}, {h} -> {data_t}, {inverse}, {h}")
        results = [("%d", data), ("%i", inverse), ("%dt", data_t), ("%h2", h)]
    return tools.function_source(name, [f"%x: {x}", f"%s: {s}", f"%h: {h}"], body, results)


def update_source(name, cases=None):
    """The update of UPDATE case `name`, or of each of `cases` in turn (one program, whose
    independent updates the GPU lowering puts in one launch: a training step's states)."""
    arguments, body, results = [], [], []
    for i, case in enumerate(cases or [name]):
        rows, columns, elem, algorithm, margin = UPDATE[case]
        h, s = _type((rows, columns), F32), _type((columns,), F32)
        arguments += [f"%h{i}: {h}", f"%s{i}: {s}"]
        body.append(f"  %nh{i}, %ns{i} = mx.update_amax_history %h{i}, %s{i} element {elem} "
                    f"algorithm {algorithm} margin {margin} : {h}, {s} -> {h}, {s}")
        results += [(f"%nh{i}", h), (f"%ns{i}", s)]
    return tools.function_source(name, arguments, body, results)



def dequantize_source(name):
    shape, elem, block, scale_type, out = DEQUANTIZE[name]
    data_type = _type(shape, reference.ELEMENT_TYPES[elem])
    scales_type = _type(reference.scales_shape(shape, block), reference.SCALE_TYPES[scale_type])
    body = [f"  %y = mx.dequantize %d, %s block [{', '.join(map(str, block))}] : {data_type}, {scales_type} -> "
            f"{_type(shape, out)}"]
    return tools.function_source(name, [f"%d: {data_type}", f"%s: {scales_type}"], body, [("%y", _type(shape, out))])


def swizzle_source(name):
    # Separate inputs: unswizzle(swizzle(s)) would fold to s itself.
    shape, dim, dtype = SWIZZLE[name]
    linear = _type(shape, dtype)
    tiled = _type(reference.swizzled_shape(shape, dim), dtype)
    body = [f"  %t = mx.swizzle %s unscaled_dim {dim} : {linear} -> {tiled}",
            f"  %u = mx.unswizzle %w unscaled_dim {dim} : {tiled} -> {linear}"]
    return tools.function_source(name, [f"%s: {linear}", f"%w: {tiled}"], body, [("%t", tiled), ("%u", linear)])


def quantized_operands(rng, name):
    m, n, k, a_block, b_block, scale_type, swizzled, _ = MATMUL[name]
    return matmul_operands(rng, m, n, k, a_block, b_block, scale_type, swizzled)


def matmul_source(name):
    m, n, k, a_block, b_block, _, _, out = MATMUL[name]
    operands = quantized_operands(np.random.default_rng(0), name)  # only their types matter here
    args = [f"%{v}: {_type(x.shape, x.dtype)}" for v, x in zip(("a", "as", "b", "bs"), operands)]
    types = ", ".join(_type(x.shape, x.dtype) for x in operands)
    body = [f"  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block [{a_block[0]}, {a_block[1]}] "
            f"rhs_block [{b_block[0]}, {b_block[1]}] : {types} -> {_type((m, n), out)}"]
    return tools.function_source(name, args, body, [("%c", _type((m, n), out))])


def epilogue_operands(rng, name):
    """The quantized operands, and the bias and D the epilogue adds (of the product's magnitude)."""
    m, n, k, a_block, b_block, scale_type, out, bias_dtype, accumulate = EPILOGUE[name]
    operands = list(matmul_operands(rng, m, n, k, a_block, b_block, scale_type, swizzled=False))
    size = np.sqrt(k)
    if bias_dtype is not None:
        operands.append((rng.standard_normal(n) * size).astype(bias_dtype))
    if accumulate:
        operands.append((rng.standard_normal((m, n)) * size).astype(out))
    return operands


def epilogue_source(name):
    m, n, k, a_block, b_block, _, out, bias_dtype, accumulate = EPILOGUE[name]
    operands = epilogue_operands(np.random.default_rng(0), name)  # only their types matter here
    names = ["a", "as", "b", "bs", "bias"][:4 + (bias_dtype is not None)] + ["d"] * accumulate
    types = [_type(x.shape, x.dtype) for x in operands]
    clauses = "".join(f" {keyword}(%{v} : {t})" for keyword, v, t in zip(
        ["bias"] * (bias_dtype is not None) + ["accumulate"] * accumulate, names[4:], types[4:]))
    result = _type((m, n), out)
    body = [f"  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block {_attribute(a_block)} rhs_block "
            f"{_attribute(b_block)}{clauses} : {', '.join(types[:4])} -> {result}"]
    return tools.function_source(name, [f"%{v}: {t}" for v, t in zip(names, types)], body, [("%c", result)])


def sources():
    return {**{n: quantize_source(n) for n in QUANTIZE}, **{n: epilogue_source(n) for n in EPILOGUE}, **{n: dequantize_source(n) for n in DEQUANTIZE},
            **{n: swizzle_source(n) for n in SWIZZLE}, **{n: matmul_source(n) for n in MATMUL},
            **{n: amax_source(n) for n in AMAX}, **{n: delayed_source(n) for n in DELAYED},
            **{n: update_source(n) for n in UPDATE}, "update_all": update_source("update_all", list(UPDATE))}


def build(directory, chip=None):
    def lowering(name):
        if name in EPILOGUE:  # FP8 with f32 scales has generated kernels on sm_90a only
            return {"gemm": "kernel", **({"chip": "sm_90a"} if EPILOGUE[name][5] == "f32" else {})}
        if name not in MATMUL:
            return {}
        return {"gemm": "cublas", **({"chip": MX_CUBLAS_CHIP} if MATMUL[name][6] else {})}
    build_gpu_programs(directory, sources(), chip, lowering)


pytestmark = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    return load_gpu_programs(tmp_path_factory, build, sources())




def _test_input(rng, shape, dtype, specials):
    """Random input with the planted special values (zeros, subnormals, Inf, and NaNs, here with a
    sign and a payload, which no result may keep) or, with specials "finite", the same with every NaN
    and Inf replaced by an ordinary value: a NaN decides a per-tensor result alone."""
    x = random_input(rng, shape, np.float32)
    if specials == "finite":
        x = np.where(np.isfinite(x), x, np.float32(-3.25))
    else:
        x.view(np.uint32)[np.isnan(x)] = 0xFFC00123
    if dtype is np.float16:
        x = np.clip(x, -6e4, 6e4)
    return x.astype(dtype)


def _expected_quantize(name, x):
    """The reference results of quantize program `name` on `x`."""
    shape, dtype, elem, scale_type, rounding, outputs = QUANTIZE[name]
    expected = []
    for block, swizzled in outputs:
        source = np.swapaxes(x, -1, -2) if block in WRITTEN_TRANSPOSED else x
        block = _full_block(source.shape, block)
        data, scales = reference.quantize(source, block, elem, scale_type, rounding)
        expected += [data, reference.swizzle(scales, _unscaled_dim(shape, block)) if swizzled else scales]
    return expected


@pytest.mark.parametrize("specials", ["all", "finite"])
@pytest.mark.parametrize("name", list(QUANTIZE))
def test_quantize_kernel(rng, libraries, name, specials):
    x = _test_input(rng, *QUANTIZE[name][:2], specials)
    run_gpu_program(libraries, name, [x], _expected_quantize(name, x))


@pytest.mark.parametrize("name", [n for n in QUANTIZE if n.startswith("boundaries_")])
def test_quantize_ceil_boundaries(rng, libraries, name):
    """Blocks whose amaxes are where the `ceil` exponent steps (conftest.ceil_boundary_input): maxfinite
    times every power of two and the ulps beside it, subnormal, 0, the largest finite value, Inf, NaN."""
    shape, dtype, elem = QUANTIZE[name][:3]
    x = ceil_boundary_input(rng, shape, elem, dtype)
    run_gpu_program(libraries, name, [x], _expected_quantize(name, x))


@pytest.mark.parametrize("name", [n for n in QUANTIZE if n.startswith("blockwise_transposed")])
def test_blockwise_transposed_spread(rng, libraries, name):
    """The transposed [1, 128] kernel, alone and with the rowwise one, on blocks of widely spread
    magnitudes: each 128-row block of each input column gets its own factor 2^[-20, 20] (2^[-4, 4]
    for f16), and so does each 128-column block of each row, so that a scale written at the wrong
    place, or an amax taken over the wrong elements, changes the bytes of either output. Planted:
    zeros, the input type's max finite and smallest normal, the element types' max finite, f32
    subnormals, Inf, NaN; column 0 is zero."""
    shape, dtype = QUANTIZE[name][:2]
    rows, cols = shape[-2:]
    spread = 4 if dtype is np.float16 else 20

    def factors(along, across):  # 2^e per 128-block along one dimension and element of the other
        blocks = -(-along // 128)
        e = rng.integers(-spread, spread + 1, size=shape[:-2] + (blocks, across))
        return np.repeat(np.exp2(e), 128, axis=-2)[..., :along, :]

    x = rng.standard_normal(shape) * factors(rows, cols) * np.swapaxes(factors(cols, rows), -1, -2)
    x = np.ascontiguousarray(x, np.float32)
    flat = x.reshape(-1)
    info = ml_dtypes.finfo(dtype)
    planted = np.array([0.0, -0.0, float(info.max), -448.0, 57344.0, 1e-40, -3e-42, float(info.tiny),
                        np.inf, -np.inf, np.nan], np.float32)
    where = rng.choice(flat.size, size=min(flat.size, 4 * planted.size), replace=False)
    flat[where] = np.resize(planted, where.size)
    x[..., 0] = 0.0  # column 0: all-zero blocks
    if dtype is np.float16:
        x = np.clip(x, -6e4, 6e4)
    x = x.astype(dtype)
    run_gpu_program(libraries, name, [x], _expected_quantize(name, x))


@pytest.mark.parametrize("specials", ["all", "finite"])
@pytest.mark.parametrize("name", list(AMAX))
def test_amax_kernel(rng, libraries, name, specials):
    shape, dtype = AMAX[name]
    x = _test_input(rng, shape, dtype, specials)
    run_gpu_program(libraries, name, [x], [np.array(reference.amax(x))])


@pytest.mark.parametrize("scale", ["random", "nan"])
@pytest.mark.parametrize("specials", ["all", "finite"])
@pytest.mark.parametrize("name", list(DELAYED))
def test_quantize_delayed_kernel(rng, libraries, name, specials, scale):
    """Scales that saturate, keep and flush elements, or a NaN scale (with a sign and a payload); a NaN
    scale in another column. The history is read back whole: every entry but [0, index] must be
    copied."""
    shape, dtype, elem, rows, columns, index, transposed = DELAYED[name]
    x = _test_input(rng, shape, dtype, specials)
    scales = (np.exp2(rng.integers(-40, 40, columns)) * (rng.random(columns) + 0.5)).astype(np.float32)
    scales[(index + 1) % columns] = np.nan
    if scale == "nan":
        scales.view(np.uint32)[index] = 0xFFC00042
    history = np.abs(rng.standard_normal((rows, columns))).astype(np.float32)
    history[0, index] = 123.0  # overwritten
    data, inverse, new_history = reference.quantize_delayed(x, scales, history, index, elem)
    expected = [data, inverse, np.swapaxes(data, -1, -2), new_history] if transposed else \
        [data, inverse, new_history]
    run_gpu_program(libraries, name, [x, scales, history], expected)


def _update_case(rng, name):
    """([history, scales], expected [new history, new scales]) of UPDATE case `name`: zero, Inf,
    NaN and tiny amaxes (whose scale overflows f32) beside ordinary ones."""
    rows, columns, elem, algorithm, margin = UPDATE[name]
    history = np.abs(rng.standard_normal((rows, columns))) * np.exp2(rng.integers(-20, 20, (1, columns)))
    history = history.astype(np.float32)
    history[:, 1] = 0.0
    history[0, 2] = np.inf
    history[0, 3] = np.nan
    history[:, 4] = 1e-41
    history[rows // 2, 5] = -7.0
    history[rows - 1, 6] = np.nan
    scales = (rng.random(columns) + 0.5).astype(np.float32)
    return [history, scales], list(reference.update_amax_history(history, scales, algorithm, margin, elem=elem))


@pytest.mark.parametrize("name", list(UPDATE))
def test_update_amax_history_kernel(rng, libraries, name):
    run_gpu_program(libraries, name, *_update_case(rng, name))


def test_updates_in_one_launch(rng, libraries):
    """Every UPDATE case in one program, one launch (each CTA branching to its update by its
    index): each update's results are those of the reference."""
    cases = [_update_case(rng, name) for name in UPDATE]
    run_gpu_program(libraries, "update_all", [a for inputs, _ in cases for a in inputs],
                    [a for _, expected in cases for a in expected])


@pytest.mark.parametrize("name", list(DEQUANTIZE))
def test_dequantize_kernel(rng, libraries, name):
    shape, elem, block, scale_type, out = DEQUANTIZE[name]
    data = rng.integers(0, 256, size=shape, dtype=np.uint8).view(reference.ELEMENT_TYPES[elem])
    scales_shape = reference.scales_shape(shape, block)
    if scale_type == "f32":
        scales = (rng.standard_normal(scales_shape) * 2.0 ** rng.integers(-20, 20, scales_shape))
        scales = scales.astype(np.float32)
        scales.flat[0] = np.nan
    else:
        scales = rng.integers(0, 256, size=scales_shape, dtype=np.uint8)
        scales.flat[:3] = [0, 254, 255]
        scales = scales.view(ml_dtypes.float8_e8m0fnu)
    run_gpu_program(libraries, name, [data, scales], [reference.dequantize(data, scales, block, out)])


@pytest.mark.parametrize("name", list(SWIZZLE))
def test_swizzle_kernels(rng, libraries, name):
    shape, dim, dtype = SWIZZLE[name]
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    scales = rng.integers(0, np.iinfo(bits).max, size=shape, dtype=bits, endpoint=True).view(dtype)
    other = rng.integers(0, np.iinfo(bits).max, size=shape, dtype=bits, endpoint=True).view(dtype)
    tiles = reference.swizzle(other, dim)
    run_gpu_program(libraries, name, [scales, tiles], [reference.swizzle(scales, dim), other])


@pytest.mark.parametrize("name", list(MATMUL))
def test_scaled_matmul_cublas(rng, libraries, name):
    """cuBLASLt through the compiled call, against the float64 product (tolerances: _check_product)."""
    m, n, k, a_block, b_block, _, swizzled, out = MATMUL[name]
    operands = quantized_operands(rng, name)
    if swizzled and runtime.compute_capability() < (10, 0):
        with pytest.raises(runtime.MXRuntimeError, match="not supported"):
            _check_product(libraries, name, operands, out, None)
        return
    _check_product(libraries, name, operands, out, exact_matmul(*operands, a_block, b_block),
                   CUBLAS_F32_TOLERANCE)


# cuBLASLt's FP8 products in f32 on Hopper: its tensor cores accumulate with about 14 mantissa bits
# (DeepSeek-V3's measurement), so over K = 128 the error's random walk reaches ~sqrt(K) 2^-14 = 7e-4
# relative; 3e-4 failed 1 of 25 fresh seeds on an H100 (3.7e-4, and 7.4e-4 once). A layout or scale
# mistake is an error of order 1.
CUBLAS_F32_TOLERANCE = 2e-3


def _check_product(libraries, name, operands, out, expected, f32_tolerance=3e-4):
    """Runs GEMM program `name` on `operands` and compares its [M, N] result of dtype `out` with the
    float64 `expected`: 4e-3 for bf16 (spec); for f32 output `f32_tolerance`, not the spec's 1e-5:
    Hopper's FP8 tensor cores accumulate with less than f32 precision (the generated kernels promote
    each k-block's partial sums to f32: ~1.3e-4 measured here)."""
    buffers = [runtime.DeviceBuffer.from_numpy(np.ascontiguousarray(x)) for x in operands]
    try:
        result, = runtime.call_mlir_function(libraries[name], name, buffers, result_ranks=[2])
        got = result.to_numpy(out)
        result.free()
    finally:
        for buffer in buffers:
            buffer.close()
    tolerance = f32_tolerance if out is np.float32 else 4e-3
    error = reference.matmul_error(got, expected)
    assert error < tolerance, f"relative Frobenius error {error:.3g} >= {tolerance}"


@pytest.mark.parametrize("name", list(EPILOGUE))
def test_gemm_epilogue(rng, libraries, name):
    """The generated kernel adds the bias and D in its epilogue: the float64 product plus both, within
    _check_product's tolerances (bias and D are of the product's magnitude, so a dropped term is an
    error of order 1)."""
    _, _, _, a_block, b_block, scale_type, out, _, _ = EPILOGUE[name]
    if runtime.compute_capability() >= (10, 0) and scale_type == "f32":
        pytest.skip("sm_100a has generated kernels for MX only")
    operands = epilogue_operands(rng, name)
    expected = exact_matmul(*operands[:4], a_block, b_block)
    for term in operands[4:]:
        expected = expected + term.astype(np.float64)
    _check_product(libraries, name, operands, out, expected)


def test_dlpack_input(rng, libraries):
    """A framework's CUDA tensor goes in through DLPack, without a copy through the host."""
    torch = pytest.importorskip("torch")
    name = "rowwise_swizzled_bf16"
    shape, _, elem, scale_type, rounding, _ = QUANTIZE[name]
    x = random_input(rng, shape, np.float32).astype(BF16)
    device_x = torch.from_numpy(x.view(np.uint16)).cuda().view(torch.bfloat16)
    data, tiles = runtime.call_mlir_function(libraries[name], name, [runtime.MemRef.from_dlpack(device_x)],
                                             result_ranks=[2, 5])
    ref_data, ref_scales = reference.quantize(x, ROW, elem, scale_type, rounding)
    try:
        assert_bits_equal(data.to_numpy(ref_data.dtype), ref_data, "data")
        assert_bits_equal(tiles.to_numpy(ref_scales.dtype), reference.swizzle(ref_scales), "tiles")
    finally:
        data.free()
        tiles.free()


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])
