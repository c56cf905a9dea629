"""mx.reference: bit-exact NumPy oracle for the mx dialect's MXFP8 / MXFP6 / MXFP4 / MXINT8 / NVFP4 / FP8
numerics.

This module is the executable form of the numerical contract in docs/spec.md plus the project
decisions recorded alongside it:

* block-scaled quantization of f32/bf16/f16 tensors to the element types of mx.formats (f8E4M3FN,
  f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN, and i8 for MXINT8) with f8E8M0FNU or f32 block scales (`ceil`,
  `floor` and `exact` scale rules, NaN/Inf/zero special blocks, RNE + satfinite element rounding) and
  dequantization (sections 1-3, 10, 11); leading dimensions are batch dimensions (6);
* the cuBLASLt/cuDNN 128x4 swizzled scale layout, batched (sections 4, 6) and the FP8-blockwise
  compact <-> GEMM-ready scale conversion (section 9);
* a scaled matmul with batch dimensions, K-contiguous or K-outer operands and linear, tiled or
  GEMM-ready scales (sections 5-7, 9, 10);
* per-tensor amax, delayed-scaling casts and the amax-history / scale update (section 8);
* the column sum of a matrix (a linear layer's bias gradient; docs/numerics.md, not in the spec);
* FP4: the E2M1 element, nibble packing, MXFP4 and two-level NVFP4 (section 10); the packing of FP6
  (section 11, mx.formats).

Every CPU and GPU lowering is compared against it bit for bit, so it is written for clarity of the
numerics rather than speed: everything is done in float32 exactly as the spec words it (one f32 division
for q, one f32 multiply per element, the spec's order of f32 operations for NVFP4 and delayed scaling) and
all scale arithmetic is done on integer bit patterns so no intermediate rounding can creep in.  It needs
IEEE subnormals (no FTZ/DAZ) and checks that.

Where the spec leaves a case open, the choice made here is stated in the docstring of the function
concerned (look for "Not fixed by the spec").
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from . import formats

ELEMENT_TYPES = {name: formats.get(name).dtype.type for name in formats.ELEMENT_TYPES}
SCALE_TYPES = {name: formats.get(name).dtype.type for name in formats.SCALE_TYPES}
ROUNDING_MODES = ("ceil", "floor", "exact")
LAYOUTS = ("k_contiguous", "k_outer")          # scaled_matmul operand layouts (spec section 7)
AMAX_ALGORITHMS = ("max", "most_recent")       # delayed-scaling history reductions (spec section 8)
FP8_ELEMENT_TYPES = ("f8E4M3FN", "f8E5M2")     # the per-tensor (current / delayed) scaling elements
NVFP4_BLOCK = 16                               # NVFP4: one f8E4M3FN scale per 16 elements of the last dim

_INPUT_DTYPES = tuple(formats.get(name).dtype for name in formats.WIDE_TYPES)
_OUTPUT_DTYPES = _INPUT_DTYPES
_NAN_ELEMENT = 0x7F        # positive NaN in both f8E4M3FN (S.1111.111) and f8E5M2 (S.11111.11)
_E4M3_NAN = 0x7F           # positive NaN byte of an f8E4M3FN scale (NVFP4 NaN blocks)
_NAN_SCALE = 255           # E8M0 byte 0xFF
_MAX_SCALE = 254           # 2**127, the largest finite E8M0 scale
_F32_QNAN_BITS = 0x7FC00000
_F32_QNAN_BITS_ARR = np.array(_F32_QNAN_BITS, np.uint32)
_F32_MAX = np.float32(np.finfo(np.float32).max)
_F32_MIN_NORMAL = np.float32(np.finfo(np.float32).smallest_normal)   # 2**-126
# E2M1 magnitudes by code 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; these are the midpoints between neighbours.
_FP4_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
_FP4_MAX = np.float32(6.0)
_E4M3_MAX = np.float32(448.0)
_NVFP4_SCALE_MIN = np.float32(2.0 ** -6)       # smallest normal f8E4M3FN, the lower clamp of NVFP4 scales

Shape = Sequence[int]


def _check_name(name: str, table: dict | tuple, what: str) -> None:
    if name not in table:
        raise ValueError(f"unknown {what} {name!r}; expected one of {list(table)}")


def max_finite(elem: str) -> float:
    """Largest finite value of the element type: 448.0 (f8E4M3FN), 57344.0 (f8E5M2), 28.0 (f6E3M2FN),
    7.5 (f6E2M3FN), 6.0 (f4E2M1FN) or 127/64 (i8, MXINT8: code c means c * 2**-6)."""
    _check_name(elem, ELEMENT_TYPES, "element type")
    fmt = formats.get(elem)
    if fmt.int_fraction_bits is not None:
        return 127 / 2 ** fmt.int_fraction_bits
    return float(ml_dtypes.finfo(fmt.dtype).max)


def nan_block_code(elem: str) -> int:
    """The code of every element of a NaN block: the positive NaN with every other bit set where the
    format has NaN (0x7F for both FP8 formats), else 0 (E3M2, E2M3, E2M1 and MXINT8 have no NaN: spec
    sections 10 and 11)."""
    _check_name(elem, ELEMENT_TYPES, "element type")
    fmt = formats.get(elem)
    if fmt.int_fraction_bits is not None:
        return 0
    all_ones = (1 << (fmt.bits - 1)) - 1
    return all_ones if np.isnan(np.array(all_ones, np.uint8).view(fmt.dtype).astype(np.float32)) else 0


def emax(elem: str) -> int:
    """Exponent of the largest power of two not above max_finite(elem): 8, 15, 4, 2, 2 or 0."""
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


def transposed_shape(shape: Shape) -> tuple[int, ...]:
    """`shape` with its last two dimensions swapped: the data of a `transposed` quantize."""
    return (*shape[:-2], shape[-1], shape[-2])


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


def _widen(x: np.ndarray, what: str = "quantize input") -> np.ndarray:
    x = np.asarray(x)
    if x.dtype not in _INPUT_DTYPES:
        raise TypeError(f"{what} must be float32, bfloat16 or float16, got {x.dtype}")
    if x.ndim < 1:
        raise ValueError(f"{what} must have rank >= 1")
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


def _round_to_fp4(y: np.ndarray) -> np.ndarray:
    """float32 -> f4E2M1FN, written out: round to nearest even, saturate to +-6 (Inf too), sign of zero
    kept (-0.2 -> -0, code 0x8).  E2M1 has no NaN; a NaN input gives code 0 (callers overwrite NaN blocks
    anyway).  Codes 0..7 are the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 in order, so the code of |y| is
    the number of midpoints below it, plus one on a tie whose lower neighbour has an odd code."""
    y = np.asarray(y, np.float32)
    mag = np.abs(y)
    nan = np.isnan(mag)
    mag = np.where(nan, np.float32(0), mag)
    code = np.searchsorted(_FP4_MIDPOINTS, mag, side="left")       # midpoints strictly below |y|
    tie = mag == _FP4_MIDPOINTS[np.minimum(code, 6)]
    code = code + (tie & (code % 2 == 1))                           # ties go to the even code
    sign = (y.view(np.uint32) >> 31).astype(np.int64) << 3
    code = np.where(nan, 0, code | sign)
    return code.astype(np.uint8).view(ml_dtypes.float4_e2m1fn)


def _round_to_integer(y: np.ndarray, elem: str) -> np.ndarray:
    """float32 -> MXINT8 code c = clamp(rne(y * 2**6), -127, 127) (-128 is never produced); NaN gives 0
    (callers overwrite NaN blocks anyway).  The multiply by a power of two is exact in f32."""
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.asarray(y, np.float32) * np.float32(2 ** formats.get(elem).int_fraction_bits)
        code = np.clip(np.rint(scaled), -127, 127)       # np.rint rounds half to even
    return np.where(np.isnan(code), 0, code).astype(np.int8)


def _round_to_element(y: np.ndarray, elem: str) -> np.ndarray:
    """float32 -> element type with round-to-nearest-even and saturation to +-maxfinite (Inf too),
    subnormals kept, sign of zero kept.  FP8 and FP6: clipping first is exact (the bounds are f32 values),
    and ml_dtypes rounds f32 -> fp8 / fp6 in one correctly rounded step (checked bit-exactly by the tests).
    FP4 is rounded explicitly by _round_to_fp4, MXINT8 by _round_to_integer."""
    if elem == "f4E2M1FN":
        return _round_to_fp4(y)
    if formats.get(elem).int_fraction_bits is not None:
        return _round_to_integer(y, elem)
    mf = np.float32(max_finite(elem))
    with np.errstate(invalid="ignore"):   # NaN passes through (NaN blocks are overwritten by the caller)
        return np.clip(np.asarray(y, np.float32), -mf, mf).astype(ELEMENT_TYPES[elem])


def element_values(data: np.ndarray) -> np.ndarray:
    """The exact f32 values of an array of element codes (FP8, FP6, FP4 dtypes; int8 as MXINT8, c * 2**-6)."""
    data = np.asarray(data)
    fmt = formats.BY_DTYPE.get(data.dtype)
    if fmt is None or fmt.role != "element":
        raise TypeError(f"data must be of an mx element type {list(ELEMENT_TYPES)}, got {data.dtype}")
    values = data.astype(np.float32)
    if fmt.int_fraction_bits is not None:
        values = values * np.float32(2.0 ** -fmt.int_fraction_bits)
    return values


def quantize(x: np.ndarray, block: Shape, elem: str = "f8E4M3FN", scale_type: str = "f8E8M0FNU",
             rounding: str = "ceil") -> tuple[np.ndarray, np.ndarray]:
    """Block-quantize x (float32/bfloat16/float16, rank >= 1) with one block entry per dim.

    Leading dims are batch dims with block extent 1 (spec section 6), e.g. (1, 1, 1, 32) for Q [B, H, S, D]
    scaled along D and (1, 1, 32, 1) for V scaled along S; nothing here depends on the rank.

    Returns (data, scales): data has x's shape and the dtype of `elem` (one element per array entry, also
    for the packed FP4 and FP6 types: see pack / unpack for their memory form; int8 codes for i8);
    scales has shape scales_shape(x.shape, block) and dtype SCALE_TYPES[scale_type] (E8M0 bytes, or f32
    values 2**(b-127) for ceil/floor, q itself for exact).

    MXFP4, MXFP6 and MXINT8 are elem="f4E2M1FN", "f6E3M2FN" / "f6E2M3FN" and "i8" with a block of 32
    along one of the last two dims: section 3 with their max finite and emax (sections 10, 11); a NaN
    block gets scale byte 0xFF (f32: NaN) and element codes nan_block_code(elem), 0 for these formats
    without NaN.  MXINT8's code is clamp(rne(y * 64), -127, 127)."""
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
    # Every element of a NaN block is the positive NaN byte (FP8) or code 0 (FP4), whatever its own value.
    data.view(np.uint8)[_expand(nan_block, eff, x32.shape)] = nan_block_code(elem)
    return data, scales


