"""The CPU pipeline (`mx-opt --mx-lower-to-cpu` + mlir-runner) against mx.reference, bit for bit.

Every test draws fresh random inputs (the seed is printed on failure) over a wide dynamic range and
plants the spec's special values: +-0, f32 subnormals, values that land on FP8 subnormals, max finite
and just above it, +-Inf and NaN, and an all-zero block. Shapes include ones that no block divides.
"""

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, ceil_boundary_input, exact_matmul, matmul_operands, random_input

from mx import formats, reference, tools

BLOCKS = {
    "rowwise-1x32": ((70, 200), (1, 32)),
    "columnwise-32x1": ((130, 33), (32, 1)),
    "blockwise-1x128": ((50, 300), (1, 128)),
    "blockwise-128x128": ((200, 260), (128, 128)),
    "per-tensor": ((37, 45), (37, 45)),
    "aligned-1x32": ((128, 256), (1, 32)),
}
SCALINGS = [("f8E8M0FNU", "ceil"), ("f8E8M0FNU", "floor"), ("f32", "ceil"), ("f32", "floor"),
            ("f32", "exact")]


@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2"])
@pytest.mark.parametrize("scale_type,rounding", SCALINGS)
@pytest.mark.parametrize("recipe", list(BLOCKS))
def test_quantize(rng, recipe, scale_type, rounding, elem):
    shape, block = BLOCKS[recipe]
    x = random_input(rng, shape, np.float32)
    data, scales = tools.cpu_quantize(x, block, elem, scale_type, rounding)
    ref_data, ref_scales = reference.quantize(x, block, elem, scale_type, rounding)
    assert_bits_equal(scales, ref_scales, "scales")
    assert_bits_equal(data, ref_data, "data")


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("elem", formats.ELEMENT_TYPES)
def test_quantize_ceil_boundaries(rng, elem, dtype):
    """The `ceil` exponent, computed from amax's bits without the spec's division, on blocks whose
    amaxes are maxfinite times every power of two and the ulps beside it, subnormal, 0, the largest
    finite value, Inf and NaN (ceil_boundary_input: every such amax of the input type in both the
    rowwise and the columnwise blocks of one input)."""
    x = ceil_boundary_input(rng, (704, 64), elem, dtype)
    for block in [(1, 32), (32, 1)]:
        data, scales = tools.cpu_quantize(x, block, elem, "f8E8M0FNU", "ceil")
        ref_data, ref_scales = reference.quantize(x, block, elem, "f8E8M0FNU", "ceil")
        assert_bits_equal(scales, ref_scales, f"scales {block}")
        assert_bits_equal(data, ref_data, f"data {block}")


@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2"])
def test_quantize_exact_underflow(rng, elem):
    """`exact` scales of blocks whose amax / maxfinite underflows to 0 in f32 (and of zero blocks)."""
    x = random_input(rng, (4, 64), np.float32)
    x[0] = np.float32(1e-44) * rng.choice([-1, 1], size=64)
    x[1, :32] = 0.0
    x[2, :32] = np.float32(3e-42)
    data, scales = tools.cpu_quantize(x, (1, 32), elem, "f32", "exact")
    ref_data, ref_scales = reference.quantize(x, (1, 32), elem, "f32", "exact")
    assert_bits_equal(scales, ref_scales, "scales")
    assert_bits_equal(data, ref_data, "data")


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2"])
def test_quantize_narrow_inputs(rng, dtype, elem):
    x = random_input(rng, (65, 96), np.float32)
    x = np.clip(x, -6e4, 6e4) if dtype is np.float16 else x
    x = x.astype(dtype)
    for block in [(1, 32), (32, 1)]:
        data, scales = tools.cpu_quantize(x, block, elem)
        ref_data, ref_scales = reference.quantize(x, block, elem)
        assert_bits_equal(scales, ref_scales, f"scales {block}")
        assert_bits_equal(data, ref_data, f"data {block}")


def test_quantize_rank3(rng):
    x = random_input(rng, (3, 5, 70), np.float32)
    data, scales = tools.cpu_quantize(x, (1, 1, 32))
    ref_data, ref_scales = reference.quantize(x, (1, 1, 32))
    assert_bits_equal(scales, ref_scales, "scales")
    assert_bits_equal(data, ref_data, "data")


@pytest.mark.parametrize("out_dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2"])
def test_dequantize_every_code(rng, elem, out_dtype):
    """All 256 element codes against random E8M0 scales, including 0 (2^-127) and 255 (NaN)."""
    data = np.tile(np.arange(256, dtype=np.uint8), (40, 1)).reshape(40, 256)
    rng.permuted(data, axis=1, out=data)
    scale_bytes = rng.integers(0, 256, size=(40, 8), dtype=np.uint8)
    scale_bytes[0, :3] = [0, 254, 255]
    data = data.view(reference.ELEMENT_TYPES[elem])
    scales = scale_bytes.view(ml_dtypes.float8_e8m0fnu)
    out = tools.cpu_dequantize(data, scales, (1, 32), out_dtype)
    assert_bits_equal(out, reference.dequantize(data, scales, (1, 32), out_dtype), "dequantized")


