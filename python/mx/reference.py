"""mx.reference: bit-exact NumPy oracle for the mx dialect's MXFP8 / FP8-blockwise numerics.

This module is the executable form of the numerical contract in shared/spec/mx-spec.md plus the project
decisions recorded alongside it: block-scaled quantization of f32/bf16/f16 tensors to f8E4M3FN or f8E5M2
with f8E8M0FNU or f32 block scales (`ceil`, `floor` and `exact` scale rules, NaN/Inf/zero special blocks,
RNE + satfinite element rounding), dequantization, the cuBLASLt/cuDNN 128x4 swizzled scale layout, and a
scaled matmul.  Every CPU and GPU lowering is compared against it bit for bit, so it is written for
clarity of the numerics rather than speed: everything is done in float32 exactly as the spec words it
(one f32 division for q, one f32 multiply per element) and all scale arithmetic is done on integer bit
patterns so no intermediate rounding can creep in.  It needs IEEE subnormals (no FTZ/DAZ) and checks that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

ELEMENT_TYPES = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}
SCALE_TYPES = {"f8E8M0FNU": ml_dtypes.float8_e8m0fnu, "f32": np.float32}
ROUNDING_MODES = ("ceil", "floor", "exact")

_INPUT_DTYPES = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))
_OUTPUT_DTYPES = _INPUT_DTYPES
_NAN_ELEMENT = 0x7F        # positive NaN in both f8E4M3FN (S.1111.111) and f8E5M2 (S.11111.11)
_NAN_SCALE = 255           # E8M0 byte 0xFF
_MAX_SCALE = 254           # 2**127, the largest finite E8M0 scale
_F32_QNAN_BITS = 0x7FC00000
_F32_QNAN_BITS_ARR = np.array(_F32_QNAN_BITS, np.uint32)
_F32_MAX = np.float32(np.finfo(np.float32).max)

Shape = Sequence[int]


def _check_name(name: str, table: dict | tuple, what: str) -> None:
    if name not in table:
        raise ValueError(f"unknown {what} {name!r}; expected one of {list(table)}")


def max_finite(elem: str) -> float:
    """Largest finite value of the element type: 448.0 (f8E4M3FN) or 57344.0 (f8E5M2)."""
    _check_name(elem, ELEMENT_TYPES, "element type")
    return float(ml_dtypes.finfo(ELEMENT_TYPES[elem]).max)


def emax(elem: str) -> int:
    """Exponent of the largest power of two not above max_finite(elem): 8 or 15."""
    return math.frexp(max_finite(elem))[1] - 1


def _block_layout(shape: Shape, block: Shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(effective block, number of blocks) per dim.  A block larger than its dim is cut to the dim:
    it is the same single block, and it keeps the zero padding (and memory) bounded."""
    shape, block = tuple(int(s) for s in shape), tuple(int(b) for b in block)
    if len(block) != len(shape):
        raise ValueError(f"block {block} needs one entry per dimension of shape {shape}")
    if any(b < 1 for b in block):
        raise ValueError(f"block entries must be >= 1, got {block}")
    eff = tuple(max(1, min(b, s)) for b, s in zip(block, shape))
    return eff, tuple(-(-s // e) for s, e in zip(shape, eff))


def scales_shape(shape: Shape, block: Shape) -> tuple[int, ...]:
    """ceil(shape / block) per dimension (trailing partial blocks count as blocks)."""
    return _block_layout(shape, block)[1]


def _require_subnormals() -> None:
    # A library loaded with -ffast-math can switch on FTZ/DAZ process-wide; the oracle would then silently
    # flush 2**-127 scales and subnormal elements, so refuse to run rather than give wrong answers.
    tiny = np.array([np.finfo(np.float32).smallest_normal], np.float32)
    half = tiny * np.float32(0.5)
    if half[0] == 0 or (half * np.float32(2))[0] != tiny[0]:
        raise RuntimeError("float32 subnormals are flushed (FTZ/DAZ is on); mx.reference needs IEEE arithmetic")


def _pow2_f32(e: np.ndarray) -> np.ndarray:
    """Exact float32 2**e for integer e in [-149, 127], built from bits (subnormal for e < -126)."""
    e = np.asarray(e, np.int64)
    bits = np.where(e >= -126, (e + 127) << 23, np.left_shift(1, np.clip(e + 149, 0, 22)))
    return bits.astype(np.uint32).view(np.float32)


def _scale_value(b: np.ndarray) -> np.ndarray:
    """Float32 value of E8M0 byte(s) b: 2**(b-127), NaN for 0xFF (byte 0 -> 2**-127, an f32 subnormal)."""
    b = np.asarray(b, np.int64)
    v = _pow2_f32(np.minimum(b, _MAX_SCALE) - 127)
    return np.where(b == _NAN_SCALE, _F32_QNAN_BITS_ARR.view(np.float32), v)


def _widen(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype not in _INPUT_DTYPES:
        raise TypeError(f"quantize input must be float32, bfloat16 or float16, got {x.dtype}")
    if x.ndim < 1:
        raise ValueError("quantize input must have rank >= 1")
    return x.astype(np.float32)  # exact for bf16/f16


def _to_blocks(x32: np.ndarray, eff: tuple[int, ...], nb: tuple[int, ...]) -> np.ndarray:
    """[*nb, prod(eff)] view of x32 zero-padded to whole blocks (zeros never raise max|x|)."""
    d = x32.ndim
    padded = np.zeros([n * e for n, e in zip(nb, eff)], np.float32)
    padded[tuple(slice(0, s) for s in x32.shape)] = x32
    inter = [v for pair in zip(nb, eff) for v in pair]       # (n0, e0, n1, e1, ...)
    perm = list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2))
    return padded.reshape(inter).transpose(perm).reshape(nb + (-1,))


def _expand(per_block: np.ndarray, eff: tuple[int, ...], shape: Shape) -> np.ndarray:
    """Broadcast a per-block array back to element shape (cutting the partial trailing blocks)."""
    for axis, e in enumerate(eff):
        per_block = np.repeat(per_block, e, axis=axis)
    return per_block[tuple(slice(0, s) for s in shape)]


def _scale_bytes(amax: np.ndarray, elem: str, rounding: str) -> np.ndarray:
    """E8M0 byte per block for the power-of-two rules (int64 array)."""
    if rounding == "ceil":
        # q must be the correctly rounded f32 quotient (the hardware converts that f32 with cvt.rp).
        q = amax / np.float32(max_finite(elem))
        bits = q.view(np.uint32).astype(np.int64)
        exp, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
        # Round the exponent up; a subnormal q is above 2**-127 (bits 0x00400000) -> 1, else 0.
        b = np.where(exp == 0, (bits > 0x00400000).astype(np.int64), exp + (mant != 0))
    else:  # floor: OCP MX v1.0, biased exponent of amax minus emax; a subnormal amax has field 0.
        b = ((amax.view(np.uint32).astype(np.int64) >> 23) & 0xFF) - emax(elem)
    b = np.clip(b, 0, _MAX_SCALE)
    b = np.where(np.isinf(amax), _MAX_SCALE, b)       # q = +Inf saturates (satfinite)
    return np.where(np.isnan(amax), _NAN_SCALE, b)


def _exact_scale(amax: np.ndarray, elem: str) -> np.ndarray:
    q = amax / np.float32(max_finite(elem))
    # q == 0 covers amax == 0 (spec: scale 2**-127) and also an amax so small that q underflows to 0,
    # where a literal q would turn 0 elements into 0/0 = NaN.
    q = np.where(q == 0, _pow2_f32(np.int64(-127)), q)
    q = np.where(np.isinf(amax), _F32_MAX, q)
    # canonical quiet NaN, so the scale's bits do not depend on the input NaN's payload
    return np.where(np.isnan(amax), _F32_QNAN_BITS_ARR.view(np.float32), q).astype(np.float32)


def _round_to_element(y: np.ndarray, elem: str) -> np.ndarray:
    """float32 -> fp8 with round-to-nearest-even and saturation to +-maxfinite (Inf too), subnormals
    kept, sign of zero kept.  Clipping first is exact (the bounds are f32 values), and ml_dtypes rounds
    f32 -> fp8 in one correctly rounded step (checked bit-exactly by the tests)."""
    mf = np.float32(max_finite(elem))
    with np.errstate(invalid="ignore"):   # NaN passes through (NaN blocks are overwritten by the caller)
        return np.clip(np.asarray(y, np.float32), -mf, mf).astype(ELEMENT_TYPES[elem])


def quantize(x: np.ndarray, block: Shape, elem: str = "f8E4M3FN", scale_type: str = "f8E8M0FNU",
             rounding: str = "ceil") -> tuple[np.ndarray, np.ndarray]:
    """Block-quantize x (float32/bfloat16/float16, rank >= 1) with one block entry per dim.

    Returns (data, scales): data has x's shape and the ml_dtypes fp8 dtype of `elem`; scales has shape
    scales_shape(x.shape, block) and dtype SCALE_TYPES[scale_type] (E8M0 bytes, or f32 values
    2**(b-127) for ceil/floor, q itself for exact)."""
    _check_name(elem, ELEMENT_TYPES, "element type")
    _check_name(scale_type, SCALE_TYPES, "scale type")
    _check_name(rounding, ROUNDING_MODES, "rounding mode")
    if rounding == "exact" and scale_type != "f32":
        raise ValueError("rounding='exact' needs scale_type='f32' (E8M0 scales are powers of two)")
    _require_subnormals()
    x32 = _widen(x)
    eff, nb = _block_layout(x32.shape, block)
    amax = np.max(np.abs(_to_blocks(x32, eff, nb)), axis=-1)   # np.max propagates NaN
    nan_block = np.isnan(amax)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        if rounding == "exact":
            scales = _exact_scale(amax, elem)
            y = x32 / _expand(scales, eff, x32.shape)
        else:
            b = _scale_bytes(amax, elem, rounding)
            # One f32 multiply by the exact 2**(127-b) (2**-127 for b = 254 is subnormal, built from bits).
            y = x32 * _expand(_pow2_f32(127 - np.minimum(b, _MAX_SCALE)), eff, x32.shape)
            scales = b.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu) if scale_type == "f8E8M0FNU" \
                else _scale_value(b)
    data = _round_to_element(y, elem)
    # Every element of a NaN block is the positive NaN byte, whatever its own value or sign.
    data.view(np.uint8)[_expand(nan_block, eff, x32.shape)] = _NAN_ELEMENT
    return data, scales