def _scale_values(scales: np.ndarray) -> np.ndarray:
    scales = np.asarray(scales)
    if scales.dtype == np.dtype(ml_dtypes.float8_e8m0fnu):
        return _scale_value(scales.view(np.uint8))
    if scales.dtype == np.dtype(np.float32):
        return scales
    if scales.dtype == np.dtype(ml_dtypes.float8_e4m3fn):     # NVFP4 block scales; 0x7F / 0xFF are NaN
        return scales.astype(np.float32)
    raise TypeError(f"scales must be float8_e8m0fnu, float32 or float8_e4m3fn, got {scales.dtype}")


def _check_out_dtype(out_dtype) -> np.dtype:
    dt = np.dtype(out_dtype)
    if dt not in _OUTPUT_DTYPES:
        raise TypeError(f"out_dtype must be float32, bfloat16 or float16, got {dt}")
    return dt


def _dequantize_f32(data: np.ndarray, scales: np.ndarray, block: Shape, tensor_scale=None) -> np.ndarray:
    """f32(data) * f32 scale value (one f32 multiply), then * f32 tensor_scale when given (a second f32
    multiply: NVFP4's x' = float(q) * float(s) * t, left to right).  NaN results are canonical."""
    data = np.asarray(data)
    values = element_values(data)
    eff, nb = _block_layout(data.shape, block)
    if tuple(np.shape(scales)) != nb:
        raise ValueError(f"scales shape {np.shape(scales)} != {nb} for data {data.shape}, block {tuple(block)}")
    _require_subnormals()
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        x = values * _expand(_scale_values(scales), eff, data.shape)
        if tensor_scale is not None:
            x = x * np.float32(tensor_scale)
    # NaN sign and payload are not portable (GPU arithmetic returns a canonical NaN), so every NaN
    # result is the positive quiet NaN of the output type.
    x[np.isnan(x)] = np.float32(np.nan)
    return x


