"""Tests for mx.reference against the spec (docs/spec.md) and independent slow oracles.

The oracles here deliberately share no code with the reference: fp8 rounding is done on integer bit
patterns, scale exponents with math.frexp, blocks with Python loops over slices.  Inputs are fresh random
draws each run; the seed is printed (pytest shows it on failure) so a failure can be replayed.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from mx import reference as ref
from mx.reference import (ELEMENT_TYPES, SCALE_TYPES, amax, blockwise_compact, blockwise_gemm_ready, dequantize,
                          dequantize_nvfp4, emax, matmul_error, max_finite, pack_fp4, quantize, quantize_delayed,
                          quantize_nvfp4, scaled_matmul, scales_shape, swizzle, unpack_fp4, unswizzle,
                          update_amax_history)

ELEMS = ["f8E4M3FN", "f8E5M2"]
# (mantissa bits, exponent bias, largest finite code, max finite, emax) written down independently.
FMT = {"f8E4M3FN": (3, 7, 0x7E, 448.0, 8), "f8E5M2": (2, 15, 0x7B, 57344.0, 15), "f4E2M1FN": (1, 1, 0x7, 6.0, 2)}
NAN_CODE = {"f8E4M3FN": 0x7F, "f8E5M2": 0x7F, "f4E2M1FN": 0x0}    # every element of a NaN block
MODES = [("ceil", "f8E8M0FNU"), ("floor", "f8E8M0FNU"), ("ceil", "f32"), ("floor", "f32"), ("exact", "f32")]
E8M0 = ml_dtypes.float8_e8m0fnu
E4M3 = ml_dtypes.float8_e4m3fn
F4 = ml_dtypes.float4_e2m1fn
FP4_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])                 # E2M1 magnitude of codes 0..7
F32_MAX = float(np.finfo(np.float32).max)


@pytest.fixture
def rng() -> np.random.Generator:
    seed = np.random.SeedSequence().entropy
    print(f"numpy rng seed = {seed}")
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------------------
# Independent oracles
# ---------------------------------------------------------------------------------------------------

def encode_fp4(y: np.ndarray) -> np.ndarray:
    """f32 -> E2M1 code by brute force: the nearest grid value in float64 (exact here), a tie to the even
    code, saturation to 6, sign bit 3 copied from the f32 sign (finite or +-Inf inputs)."""
    y = np.asarray(y, np.float32)
    sign = ((y.view(np.uint32) >> 31).astype(np.uint8) << 3)
    mag = np.minimum(np.abs(y.astype(np.float64)), 7.0)
    dist = np.abs(mag[..., None] - FP4_GRID)
    best = dist == dist.min(axis=-1, keepdims=True)
    even = best & (np.arange(8) % 2 == 0)
    code = np.where(even.any(axis=-1), np.argmax(even, axis=-1), np.argmax(best, axis=-1))
    return (code.astype(np.uint8) | sign).astype(np.uint8)


def decode_fp4(code: np.ndarray) -> np.ndarray:
    c = np.asarray(code).astype(np.int64)
    return np.where(c & 8, -1.0, 1.0) * FP4_GRID[c & 7]


def encode_bits(y: np.ndarray, elem: str) -> np.ndarray:
    """f32 -> fp8 code (RNE, saturate to max finite, Inf saturates, NaN -> 0x7F|sign) on integer bits."""
    if elem == "f4E2M1FN":
        return encode_fp4(y)
    mbits, bias, maxcode = FMT[elem][:3]
    bits = np.asarray(y, np.float32).view(np.uint32).astype(np.int64)
    sign = (bits >> 31) << 7
    e, m = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    sig = np.where(e > 0, m | (1 << 23), m)                 # value = sig * 2**lsb
    lsb = np.maximum(e, 1) - 150
    top = np.frexp(sig.astype(np.float64))[1] - 1           # floor(log2(sig))
    p = np.maximum(np.where(sig > 0, top + lsb, 1 - bias), 1 - bias)   # binade, subnormals share 1-bias
    shift = np.minimum(p - mbits - lsb, 40)                 # > 0 for every f32
    k = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    k = k + ((rem > half) | ((rem == half) & ((k & 1) == 1)))
    code = np.minimum(((p + bias - 1) << mbits) + k, maxcode)   # carry into the next binade is automatic
    code = np.where(e == 255, np.where(m == 0, maxcode, 0x7F), code)
    return (code | sign).astype(np.uint8)


def decode_bits(code: np.ndarray, elem: str) -> np.ndarray:
    """fp8 / fp4 code -> float64 value (finite codes only)."""
    if elem == "f4E2M1FN":
        return decode_fp4(code)
    mbits, bias = FMT[elem][:2]
    c = np.asarray(code).astype(np.int64)
    e, m = (c >> mbits) & ((1 << (7 - mbits)) - 1), c & ((1 << mbits) - 1)
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (m + 2 ** mbits) * 2.0 ** (e - bias - mbits))
    return np.where(c & 0x80, -mag, mag)


def ceil_byte(amax: float, elem: str) -> int:
    """Smallest b with 2**(b-127) >= q, q the f32 quotient amax/maxfinite; clamped; Inf -> 254, NaN -> 255."""
    if math.isnan(amax):
        return 255
    if math.isinf(amax):
        return 254
    q = float(np.float32(amax) / np.float32(FMT[elem][3]))
    if q == 0:
        return 0
    mant, e = math.frexp(q)                                 # q = mant * 2**e, mant in [0.5, 1)
    return min(max((e - 1 if mant == 0.5 else e) + 127, 0), 254)


def floor_byte(amax: float, elem: str) -> int:
    """OCP MX v1.0: shared exponent floor(log2(amax)) - emax, biased and clamped."""
    if math.isnan(amax):
        return 255
    if math.isinf(amax):
        return 254
    if amax == 0:
        return 0
    return min(max(math.frexp(amax)[1] - 1 - FMT[elem][4] + 127, 0), 254)


def slow_quantize(x: np.ndarray, block, elem: str, scale_type: str, rounding: str):
    """Per-block loop oracle. Returns (codes uint8, scales as uint8 bytes or float32 values)."""
    x32 = np.asarray(x).astype(np.float32)
    nb = tuple(-(-s // b) for s, b in zip(x32.shape, block))
    codes = np.zeros(x32.shape, np.uint8)
    scales = np.zeros(nb, np.uint8 if scale_type == "f8E8M0FNU" else np.float32)
    for idx in np.ndindex(*nb):
        sl = tuple(slice(i * b, (i + 1) * b) for i, b in zip(idx, block))
        vals = x32[sl]
        amax = float(np.max(np.abs(vals)))
        if rounding == "exact":
            if math.isnan(amax):
                s = np.float32("nan")
            elif math.isinf(amax):
                s = np.float32(F32_MAX)
            else:
                s = np.float32(amax) / np.float32(FMT[elem][3])
                s = np.float32(2.0 ** -127) if s == 0 else s
            with np.errstate(all="ignore"):
                y = vals / s
            scales[idx] = s
        else:
            b = (ceil_byte if rounding == "ceil" else floor_byte)(amax, elem)
            with np.errstate(all="ignore"):
                y = vals * np.float32(2.0 ** (127 - min(b, 254)))
            scales[idx] = b if scale_type == "f8E8M0FNU" else (np.float32(2.0 ** (b - 127)) if b < 255 else np.nan)
        codes[sl] = NAN_CODE[elem] if math.isnan(amax) else encode_bits(y, elem)
    return codes, scales


def scale_bits(s: np.ndarray) -> np.ndarray:
    """Comparable bit patterns of scales of either type (so NaN == NaN)."""
    s = np.asarray(s)
    return s.view(np.uint8) if s.dtype.itemsize == 1 else s.view(np.uint32)


def scale_f64(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s)
    if s.dtype == np.dtype(E8M0):
        b = s.view(np.uint8).astype(np.int64)
        return np.where(b == 255, np.nan, np.exp2(b - 127.0))
    return s.astype(np.float64)


def slow_dequantize(data: np.ndarray, scales: np.ndarray, block, elem: str) -> np.ndarray:
    """float64 dequantization through decode_bits (exact: fp8 * 2**k or f32 products fit in f64)."""
    sv = scale_f64(scales)
    for ax, b in enumerate(block):
        sv = np.repeat(sv, b, axis=ax)
    sv = sv[tuple(slice(0, n) for n in data.shape)]
    return decode_bits(data.view(np.uint8), elem) * sv


def check_against_oracle(x: np.ndarray, block, elem: str, scale_type: str, rounding: str) -> None:
    data, scales = quantize(x, block, elem, scale_type, rounding)
    codes, want_scales = slow_quantize(x, block, elem, scale_type, rounding)
    assert data.dtype == np.dtype(ELEMENT_TYPES[elem]) and data.shape == x.shape
    assert scales.dtype == np.dtype(SCALE_TYPES[scale_type])
    assert scales.shape == scales_shape(x.shape, block) == want_scales.shape
    np.testing.assert_array_equal(scale_bits(scales), scale_bits(want_scales.astype(scales.dtype)
                                                                 if scale_type == "f32" else want_scales))
    np.testing.assert_array_equal(data.view(np.uint8), codes)


def random_f32(rng: np.random.Generator, shape, lo: int = -20, hi: int = 20) -> np.ndarray:
    """Signed values with random mantissas and exponents in [lo, hi) (a few exact zeros)."""
    mag = rng.uniform(1, 2, shape) * np.exp2(rng.integers(lo, hi, shape))
    x = (rng.choice([-1.0, 1.0], shape) * mag).astype(np.float32)
    x[rng.random(shape) < 0.02] = 0
    return x


def random_f32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random finite float32 over the full range (subnormals included)."""
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    bits = np.where(((bits >> 23) & 0xFF) == 0xFF, bits & ~np.uint32(0x40000000), bits).astype(np.uint32)
    return bits.view(np.float32)


