"""Independent oracles for the tests of mx.reference (test_reference*.py), and the formats' facts written
down independently of it.

The oracles deliberately share no code with the reference: fp8 rounding is done on integer bit patterns,
scale exponents with math.frexp, blocks with Python loops over slices."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from mx.reference import (amax, ELEMENT_TYPES, quantize, SCALE_TYPES, scales_shape)

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


def spec_address(r: np.ndarray, c: np.ndarray, cols_padded: int) -> np.ndarray:
    offset = (r % 32) * 16 + ((r % 128) // 32) * 4 + (c % 4)
    tile = (r // 128) * (cols_padded // 4) + (c // 4)
    return tile * 512 + offset


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
