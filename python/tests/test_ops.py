"""mx.quantize / dequantize / swizzle / unswizzle / scaled_matmul on numpy arrays (the CPU pipeline)
against mx.reference bit for bit, and their argument errors, raised before anything is compiled."""

import ml_dtypes
import numpy as np
import pytest

import mx
from mx import compiler, ops, reference
from conftest import assert_bits_equal, random_input


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MX_CACHE_DIR", str(tmp_path / "cache"))
    for factory in (ops.quantize_kernel, ops.dequantize_kernel, ops.swizzle_kernel, ops.scaled_matmul_kernel):
        factory.cache_clear()


@pytest.mark.parametrize("shape, dtype, block, elem, scale_type, rounding", [
    ((70, 96), np.float32, (1, 32), "f8E4M3FN", "f8E8M0FNU", "ceil"),
    ((64, 200), ml_dtypes.bfloat16, (1, 128), "f8E4M3FN", "f32", "exact"),
    ((3, 40, 64), np.float16, (1, 1, 32), "f8E5M2", "f8E8M0FNU", "floor"),
    ((256, 256), np.float32, (128, 128), "f8E4M3FN", "f32", "ceil"),
])
def test_quantize_matches_reference(rng, shape, dtype, block, elem, scale_type, rounding):
    x = random_input(rng, shape, dtype)
    data, scales = mx.quantize(x, block, elem, scale_type, rounding)
    ref_data, ref_scales = reference.quantize(x, block, elem, scale_type, rounding)
    assert_bits_equal(data, ref_data, "data")
    assert_bits_equal(scales, ref_scales, "scales")


def test_fused_rowwise_columnwise_swizzled(rng):
    x = random_input(rng, (160, 96), ml_dtypes.bfloat16)
    data, tiles, col_data, col_tiles = mx.quantize(x, (1, 32), swizzle=True, columnwise=True)
    ref_data, ref_scales = reference.quantize(x, (1, 32))
    ref_col, ref_col_scales = reference.quantize(x, (32, 1))
    assert_bits_equal(data, ref_data, "rowwise data")
    assert_bits_equal(tiles, reference.swizzle(ref_scales, 0), "rowwise tiles")
    assert_bits_equal(col_data, ref_col, "columnwise data")
    assert_bits_equal(col_tiles, reference.swizzle(ref_col_scales, 1), "columnwise tiles")


def test_dequantize_swizzle_unswizzle(rng):
    x = random_input(rng, (130, 64), np.float32)
    data, scales = reference.quantize(x, (1, 32))
    assert_bits_equal(mx.dequantize(data, scales, (1, 32), "bf16"),
                      reference.dequantize(data, scales, (1, 32), ml_dtypes.bfloat16), "dequantize")
    tiles = mx.swizzle(scales)
    assert_bits_equal(tiles, reference.swizzle(scales), "swizzle")
    assert_bits_equal(mx.unswizzle(tiles, scales.shape), scales, "unswizzle")


def test_scaled_matmul_matches_reference(rng):
    a, a_scales = reference.quantize(random_input(rng, (48, 256), np.float32, specials=False), (1, 32))
    b, b_scales = reference.quantize(random_input(rng, (40, 256), np.float32, specials=False), (1, 32))
    got = mx.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32))
    expected = reference.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32))
    assert got.dtype == np.float32 and reference.matmul_error(got, expected) < 1e-6  # f32 summation order


def test_repeated_calls_reuse_one_kernel(rng):
    x = random_input(rng, (64, 64), np.float32)
    mx.quantize(x)
    mx.quantize(x * 2)
    assert ops.quantize_kernel.cache_info().misses == 1


@pytest.mark.parametrize("call, message", [
    (lambda: mx.quantize(np.zeros((4, 64), np.complex64)), "numpy dtype complex64 is not an mx element type"),
    (lambda: mx.quantize(np.zeros((4, 64), np.int32)), "input dtype i32 is not supported"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float64)), "input dtype f64 is not supported"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float32), (1, 1, 32)), "block (1, 1, 32) has 3 entries but the "
                                                                   "input (4, 64) has rank 2"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float32), elem="f8E4M3"), "element type f8E4M3 is not one of"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float32), rounding="up"), "rounding up is not one of"),
    (lambda: mx.quantize(np.zeros((64, 64), np.float32), (2, 32), swizzle=True),
     "swizzled scales need a block of one row or one column"),
    (lambda: mx.scaled_matmul(*reference.quantize(np.ones((32, 96), np.float32), (1, 32)),
                              *reference.quantize(np.ones((32, 64), np.float32), (1, 32)), (1, 32), (1, 32)),
     "has K = 96 but rhs (32, 64) (k_contiguous) has K = 64"),
    (lambda: mx.scaled_matmul(*reference.quantize(np.ones((32, 48), np.float32), (1, 32)),
                              *reference.quantize(np.ones((32, 48), np.float32), (1, 32)), (1, 32), (1, 32)),
     "K = 48 is not a multiple of the lhs block's K extent 32"),
    (lambda: mx.dequantize(*reference.quantize(np.ones((32, 64), np.float32), (1, 32)), (1, 16)),
     "scales have shape (32, 2); data (32, 64) in blocks (1, 16) needs (32, 4)"),
])
def test_errors_before_compiling(monkeypatch, call, message):
    monkeypatch.setattr(compiler, "compile", lambda *a, **k: pytest.fail("compiled a bad call"))
    with pytest.raises((ValueError, TypeError)) as error:
        call()
    assert message in str(error.value)