# ---------------------------------------------------------------------------------------------------
# Basics
# ---------------------------------------------------------------------------------------------------

def test_constants_and_shapes():
    assert max_finite("f8E4M3FN") == 448.0 and max_finite("f8E5M2") == 57344.0
    assert emax("f8E4M3FN") == 8 and emax("f8E5M2") == 15
    assert max_finite("f4E2M1FN") == 6.0 and emax("f4E2M1FN") == 2
    assert ELEMENT_TYPES == {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
                             "f6E3M2FN": ml_dtypes.float6_e3m2fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn,
                             "f4E2M1FN": ml_dtypes.float4_e2m1fn, "i8": np.int8}
    assert SCALE_TYPES == {"f8E8M0FNU": ml_dtypes.float8_e8m0fnu, "f32": np.float32}
    M, K = 500, 193
    assert scales_shape((M, K), (1, 32)) == (M, 7)
    assert scales_shape((M, K), (32, 1)) == (16, K)
    assert scales_shape((M, K), (1, 128)) == (M, 2)
    assert scales_shape((M, K), (128, 128)) == (4, 2)
    assert scales_shape((M, K), (M, K)) == (1, 1)
    assert scales_shape((1, 1), (128, 128)) == (1, 1)
    with pytest.raises(ValueError):
        scales_shape((4, 4), (1,))
    with pytest.raises(ValueError):
        max_finite("f8E4M3")


def test_numpy_keeps_subnormals():
    tiny = np.array([2.0 ** -126], np.float32)
    assert (tiny * np.float32(0.5))[0] == np.float32(2.0 ** -127) != 0
    assert np.array([0x00400000], np.uint32).view(np.float32)[0] * np.float32(2.0 ** 127) == 1.0
    assert ref._pow2_f32(np.arange(-149, 128)).astype(np.float64).tolist() == [2.0 ** e for e in range(-149, 128)]


