"""MXFP6 (f6E3M2FN, f6E2M3FN) and MXINT8 (i8): spec section 11 in mx.reference, the CPU pipeline and mx.ops.

The reference's element rounding is checked against an encoder written here independently (every code of
the format decoded from its fields, the nearest picked with ties to the even code, saturation), on every
f32 whose low 16 bits are zero, every midpoint and its neighbours; MXINT8 against clamp(rint(y * 64)).
The CPU pipeline must then agree with the reference bit for bit on fresh random inputs with the spec's
special values, for quantize (rowwise, columnwise, batched, every rounding mode, every input type),
dequantize (every code under widely spread scales) and scaled_matmul (the new formats, mixed with each
other and with FP8). The sm_90a kernels round FP6 with the FP8 `cvt` of a format that embeds it; that
identity is checked here on the same f32 patterns.
"""

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, random_input

import mx
from mx import formats, reference, tools

FP6 = ["f6E3M2FN", "f6E2M3FN"]
NEW = FP6 + ["i8"]
# (exponent bits, mantissa bits, bias) of each FP6 type, as the OCP MX spec states them.
FIELDS = {"f6E3M2FN": (3, 2, 3), "f6E2M3FN": (2, 3, 1)}
# The FP8 format whose cvt rounds each FP6 type on sm_90a, and the power of two between them.
CARRIERS = {"f6E3M2FN": (ml_dtypes.float8_e5m2, 3 - 15), "f6E2M3FN": (ml_dtypes.float8_e4m3fn, 1 - 7)}
# Every block quantization these formats take: E8M0 scales per 32 along one of the last two dims.
BLOCKS = {"rowwise": ((70, 200), (1, 32)), "columnwise": ((130, 36), (32, 1)),
          "batched": ((3, 40, 64), (1, 1, 32)), "batched-columnwise": ((2, 64, 24), (1, 32, 1))}


def fp6_values(elem):
    """The value of every positive code 0..31 of an FP6 type, from its fields."""
    e_bits, m_bits, bias = FIELDS[elem]
    codes = np.arange(1 << (e_bits + m_bits))
    e, m = codes >> m_bits, codes & ((1 << m_bits) - 1)
    return np.where(e == 0, m * 2.0 ** (1 - bias - m_bits), (1 + m / 2.0 ** m_bits) * 2.0 ** (e - bias))


def encode_fp6(y, elem):
    """f32 -> FP6 code: nearest value, ties to the even code, saturating to the largest, sign kept."""
    values = fp6_values(elem)
    mag = np.abs(y.astype(np.float64))
    upper = np.clip(np.searchsorted(values, mag, side="left"), 1, values.size - 1)
    lower = upper - 1
    lo, hi = values[lower], values[upper]
    pick_hi = (mag - lo > hi - mag) | ((mag - lo == hi - mag) & (upper % 2 == 0))
    code = np.where(mag >= values[-1], values.size - 1, np.where(pick_hi, upper, lower))
    sign = (y.view(np.uint32) >> 31).astype(np.int64) << (FIELDS[elem][0] + FIELDS[elem][1])
    return (code | sign).astype(np.uint8)


def f32_patterns(elem):
    """Every finite f32 with zero low 16 bits, every midpoint of the format and its neighbours."""
    y = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    y = y[np.isfinite(y)]
    values = fp6_values(elem) if elem in FP6 else np.arange(128) / 64.0
    mids = ((values[1:] + values[:-1]) / 2).astype(np.float32)
    mids = np.concatenate([mids, -mids])
    near = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, -np.float32(np.inf))])
    return np.concatenate([y, near]).astype(np.float32)


@pytest.mark.parametrize("elem", FP6)
def test_fp6_rounding_matches_independent_encoder(elem):
    y = f32_patterns(elem)
    got = reference._round_to_element(y, elem).view(np.uint8)
    np.testing.assert_array_equal(got, encode_fp6(y, elem))