def dequantize(data: np.ndarray, scales: np.ndarray, block: Shape, out_dtype=np.float32) -> np.ndarray:
    """x' = f32(data) * f32 scale value (one f32 multiply; E8M0 0xFF -> NaN block), then RNE to out_dtype.

    data may be FP8 or FP4 (MXFP4: an E8M0 NaN scale makes the block NaN although E2M1 has no NaN).
    Every NaN result is the positive quiet NaN (0x7FC00000 / 0x7FC0 / 0x7E00).
    """
    out = _check_out_dtype(out_dtype)
    x = _dequantize_f32(data, scales, block)
    with np.errstate(over="ignore"):
        return x.astype(out)  # numpy / ml_dtypes f32 -> f16 / bf16 casts are RNE


def _raw(a: np.ndarray) -> np.ndarray:
    """Same-size unsigned-integer view, so padding is all-zero bytes whatever the dtype."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


# The 128x4 tiles (spec section 4): a tile is 32 rows of 16 entries, tile row i holding rows i, i + 32,
# i + 64, i + 96 of the tile, 4 columns each; compact (r, c) sits at [r/128, c/4, r%32, (r%128)/32, c%4].
TILE_ROWS, TILE_COLS, _TILE_ROW_STRIDE = 128, 4, 32
_TILE_ROW_GROUPS = TILE_ROWS // _TILE_ROW_STRIDE


def _pad4(n: int) -> int:
    return -(-n // 4) * 4


def swizzled_shape(shape: Shape, unscaled_dim: int, layout: str = "tiles") -> tuple[int, ...]:
    """The shape swizzle gives compact scales of `shape` (batch dims kept), R along `unscaled_dim`:
    [..., R'/128, C'/4, 32, 4, 4] for "tiles", [..., C, ceil(R/4), 4] for "blockwise" (GEMM-ready)."""
    shape = tuple(int(n) for n in shape)
    rank = len(shape)
    d = _check_unscaled_dim(rank, unscaled_dim, "swizzled_shape")
    rows, cols = shape[d], shape[2 * rank - 3 - d]
    if layout == "tiles":
        return (*shape[:-2], -(-rows // TILE_ROWS), -(-cols // TILE_COLS), _TILE_ROW_STRIDE,
                _TILE_ROW_GROUPS, TILE_COLS)
    if layout == "blockwise":
        return (*shape[:-2], cols, _pad4(rows) // 4, 4)
    raise ValueError(f"unknown swizzle layout {layout!r}; expected 'tiles' or 'blockwise'")


def _transpose_tiles(a: np.ndarray, batch: int) -> np.ndarray:
    """Tiling a padded [..., R', C'] matrix is one transpose of its view [..., R'/128, 4, 32, C'/4, 4]
    that swaps the 4 row groups and the C'/4 tile columns; it is its own inverse (tiles <-> view)."""
    return a.transpose(tuple(range(batch)) + tuple(batch + k for k in (0, 3, 2, 1, 4)))