def test_argument_errors():
    x = np.ones((4, 32), np.float32)
    with pytest.raises(ValueError):
        quantize(x, (1, 32), scale_type="f8E8M0FNU", rounding="exact")
    with pytest.raises(ValueError):
        quantize(x, (1, 32), rounding="nearest")
    with pytest.raises(ValueError):
        quantize(x, (1, 32), elem="f6E3M3FN")
    with pytest.raises(TypeError):
        quantize(x.astype(np.float64), (1, 32))
    d, s = quantize(x, (1, 32))
    with pytest.raises(ValueError):
        dequantize(d, s, (1, 16))


# ---------------------------------------------------------------------------------------------------
# Element rounding: ml_dtypes f32 -> fp8 after clipping must equal integer RNE + satfinite
# ---------------------------------------------------------------------------------------------------

def _check_round(y: np.ndarray, elem: str) -> None:
    y = np.asarray(y, np.float32)
    got = ref._round_to_element(y, elem).view(np.uint8)
    want = encode_bits(y, elem)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{elem}: {bad.size} mismatches, e.g. {y[bad[:5]]} -> {got[bad[:5]]} want {want[bad[:5]]}"


@pytest.mark.parametrize("elem", ELEMS)
def test_round_all_upper_half_patterns(elem):
    bits = (np.arange(2 ** 16, dtype=np.uint32) << 16).view(np.float32)
    finite_or_inf = ~np.isnan(bits)
    _check_round(bits[finite_or_inf], elem)
    assert np.isnan(ref._round_to_element(bits[~finite_or_inf], elem).astype(np.float32)).all()


@pytest.mark.parametrize("elem", ELEMS)
def test_round_random_patterns(elem, rng):
    _check_round(random_f32_bits(rng, 1 << 20), elem)
    # Concentrate on the binades where fp8 rounding actually happens (all low mantissa bits random).
    near = rng.integers(0, 2 ** 23, 1 << 20, dtype=np.int64) | (rng.integers(127 - 30, 127 + 20, 1 << 20) << 23)
    near |= rng.integers(0, 2, 1 << 20) << 31
    _check_round(near.astype(np.uint32).view(np.float32), elem)


@pytest.mark.parametrize("elem", ELEMS)
def test_round_boundaries(elem):
    mbits, bias, maxcode, mf, _ = FMT[elem]
    vals = decode_bits(np.arange(maxcode + 1), elem)        # every non-negative finite fp8 value
    ulp_top = 2.0 ** (FMT[elem][4] - mbits)
    grid = np.append(vals, mf + ulp_top)                     # the value just past max finite
    mids = (grid[:-1] + grid[1:]) / 2                        # exact in f32 (few significant bits)
    min_sub = 2.0 ** (1 - bias - mbits)
    pts = np.concatenate([vals, mids, [mf, mf + ulp_top / 2, 2 * mf, F32_MAX, np.inf, min_sub / 2, 1.5 * min_sub,
                                       2.0 ** -149, 2.0 ** -126]]).astype(np.float32)
    with np.errstate(over="ignore"):
        pts = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))])
    pts = np.concatenate([pts, -pts])
    _check_round(pts, elem)
    r = lambda v: int(ref._round_to_element(np.array([v], np.float32), elem).view(np.uint8)[0])  # noqa: E731
    assert r(mf) == maxcode and r(mf + ulp_top / 2) == maxcode and r(np.inf) == maxcode
    assert r(-np.inf) == 0x80 | maxcode and r(F32_MAX) == maxcode
    assert r(min_sub / 2) == 0x00 and r(-min_sub / 2) == 0x80 and r(1.5 * min_sub) == 0x02
    assert r(np.nextafter(np.float32(min_sub / 2), np.float32(1))) == 0x01
    assert r(-0.0) == 0x80 and r(0.0) == 0x00


# ---------------------------------------------------------------------------------------------------
# Swizzled layout (spec section 4): the three worked checks, verbatim
# ---------------------------------------------------------------------------------------------------