@pytest.mark.parametrize("rounding", ["ceil", "exact"])
def test_dequantize_f32_scales(rng, rounding):
    x = random_input(rng, (200, 260), np.float32)
    data, scales = reference.quantize(x, (128, 128), "f8E4M3FN", "f32", rounding)
    out = tools.cpu_dequantize(data, scales, (128, 128))
    assert_bits_equal(out, reference.dequantize(data, scales, (128, 128)), "dequantized")


@pytest.mark.parametrize("out_dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_dequantize_special_f32_scales(rng, out_dtype):
    """f32 scales of any value: +-Inf (0 x Inf is NaN), NaNs with sign and payload, signalling NaN,
    zero, subnormal, max finite; every NaN result must be the contract's positive quiet NaN."""
    special_bits = np.array([0x7F800000, 0xFF800000, 0x7FC00001, 0xFFC00000, 0x7F800001, 0xFFFFFFFF,
                             0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF], np.uint32)
    data = rng.integers(0, 256, size=(16, 4 * special_bits.size), dtype=np.uint8)
    data[:, ::4] = 0x00  # +0 and -0 in every block, so 0 x Inf occurs
    data[:, 1::4] = 0x80
    scales = rng.standard_normal((16, special_bits.size)).astype(np.float32)
    scales.view(np.uint32)[::2] = special_bits
    data = data.view(ml_dtypes.float8_e4m3fn)
    out = tools.cpu_dequantize(data, scales, (1, 4), out_dtype)
    expected = reference.dequantize(data, scales, (1, 4), out_dtype)
    assert np.isnan(expected.astype(np.float32)).any()
    assert_bits_equal(out, expected, "dequantized")


@pytest.mark.parametrize("unscaled_dim", [0, 1])
@pytest.mark.parametrize("shape", [(500, 6), (4, 2), (256, 8), (129, 5), (3, 300)])
def test_swizzle_round_trip(rng, shape, unscaled_dim):
    scales = rng.integers(0, 256, size=shape, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    swizzled = tools.cpu_swizzle(scales, unscaled_dim)
    assert_bits_equal(swizzled, reference.swizzle(scales, unscaled_dim), "swizzled")
    back = tools.cpu_unswizzle(swizzled, shape, unscaled_dim)
    assert_bits_equal(back, scales, "unswizzled")


def test_swizzle_f32_scales(rng):
    scales = rng.standard_normal((130, 3)).astype(np.float32)
    assert_bits_equal(tools.cpu_swizzle(scales), reference.swizzle(scales), "swizzled f32")


MATMULS = {
    "mx-aligned": ((256, 128, 256), (1, 32), (1, 32), "f8E8M0FNU"),
    "mx-odd": ((70, 50, 96), (1, 32), (1, 32), "f8E8M0FNU"),
    "blockwise": ((200, 136, 384), (1, 128), (128, 128), "f32"),
    "per-tensor": ((64, 80, 128), (64, 128), (80, 128), "f32"),
}


@pytest.mark.parametrize("out_dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("swizzled", [False, True])
@pytest.mark.parametrize("case", list(MATMULS))
def test_scaled_matmul(rng, case, swizzled, out_dtype):
    (m, n, k), a_block, b_block, scale_type = MATMULS[case]
    if swizzled and scale_type != "f8E8M0FNU":
        pytest.skip("swizzled scales are the MX (1 x 32, E8M0) layout")
    a, a_scales, b, b_scales = matmul_operands(rng, m, n, k, a_block, b_block, scale_type, swizzled,
                                               b_elem="f8E5M2")
    out = tools.cpu_scaled_matmul(a, a_scales, b, b_scales, a_block, b_block, out_dtype)
    exact = exact_matmul(a, a_scales, b, b_scales, a_block, b_block)
    tolerance = 1e-5 if out_dtype is np.float32 else 4e-3
    error = reference.matmul_error(out, exact)
    assert error < tolerance, f"relative Frobenius error {error:.3g} >= {tolerance}"


def test_invalid_program_is_a_diagnostic():
    with pytest.raises(tools.ToolError, match="expected scales of shape"):
        tools.run_mx_opt("""
          func.func @f(%x: tensor<4x64xf32>) {
            %d, %s = mx.quantize %x block [1, 32] : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x3xf8E8M0FNU>
            return
          }""")