def _check_unscaled_dim(rank: int, unscaled_dim: int, what: str) -> int:
    """unscaled_dim is an absolute dim index and must name one of the last two dims (the ones tiled)."""
    if rank < 2:
        raise ValueError(f"{what} needs scales of rank >= 2, got rank {rank}")
    if isinstance(unscaled_dim, bool) or not isinstance(unscaled_dim, numbers.Integral) \
            or int(unscaled_dim) not in (rank - 2, rank - 1):
        raise ValueError(f"{what}: unscaled_dim must be {rank - 2} or {rank - 1} (one of the last two dims, "
                         f"as an absolute index) for rank-{rank} scales, got {unscaled_dim!r}")
    return int(unscaled_dim)


def swizzle(scales: np.ndarray, unscaled_dim: int = 0) -> np.ndarray:
    """Linear scales [..., R, C] -> 128x4 tiles [..., R'/128, C'/4, 32, 4, 4] (spec sections 4 and 6),
    zero padded, each batch slice laid out exactly as section 4.

    `unscaled_dim` (absolute index, one of the last two dims) is the non-scaled dim R: rank-2 for rowwise
    scales such as [M, ceil(K/32)] (0 for 2-D), rank-1 for columnwise scales such as [ceil(M/32), K]
    (1 for 2-D).  Any scale dtype works (E8M0, f32, NVFP4's f8E4M3FN): the bytes are moved, padding is 0."""
    s = np.asarray(scales)
    d = _check_unscaled_dim(s.ndim, unscaled_dim, "swizzle")
    raw = _raw(s if d == s.ndim - 2 else np.swapaxes(s, -1, -2))
    batch, (r, c) = raw.shape[:-2], raw.shape[-2:]
    tr, tc = swizzled_shape(raw.shape, raw.ndim - 2)[-5:-3]
    padded = np.zeros(batch + (tr * TILE_ROWS, tc * TILE_COLS), raw.dtype)
    padded[..., :r, :c] = raw
    view = padded.reshape(batch + (tr, _TILE_ROW_GROUPS, _TILE_ROW_STRIDE, tc, TILE_COLS))
    return np.ascontiguousarray(_transpose_tiles(view, len(batch))).view(s.dtype)


def unswizzle(swizzled: np.ndarray, shape: Shape, unscaled_dim: int = 0) -> np.ndarray:
    """Inverse of swizzle: tiled scales [..., R'/128, C'/4, 32, 4, 4] -> linear scales of `shape`
    (rank >= 2, batch dims first; padding dropped)."""
    s = np.asarray(swizzled)
    shape = tuple(int(n) for n in shape)
    d = _check_unscaled_dim(len(shape), unscaled_dim, "unswizzle")
    batch = shape[:-2]
    r, c = (shape[-2], shape[-1]) if d == len(shape) - 2 else (shape[-1], shape[-2])
    expected = swizzled_shape(shape, d)
    if s.shape != expected:
        raise ValueError(f"swizzled shape {s.shape} != {expected} for scales {shape}")
    tr, tc = expected[-5:-3]
    lin = _transpose_tiles(_raw(s), len(batch))
    lin = lin.reshape(batch + (tr * TILE_ROWS, tc * TILE_COLS))[..., :r, :c]
    return np.ascontiguousarray(lin if d == len(shape) - 2 else np.swapaxes(lin, -1, -2)).view(s.dtype)


