"""Tests for mx.reference against the spec (shared/spec/mx-spec.md) and independent slow oracles.

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
from mx.reference import (ELEMENT_TYPES, SCALE_TYPES, dequantize, emax, matmul_error, max_finite,
                          quantize, scaled_matmul, scales_shape, swizzle, unswizzle)

ELEMS = ["f8E4M3FN", "f8E5M2"]
# (mantissa bits, exponent bias, largest finite code, max finite, emax) written down independently.
FMT = {"f8E4M3FN": (3, 7, 0x7E, 448.0, 8), "f8E5M2": (2, 15, 0x7B, 57344.0, 15)}
MODES = [("ceil", "f8E8M0FNU"), ("floor", "f8E8M0FNU"), ("ceil", "f32"), ("floor", "f32"), ("exact", "f32")]
E8M0 = ml_dtypes.float8_e8m0fnu
F32_MAX = float(np.finfo(np.float32).max)


@pytest.fixture
def rng() -> np.random.Generator:
    seed = np.random.SeedSequence().entropy
    print(f"numpy rng seed = {seed}")
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------------------
# Independent oracles
# ---------------------------------------------------------------------------------------------------

def encode_bits(y: np.ndarray, elem: str) -> np.ndarray:
    """f32 -> fp8 code (RNE, saturate to max finite, Inf saturates, NaN -> 0x7F|sign) on integer bits."""
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
    """fp8 code -> float64 value (finite codes only)."""
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
        codes[sl] = 0x7F if math.isnan(amax) else encode_bits(y, elem)
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
    assert ELEMENT_TYPES == {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}
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
        quantize(x, (1, 32), elem="f4E2M1FN")
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