def _scale_values(scales: np.ndarray) -> np.ndarray:
    scales = np.asarray(scales)
    if scales.dtype == np.dtype(ml_dtypes.float8_e8m0fnu):
        return _scale_value(scales.view(np.uint8))
    if scales.dtype == np.dtype(np.float32):
        return scales
    raise TypeError(f"scales must be float8_e8m0fnu or float32, got {scales.dtype}")


def _check_out_dtype(out_dtype) -> np.dtype:
    dt = np.dtype(out_dtype)
    if dt not in _OUTPUT_DTYPES:
        raise TypeError(f"out_dtype must be float32, bfloat16 or float16, got {dt}")
    return dt


def dequantize(data: np.ndarray, scales: np.ndarray, block: Shape, out_dtype=np.float32) -> np.ndarray:
    """x' = f32(data) * f32 scale value (one f32 multiply; E8M0 0xFF -> NaN block), then RNE to out_dtype.

    Every NaN result is the positive quiet NaN (0x7FC00000 / 0x7FC0 / 0x7E00).
    """
    data = np.asarray(data)
    if data.dtype not in [np.dtype(t) for t in ELEMENT_TYPES.values()]:
        raise TypeError(f"data must be an fp8 element type, got {data.dtype}")
    out = _check_out_dtype(out_dtype)
    eff, nb = _block_layout(data.shape, block)
    if tuple(np.shape(scales)) != nb:
        raise ValueError(f"scales shape {np.shape(scales)} != {nb} for data {data.shape}, block {tuple(block)}")
    _require_subnormals()
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        x = data.astype(np.float32) * _expand(_scale_values(scales), eff, data.shape)
    # NaN sign and payload are not portable (GPU arithmetic returns a canonical NaN), so every NaN
    # result is the positive quiet NaN of the output type.
    x[np.isnan(x)] = np.float32(np.nan)
    with np.errstate(over="ignore"):
        return x.astype(out)  # numpy / ml_dtypes f32 -> f16 / bf16 casts are RNE


