"""The recipes beyond 2-D FP8 on the CPU pipeline, against mx.reference: batch dimensions (attention
shapes), K-outer GEMM operands (a linear layer's three products), FP8 blockwise GEMM-ready scales,
per-tensor current and delayed scaling, and FP4 (MXFP4, NVFP4).

Quantize, swizzle and the scaling ops must match bit for bit; GEMMs match the float64 product of
the dequantized operands within the spec's tolerance. Inputs are fresh random values over a wide
range with the spec's special values planted (conftest.random_input), in shapes no block divides.
"""

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, random_input

from mx import reference, tools

F32_MAX = np.finfo(np.float32).max


def quantize_both(x, block, elem, scale_type="f8E8M0FNU", **kwargs):
    """The CPU pipeline's and the reference's quantize of `x`, checked equal; returns the latter."""
    data, scales = tools.cpu_quantize(x, block, elem, scale_type, **kwargs)[:2]
    ref = reference.quantize(x, block, elem, scale_type, **kwargs)
    assert_bits_equal(scales, ref[1], f"scales of block {block}")
    assert_bits_equal(data, ref[0], f"data of block {block}")
    return ref


# --- batch dimensions ------------------------------------------------------------------------------

def test_attention_shapes(rng):
    """Q [B, H, S, D] rowwise along D and V columnwise along S, S and D no multiple of 128, with
    their scales tiled per [b, h] slice (spec section 6)."""
    b, h, s, d = 2, 3, 200, 72
    q = random_input(rng, (b, h, s, d), np.float32).astype(ml_dtypes.bfloat16)
    v = random_input(rng, (b, h, s, d), np.float32).astype(ml_dtypes.bfloat16)
    _, q_scales = quantize_both(q, (1, 1, 1, 32), "f8E4M3FN")
    _, v_scales = quantize_both(v, (1, 1, 32, 1), "f8E4M3FN")
    for scales, unscaled_dim in ((q_scales, 2), (v_scales, 3)):
        tiles = tools.cpu_swizzle(scales, unscaled_dim)
        assert_bits_equal(tiles, reference.swizzle(scales, unscaled_dim), f"tiles along {unscaled_dim}")
        assert_bits_equal(tools.cpu_unswizzle(tiles, scales.shape, unscaled_dim), scales, "round trip")


def test_batched_dequantize(rng):
    x = random_input(rng, (3, 40, 96), np.float32)
    data, scales = reference.quantize(x, (1, 32, 1), "f8E5M2")
    assert_bits_equal(tools.cpu_dequantize(data, scales, (1, 32, 1)),
                      reference.dequantize(data, scales, (1, 32, 1)), "dequantized")


@pytest.mark.parametrize("scales_form", ["linear", "tiles"])
def test_batched_matmul(rng, scales_form):
    a, a_scales = reference.quantize(random_input(rng, (2, 3, 70, 96), np.float32, False), (1, 1, 1, 32))
    b, b_scales = reference.quantize(random_input(rng, (2, 3, 50, 96), np.float32, False), (1, 1, 1, 32))
    if scales_form == "tiles":
        a_scales, b_scales = reference.swizzle(a_scales, 2), reference.swizzle(b_scales, 2)
    out = tools.cpu_scaled_matmul(a, a_scales, b, b_scales, (1, 1, 1, 32), (1, 1, 1, 32))
    exact = reference.scaled_matmul(a, a_scales, b, b_scales, (1, 1, 1, 32), (1, 1, 1, 32))
    assert out.shape == (2, 3, 70, 50)
    assert reference.matmul_error(out, exact) < 1e-5


# --- K-outer operands: the three GEMMs of a linear layer ---------------------------------------------

