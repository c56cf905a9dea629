"""Tests for mx.reference's scaled matmul (spec sections 5-7, 9, 10): f32 accumulation and rounding, FP8
blockwise compact <-> GEMM-ready scales, operand layouts, batches and scale forms, against float64 products
of the oracles' dequantized operands (reference_oracles.py). Fresh random inputs each run; the seed is printed.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mx.reference import (blockwise_compact, blockwise_gemm_ready, dequantize_nvfp4, matmul_error, quantize,
                          quantize_nvfp4, scaled_matmul, swizzle)
from reference_oracles import (ELEMS, random_f32, slow_dequantize)


# ---------------------------------------------------------------------------------------------------
# Scaled matmul
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", ELEMS)
def test_scaled_matmul_mx(elem, rng):
    M, N, K = 200, 130, 416
    # magnitudes kept small enough that the f16 output does not overflow
    xa = random_f32(rng, (M, K), -8, 2) * np.exp2(rng.integers(-4, 4, (M, 1))).astype(np.float32)
    xb = random_f32(rng, (N, K), -8, 2)
    a, sa = quantize(xa, (1, 32), elem)
    b, sb = quantize(xb, (1, 32), elem)
    lin = scaled_matmul(a, sa, b, sb, (1, 32), (1, 32))
    assert lin.shape == (M, N) and lin.dtype == np.float32
    swz = scaled_matmul(a, swizzle(sa), b, swizzle(sb), (1, 32), (1, 32))
    mixed = scaled_matmul(a, swizzle(sa), b, sb, (1, 32), (1, 32))
    np.testing.assert_array_equal(lin.view(np.uint32), swz.view(np.uint32))
    np.testing.assert_array_equal(lin.view(np.uint32), mixed.view(np.uint32))
    ref64 = slow_dequantize(a, sa, (1, 32), elem) @ slow_dequantize(b, sb, (1, 32), elem).T
    assert matmul_error(lin, ref64) < 1e-5
    np.testing.assert_array_equal(lin, ref64.astype(np.float32))
    for out_dtype, tol in [(ml_dtypes.bfloat16, 4e-3), (np.float16, 1e-3)]:
        o = scaled_matmul(a, swizzle(sa), b, swizzle(sb), (1, 32), (1, 32), out_dtype)
        assert o.dtype == np.dtype(out_dtype) and matmul_error(o, ref64) < tol
        np.testing.assert_array_equal(o.view(np.uint16), lin.astype(out_dtype).view(np.uint16))
    # and the quantization itself is close to the high-precision product
    assert matmul_error(lin, xa.astype(np.float64) @ xb.astype(np.float64).T) < (0.06 if elem == "f8E4M3FN" else 0.12)


def test_scaled_matmul_blockwise_and_per_tensor(rng):
    M, N, K = 150, 260, 300
    xa, xb = random_f32(rng, (M, K), -8, 8), random_f32(rng, (N, K), -8, 8)
    for (ba, bb, rounding) in [((1, 128), (128, 128), "ceil"), ((M, K), (N, K), "exact"), ((1, 128), (1, 128), "floor")]:
        a, sa = quantize(xa, ba, "f8E4M3FN", "f32", rounding)
        b, sb = quantize(xb, bb, "f8E4M3FN", "f32", rounding)
        out = scaled_matmul(a, sa, b, sb, ba, bb)
        ref64 = slow_dequantize(a, sa, ba, "f8E4M3FN") @ slow_dequantize(b, sb, bb, "f8E4M3FN").T
        assert matmul_error(out, ref64) < 1e-5               # not bit-compared: f64 sums need not be exact here


@pytest.mark.parametrize("out_dtype,tie", [(ml_dtypes.bfloat16, 2.0 ** -8), (np.float16, 2.0 ** -11)])
def test_scaled_matmul_rounds_via_f32(out_dtype, tie):
    # Sum 1 + tie + 2**-40: straight f64 -> out_dtype would round up (just above the tie); the contract
    # rounds to f32 first (exactly the tie), then RNE gives 1.0.
    a, sa = quantize(np.array([[1.0, tie, 2.0 ** -40]], np.float32), (1, 1))
    b, sb = quantize(np.ones((1, 3), np.float32), (1, 3))
    assert scaled_matmul(a, sa, b, sb, (1, 1), (1, 3))[0, 0] == np.float32(1 + tie)
    assert scaled_matmul(a, sa, b, sb, (1, 1), (1, 3), out_dtype)[0, 0] == 1.0


def test_matmul_error():
    r = np.array([[3.0, 4.0]])
    assert matmul_error(r, r) == 0.0
    assert matmul_error(np.array([[3.0, 4.5]], np.float32), r) == pytest.approx(0.1)
    assert matmul_error(np.zeros((2, 2)), np.zeros((2, 2))) == 0.0


# ---------------------------------------------------------------------------------------------------
# FP8 blockwise compact <-> GEMM-ready scales (spec section 9)
# ---------------------------------------------------------------------------------------------------

def test_gemm_ready_worked():
    A, B = 5, 256
    row = np.arange(1, 11, dtype=np.float32).reshape(A, B // 128)      # rowwise [A, B/128] = [5, 2]
    ready = blockwise_gemm_ready(row, unscaled_dim=0)
    assert ready.shape == (2, 2, 4) and ready.dtype == np.float32       # [B/128, pad4(A)/4, 4]
    flat = ready.reshape(2, 8)                                          # = [B/128, pad4(A)]: row transposed
    np.testing.assert_array_equal(flat[:, :5], row.T)
    assert (flat[:, 5:].view(np.uint32) == 0).all()                     # padding is +0.0
    np.testing.assert_array_equal(blockwise_compact(ready, row.shape, 0), row)
    col = np.arange(1, 13, dtype=np.float32).reshape(2, 6)              # columnwise [A/128, B] = [2, 6]
    ready = blockwise_gemm_ready(col, unscaled_dim=1)
    assert ready.shape == (2, 2, 4)                                     # [A/128, pad4(B)/4, 4]
    flat = ready.reshape(2, 8)
    np.testing.assert_array_equal(flat[:, :6], col)
    assert (flat[:, 6:].view(np.uint32) == 0).all()
    np.testing.assert_array_equal(blockwise_compact(ready, col.shape, 1), col)
    assert blockwise_gemm_ready(np.ones((8, 3), np.float32), 0).shape == (3, 2, 4)   # no padding needed
    with pytest.raises(ValueError):
        blockwise_gemm_ready(row, 2)
    with pytest.raises(ValueError):
        blockwise_compact(ready, (3, 6), 1)


def test_gemm_ready_batched_and_from_quantize(rng):
    x = random_f32(rng, (2, 300, 260), -20, 20)                        # [batch, A, B]
    _, rs = quantize(x, (1, 1, 128), "f8E4M3FN", "f32")                # rowwise [2, 300, 3]
    _, cs = quantize(x, (1, 128, 1), "f8E4M3FN", "f32")                # columnwise [2, 3, 260]
    rr, cr = blockwise_gemm_ready(rs, 1), blockwise_gemm_ready(cs, 2)
    assert rr.shape == (2, 3, 75, 4) and cr.shape == (2, 3, 65, 4)
    for b in range(2):
        np.testing.assert_array_equal(rr[b], blockwise_gemm_ready(rs[b], 0))
        np.testing.assert_array_equal(cr[b], blockwise_gemm_ready(cs[b], 1))
    np.testing.assert_array_equal(blockwise_compact(rr, rs.shape, 1), rs)
    np.testing.assert_array_equal(blockwise_compact(cr, cs.shape, 2), cs)
    odd = rs[:, :298]                                                   # A = 298: two padding rows per column
    rd = blockwise_gemm_ready(odd, 1)
    assert rd.shape == (2, 3, 75, 4) and (rd.reshape(2, 3, 300)[..., 298:].view(np.uint32) == 0).all()


# ---------------------------------------------------------------------------------------------------
# Scaled matmul: layouts, batches, scale forms (spec sections 5-7, 9, 10)
# ---------------------------------------------------------------------------------------------------

def deq64(data, scales, block, elem):
    return slow_dequantize(data, scales, block, elem)


@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2", "f4E2M1FN"])
def test_linear_layer_products(elem, rng):
    """fprop / dgrad / wgrad from ONE rowwise and ONE columnwise quantize of X, W and dY (spec section 7)."""
    M, N, K = 100, 72, 160
    x, w, dy = random_f32(rng, (M, K), -4, 4), random_f32(rng, (N, K), -4, 4), random_f32(rng, (M, N), -4, 4)
    q = {name: (quantize(t, (1, 32), elem), quantize(t, (32, 1), elem)) for name, t in
         [("x", x), ("w", w), ("dy", dy)]}
    (xr, sxr), (xc, sxc) = q["x"]
    (wr, swr), (wc, swc) = q["w"]
    (dyr, sdyr), (dyc, sdyc) = q["dy"]
    R, C = (1, 32), (32, 1)
    fprop = scaled_matmul(xr, sxr, wr, swr, R, R)                                           # Y = X W^T
    dgrad = scaled_matmul(dyr, sdyr, wc, swc, R, C, b_layout="k_outer")                     # dX = dY W
    wgrad = scaled_matmul(dyc, sdyc, xc, sxc, C, C, a_layout="k_outer", b_layout="k_outer")  # dW = dY^T X
    assert fprop.shape == (M, N) and dgrad.shape == (M, K) and wgrad.shape == (N, K)
    want = {"fprop": deq64(xr, sxr, R, elem) @ deq64(wr, swr, R, elem).T,
            "dgrad": deq64(dyr, sdyr, R, elem) @ deq64(wc, swc, C, elem),
            "wgrad": deq64(dyc, sdyc, C, elem).T @ deq64(xc, sxc, C, elem)}
    got = {"fprop": fprop, "dgrad": dgrad, "wgrad": wgrad}
    hi = {"fprop": x.astype(np.float64) @ w.T, "dgrad": dy.astype(np.float64) @ w, "wgrad": dy.T.astype(np.float64) @ x}
    for name in got:
        assert matmul_error(got[name], want[name]) < 1e-5
        np.testing.assert_array_equal(got[name], want[name].astype(np.float32), err_msg=name)  # sums are exact
        assert matmul_error(got[name], hi[name]) < (0.2 if elem == "f4E2M1FN" else 0.1)
    # the same products from 128x4 tiles: K-outer scales are tiled with the M / N dim (dim 1) unscaled
    tiled = {"fprop": scaled_matmul(xr, swizzle(sxr, 0), wr, swizzle(swr, 0), R, R),
             "dgrad": scaled_matmul(dyr, swizzle(sdyr, 0), wc, swizzle(swc, 1), R, C, b_layout="k_outer"),
             "wgrad": scaled_matmul(dyc, swizzle(sdyc, 1), xc, swizzle(sxc, 1), C, C, np.float32, "k_outer",
                                    "k_outer")}
    for name in got:
        np.testing.assert_array_equal(tiled[name].view(np.uint32), got[name].view(np.uint32), err_msg=name)


LAYOUT_CASES = [("k_contiguous", "k_contiguous"), ("k_contiguous", "k_outer"), ("k_outer", "k_contiguous"),
                ("k_outer", "k_outer")]


def _stored(t: np.ndarray, layout: str) -> np.ndarray:
    """[..., MN, K] logical operand -> its stored form for the layout ([..., K, MN] when K-outer)."""
    return t if layout == "k_contiguous" else np.ascontiguousarray(np.swapaxes(t, -1, -2))


@pytest.mark.parametrize("a_layout,b_layout", LAYOUT_CASES)
def test_batched_matmul_equals_slice_loop(a_layout, b_layout, rng):
    batch, M, N, K = (2, 3), 40, 36, 96
    a_log, b_log = random_f32(rng, batch + (M, K), -8, 8), random_f32(rng, batch + (N, K), -8, 8)
    ops = []
    for t, layout in [(a_log, a_layout), (b_log, b_layout)]:
        blk2 = (1, 32) if layout == "k_contiguous" else (32, 1)
        d, s = quantize(_stored(t, layout), (1, 1) + blk2)
        ops.append((d, s, blk2, 2 if layout == "k_contiguous" else 3))     # the M / N dim: tiles' unscaled dim
    (a, sa, ba, mn_a), (b, sb, bb, mn_b) = ops
    for out_dtype in (np.float32, ml_dtypes.bfloat16):
        for tiles in (False, True):
            ta, tb = (swizzle(sa, mn_a), swizzle(sb, mn_b)) if tiles else (sa, sb)
            got = scaled_matmul(a, ta, b, tb, (1, 1) + ba, (1, 1) + bb, out_dtype, a_layout, b_layout)
            assert got.shape == batch + (M, N) and got.dtype == np.dtype(out_dtype)
            for i in np.ndindex(*batch):
                one = scaled_matmul(a[i], sa[i], b[i], sb[i], ba, bb, out_dtype, a_layout, b_layout)
                np.testing.assert_array_equal(got[i].view(np.uint8), one.view(np.uint8))
    with pytest.raises(ValueError):
        scaled_matmul(a, sa, b[:1], sb[:1], (1, 1) + ba, (1, 1) + bb, np.float32, a_layout, b_layout)
    with pytest.raises(ValueError):
        scaled_matmul(a, sa, b, sb, (1, 1) + ba, (1, 1) + bb, np.float32, a_layout, "k_inner")


@pytest.mark.parametrize("batch", [(), (2,)])
def test_scale_forms_give_identical_products(batch, rng):
    """FP8 blockwise 1x128 along K: linear, 128x4-tiled and GEMM-ready scales are the same product, for a
    rowwise (K-contiguous) A and a columnwise (K-outer) B."""
    M, N, K = 130, 70, 300
    one = (1,) * len(batch)
    a, sa = quantize(random_f32(rng, batch + (M, K), -10, 10), one + (1, 128), "f8E4M3FN", "f32")
    b, sb = quantize(random_f32(rng, batch + (K, N), -10, 10), one + (128, 1), "f8E4M3FN", "f32")
    r = len(batch) + 2
    ra, rb = blockwise_gemm_ready(sa, r - 2), blockwise_gemm_ready(sb, r - 1)
    assert ra.shape == batch + (3, 33, 4) and rb.shape == batch + (3, 18, 4)
    forms_a = [sa, swizzle(sa, r - 2), ra]
    forms_b = [sb, swizzle(sb, r - 1), rb]
    base = scaled_matmul(a, sa, b, sb, one + (1, 128), one + (128, 1), b_layout="k_outer")
    assert base.shape == batch + (M, N)
    want = deq64(a, sa, one + (1, 128), "f8E4M3FN") @ deq64(b, sb, one + (128, 1), "f8E4M3FN")
    assert matmul_error(base, want) < 1e-5
    for fa in forms_a:
        for fb in forms_b:
            got = scaled_matmul(a, fa, b, fb, one + (1, 128), one + (128, 1), b_layout="k_outer")
            np.testing.assert_array_equal(got.view(np.uint32), base.view(np.uint32))
    with pytest.raises(ValueError):                         # GEMM-ready scales need a 1 x 128 block along K
        d, s = quantize(random_f32(rng, batch + (M, K)), one + (1, 32), "f8E4M3FN", "f32")
        scaled_matmul(d, blockwise_gemm_ready(s, r - 2), a, sa, one + (1, 32), one + (1, 128))
    with pytest.raises(ValueError):                         # rank + 2 fits no scale form
        scaled_matmul(a, sa[..., None, None], b, sb, one + (1, 128), one + (128, 1), b_layout="k_outer")


def test_scaled_matmul_fp4(rng):
    M, N, K = 70, 50, 128
    xa, xb = random_f32(rng, (M, K), -4, 4), random_f32(rng, (N, K), -4, 4)
    # MXFP4: E8M0 scales, block 32
    a, sa = quantize(xa, (1, 32), "f4E2M1FN")
    b, sb = quantize(xb, (1, 32), "f4E2M1FN")
    mx = scaled_matmul(a, swizzle(sa), b, sb, (1, 32), (1, 32))
    want = deq64(a, sa, (1, 32), "f4E2M1FN") @ deq64(b, sb, (1, 32), "f4E2M1FN").T
    np.testing.assert_array_equal(mx, want.astype(np.float32))
    assert matmul_error(mx, xa.astype(np.float64) @ xb.T) < 0.2
    # NVFP4: f8E4M3FN scales, block 16, per-tensor scales t
    a, sa, ta = quantize_nvfp4(xa)
    b, sb, tb = quantize_nvfp4(xb * np.float32(1000))
    assert ta != 1 and tb != 1
    nv = scaled_matmul(a, sa, b, swizzle(sb), (1, 16), (1, 16), a_tensor_scale=ta, b_tensor_scale=tb)
    want = dequantize_nvfp4(a, sa, ta).astype(np.float64) @ dequantize_nvfp4(b, sb, tb).astype(np.float64).T
    assert matmul_error(nv, want) < 1e-6
    assert matmul_error(nv, (xa.astype(np.float64) @ xb.T) * 1000) < 0.2
    nv_tiles = scaled_matmul(a, swizzle(sa), b, sb, (1, 16), (1, 16), a_tensor_scale=ta, b_tensor_scale=tb)
    np.testing.assert_array_equal(nv_tiles.view(np.uint32), nv.view(np.uint32))
    # without the tensor scales the product is off by ta * tb
    raw = scaled_matmul(a, sa, b, sb, (1, 16), (1, 16))
    assert matmul_error(raw * np.float64(ta) * np.float64(tb), want) < 1e-5