def _raw(a: np.ndarray) -> np.ndarray:
    """Same-size unsigned-integer view, so padding is all-zero bytes whatever the dtype."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _tiles(r: int, c: int) -> tuple[int, int]:
    return -(-r // 128), -(-c // 4)


def swizzle(scales: np.ndarray, unscaled_dim: int = 0) -> np.ndarray:
    """Linear 2-D scales -> 128x4-tiled 5-D [R'/128, C'/4, 32, 4, 4] (spec section 4), zero padded.
    R is the extent of `unscaled_dim` (columnwise [ceil(M/32), K] scales use unscaled_dim=1)."""
    s = np.asarray(scales)
    if s.ndim != 2 or unscaled_dim not in (0, 1):
        raise ValueError(f"swizzle needs 2-D scales and unscaled_dim 0 or 1, got {s.shape}, {unscaled_dim}")
    raw = _raw(s if unscaled_dim == 0 else s.T)
    (r, c), (tr, tc) = raw.shape, _tiles(*raw.shape)
    padded = np.zeros((tr * 128, tc * 4), raw.dtype)
    padded[:r, :c] = raw
    # padded[r, c] with r = 128*t + 32*i + j, c = 4*u + v  ->  out[t, u, j, i, v]
    out = padded.reshape(tr, 4, 32, tc, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(out).view(s.dtype)


def unswizzle(swizzled: np.ndarray, shape: Shape, unscaled_dim: int = 0) -> np.ndarray:
    """Inverse of swizzle: 5-D tiled scales -> linear 2-D scales of `shape` (padding dropped)."""
    s = np.asarray(swizzled)
    if len(shape) != 2 or unscaled_dim not in (0, 1):
        raise ValueError(f"unswizzle needs a 2-D shape and unscaled_dim 0 or 1, got {shape}, {unscaled_dim}")
    r, c = (shape[0], shape[1]) if unscaled_dim == 0 else (shape[1], shape[0])
    tr, tc = _tiles(r, c)
    if s.shape != (tr, tc, 32, 4, 4):
        raise ValueError(f"swizzled shape {s.shape} != {(tr, tc, 32, 4, 4)} for scales {tuple(shape)}")
    lin = _raw(s).transpose(0, 3, 2, 1, 4).reshape(tr * 128, tc * 4)[:r, :c]
    return np.ascontiguousarray(lin if unscaled_dim == 0 else lin.T).view(s.dtype)


def _linear_scales(scales: np.ndarray, shape: Shape, block: Shape) -> np.ndarray:
    scales = np.asarray(scales)
    # 5-D scales are taken as swizzled MX rowwise scales (unscaled dim = the operand's M or N).
    return unswizzle(scales, scales_shape(shape, block), 0) if scales.ndim == 5 else scales


def scaled_matmul(a: np.ndarray, a_scales: np.ndarray, b: np.ndarray, b_scales: np.ndarray,
                  a_block: Shape, b_block: Shape, out_dtype=np.float32) -> np.ndarray:
    """C[m, n] = sum_k deq(A)[m, k] * deq(B)[n, k] for A [M, K], B [N, K] ("TN").  Scales are linear 2-D
    or swizzled 5-D.  The sum is taken in float64 over the f32 dequantized operands, then rounded to
    float32 and from there (RNE) to out_dtype."""
    out = _check_out_dtype(out_dtype)
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"scaled_matmul needs A [M, K] and B [N, K], got {a.shape} and {b.shape}")
    da = dequantize(a, _linear_scales(a_scales, a.shape, a_block), a_block).astype(np.float64)
    db = dequantize(b, _linear_scales(b_scales, b.shape, b_block), b_block).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        c = da @ db.T
        return c.astype(np.float32).astype(out)


def matmul_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative Frobenius error ||out - ref|| / ||ref||, in float64 (0 when both are zero)."""
    o = np.asarray(out).astype(np.float64).ravel()
    r = np.asarray(ref).astype(np.float64).ravel()
    num, den = np.linalg.norm(o - r), np.linalg.norm(r)
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return float(num / den)