def spec_address(r: np.ndarray, c: np.ndarray, cols_padded: int) -> np.ndarray:
    offset = (r % 32) * 16 + ((r % 128) // 32) * 4 + (c % 4)
    tile = (r // 128) * (cols_padded // 4) + (c // 4)
    return tile * 512 + offset


def test_swizzle_worked_4x2():
    a_to_h = np.frombuffer(b"abcdefgh", np.uint8).reshape(4, 2)
    sw = swizzle(a_to_h.view(E8M0))
    assert sw.shape == (1, 1, 32, 4, 4) and sw.dtype == np.dtype(E8M0)
    flat = sw.view(np.uint8).ravel()
    want = np.zeros(512, np.uint8)
    want[[0, 1, 16, 17, 32, 33, 48, 49]] = np.frombuffer(b"abcdefgh", np.uint8)
    np.testing.assert_array_equal(flat, want)


def test_swizzle_worked_256x256(rng):
    x = random_f32(rng, (256, 256), -30, 30)
    _, s = quantize(x, (1, 32))
    assert s.shape == (256, 8)
    sw = swizzle(s)
    assert sw.shape == (2, 2, 32, 4, 4) and sw.nbytes == 2048
    tiles = sw.view(np.uint8).reshape(4, 512)
    r, c = np.meshgrid(np.arange(128), np.arange(4), indexing="ij")
    offset = (r % 32) * 16 + (r // 32) * 4 + c               # r < 128 inside one tile
    sb = s.view(np.uint8)
    for t, (rows, cols) in enumerate([(slice(0, 128), slice(0, 4)), (slice(0, 128), slice(4, 8)),
                                      (slice(128, 256), slice(0, 4)), (slice(128, 256), slice(4, 8))]):
        want = np.zeros(512, np.uint8)
        want[offset] = sb[rows, cols]
        np.testing.assert_array_equal(tiles[t], want, err_msg=f"tile {'ABCD'[t]}")


def test_swizzle_worked_500x192_padding(rng):
    x = random_f32(rng, (500, 192), -30, 30)
    x[np.abs(x) == 0] = 1.0                                  # no all-zero block, so real scale bytes != 0
    _, s = quantize(x, (1, 32))
    assert s.shape == (500, 6)
    assert (s.view(np.uint8) != 0).all()
    sw = swizzle(s)
    assert sw.shape == (4, 2, 32, 4, 4) and sw.nbytes == 4096
    flat = sw.view(np.uint8).ravel()
    r, c = np.meshgrid(np.arange(500), np.arange(6), indexing="ij")
    addr = spec_address(r, c, 8)
    np.testing.assert_array_equal(flat[addr], s.view(np.uint8))
    pad = np.ones(4096, bool)
    pad[addr.ravel()] = False
    assert pad.sum() == 4096 - 3000 and (flat[pad] == 0).all()


@pytest.mark.parametrize("dtype", [E8M0, np.float32])
def test_swizzle_roundtrip(dtype, rng):
    for _ in range(20):
        R, C = int(rng.integers(1, 400)), int(rng.integers(1, 20))
        if dtype is E8M0:
            s = rng.integers(1, 256, (R, C)).astype(np.uint8).view(E8M0)
        else:
            s = np.exp2(rng.integers(-127, 128, (R, C))).astype(np.float32)
        bits = scale_bits
        sw = swizzle(s)
        assert sw.shape == (-(-R // 128), -(-C // 4), 32, 4, 4) and sw.dtype == s.dtype
        r, c = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
        flat = bits(sw).ravel()
        np.testing.assert_array_equal(flat[spec_address(r, c, -(-C // 4) * 4)], bits(s))
        assert np.count_nonzero(flat) == R * C               # padding is zero bytes / +0.0
        np.testing.assert_array_equal(bits(unswizzle(sw, s.shape)), bits(s))
        # unscaled_dim=1: the scales are [C, R] (e.g. columnwise [ceil(M/32), K]); swizzle the transpose.
        st = np.ascontiguousarray(s.T)
        sw1 = swizzle(st, unscaled_dim=1)
        np.testing.assert_array_equal(bits(sw1), bits(sw))
        np.testing.assert_array_equal(bits(unswizzle(sw1, st.shape, unscaled_dim=1)), bits(st))


def test_swizzle_columnwise_scales(rng):
    M, K = 100, 300
    _, s = quantize(random_f32(rng, (M, K)), (32, 1))
    assert s.shape == (4, K)
    sw = swizzle(s, unscaled_dim=1)
    assert sw.shape == (3, 1, 32, 4, 4)                     # R = K = 300 -> 384, C = 4
    np.testing.assert_array_equal(sw.view(np.uint8), swizzle(np.ascontiguousarray(s.T)).view(np.uint8))
    np.testing.assert_array_equal(unswizzle(sw, s.shape, 1).view(np.uint8), s.view(np.uint8))


# ---------------------------------------------------------------------------------------------------
# Quantize: special values, scale rules, error bounds
# ---------------------------------------------------------------------------------------------------

def special_rows(elem: str) -> np.ndarray:
    mbits, bias, _, mf, _ = FMT[elem]
    ms = 2.0 ** (1 - bias - mbits)                           # smallest subnormal fp8 at scale 1
    inf, nan = np.inf, np.nan
    rows = [
        [0, -0.0, 0, 0, 0, 0, 0, 0],
        [mf, -mf, 1, -0.0, 0.5, -3, 7, 0],
        [np.nextafter(np.float32(mf), np.float32(inf)), mf * 1.01, -mf * 1.5, 1, 0, -0.0, 2, 3],
        [2.0 ** -130, -2.0 ** -140, 2.0 ** -149, 0, -0.0, 2.0 ** -127, 2.0 ** -126, -2.0 ** -135],
        [mf, ms, ms / 2, 1.5 * ms, -ms, 2.5 * ms, -0.0, 3 * ms],
        [mf * 2.0 ** -127, np.nextafter(np.float32(mf * 2.0 ** -127), np.float32(1)), 2.0 ** -149, 0, 0, 0, 0, 0],
        [inf, 1, -2, 0, -0.0, mf, 3e38, -1e-30],
        [-inf, -inf, inf, 1e-30, 0, 0, 0, 0],
        [nan, inf, -1, -0.0, 0, mf, 1, 1],
        [-nan, 0, 0, 0, 0, 0, 0, 0],
        [3e38, -F32_MAX, 1, 0, 0, 0, 0, 0],
        [2.0 ** 127, 2.0 ** -126, 0, 0, 0, 0, 0, 0],
    ]
    return np.array(rows, np.float32)


@pytest.mark.parametrize("rounding,scale_type", MODES)
@pytest.mark.parametrize("elem", ELEMS)
def test_special_values_vs_oracle(elem, rounding, scale_type):
    x = special_rows(elem)
    check_against_oracle(x, (1, 8), elem, scale_type, rounding)
    data, scales = quantize(x, (1, 8), elem, scale_type, rounding)
    u = data.view(np.uint8)
    maxcode = FMT[elem][2]
    # Rules stated by the spec, checked directly too.
    assert u[0].tolist() == [0, 0x80, 0, 0, 0, 0, 0, 0]                      # zero block
    assert (u[8] == 0x7F).all() and (u[9] == 0x7F).all()                    # NaN blocks: positive NaN bytes
    assert u[6, 0] == maxcode and u[7, 0] == u[7, 1] == 0x80 | maxcode and u[7, 2] == maxcode  # Inf saturates
    assert u[1, 3] == 0x80 and u[4, 6] == 0x80
    sv = scale_f64(scales)
    assert np.isnan(sv[8]) and np.isnan(sv[9]) and not np.isnan(sv[:8]).any()
    if rounding == "exact":
        assert sv[0] == 2.0 ** -127 and sv[6] == F32_MAX and sv[7] == F32_MAX
    else:
        assert sv[0] == 2.0 ** -127 and sv[6] == sv[7] == 2.0 ** 127         # b = 0; Inf -> b = 254
        if scale_type == "f8E8M0FNU":
            assert scales.view(np.uint8)[[0, 6, 7, 8, 9], 0].tolist() == [0, 254, 254, 255, 255]


def test_special_values_explicit_ceil_e4m3():
    x = special_rows("f8E4M3FN")
    data, s = quantize(x, (1, 8))
    u, b = data.view(np.uint8), s.view(np.uint8)
    assert b[1] == 127 and u[1].tolist() == [0x7E, 0xFE, 0x38, 0x80, 0x30, 0xC4, 0x4E, 0x00]
    assert b[2] == 128                                       # amax just above 448 -> scale 2
    assert b[4] == 127 and u[4].tolist() == [0x7E, 0x01, 0x00, 0x02, 0x81, 0x02, 0x80, 0x03]
    # f32 subnormal block: q = 2**-130/448 is subnormal and <= 2**-127 -> b = 0, y = x * 2**127.
    assert b[3] == 0 and u[3, 0] == 0x20 and u[3, 6] == 0x40
    # The one window where the f32 quotient hides the excess: amax = nextafter(448 * 2**-127) rounds q to
    # 2**-127 exactly, so b = 0 and y = 448 + 2**-15, which still encodes (saturates) to 448.
    assert b[5] == 0 and u[5, 1] == 0x7E


def test_special_values_explicit_floor_e5m2():
    x = np.array([[61440, 1], [57344, -1], [65536 * 1.5, 0]], np.float32)
    data, s = quantize(x, (1, 2), "f8E5M2", rounding="floor")
    assert s.view(np.uint8).tolist() == [[127], [127], [128]]
    assert data.view(np.uint8).tolist() == [[0x7B, 0x3C], [0x7B, 0xBC], [0x7A, 0x00]]  # saturate, never Inf


@pytest.mark.parametrize("elem", ELEMS)
def test_ceil_guarantee_and_minimality(elem, rng):
    mf = FMT[elem][3]
    for lo, hi in [(-20, 20), (-140, 128 - 10)]:
        x = random_f32(rng, (4096, 32), lo, hi) * np.exp2(rng.integers(-8, 8, (4096, 1))).astype(np.float32)
        _, s = quantize(x, (1, 32), elem)
        amax = np.abs(x).max(axis=1).astype(np.float64)
        b = s.view(np.uint8)[:, 0].astype(np.float64)
        ok = amax > 0
        assert (amax[ok] / np.exp2(b[ok] - 127) <= mf).all()
        assert ((b == 0) | (amax / np.exp2(b - 128) > mf)).all()   # and b is the smallest such exponent


@pytest.mark.parametrize("elem", ELEMS)
def test_floor_is_ocp_rule(elem, rng):
    amax = np.abs(random_f32_bits(rng, 1 << 16))
    x = np.stack([amax, -amax / 3], axis=1)
    _, s = quantize(x, (1, 2), elem, rounding="floor")
    want = [floor_byte(float(a), elem) for a in amax]
    np.testing.assert_array_equal(s.view(np.uint8)[:, 0], want)
    # OCP scale can leave elements above max finite: they saturate.
    data, s = quantize(np.array([[FMT[elem][3] * 1.1, 1.0]], np.float32), (1, 2), elem, rounding="floor")
    assert data.view(np.uint8)[0, 0] == FMT[elem][2]


@pytest.mark.parametrize("elem", ELEMS)
def test_exact_mode(elem, rng):
    mf = FMT[elem][3]
    x = random_f32(rng, (512, 32), -60, 60) * np.exp2(rng.integers(-30, 30, (512, 1))).astype(np.float32)
    data, s = quantize(x, (1, 32), elem, "f32", "exact")
    amax = np.abs(x).max(axis=1, keepdims=True)
    np.testing.assert_array_equal(s, amax / np.float32(mf))
    u = data.view(np.uint8)
    hit = np.abs(x) == amax
    assert ((u[hit] & 0x7F) == FMT[elem][2]).all()          # the block max lands on +-max finite
    np.testing.assert_array_equal(u, encode_bits(x / s, elem))
    # tiny amax: q underflows to 0, treated like amax == 0 (scale 2**-127) instead of 0/0 = NaN
    d, s = quantize(np.array([2.0 ** -149, 0, -0.0], np.float32), (3,), elem, "f32", "exact")
    assert s[0] == np.float32(2.0 ** -127) and d.view(np.uint8).tolist() == [0, 0, 0x80]


@pytest.mark.parametrize("elem,rel,sub_exp", [("f8E4M3FN", 2.0 ** -4, -10), ("f8E5M2", 2.0 ** -3, -17)])
@pytest.mark.parametrize("rounding,scale_type", MODES)
def test_roundtrip_error_bound(elem, rel, sub_exp, rounding, scale_type, rng):
    x = random_f32(rng, (300, 256), -40, 40) * np.exp2(rng.integers(-60, 60, (300, 1))).astype(np.float32)
    data, s = quantize(x, (1, 32), elem, scale_type, rounding)
    xr = dequantize(data, s, (1, 32)).astype(np.float64)
    sv = np.repeat(scale_f64(s), 32, axis=1)
    err, ax = np.abs(xr - x), np.abs(x.astype(np.float64))
    normal = ax / sv >= 2.0 ** (1 - FMT[elem][1])            # scaled value in the fp8 normal range
    # exact mode rounds twice more in f32 (x / s and code * s); allow that at a tie on the subnormal grid
    slack = 1 + 2.0 ** -20 if rounding == "exact" else 1.0
    if rounding != "floor":                                  # floor may saturate the block max
        assert (err[normal] <= rel * ax[normal]).all()
    assert (err[~normal] <= 2.0 ** sub_exp * sv[~normal] * slack).all()  # half the smallest subnormal step
    if rounding == "ceil":
        assert (err <= np.maximum(rel * ax, 2.0 ** sub_exp * sv)).all()
    np.testing.assert_array_equal(xr, slow_dequantize(data, s, (1, 32), elem).astype(np.float32))


SHAPES = [(33, 70), (1, 1), (129, 257), (256, 256)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("recipe", ["1x32", "32x1", "1x128", "128x128", "tensor"])
def test_block_shapes_vs_oracle(shape, recipe, rng):
    block = {"1x32": (1, 32), "32x1": (32, 1), "1x128": (1, 128), "128x128": (128, 128), "tensor": shape}[recipe]
    x = random_f32(rng, shape, -30, 30) * np.exp2(rng.integers(-20, 20, (shape[0], 1))).astype(np.float32)
    if x.size > 8:
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size, 3)] = rng.choice([np.inf, -np.inf, np.nan, 0.0, 2.0 ** -140], 3)
    for elem in ELEMS:
        for rounding, scale_type in MODES:
            check_against_oracle(x, block, elem, scale_type, rounding)
            data, s = quantize(x, block, elem, scale_type, rounding)
            got = dequantize(data, s, block)
            with np.errstate(all="ignore"):
                want = slow_dequantize(data, s, block, elem).astype(np.float32)
            same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), f"{elem} {rounding} {scale_type}: dequantize differs at {np.argwhere(~same)[:5]}"


def test_other_ranks(rng):
    x = random_f32(rng, (77,))
    check_against_oracle(x, (32,), "f8E4M3FN", "f8E8M0FNU", "ceil")
    x = random_f32(rng, (5, 40, 9))
    for block in [(1, 32, 1), (2, 3, 4), (5, 40, 9)]:
        for rounding, scale_type in MODES:
            check_against_oracle(x, block, "f8E5M2", scale_type, rounding)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_low_precision_inputs(dtype, rng):
    x = random_f32(rng, (64, 96), -24, 14).astype(dtype)     # includes f16 subnormals
    x[0, :3] = [np.inf, 1, -0.0]
    x[5, 40] = np.nan
    for elem in ELEMS:
        for rounding, scale_type in MODES:
            d1, s1 = quantize(x, (1, 32), elem, scale_type, rounding)
            d2, s2 = quantize(x.astype(np.float32), (1, 32), elem, scale_type, rounding)
            np.testing.assert_array_equal(d1.view(np.uint8), d2.view(np.uint8))
            np.testing.assert_array_equal(scale_bits(s1), scale_bits(s2))
            check_against_oracle(x, (1, 32), elem, scale_type, rounding)


def bf16_rne_bits(x32: np.ndarray) -> np.ndarray:
    """Independent f32 -> bf16 RNE on bits (finite inputs)."""
    b = x32.view(np.uint32).astype(np.int64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def test_dequantize_out_dtypes_and_specials(rng):
    x = random_f32(rng, (40, 64), -30, 30)
    data, s = quantize(x, (1, 32))
    f32 = dequantize(data, s, (1, 32))
    bf = dequantize(data, s, (1, 32), ml_dtypes.bfloat16)
    f16 = dequantize(data, s, (1, 32), np.float16)
    assert f32.dtype == np.float32 and bf.dtype == np.dtype(ml_dtypes.bfloat16) and f16.dtype == np.float16
    np.testing.assert_array_equal(bf.view(np.uint16), bf16_rne_bits(f32))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(f16.view(np.uint16), f32.astype(np.float16).view(np.uint16))
    # E8M0 byte 0xFF: the whole block is NaN even for zero codes; byte 0 is the subnormal 2**-127;
    # the product is one f32 multiply, so it can overflow.
    d = np.array([[0x38, 0x00, 0x38, 0x40]], np.uint8).view(ml_dtypes.float8_e4m3fn)      # 1, 0, 1, 2
    sc = np.array([[255, 0]], np.uint8).view(E8M0)
    out = dequantize(d, sc, (1, 2))
    assert np.isnan(out[0, :2]).all() and out[0, 2] == np.float32(2.0 ** -127)
    out = dequantize(d, np.array([[127, 254]], np.uint8).view(E8M0), (1, 2))
    assert out[0].tolist() == [1.0, 0.0, 2.0 ** 127, np.inf]


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


# ---------------------------------------------------------------------------------------------------
# Batch dimensions (spec section 6): quantize, swizzle, attention shapes
# ---------------------------------------------------------------------------------------------------

def test_batched_quantize_vs_oracle(rng):
    x = random_f32(rng, (2, 3, 70, 72), -20, 20)
    x.reshape(-1)[rng.integers(0, x.size, 3)] = [np.nan, np.inf, 0.0]
    for block in [(1, 1, 1, 32), (1, 1, 32, 1)]:
        check_against_oracle(x, block, "f8E4M3FN", "f8E8M0FNU", "ceil")
        check_against_oracle(x, block, "f4E2M1FN", "f8E8M0FNU", "ceil")
    check_against_oracle(x[:1, :1], (1, 1, 1, 128), "f8E4M3FN", "f32", "ceil")


def test_batched_swizzle_worked(rng):
    s = rng.integers(1, 256, (2, 3, 130, 5)).astype(np.uint8).view(E8M0)
    sw = swizzle(s, unscaled_dim=2)
    assert sw.shape == (2, 3, 2, 2, 32, 4, 4) and sw.dtype == np.dtype(E8M0)
    r, c = np.meshgrid(np.arange(130), np.arange(5), indexing="ij")
    addr = spec_address(r, c, 8)
    for b in range(2):
        for h in range(3):
            flat = sw[b, h].view(np.uint8).ravel()
            np.testing.assert_array_equal(flat[addr], s[b, h].view(np.uint8))
            assert np.count_nonzero(flat) == 130 * 5
            np.testing.assert_array_equal(sw[b, h].view(np.uint8), swizzle(s[b, h]).view(np.uint8))
    np.testing.assert_array_equal(unswizzle(sw, s.shape, 2).view(np.uint8), s.view(np.uint8))
    st = np.ascontiguousarray(np.swapaxes(s, -1, -2))                 # [2, 3, 5, 130], R = the last dim
    np.testing.assert_array_equal(swizzle(st, 3).view(np.uint8), sw.view(np.uint8))
    np.testing.assert_array_equal(unswizzle(sw, st.shape, 3).view(np.uint8), st.view(np.uint8))
    for bad in (0, 1, -1, -2, 4, True, 2.0):
        with pytest.raises(ValueError):
            swizzle(s, bad)
    with pytest.raises(ValueError):
        swizzle(s[0, 0, 0], 0)                                       # rank 1
    with pytest.raises(ValueError):
        unswizzle(sw, (2, 4, 130, 5), 2)                             # batch dims differ
    with pytest.raises(ValueError):
        unswizzle(sw[0], (2, 3, 130, 5), 2)


def attention_inputs(rng, B=2, H=3, S=200, D=72):
    """Q, K, V [B, H, S, D] and a probability-like P [B, H, S, S]; narrow ranges keep float64 sums exact."""
    q, k, v = (random_f32(rng, (B, H, S, D), -3, 3) for _ in range(3))
    p = np.abs(random_f32(rng, (B, H, S, S), -6, 0))
    return q, k, v, p


def test_attention_shapes(rng):
    B, H, S, D = 2, 3, 200, 72                                       # S and D not multiples of 128
    q, k, v, p = attention_inputs(rng, B, H, S, D)
    # Q rowwise along D: scales [B, H, S, ceil(D/32)] -> tiles with S as the non-scaled dim
    dq, sq = quantize(q, (1, 1, 1, 32))
    assert sq.shape == (B, H, S, 3)
    tq = swizzle(sq, unscaled_dim=2)
    assert tq.shape == (B, H, 2, 1, 32, 4, 4)                       # padded [.., 256, 4] in 128x4 tiles
    # V columnwise along S: scales [B, H, ceil(S/32), D] -> tiles with D as the non-scaled dim
    dv, sv = quantize(v, (1, 1, 32, 1))
    assert sv.shape == (B, H, 7, D)
    tv = swizzle(sv, unscaled_dim=3)
    assert tv.shape == (B, H, 1, 2, 32, 4, 4)
    for b in range(B):
        for h in range(H):
            d2, s2 = quantize(q[b, h], (1, 32))
            np.testing.assert_array_equal(dq[b, h].view(np.uint8), d2.view(np.uint8))
            np.testing.assert_array_equal(tq[b, h].view(np.uint8), swizzle(s2, 0).view(np.uint8))
            d2, s2 = quantize(v[b, h], (32, 1))
            np.testing.assert_array_equal(dv[b, h].view(np.uint8), d2.view(np.uint8))
            np.testing.assert_array_equal(tv[b, h].view(np.uint8), swizzle(s2, 1).view(np.uint8))
    np.testing.assert_array_equal(unswizzle(tv, sv.shape, 3).view(np.uint8), sv.view(np.uint8))
    # S = Q K^T (TN over D) and O = P V (NN: V is K-outer, contraction over S), batched over [B, H]
    dk, sk = quantize(k, (1, 1, 1, 32))
    dp, sp = quantize(p, (1, 1, 1, 32))
    scores = scaled_matmul(dq, tq, dk, swizzle(sk, 2), (1, 1, 1, 32), (1, 1, 1, 32))
    o = scaled_matmul(dp, swizzle(sp, 2), dv, tv, (1, 1, 1, 32), (1, 1, 32, 1), b_layout="k_outer")
    assert scores.shape == (B, H, S, S) and o.shape == (B, H, S, D)
    deq = lambda d, s, blk: slow_dequantize(d, s, blk, "f8E4M3FN")  # noqa: E731
    want_s = deq(dq, sq, (1, 1, 1, 32)) @ np.swapaxes(deq(dk, sk, (1, 1, 1, 32)), -1, -2)
    want_o = deq(dp, sp, (1, 1, 1, 32)) @ deq(dv, sv, (1, 1, 32, 1))
    np.testing.assert_array_equal(scores, want_s.astype(np.float32))
    np.testing.assert_array_equal(o, want_o.astype(np.float32))
    assert matmul_error(o, p.astype(np.float64) @ v.astype(np.float64)) < 0.06


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


# ---------------------------------------------------------------------------------------------------
# Per-tensor scaling: amax, current and delayed scaling (spec section 8)
# ---------------------------------------------------------------------------------------------------

def test_amax():
    assert amax(np.array([[1.0, -3.0], [2.0, -0.0]], np.float32)) == 3.0
    assert type(amax(np.array([1.0], np.float32))) is np.float32
    assert amax(np.array([-2.5, 1], ml_dtypes.bfloat16)) == 2.5
    assert amax(np.array([1, -np.inf], np.float16)) == np.inf
    n = amax(np.array([1.0, np.inf, -np.nan], np.float32))
    assert np.isnan(n) and np.array(n).view(np.uint32) == 0x7FC00000
    assert amax(np.array([-0.0], np.float32)) == 0 and amax(np.zeros((0, 4), np.float32)) == 0
    with pytest.raises(TypeError):
        amax(np.ones(3))


def test_current_scaling_worked():
    x = np.array([[896.0, 1.0], [-3.0, 0.5]], np.float32)
    data, s = quantize(x, x.shape, "f8E4M3FN", "f32", "exact")        # scale = amax / 448 = 2
    assert s.shape == (1, 1) and s[0, 0] == 2.0
    assert data.astype(np.float64).tolist() == [[448.0, 0.5], [-1.5, 0.25]]
    data, s = quantize(x, x.shape, "f8E4M3FN", "f32", "ceil")         # power of two: 2 as well
    assert s[0, 0] == 2.0
    assert amax(x) == 896.0


def test_quantize_delayed_worked():
    x = np.array([[1.0, -2.0, 300.0], [0.001, -0.0, np.inf]], np.float32)
    scales = np.array([0.5, 2.0, 1.0], np.float32)
    history = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = history.copy()
    data, inv, hist = quantize_delayed(x, scales, history, 1)
    assert data.dtype == np.dtype(E4M3) and data.shape == x.shape
    # y = x * 2: 2, -4, 600 -> 448 (saturated), 0.002 -> subnormal 2**-9 (RNE of 1.024 * 2**-9), -0, Inf -> 448
    assert data.astype(np.float64).tolist() == [[2.0, -4.0, 448.0], [2.0 ** -9, -0.0, 448.0]]
    assert inv.shape == (1, 1) and inv.dtype == np.float32 and inv[0, 0] == 0.5
    np.testing.assert_array_equal(history, before)                      # the input is not modified
    assert hist[0].tolist() == [0.0, np.inf, 2.0] and hist[1].tolist() == [3.0, 4.0, 5.0]
    # NaN elements encode the positive NaN byte one by one (no block rule); the history records NaN
    y = np.array([np.nan, -1.0, -np.nan, 3.0], np.float32)
    data, inv, hist = quantize_delayed(y, np.array([3.0], np.float32), np.zeros((4, 1), np.float32), 0, "f8E5M2")
    assert data.view(np.uint8).tolist() == [0x7F, 0xC2, 0x7F, 0x48]   # -3 and 9 in E5M2
    assert inv.shape == (1,) and inv[0] == np.float32(1) / np.float32(3)
    assert np.isnan(hist[0, 0]) and (hist[1:] == 0).all()
    # scale 1/3 is not exact: the f32 product x * scale is what gets rounded
    s3 = np.float32(1) / np.float32(3)
    data, _, _ = quantize_delayed(np.array([3.0, 1344.0], np.float32), np.array([s3], np.float32),
                                  np.zeros((1, 1), np.float32), 0)
    assert data.astype(np.float64).tolist() == [1.0, 448.0]
    for bad in [dict(index=3), dict(index=-1), dict(elem="f4E2M1FN"), dict(history=np.zeros((2, 2), np.float32)),
                dict(history=np.zeros((0, 3), np.float32))]:
        kw = dict(x=x, scales=scales, history=history, index=0) | bad
        with pytest.raises(ValueError):
            quantize_delayed(**kw)
    with pytest.raises(TypeError):
        quantize_delayed(x, scales.astype(np.float64), history, 0)


def test_update_amax_history_worked():
    f = np.float32
    nan, inf = np.nan, np.inf
    # columns: ordinary, all zero, Inf current, NaN current, tiny, 3 (448/3 inexact)
    history = np.array([[2.0, 0.0, inf, nan, 1e-45, 3.0],      # row 0: c, the amax of this step
                        [8.0, 0.0, 1.0, 1.0, 0.0, 0.0],        # a_1, the oldest
                        [4.0, 0.0, 1.0, 4.0, 0.0, 0.0]], np.float32)
    scales = np.array([1.0, 7.0, 5.0, 6.0, 1.0, 1.0], np.float32)
    h, s = update_amax_history(history, scales)
    assert s.dtype == np.float32 and h.dtype == np.float32
    # max: 448/8; zero -> kept; Inf -> kept; NaN ignored (fmaxf) -> 448/4; tiny -> 448/1e-45 = Inf -> FLT_MAX
    assert s.tolist() == [56.0, 7.0, 5.0, 112.0, F32_MAX, f(448) / f(3)]
    # rotation [c, a1, a2] -> [0, a2, c]
    np.testing.assert_array_equal(h, np.array([[0, 0, 0, 0, 0, 0], [4, 0, 1, 4, 0, 0], [2, 0, inf, nan, 1e-45, 3]],
                                              np.float32))
    h2, s = update_amax_history(history, scales, "most_recent")
    np.testing.assert_array_equal(h2, h)
    assert s.tolist() == [224.0, 7.0, 5.0, 6.0, F32_MAX, f(448) / f(3)]
    _, s = update_amax_history(history, scales, "max", margin=1)
    assert s.tolist() == [28.0, 7.0, 5.0, 56.0, F32_MAX, (f(448) / f(3)) / f(2)]
    _, s = update_amax_history(history, scales, "max", margin=-2)
    assert s.tolist() == [224.0, 7.0, 5.0, 448.0, F32_MAX, (f(448) / f(3)) * f(4)]
    _, s = update_amax_history(history, scales, elem="f8E5M2")
    assert s[0] == 57344.0 / 8 and s[3] == 57344.0 / 4
    # an all-NaN column gives a = 0 (fmaxf from 0) and keeps the scale
    _, s = update_amax_history(np.array([[nan], [nan]], np.float32), np.array([3.0], np.float32))
    assert s.tolist() == [3.0]
    # L = 1: the scale comes from the single row, which is then zeroed
    h, s = update_amax_history(np.array([[5.0, 0.0]], np.float32), np.array([1.0, 2.0], np.float32))
    assert h.tolist() == [[0.0, 0.0]] and s.tolist() == [f(448) / f(5), 2.0]
    # the input arrays are not modified
    assert history[0, 0] == 2.0 and scales[0] == 1.0
    for bad in [dict(algorithm="mean"), dict(margin=0.5), dict(margin=True), dict(margin=128),
                dict(elem="f4E2M1FN"), dict(scales=np.ones(5, np.float32))]:
        kw = dict(history=history, scales=scales) | bad
        with pytest.raises(ValueError):
            update_amax_history(**kw)


def test_delayed_scaling_steps(rng):
    """Three training steps of one tensor: cast with the current scale, record amax, update, rotate."""
    L = 3
    history, scales = np.zeros((L, 2), np.float32), np.ones(2, np.float32)
    mags = [10.0, 40.0, 20.0]
    seen = []
    for step, m in enumerate(mags):
        x = (rng.uniform(-1, 1, (8, 16)) * m).astype(np.float32)
        x[0, 0] = m
        data, inv, history = quantize_delayed(x, scales, history, 1)
        np.testing.assert_array_equal(data.view(np.uint8), encode_bits(x * scales[1], "f8E4M3FN"))
        assert inv[0, 0] == np.float32(1) / scales[1]
        assert history[0, 1] == m
        seen.append(m)
        history, scales = update_amax_history(history, scales)
        assert scales[1] == np.float32(448) / np.float32(max(seen[-L:]))
        assert scales[0] == 1.0                                  # tensor 0 never cast: amax 0, scale kept
        assert history[0].tolist() == [0.0, 0.0] and history[-1, 1] == m
