"""Tests for mx.reference's FP4 formats against the spec (section 10) and the oracles of reference_oracles.py:
the E2M1 element (values, RNE ties, saturation, nibble packing), MXFP4 and NVFP4. Fresh random inputs each
run; the seed is printed.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from mx import reference as ref
from mx.reference import (dequantize, dequantize_nvfp4, matmul_error, pack_fp4, quantize, quantize_nvfp4,
                          scales_shape, swizzle, unpack_fp4, unswizzle)
from reference_oracles import (E4M3, E8M0, F32_MAX, F4, FP4_GRID, MODES, check_against_oracle, decode_bits,
                               decode_fp4, encode_bits, encode_fp4, random_f32, random_f32_bits, slow_dequantize,
                               spec_address, special_rows)


# ---------------------------------------------------------------------------------------------------
# FP4 element (spec section 10): values, RNE ties, saturation, nibble packing
# ---------------------------------------------------------------------------------------------------

def fp4(values) -> np.ndarray:
    return ref._round_to_fp4(np.asarray(values, np.float32))


def test_fp4_value_table():
    codes = np.arange(16, dtype=np.uint8).view(F4)
    np.testing.assert_array_equal(codes.astype(np.float64), np.concatenate([FP4_GRID, -FP4_GRID]))
    grid = np.concatenate([FP4_GRID, -FP4_GRID]).astype(np.float32)
    np.testing.assert_array_equal(fp4(grid).view(np.uint8), np.arange(16))   # every value encodes to itself
    assert fp4([-0.0]).view(np.uint8)[0] == 0x8 and fp4([0.0]).view(np.uint8)[0] == 0x0


def test_fp4_rne_ties_and_saturation():
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    want = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert fp4(ties).astype(np.float64).tolist() == want
    assert fp4(np.negative(ties)).view(np.uint8).tolist() == [0x8, 0xA, 0xA, 0xC, 0xC, 0xE, 0xE]
    up = np.nextafter(np.float32(ties), np.float32(np.inf))
    down = np.nextafter(np.float32(ties), np.float32(0))
    assert fp4(up).astype(np.float64).tolist() == [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert fp4(down).astype(np.float64).tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
    sat = [6.0, 6.5, 7.0, 100.0, F32_MAX, np.inf]
    assert fp4(sat).view(np.uint8).tolist() == [7] * 6
    assert fp4(np.negative(sat)).view(np.uint8).tolist() == [0xF] * 6
    assert fp4([2.0 ** -149, -1e-30, 0.2, -0.26]).view(np.uint8).tolist() == [0, 0x8, 0, 0x9]
    assert fp4([np.nan, -np.nan]).view(np.uint8).tolist() == [0, 0]        # E2M1 has no NaN


def test_fp4_rounding_vs_oracles(rng):
    upper = (np.arange(2 ** 16, dtype=np.uint32) << 16).view(np.float32)
    near = (rng.integers(0, 2 ** 23, 1 << 17) | (rng.integers(127 - 4, 127 + 4, 1 << 17) << 23)
            | (rng.integers(0, 2, 1 << 17) << 31)).astype(np.uint32).view(np.float32)
    for y in (upper[~np.isnan(upper)], near, random_f32_bits(rng, 1 << 16)):
        got = fp4(y).view(np.uint8)
        np.testing.assert_array_equal(got, encode_fp4(y))
        with np.errstate(invalid="ignore"):     # ml_dtypes, after an explicit clip, as a second opinion
            np.testing.assert_array_equal(got, np.clip(y, -6, 6).astype(F4).view(np.uint8))


def test_pack_fp4_nibble_order(rng):
    a = np.array([1.0, -6.0, 0.5, 0.0, -0.0, 3.0], np.float32).astype(F4)      # codes 2, F, 1, 0, 8, 5
    p = pack_fp4(a)
    assert p.dtype == np.uint8 and p.tolist() == [0xF2, 0x01, 0x58]
    np.testing.assert_array_equal(unpack_fp4(p).view(np.uint8), a.view(np.uint8))
    codes = rng.integers(0, 16, (3, 4, 10)).astype(np.uint8)
    p = pack_fp4(codes.view(F4))
    assert p.shape == (3, 4, 5)
    np.testing.assert_array_equal(p, codes[..., 0::2] + 16 * codes[..., 1::2])
    u = unpack_fp4(p)
    assert u.dtype == np.dtype(F4) and u.shape == (3, 4, 10)
    np.testing.assert_array_equal(u.view(np.uint8), codes)
    with pytest.raises(ValueError):
        pack_fp4(codes[..., :9].view(F4))
    with pytest.raises(TypeError):
        pack_fp4(codes)
    with pytest.raises(TypeError):
        unpack_fp4(codes.view(F4))


# ---------------------------------------------------------------------------------------------------
# MXFP4 (spec section 10: section 3 with max finite 6, emax 2)
# ---------------------------------------------------------------------------------------------------

def test_mxfp4_worked():
    row = np.zeros((6, 32), np.float32)
    row[0, :6] = [7.0, 2.5, -0.5, 0.25, 1.0, 3.0]          # ceil: q = 7/6 -> b = 128 (scale 2)
    row[1, :3] = [6.0, -1.25, 0.75]                         # q = 1 exactly -> b = 127, ties 1.25 -> 1, 0.75 -> 1
    row[2, :2] = [0.0, -0.0]                                # zero block
    row[3, :3] = [np.nan, 1.0, -2.0]                        # NaN block
    row[4, :3] = [np.inf, -1.0, -np.inf]                    # Inf block
    row[5, :2] = [2.0 ** -124, 2.0 ** -126]                 # q = 2**-126/6 subnormal and > 2**-127 -> b = 1
    data, s = quantize(row, (1, 32), "f4E2M1FN")
    assert data.dtype == np.dtype(F4) and s.dtype == np.dtype(E8M0)
    assert s.view(np.uint8)[:, 0].tolist() == [128, 127, 0, 255, 254, 1]
    u = data.view(np.uint8)
    assert u[0, :6].tolist() == [0x6, 0x2, 0x8, 0x0, 0x1, 0x3]      # 3.5->4, 1.25->1, -0.25->-0, .125->0, .5, 1.5
    assert u[1, :3].tolist() == [0x7, 0xA, 0x2] and (u[1, 3:] == 0).all()
    assert u[2, :2].tolist() == [0x0, 0x8]
    assert (u[3] == 0).all()                                         # NaN block: codes 0, scale 0xFF
    assert u[4, :3].tolist() == [0x7, 0x8, 0xF]                      # Inf saturates; -1 * 2**-127 -> -0
    assert u[5, :2].tolist() == [0x6, 0x2]                           # y = x * 2**126: 4 and 1
    # floor (OCP): b = exponent(amax) - 2, so 7 has scale 1 and saturates
    data, s = quantize(row[:2], (1, 32), "f4E2M1FN", rounding="floor")
    assert s.view(np.uint8)[:, 0].tolist() == [127, 127]
    assert data.view(np.uint8)[0, :6].tolist() == [0x7, 0x4, 0x9, 0x0, 0x2, 0x5]
    # dequantize: f32(code) * 2**(b-127); NaN scale -> NaN block although the codes are 0
    d, s = quantize(row, (1, 32), "f4E2M1FN")
    x = dequantize(d, s, (1, 32))
    assert x[0, :6].tolist() == [8.0, 2.0, -0.0, 0.0, 1.0, 3.0] and np.isnan(x[3]).all()
    assert x[4, :3].tolist() == [np.inf, -0.0, -np.inf]                # 6 * 2**127 overflows f32


@pytest.mark.parametrize("rounding,scale_type", MODES)
def test_mxfp4_vs_oracle(rounding, scale_type, rng):
    x = random_f32(rng, (24, 96), -20, 20) * np.exp2(rng.integers(-30, 30, (24, 1))).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 6)] = [np.inf, -np.inf, np.nan, 0.0, 2.0 ** -140, -F32_MAX]
    for block in [(1, 32), (32, 1), (24, 96)]:
        check_against_oracle(x, block, "f4E2M1FN", scale_type, rounding)
    check_against_oracle(special_rows("f8E4M3FN"), (1, 8), "f4E2M1FN", scale_type, rounding)
    data, s = quantize(x, (1, 32), "f4E2M1FN", scale_type, rounding)
    got = dequantize(data, s, (1, 32))
    with np.errstate(all="ignore"):
        want = slow_dequantize(data, s, (1, 32), "f4E2M1FN").astype(np.float32)
    assert ((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))).all()


def test_mxfp4_ceil_guarantee(rng):
    x = random_f32(rng, (2048, 32), -30, 30) * np.exp2(rng.integers(-60, 60, (2048, 1))).astype(np.float32)
    data, s = quantize(x, (1, 32), "f4E2M1FN")
    amax_blk = np.abs(x).max(axis=1).astype(np.float64)
    b = s.view(np.uint8)[:, 0].astype(np.float64)
    assert (amax_blk / np.exp2(b - 127) <= 6).all()
    assert ((b == 0) | (amax_blk / np.exp2(b - 128) > 6)).all()
    # the block max never saturates below itself: it lands on 4 or 6 after scaling (or 3 on RNE from 3.x)
    top = np.abs(decode_fp4(data.view(np.uint8)[np.arange(2048), np.abs(x).argmax(axis=1)]))
    assert (top >= 3).all()


# ---------------------------------------------------------------------------------------------------
# NVFP4 (spec section 10): two-level scales, the spec's f32 order
# ---------------------------------------------------------------------------------------------------

def slow_nvfp4(x: np.ndarray, t: np.float32):
    """Per-block loop in np.float32 scalars with the bit-level E4M3 / brute-force E2M1 oracles."""
    f = np.float32
    x32 = np.asarray(x).astype(np.float32)
    nb = -(-x32.shape[-1] // 16)
    codes = np.zeros(x32.shape, np.uint8)
    scales = np.zeros(x32.shape[:-1] + (nb,), np.uint8)
    for idx in np.ndindex(*x32.shape[:-1]):
        for j in range(nb):
            vals = x32[idx][16 * j:16 * j + 16]
            am = f(np.max(np.abs(vals)))
            if math.isnan(am):
                scales[idx + (j,)], codes[idx + (slice(16 * j, 16 * j + 16),)] = 0x7F, 0
                continue
            with np.errstate(over="ignore"):
                v = f(f(am / f(6)) / t)
            v = min(max(v, f(2.0 ** -6)), f(448))
            sc = encode_bits(v, "f8E4M3FN")
            r = f(f(f(1) / t) / f(decode_bits(sc, "f8E4M3FN")))
            with np.errstate(over="ignore", invalid="ignore"):
                y = np.clip(vals * r, f(-6), f(6))
            scales[idx + (j,)] = sc
            codes[idx + (slice(16 * j, 16 * j + 16),)] = encode_fp4(y)
    return codes, scales


def test_nvfp4_worked_unit_tensor_scale():
    x = np.zeros((4, 16), np.float32)
    x[0, :5] = [6.0, 0.75, -1.25, 2.5, 5.0]      # amax 6: s = 1, r = 1: ties 0.75->1, 1.25->1, 2.5->2, 5->4
    x[1, :4] = [12.0, -5.0, 2.5, 0.6]             # amax 12: s = 2, r = 0.5: 6, -2.5->-2, 1.25->1, 0.3->0.5
    x[2, :2] = [0.03, 0.01]                       # amax/6 = 0.005 clamps to s = 2**-6, r = 64: 1.92->2, .64->.5
    x[3, :4] = [1.0, 0.5, 0.25, -0.1]             # 1/6 -> e4m3 0.171875 (11/64), r = 64/11: 5.8->6, 2.9->3, ...
    data, s, t = quantize_nvfp4(x, tensor_scale=1.0)
    assert t == 1.0 and type(t) is np.float32
    assert data.dtype == np.dtype(F4) and data.shape == (4, 16)
    assert s.dtype == np.dtype(E4M3) and s.shape == (4, 1)
    assert s.astype(np.float64)[:, 0].tolist() == [1.0, 2.0, 2.0 ** -6, 0.171875]
    q = data.astype(np.float64)
    assert q[0, :5].tolist() == [6.0, 1.0, -1.0, 2.0, 4.0]
    assert q[1, :4].tolist() == [6.0, -2.0, 1.0, 0.5]
    assert q[2, :2].tolist() == [2.0, 0.5]
    assert q[3, :4].tolist() == [6.0, 3.0, 1.5, -0.5]
    assert (q[:, 5:] == 0).all()


def test_nvfp4_worked_computed_tensor_scale():
    f = np.float32
    # amax_tensor = 5376 = 2 * 2688: t = 2 exactly; the block with that amax gets s = (5376/6)/2 = 448.
    x = np.zeros((2, 16), np.float32)
    x[0, :3] = [5376.0, -2688.0, 896.0]           # r = (1/2)/448 = 1/896: 6, -3, 1
    x[1, :2] = [12.0, 3.0]                        # s = (12/6)/2 = 1, r = 0.5: 6, 1.5
    data, s, t = quantize_nvfp4(x)
    assert t == 2.0 and s.astype(np.float64)[:, 0].tolist() == [448.0, 1.0]
    assert data.astype(np.float64)[0, :3].tolist() == [6.0, -3.0, 1.0]
    assert data.astype(np.float64)[1, :2].tolist() == [6.0, 1.5]
    # The f32 order matters: amax 6 gives t = f32(6/2688) = 0.002232143, 1/t = 447.99997 -> s = 448, and
    # r = (1/t)/448 = 0.99999994, so the tie 0.75 lands just below it and rounds to 0.5 (with t = 1 it is 1).
    y = np.zeros((1, 16), np.float32)
    y[0, :2] = [6.0, 0.75]
    data, s, t = quantize_nvfp4(y)
    assert t == f(6) / f(2688) and s.astype(np.float64)[0, 0] == 448.0
    assert (f(1) / t) / f(448) == f(0.99999994)
    assert data.astype(np.float64)[0, :2].tolist() == [6.0, 0.5]
    assert quantize_nvfp4(y, 1.0)[0].astype(np.float64)[0, :2].tolist() == [6.0, 1.0]


def test_nvfp4_special_values():
    x = np.zeros((5, 20), np.float32)             # last dim 20: a full block and a partial block of 4
    x[0, :3] = [np.nan, 1.0, -2.0]                # NaN block: scale 0x7F, codes 0
    x[1, :3] = [np.inf, -3.0, -np.inf]            # Inf block: s = 448, Inf saturates to +-6
    x[2, 16:20] = [-0.0, 0.0, 0.0, -0.0]          # zero (partial) block: s = 2**-6, signed zeros kept
    x[3, 16:19] = [3.0, -1.5, 0.7]                # partial block amax 3
    x[4, :2] = [2688.0, 1.0]                      # finite amax_tensor 2688 -> t = 1 (NaN / Inf excluded)
    data, s, t = quantize_nvfp4(x)
    assert t == 1.0 and s.shape == (5, 2)
    sb, u = s.view(np.uint8), data.view(np.uint8)
    assert sb[0, 0] == 0x7F and (u[0, :16] == 0).all()
    assert s.astype(np.float64)[1, 0] == 448.0 and u[1, :3].tolist() == [0x7, 0x8, 0xF]  # -3/448 -> -0
    assert s.astype(np.float64)[2, 1] == 2.0 ** -6 and u[2, 16:20].tolist() == [0x8, 0, 0, 0x8]
    assert s.astype(np.float64)[3, 1] == 0.5 and data.astype(np.float64)[3, 16:19].tolist() == [6.0, -3.0, 1.5]
    assert s.astype(np.float64)[4, 0] == 448.0
    deq = dequantize_nvfp4(data, s, t)
    assert np.isnan(deq[0, :16]).all() and not np.isnan(deq[1:]).any() and not np.isnan(deq[0, 16:]).any()
    assert deq.view(np.uint32)[0, 0] == 0x7FC00000
    # t falls back to 1 when amax_tensor is 0, or so small that t = amax/2688 is not a normal f32
    for z in (np.zeros((2, 16), np.float32), np.full((2, 16), 2.0 ** -120, np.float32)):
        assert quantize_nvfp4(z)[2] == 1.0
    assert quantize_nvfp4(np.full((1, 16), np.nan, np.float32))[2] == 1.0
    for bad in (0.0, -1.0, np.nan, np.inf, 1e-39):
        with pytest.raises(ValueError):
            quantize_nvfp4(x, bad)


def test_nvfp4_vs_oracle(rng):
    x = random_f32(rng, (4, 6, 40), -12, 12) * np.exp2(rng.integers(-6, 6, (4, 6, 1))).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 4)] = [np.inf, -np.inf, np.nan, -0.0]
    finite = np.abs(x[np.isfinite(x)])
    for t_in in (None, 1.0, 0.37, 1e-3):
        data, s, t = quantize_nvfp4(x, t_in)
        if t_in is None:
            assert t == np.float32(finite.max()) / np.float32(2688)
        codes, want_s = slow_nvfp4(x, t)
        assert data.shape == x.shape and s.shape == scales_shape(x.shape, (1, 1, 16)) == (4, 6, 3)
        np.testing.assert_array_equal(s.view(np.uint8), want_s)
        np.testing.assert_array_equal(data.view(np.uint8), codes)
    bf = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(quantize_nvfp4(bf)[0].view(np.uint8),
                                  quantize_nvfp4(bf.astype(np.float32))[0].view(np.uint8))


def test_dequantize_nvfp4_order_and_dtypes(rng):
    # x' = (float(q) * float(s)) * t: with q = 6, s = 3.5, t = 0.7297671 this is 15.325109, while
    # q * (s * t) would give 15.3251095.
    t = np.float32(0.7297671)
    data = np.full((1, 16), 6.0, np.float32).astype(F4)
    s = np.array([[3.5]], np.float32).astype(E4M3)
    out = dequantize_nvfp4(data, s, t)
    assert out[0, 0] == np.float32(15.325109) != np.float32(6) * (np.float32(3.5) * t)
    x = random_f32(rng, (32, 64), -10, 10)
    d, sc, tt = quantize_nvfp4(x)
    f32 = dequantize_nvfp4(d, sc, tt)
    want = (decode_fp4(d.view(np.uint8)).astype(np.float32) * np.repeat(sc.astype(np.float32), 16, axis=1)) * tt
    np.testing.assert_array_equal(f32, want)
    assert matmul_error(f32, x) < 0.1
    bf = dequantize_nvfp4(d, sc, tt, ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bf.view(np.uint16), f32.astype(ml_dtypes.bfloat16).view(np.uint16))
    with pytest.raises(TypeError):
        dequantize_nvfp4(d.view(np.uint8), sc, tt)


def test_nvfp4_scales_swizzle():
    # block 16: one 128x4 tile of scales covers 128 rows x 64 elements
    x = np.arange(200 * 64, dtype=np.float32).reshape(200, 64) % 97 + 1
    _, s, _ = quantize_nvfp4(x)
    assert s.shape == (200, 4)
    sw = swizzle(s)
    assert sw.shape == (2, 1, 32, 4, 4) and sw.dtype == np.dtype(E4M3)
    r, c = np.meshgrid(np.arange(200), np.arange(4), indexing="ij")
    flat = sw.view(np.uint8).ravel()
    np.testing.assert_array_equal(flat[spec_address(r, c, 4)], s.view(np.uint8))
    assert np.count_nonzero(flat) == 800
    np.testing.assert_array_equal(unswizzle(sw, s.shape).view(np.uint8), s.view(np.uint8))