def blockwise_gemm_ready(scales: np.ndarray, unscaled_dim: int) -> np.ndarray:
    """FP8-blockwise compact scales -> GEMM-ready scales (spec section 9).

    `scales` [..., R, C] has R along `unscaled_dim` (absolute index, one of the last two dims).  The result
    is [..., C, pad4(R)/4, 4]: transposed so that the unscaled dim is innermost, zero padded to a multiple
    of 4 (pad4(n) = ceil(n/4)*4), and the padded dim written as [pad4(R)/4, 4] so that GEMM-ready scales
    have rank + 1 (the shape the dialect uses).  Rowwise 1x128 scales [A, B/128] use unscaled_dim = rank-2
    and give [B/128, pad4(A)/4, 4]; columnwise [A/128, B] use unscaled_dim = rank-1 and give
    [A/128, pad4(B)/4, 4].  The contract's scales are f32; any dtype is moved bit for bit."""
    s = np.asarray(scales)
    d = _check_unscaled_dim(s.ndim, unscaled_dim, "blockwise_gemm_ready")
    raw = _raw(s if d == s.ndim - 1 else np.swapaxes(s, -1, -2))     # [..., C, R]
    batch, (c, r) = raw.shape[:-2], raw.shape[-2:]
    out = np.zeros(batch + (c, _pad4(r)), raw.dtype)
    out[..., :r] = raw
    return out.reshape(batch + (c, _pad4(r) // 4, 4)).view(s.dtype)


def blockwise_compact(ready: np.ndarray, shape: Shape, unscaled_dim: int) -> np.ndarray:
    """Inverse of blockwise_gemm_ready: GEMM-ready [..., C, pad4(R)/4, 4] -> compact scales of `shape`
    ([..., R, C] with R along `unscaled_dim`), padding dropped."""
    s = np.asarray(ready)
    shape = tuple(int(n) for n in shape)
    d = _check_unscaled_dim(len(shape), unscaled_dim, "blockwise_compact")
    batch = shape[:-2]
    r, c = (shape[-2], shape[-1]) if d == len(shape) - 2 else (shape[-1], shape[-2])
    want = batch + (c, _pad4(r) // 4, 4)
    if s.shape != want:
        raise ValueError(f"GEMM-ready scales shape {s.shape} != {want} for compact scales {shape}, "
                         f"unscaled_dim {d}")
    lin = _raw(s).reshape(batch + (c, _pad4(r)))[..., :r]
    return np.ascontiguousarray(lin if d == len(shape) - 1 else np.swapaxes(lin, -1, -2)).view(s.dtype)


def _operand(data: np.ndarray, scales: np.ndarray, block: Shape, layout: str, tensor_scale, name: str):
    """Dequantized GEMM operand as float64 [..., MN, K] (K innermost whatever the stored layout)."""
    _check_name(layout, LAYOUTS, f"{name} layout")
    data = np.asarray(data)
    if data.ndim < 2:
        raise ValueError(f"scaled_matmul operand {name} needs rank >= 2, got shape {data.shape}")
    rank, block = data.ndim, tuple(int(b) for b in block)
    if len(block) != rank:
        raise ValueError(f"{name}_block {block} needs one entry per dimension of {name} {data.shape}")
    mn_dim, k_dim = (rank - 2, rank - 1) if layout == "k_contiguous" else (rank - 1, rank - 2)
    linear = scales_shape(data.shape, block)
    s = np.asarray(scales)
    if s.ndim == rank + 3:                            # 128x4 tiles, the M/N dim is the non-scaled one
        s = unswizzle(s, linear, mn_dim)
    elif s.ndim == rank + 1:                          # FP8-blockwise GEMM-ready (1 x 128 along K only)
        if block[k_dim] != 128 or any(b != 1 for i, b in enumerate(block) if i != k_dim):
            raise ValueError(f"GEMM-ready (rank {rank}+1) {name}_scales need a block of 128 along K and 1 "
                             f"elsewhere, got block {block} with layout {layout!r}")
        s = blockwise_compact(s, linear, mn_dim)
    elif s.ndim != rank:
        raise ValueError(f"{name}_scales of rank {s.ndim} fit neither linear (rank {rank}), GEMM-ready "
                         f"(rank {rank + 1}) nor 128x4-tiled (rank {rank + 3}) scales of {name} {data.shape}")
    x = _dequantize_f32(data, s, block, tensor_scale)
    return (x if layout == "k_contiguous" else np.swapaxes(x, -1, -2)).astype(np.float64)


def scaled_matmul(a: np.ndarray, a_scales: np.ndarray, b: np.ndarray, b_scales: np.ndarray,
                  a_block: Shape, b_block: Shape, out_dtype=np.float32, a_layout: str = "k_contiguous",
                  b_layout: str = "k_contiguous", *, a_tensor_scale=None, b_tensor_scale=None) -> np.ndarray:
    """C[..., m, n] = sum_k deq(A)[..., m, k] * deq(B)[..., n, k] (spec sections 5-7, 9, 10).

    Layouts: "k_contiguous" stores A as [..., M, K] and B as [..., N, K] (TN); "k_outer" stores A as
    [..., K, M] and B as [..., K, N] (the columnwise-quantized operand of dgrad / wgrad).  Blocks are given
    in the data's own dims (K-outer MX: (32, 1), batched (1, 32, 1)).  Leading dims are batch dims and must
    be equal for A and B; the result is [..., M, N].

    Each operand's scales are told apart by rank: linear (scales_shape(data.shape, block), same rank as the
    data), 128x4 tiles (rank + 3: swizzle of the linear scales with the M/N dim as the unscaled dim, i.e.
    rank-2 for k_contiguous and rank-1 for k_outer) or FP8-blockwise GEMM-ready (rank + 1, only with a block
    of 1 x 128 along K: blockwise_gemm_ready with the M/N dim as the unscaled dim).  Data may be FP8 or FP4:
    MXFP4 (E8M0 scales, block 32) or NVFP4 (f8E4M3FN scales, block 16, plus a_tensor_scale / b_tensor_scale:
    the f32 per-tensor scale t, applied as x' = float(q) * float(s) * t).

    The sum is taken in float64 over the f32 dequantized operands, then rounded to float32 and from there
    (RNE) to out_dtype."""
    out = _check_out_dtype(out_dtype)
    da = _operand(a, a_scales, a_block, a_layout, a_tensor_scale, "a")
    db = _operand(b, b_scales, b_block, b_layout, b_tensor_scale, "b")
    if da.ndim != db.ndim or da.shape[:-2] != db.shape[:-2] or da.shape[-1] != db.shape[-1]:
        raise ValueError(f"scaled_matmul needs equal batch dims and K: A {np.shape(a)} ({a_layout}) and "
                         f"B {np.shape(b)} ({b_layout}) give [..., M, K] {da.shape} and [..., N, K] {db.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        c = np.matmul(da, np.swapaxes(db, -1, -2))
        return c.astype(np.float32).astype(out)


def matmul_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative Frobenius error ||out - ref|| / ||ref||, in float64 (0 when both are zero)."""
    o = np.asarray(out).astype(np.float64).ravel()
    r = np.asarray(ref).astype(np.float64).ravel()
    num, den = np.linalg.norm(o - r), np.linalg.norm(r)
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return float(num / den)


# ---------------------------------------------------------------------------------------------------
# Per-tensor scaling: amax, delayed-scaling cast, amax-history update (spec section 8).  Current scaling
# is quantize(x, x.shape, elem, "f32", rounding).
# ---------------------------------------------------------------------------------------------------

def amax(x: np.ndarray) -> np.float32:
    """max |x| over the whole tensor in f32 (bf16/f16 widened exactly); the canonical NaN if any element is
    NaN; 0 for an empty tensor."""
    x32 = _widen(x, "amax input")
    if x32.size == 0:
        return np.float32(0)
    m = np.max(np.abs(x32))                                   # np.max propagates NaN
    return np.float32(np.nan) if np.isnan(m) else np.float32(m)


def column_sum(x: np.ndarray) -> np.ndarray:
    """The sum of every column of a matrix [M, N] (f32, bf16 or f16): [N] f32, the float64 sum of
    the widened values rounded once to f32. Not fixed by the spec (docs/numerics.md): the lowerings
    add in f32 in an order of their own, so they agree with this within (M - 1) * 2^-24 *
    sum |x[:, n]| (`column_sum_bound`), not bit for bit; NaN and Inf propagate as in any order
    (an overflow of f32 that float64 does not see becomes +-Inf in the rounding)."""
    x32 = _widen(x, "column_sum input")
    if x32.ndim != 2:
        raise ValueError(f"column_sum input must be a matrix [M, N], got shape {x32.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        # From -0, the identity of addition: a column of -0 sums to -0 (numpy starts from +0).
        return x32.astype(np.float64).sum(axis=0, initial=-0.0).astype(np.float32)


def column_sum_bound(x: np.ndarray) -> np.ndarray:
    """The contract's bound on |column sum - exact sum| per column: (M - 1) * 2^-24 * sum |x[:, n]|,
    in float64."""
    x64 = _widen(x, "column_sum input").astype(np.float64)
    return (x64.shape[0] - 1) * 2.0 ** -24 * np.abs(x64).sum(axis=0)


def _check_fp8_elem(elem: str, what: str) -> None:
    if elem not in FP8_ELEMENT_TYPES:
        raise ValueError(f"{what} needs an FP8 element type {list(FP8_ELEMENT_TYPES)}, got {elem!r}")


def _check_f32(a, ndim: int, what: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype != np.dtype(np.float32):
        raise TypeError(f"{what} must be float32, got {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{what} must have rank {ndim}, got shape {a.shape}")
    return a


def _check_history(history, scales) -> tuple[np.ndarray, np.ndarray]:
    scales = _check_f32(scales, 1, "scales")
    history = _check_f32(history, 2, "amax history")
    if history.shape[0] < 1 or history.shape[1] != scales.shape[0]:
        raise ValueError(f"amax history must be [L >= 1, N] with N = len(scales) = {scales.shape[0]}, "
                         f"got {history.shape}")
    return history, scales


def quantize_delayed(x: np.ndarray, scales: np.ndarray, history: np.ndarray, index: int,
                     elem: str = "f8E4M3FN") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Delayed-scaling cast of tensor `index` (spec section 8).

    scales: f32 [N]; history: f32 [L, N].  Returns (data, scale_inv, new_history):
    * data: y = sat(x * scales[index]) — one f32 multiply, then RNE with saturation to +-maxfinite (Inf too)
      like quantize; element-wise, a NaN y (NaN input, or 0 * Inf) is the positive NaN byte 0x7F;
    * scale_inv: f32 1 / scales[index] (one f32 division), shaped (1,) * x.ndim;
    * new_history: a copy of history with [0, index] = amax(x) (NaN if x has a NaN).
    """
    _check_name(elem, ELEMENT_TYPES, "element type")
    _check_fp8_elem(elem, "quantize_delayed")
    history, scales = _check_history(history, scales)
    if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < scales.shape[0]:
        raise ValueError(f"index must be an integer in [0, {scales.shape[0]}), got {index!r}")
    _require_subnormals()
    x32 = _widen(x, "quantize_delayed input")
    s = scales[int(index)]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        y = x32 * s
        data = _round_to_element(y, elem)
        inv = np.float32(1) / s
    data.view(np.uint8)[np.isnan(y)] = _NAN_ELEMENT
    scale_inv = np.full((1,) * x32.ndim, np.float32(np.nan) if np.isnan(inv) else inv, np.float32)
    new_history = history.copy()
    new_history[0, int(index)] = amax(x32)
    return data, scale_inv, new_history


def update_amax_history(history: np.ndarray, scales: np.ndarray, algorithm: str = "max", margin: int = 0,
                        *, elem: str = "f8E4M3FN") -> tuple[np.ndarray, np.ndarray]:
    """Once-per-step delayed-scaling update for all N tensors (spec section 8).  Returns
    (new_history, new_scales), both fresh f32 arrays.

    For each column j: a = max(history[:, j]) ("max") or history[0, j] ("most_recent");
    scale[j] = (maxfinite(elem) / a) / 2**margin in f32, in that order, when a is finite and > 0, else
    scale[j] is left unchanged.  The scale is computed before the history rotates
    [c, a_1, ..., a_{L-1}] -> [0, a_2, ..., a_{L-1}, c].

    Not fixed by the spec; chosen as NVIDIA Transformer Engine's delayed-scaling update kernel
    (transformer_engine/common/recipe/delayed_scaling.cu) does:
    * "max" reduces like fmaxf from 0: NaN entries are ignored (a column of NaNs gives a = 0, so the scale
      is kept); +-Inf entries count (a = Inf keeps the scale).  "most_recent" with a NaN keeps the scale.
    * a newly computed scale that overflows to Inf (tiny a) becomes the largest finite f32.
    * L = 1: the single row becomes 0 (the current amax is consumed, as the rotation gives for L >= 2).
    * margin is an integer with 2**margin an f32 (-149..127); negative margins are allowed.
    * elem (keyword, default f8E4M3FN) picks maxfinite: 448 or 57344.
    """
    _check_name(elem, ELEMENT_TYPES, "element type")
    _check_fp8_elem(elem, "update_amax_history")
    _check_name(algorithm, AMAX_ALGORITHMS, "amax algorithm")
    if isinstance(margin, bool) or not isinstance(margin, numbers.Integral) or not -149 <= margin <= 127:
        raise ValueError(f"margin must be an integer in [-149, 127] (2**margin an f32), got {margin!r}")
    history, scales = _check_history(history, scales)
    _require_subnormals()
    if algorithm == "max":
        a = np.fmax.reduce(history, axis=0, initial=np.float32(0)).astype(np.float32)
    else:
        a = history[0].copy()
    ok = np.isfinite(a) & (a > 0)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        fresh = (np.float32(max_finite(elem)) / a) / _pow2_f32(np.int64(margin))
    fresh = np.where(np.isinf(fresh), _F32_MAX, fresh)
    new_scales = np.where(ok, fresh, scales).astype(np.float32)
    new_history = np.roll(history, -1, axis=0)               # [a_1, a_2, ..., a_{L-1}, c]
    new_history[0] = 0                                       # [0, a_2, ..., a_{L-1}, c]; L = 1: [0]
    return new_history.astype(np.float32), new_scales


# ---------------------------------------------------------------------------------------------------
# FP4 (spec section 10): nibble packing, NVFP4.  MXFP4 is quantize(x, (..., 1, 32), "f4E2M1FN").
# ---------------------------------------------------------------------------------------------------

def pack(a: np.ndarray) -> np.ndarray:
    """An array of a packed element type (float4_e2m1fn, float6_e3m2fn, float6_e2m3fn) [..., n] -> its
    memory, uint8 [..., n * bits / 8]: FP4 element 2i in the low nibble of byte i (PyTorch's
    float4_e2m1fn_x2, cuBLASLt's CUDA_R_4F_E2M1); FP6 element 4i + j in bits 6j..6j+5 of the little-endian
    24-bit word of bytes 3i..3i+2 (the order of the sub-byte tensor-map types, docs/numerics.md).  Other
    element types are returned as their bytes."""
    a = np.asarray(a)
    fmt = formats.BY_DTYPE.get(a.dtype)
    if fmt is None or fmt.role != "element":
        raise TypeError(f"pack needs an array of an mx element type, got {a.dtype}")
    return fmt.pack(a)


def unpack(packed: np.ndarray, elem: str) -> np.ndarray:
    """uint8 memory [..., stored n] of element type `elem` -> its elements (inverse of pack)."""
    _check_name(elem, ELEMENT_TYPES, "element type")
    return formats.get(elem).unpack(packed)


def pack_fp4(a: np.ndarray) -> np.ndarray:
    """float4_e2m1fn array [..., 2n] -> uint8 [..., n]: pack for FP4."""
    a = np.asarray(a)
    if a.dtype != np.dtype(ml_dtypes.float4_e2m1fn):
        raise TypeError(f"pack_fp4 needs a float4_e2m1fn array, got {a.dtype}")
    return pack(a)


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """uint8 [..., n] -> float4_e2m1fn [..., 2n] (inverse of pack_fp4)."""
    return unpack(packed, "f4E2M1FN")


def _nvfp4_block(shape: Shape) -> tuple[int, ...]:
    return (1,) * (len(shape) - 1) + (NVFP4_BLOCK,)


def quantize_nvfp4(x: np.ndarray, tensor_scale=None) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """Two-level NVFP4 quantization (spec section 10; torchao's nvfp4_quantize rule, same f32 order).

    Returns (data, scales, t): data float4_e2m1fn with x's shape; scales float8_e4m3fn of shape
    scales_shape(x.shape, (1, ..., 1, 16)); t the f32 per-tensor scale.
    * t = amax_tensor / (448 * 6) (one f32 division by 2688), or tensor_scale (converted to f32) if given;
    * per block: s = e4m3(clamp((amax_block / 6) / t, 2**-6, 448)), RNE;
    * per element: r = (1 / t) / float(s); q = e2m1(clamp(x * r, -6, 6)), RNE.

    Not fixed by the spec (torchao leaves these undefined or produces NaN garbage); chosen here:
    * the last dim need not be a multiple of 16: a trailing partial block's amax covers the elements that
      exist (as section 2);
    * a computed t uses the amax of the finite elements only, so a NaN or Inf stays local to its block as
      in section 3; t = 1 when that t is not a normal f32 (amax 0 as the spec says, and amax so small
      that 1 / t would overflow).  A given tensor_scale must be finite and >= 2**-126 (ValueError);
    * a block containing NaN: scale byte 0x7F (E4M3 NaN) and element codes 0, as MXFP4; dequantizes to NaN;
    * a block containing +-Inf (no NaN): (Inf / 6) / t clamps to s = 448; Inf elements saturate to +-6, the
      finite ones use r = (1 / t) / 448 — the formula as written;
    * s never rounds to 0: the clamp's lower bound 2**-6 is the smallest normal E4M3 (an all-zero block
      gets s = 2**-6 and codes +-0, the sign of zero kept).
    """
    _require_subnormals()
    x32 = _widen(x, "quantize_nvfp4 input")
    eff, nb = _block_layout(x32.shape, _nvfp4_block(x32.shape))
    if tensor_scale is None:
        finite = np.abs(x32[np.isfinite(x32)])
        amax_t = np.max(finite) if finite.size else np.float32(0)
        t = np.float32(amax_t / np.float32(448.0 * 6.0))
        if not t >= _F32_MIN_NORMAL:
            t = np.float32(1)
    else:
        t = np.float32(tensor_scale)
        if not (np.isfinite(t) and t >= _F32_MIN_NORMAL):
            raise ValueError(f"tensor_scale must be a finite f32 >= 2**-126, got {tensor_scale!r}")
    amax_b = np.max(np.abs(_to_blocks(x32, eff, nb)), axis=-1)   # NaN propagates
    nan_block = np.isnan(amax_b)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        s = (amax_b / _FP4_MAX) / t
        scales = _round_to_element(np.clip(s, _NVFP4_SCALE_MIN, _E4M3_MAX), "f8E4M3FN")
        scales.view(np.uint8)[nan_block] = _E4M3_NAN
        r = (np.float32(1) / t) / scales.astype(np.float32)
        y = np.clip(x32 * _expand(r, eff, x32.shape), -_FP4_MAX, _FP4_MAX)
    data = _round_to_fp4(y)
    data.view(np.uint8)[_expand(nan_block, eff, x32.shape)] = nan_block_code("f4E2M1FN")
    return data, scales, t


def dequantize_nvfp4(data: np.ndarray, scales: np.ndarray, tensor_scale, out_dtype=np.float32) -> np.ndarray:
    """x' = float(q) * float(s) * t, in that f32 order, then RNE to out_dtype; a NaN scale (0x7F / 0xFF)
    makes its block NaN; every NaN is the canonical positive quiet NaN."""
    out = _check_out_dtype(out_dtype)
    data, scales = np.asarray(data), np.asarray(scales)
    if data.dtype != np.dtype(ml_dtypes.float4_e2m1fn):
        raise TypeError(f"NVFP4 data must be float4_e2m1fn, got {data.dtype}")
    if scales.dtype != np.dtype(ml_dtypes.float8_e4m3fn):
        raise TypeError(f"NVFP4 scales must be float8_e4m3fn, got {scales.dtype}")
    if data.ndim < 1:
        raise ValueError("NVFP4 data must have rank >= 1")
    x = _dequantize_f32(data, scales, _nvfp4_block(data.shape), np.float32(tensor_scale))
    with np.errstate(over="ignore"):
        return x.astype(out)