@pytest.mark.parametrize("tiled", [False, True])
def test_linear_layer_step(rng, tiled):
    """fprop Y = X W^T, dgrad dX = dY W and wgrad dW = dY^T X, each operand from one rowwise +
    columnwise quantize of its tensor and no data transposed (spec section 7), against float64."""
    m, n, k = 96, 64, 160
    x = random_input(rng, (m, k), np.float32, specials=False)
    w = random_input(rng, (n, k), np.float32, specials=False)
    dy = random_input(rng, (m, n), np.float32, specials=False)
    quantized = {}
    for name, tensor, elem in (("x", x, "f8E4M3FN"), ("w", w, "f8E4M3FN"), ("dy", dy, "f8E5M2")):
        quantized[name, "row"] = quantize_both(tensor, (1, 32), elem)
        quantized[name, "col"] = quantize_both(tensor, (32, 1), elem)

    def operand(name, direction):
        data, scales = quantized[name, direction]
        if tiled:  # the M (or N) dimension is the unscaled one in both directions
            scales = reference.swizzle(scales, 0 if direction == "row" else 1)
        block, layout = ((1, 32), "k_contiguous") if direction == "row" else ((32, 1), "k_outer")
        return data, scales, block, layout

    products = {"fprop": (("x", "row"), ("w", "row"), (m, n)),
                "dgrad": (("dy", "row"), ("w", "col"), (m, k)),
                "wgrad": (("dy", "col"), ("x", "col"), (n, k))}
    for product, (lhs, rhs, shape) in products.items():
        a, a_scales, a_block, a_layout = operand(*lhs)
        b, b_scales, b_block, b_layout = operand(*rhs)
        out = tools.cpu_scaled_matmul(a, a_scales, b, b_scales, a_block, b_block, np.float32,
                                      a_layout, b_layout)
        deq = {key: reference.dequantize(*quantized[key], (1, 32) if key[1] == "row" else (32, 1))
               .astype(np.float64) for key in (lhs, rhs)}
        lhs_matrix = deq[lhs] if lhs[1] == "row" else deq[lhs].T
        rhs_matrix = deq[rhs] if rhs[1] == "row" else deq[rhs].T
        exact = lhs_matrix @ rhs_matrix.T
        assert out.shape == shape, product
        error = reference.matmul_error(out, exact)
        assert error < 1e-5, f"{product}: relative Frobenius error {error:.3g}"


# --- FP8 blockwise: compact -> GEMM-ready -------------------------------------------------------------

def test_blockwise_gemm_ready(rng):
    """Rowwise [A, B/128] -> [B/128, pad4(A)], columnwise [A/128, B] -> [A/128, pad4(B)] (spec
    section 9), and a GEMM reading them gives the product of the compact scales."""
    a_rows, cols = 250, 384
    x = random_input(rng, (a_rows, cols), np.float32, specials=False)
    data, row_scales = quantize_both(x, (1, 128), "f8E4M3FN", "f32")
    _, col_scales = quantize_both(x, (128, 1), "f8E4M3FN", "f32")
    for scales, unscaled_dim in ((row_scales, 0), (col_scales, 1)):
        ready = tools.cpu_swizzle(scales, unscaled_dim, "blockwise")
        assert_bits_equal(ready, reference.blockwise_gemm_ready(scales, unscaled_dim), "GEMM-ready")
        back = tools.cpu_unswizzle(ready, scales.shape, unscaled_dim, "blockwise")
        assert_bits_equal(back, scales, "compact again")
    w, w_scales = reference.quantize(random_input(rng, (136, cols), np.float32, False), (128, 128),
                                     "f8E4M3FN", "f32")
    ready = reference.blockwise_gemm_ready(row_scales, 0)
    from_ready = tools.cpu_scaled_matmul(data, ready, w, w_scales, (1, 128), (128, 128))
    from_compact = tools.cpu_scaled_matmul(data, row_scales, w, w_scales, (1, 128), (128, 128))
    assert_bits_equal(from_ready, from_compact, "product")


# --- per-tensor current and delayed scaling -----------------------------------------------------------

def test_amax(rng):
    x = random_input(rng, (33, 70), np.float32, specials=False)
    assert_bits_equal(np.float32(tools.cpu_amax(x)), reference.amax(x), "amax")
    x[5, 7] = -np.inf
    assert tools.cpu_amax(x) == np.inf
    x[9, 1] = np.nan
    assert np.isnan(tools.cpu_amax(x.astype(ml_dtypes.bfloat16)))