def test_mxint8_rounding():
    y = f32_patterns("i8")
    want = np.clip(np.rint(y.astype(np.float64) * 64), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(reference._round_to_element(y, "i8"), want)
    assert reference._round_to_element(np.array([-np.inf, np.inf, -1e30], np.float32), "i8").tolist() == \
        [-127, 127, -127]


@pytest.mark.parametrize("elem", FP6)
def test_fp6_through_the_fp8_carrier(elem):
    """What the sm_90a kernels do: the FP8 cvt of the value times 2^(bias6 - bias8), clamped to the FP6
    max (scaled alike) first, with the sign moved from bit 7 to bit 5, is the FP6 rounding."""
    carrier, shift = CARRIERS[elem]
    y = f32_patterns(elem)
    limit = np.float32(reference.max_finite(elem) * 2.0 ** shift)
    with np.errstate(under="ignore"):
        scaled = np.clip(y * np.float32(2.0 ** shift), -limit, limit)
    wide = scaled.astype(carrier).view(np.uint8)
    narrow = (wide & 0x1F) | ((wide >> 2) & 0x20)
    np.testing.assert_array_equal(narrow, reference._round_to_element(y, elem).view(np.uint8))
    # And back: the wider value of the widened code times 2^-shift is the FP6 value.
    codes = np.arange(64, dtype=np.uint8)
    widened = (codes & 0x1F) | ((codes & 0x20) << 2)
    values = widened.view(carrier).astype(np.float32) * np.float32(2.0 ** -shift)
    np.testing.assert_array_equal(values, codes.view(formats.get(elem).dtype).astype(np.float32))


@pytest.mark.parametrize("elem", NEW)
@pytest.mark.parametrize("rounding", ["ceil", "floor"])
def test_special_blocks(elem, rounding):
    """NaN block: scale 0xFF and codes 0; Inf block: b = 254 and saturated codes; zero block: b = 0."""
    x = np.ones((3, 32), np.float32)
    x[0, 5] = np.nan
    x[1, 3], x[1, 4] = np.inf, -np.inf
    x[2] = 0.0
    x[2, 7] = -0.0
    data, scales = reference.quantize(x, (1, 32), elem, "f8E8M0FNU", rounding)
    assert scales.view(np.uint8).tolist() == [[255], [254], [0]]
    codes = data.view(np.uint8)
    assert (codes[0] == 0).all()
    top = formats.get(elem).bits - 1
    if elem == "i8":
        assert data[1, 3] == 127 and data[1, 4] == -127
    else:
        assert codes[1, 3] == (1 << top) - 1 and codes[1, 4] == (1 << (top + 1)) - 1
    negative_zero = 0 if elem == "i8" else 1 << top      # integers have no -0
    assert codes[2].tolist() == [negative_zero if i == 7 else 0 for i in range(32)]


@pytest.mark.parametrize("elem", NEW)
def test_floor_saturates(elem):
    """floor picks 2^(exponent(amax) - emax), so elements up to twice max finite saturate."""
    x = np.full((1, 32), 1.0, np.float32)
    x[0, 0] = np.nextafter(np.float32(2.0 ** (reference.emax(elem) + 1)), np.float32(0))   # below 2^(emax+1)
    data, scales = reference.quantize(x, (1, 32), elem, "f8E8M0FNU", "floor")
    assert scales.view(np.uint8)[0, 0] == 127
    assert reference.dequantize(data, scales, (1, 32))[0, 0] == np.float32(reference.max_finite(elem))


# ---------------------------------------------------------------------------------------------------
# The CPU pipeline against the reference
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", NEW)
@pytest.mark.parametrize("rounding", ["ceil", "floor"])
@pytest.mark.parametrize("case", list(BLOCKS))
def test_cpu_quantize(rng, elem, rounding, case):
    shape, block = BLOCKS[case]
    x = random_input(rng, shape, np.float32)
    data, scales = tools.cpu_quantize(x, block, elem, "f8E8M0FNU", rounding)
    ref_data, ref_scales = reference.quantize(x, block, elem, "f8E8M0FNU", rounding)
    assert_bits_equal(scales, ref_scales, "scales")
    assert_bits_equal(data, ref_data, "data")


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("elem", NEW)
def test_cpu_quantize_narrow_inputs(rng, dtype, elem):
    x = random_input(rng, (64, 96), np.float32)
    x = (np.clip(x, -6e4, 6e4) if dtype is np.float16 else x).astype(dtype)
    for block in [(1, 32), (32, 1)]:
        data, scales = tools.cpu_quantize(x, block, elem)
        ref_data, ref_scales = reference.quantize(x, block, elem)
        assert_bits_equal(scales, ref_scales, f"scales {block}")
        assert_bits_equal(data, ref_data, f"data {block}")


def every_code(elem, rows):
    """[rows, 64] data holding every code of `elem` in each row (FP6: 64 codes; MXINT8: 64 of its 256)."""
    fmt = formats.get(elem)
    if elem == "i8":
        codes = np.arange(-128, 128, 4, dtype=np.int8)
        return np.tile(codes[np.argsort(np.random.default_rng(1).random(64))], (rows, 1))
    return np.tile(np.arange(64, dtype=np.uint8), (rows, 1)).view(fmt.dtype)


@pytest.mark.parametrize("out_dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("elem", NEW)
def test_cpu_dequantize_every_code(rng, elem, out_dtype):
    data = every_code(elem, 16)
    # Scale bytes across E8M0's whole range, NaN included.
    scales = rng.integers(0, 256, size=(16, 2), dtype=np.uint8)
    scales[0] = [0, 255]
    scales[1] = [254, 127]
    scales = scales.view(ml_dtypes.float8_e8m0fnu)
    got = tools.cpu_dequantize(data, scales, (1, 32), out_dtype)
    assert_bits_equal(got, reference.dequantize(data, scales, (1, 32), out_dtype), "dequantized")


def test_mxint8_dequantize_values():
    data = np.arange(-128, 128, dtype=np.int8).reshape(8, 32)
    scales = np.full((8, 1), 127 + 3, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    np.testing.assert_array_equal(reference.dequantize(data, scales, (1, 32)),
                                  data.astype(np.float32) * np.float32(2.0 ** -6 * 8))


@pytest.mark.parametrize("a_elem,b_elem", [("f6E3M2FN", "f6E3M2FN"), ("f6E2M3FN", "i8"), ("i8", "i8"),
                                           ("f6E3M2FN", "f8E4M3FN"), ("i8", "f4E2M1FN")])
@pytest.mark.parametrize("swizzled", [False, True])
def test_cpu_scaled_matmul(rng, a_elem, b_elem, swizzled):
    m, n, k = 40, 24, 128
    a, a_scales = reference.quantize(random_input(rng, (m, k), np.float32, specials=False), (1, 32), a_elem)
    b, b_scales = reference.quantize(random_input(rng, (n, k), np.float32, specials=False), (1, 32), b_elem)
    if swizzled:
        a_scales, b_scales = reference.swizzle(a_scales), reference.swizzle(b_scales)
    for out in [np.float32, ml_dtypes.bfloat16]:
        got = tools.cpu_scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32), out)
        want = reference.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32), out)
        assert reference.matmul_error(got, want) < (1e-6 if out is np.float32 else 4e-3)


@pytest.mark.parametrize("elem", NEW)
def test_ops_round_trip(rng, elem):
    """mx.ops on numpy: quantize (rowwise and columnwise, swizzled) and dequantize, as the reference."""
    x = random_input(rng, (64, 128), np.float32)
    data, scales, col_data, col_scales = mx.quantize(x, (1, 32), elem, swizzle=True, columnwise=True)
    ref_data, ref_scales = reference.quantize(x, (1, 32), elem)
    ref_col_data, ref_col_scales = reference.quantize(x, (32, 1), elem)
    assert_bits_equal(data, ref_data, "rowwise data")
    assert_bits_equal(scales, reference.swizzle(ref_scales), "rowwise scales")
    assert_bits_equal(col_data, ref_col_data, "columnwise data")
    assert_bits_equal(col_scales, reference.swizzle(ref_col_scales, 1), "columnwise scales")
    back = mx.dequantize(ref_data, ref_scales, (1, 32), "bf16")
    assert_bits_equal(back, reference.dequantize(ref_data, ref_scales, (1, 32), ml_dtypes.bfloat16), "dequantized")