@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2"])
def test_quantize_delayed(rng, elem):
    x = random_input(rng, (45, 70), np.float32)
    scales = np.array([3.0, 2.0**-20, 1.7e-3], np.float32)
    history = np.abs(rng.standard_normal((5, 3))).astype(np.float32)
    for index in range(3):
        got = tools.cpu_quantize_delayed(x, scales, history, index, elem)
        expected = reference.quantize_delayed(x, scales, history, index, elem)
        for what, a, e in zip(("data", "scale_inv", "history"), got, expected):
            assert_bits_equal(a, e, f"{what} of tensor {index}")


@pytest.mark.parametrize("algorithm", ["max", "most_recent"])
@pytest.mark.parametrize("rows", [1, 2, 7])
def test_update_amax_history(rng, algorithm, rows):
    """Zero, Inf, NaN and tiny amaxes (whose scale overflows f32) beside ordinary ones."""
    columns = 8
    history = (np.abs(rng.standard_normal((rows, columns))) * np.exp2(rng.integers(-20, 20, (1, columns))))
    history = history.astype(np.float32)
    history[:, 1] = 0.0
    history[0, 2] = np.inf
    history[0, 3] = np.nan
    history[:, 4] = 1e-41
    scales = (rng.random(columns) + 0.5).astype(np.float32)
    for margin in (0, 3, -2):
        got = tools.cpu_update_amax_history(history, scales, algorithm, margin)
        expected = reference.update_amax_history(history, scales, algorithm, margin)
        assert_bits_equal(got[0], expected[0], "history")
        assert_bits_equal(got[1], expected[1], f"scales (margin {margin})")
    assert got[1][4] == F32_MAX


# --- FP4 ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rounding", ["ceil", "floor"])
@pytest.mark.parametrize("block", [(1, 32), (32, 1)])
def test_mxfp4(rng, block, rounding):
    x = random_input(rng, (70, 96), np.float32)
    data, scales = quantize_both(x, block, "f4E2M1FN", rounding=rounding)
    assert_bits_equal(tools.cpu_dequantize(data, scales, block, ml_dtypes.bfloat16),
                      reference.dequantize(data, scales, block, ml_dtypes.bfloat16), "dequantized")


@pytest.mark.parametrize("given", [False, True])
def test_nvfp4(rng, given):
    x = random_input(rng, (2, 50, 80), np.float32)
    tensor_scale = np.float32(3.5e-3) if given else None
    got = tools.cpu_quantize(x, (1, 1, 16), "f4E2M1FN", "f8E4M3FN", tensor_scale=tensor_scale)
    data, scales, t = reference.quantize_nvfp4(x, tensor_scale)
    assert_bits_equal(got[1], scales, "block scales")
    assert_bits_equal(got[0], data, "data")
    if not given:
        assert_bits_equal(np.float32(got[2]), np.float32(t), "tensor scale")
    assert_bits_equal(tools.cpu_dequantize(data, scales, (1, 1, 16), np.float32, tensor_scale=t),
                      reference.dequantize_nvfp4(data, scales, t), "dequantized")
    tiles = tools.cpu_swizzle(scales, 1)
    assert_bits_equal(tiles, reference.swizzle(scales, 1), "NVFP4 scale tiles")


def test_fp4_matmul(rng):
    """MXFP4 x NVFP4 with tiled scales: the tensor scale applies to the NVFP4 operand only."""
    m, n, k = 70, 40, 128
    a, a_scales = reference.quantize(random_input(rng, (m, k), np.float32, False), (1, 32), "f4E2M1FN")
    b, b_scales, b_t = reference.quantize_nvfp4(random_input(rng, (n, k), np.float32, False))
    a_tiles, b_tiles = reference.swizzle(a_scales), reference.swizzle(b_scales)
    out = tools.cpu_scaled_matmul(a, a_tiles, b, b_tiles, (1, 32), (1, 16), b_tensor_scale=b_t)
    exact = (reference.dequantize(a, a_scales, (1, 32)).astype(np.float64)
             @ reference.dequantize_nvfp4(b, b_scales, b_t).astype(np.float64).T)
    assert reference.matmul_error(out, exact) < 1e-5


def test_fp4_verifier_rules():
    with pytest.raises(tools.ToolError, match="NVFP4 needs a block of 16"):
        tools.run_mx_opt("""
          func.func @f(%x: tensor<4x64xf32>) {
            %d, %s, %t = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf4E2M1FN>, tensor<4x2xf8E4M3FN>, tensor<f32>
            return
          }""")
