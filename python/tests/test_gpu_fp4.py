"""FP4 GPU kernels (MXFP4, NVFP4) of `mx-lower-to-nvvm` against mx.reference, bit for bit, on a real GPU.

Built and loaded like test_gpu_kernels.py: `python python/tests/test_gpu_fp4.py DIR [CHIP]` compiles the
programs ahead of time, and $MX_GPU_ARTIFACTS=DIR runs them on a GPU machine without MLIR. FP4 data crosses
the device boundary packed, two elements to a byte (runtime.DeviceBuffer.from_numpy, MemRef.to_numpy).
Results land in memory filled with 0xA5 just before the call, so an unwritten byte shows up as a mismatch.
"""

import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import (assert_bits_equal, build_gpu_programs, ceil_boundary_input, load_gpu_programs, random_input,
                      run_gpu_program)

from mx import reference, runtime, tools

FP4 = ml_dtypes.float4_e2m1fn
ROW, COL = (1, 32), (32, 1)
# MXFP4 quantize: input shape and dtype, block, rounding.
MXFP4 = {
    "mxfp4_bf16": ((128, 256), ml_dtypes.bfloat16, ROW, "ceil"),
    "mxfp4_f32_floor_odd": ((70, 96), np.float32, ROW, "floor"),
    "mxfp4_f16_one_row": ((1, 32), np.float16, ROW, "ceil"),
    "mxfp4_batched": ((2, 3, 64), ml_dtypes.bfloat16, (1, 1, 32), "ceil"),
    "mxfp4_columnwise_odd": ((70, 102), np.float32, COL, "ceil"),
    "mxfp4_columnwise_floor": ((256, 64), ml_dtypes.bfloat16, COL, "floor"),
    "mxfp4_columnwise_batched": ((3, 64, 40), np.float32, (1, 32, 1), "ceil"),
    # Room for every `ceil` boundary amax of the input type (test_mxfp4_ceil_boundaries).
    "mxfp4_boundaries_f32": ((704, 64), np.float32, ROW, "ceil"),
    "mxfp4_boundaries_bf16": ((704, 64), ml_dtypes.bfloat16, ROW, "ceil"),
    "mxfp4_columnwise_boundaries_bf16": ((704, 64), ml_dtypes.bfloat16, COL, "ceil"),
}
# NVFP4 quantize: input shape and dtype, whether the tensor scale is given (else computed and returned),
# whether the scales are swizzled, whether the blocks are columnwise ([16, 1]).
NVFP4 = {
    "nvfp4_given_f32": ((64, 80), np.float32, True, False, False),
    "nvfp4_computed_bf16": ((100, 48), ml_dtypes.bfloat16, False, False, False),
    "nvfp4_computed_big": ((257, 1024), np.float32, False, False, False),
    "nvfp4_given_swizzled": ((130, 64), ml_dtypes.bfloat16, True, True, False),
    "nvfp4_batched_computed": ((3, 5, 32), np.float16, False, False, False),
    "nvfp4_columnwise_computed": ((70, 46), np.float32, False, False, True),
    "nvfp4_columnwise_given": ((64, 96), ml_dtypes.bfloat16, True, False, True),
}
# FP4 dequantize: data shape, block, whether NVFP4 (E4M3 scales and a tensor scale), output dtype.
DEQUANTIZE = {
    "dequantize_mxfp4_bf16": ((70, 96), (1, 32), False, ml_dtypes.bfloat16),
    "dequantize_mxfp4_columnwise": ((64, 6), (32, 1), False, np.float32),
    "dequantize_nvfp4_f32": ((50, 64), (1, 16), True, np.float32),
    "dequantize_nvfp4_batched_f16": ((2, 3, 48), (1, 1, 16), True, np.float16),
}


def _type(shape, dtype):
    return tools.mlir_type(shape, dtype)



def _block(block):
    return f"[{', '.join(map(str, block))}]"


def _nvfp4_block(shape, columnwise):
    return (16, 1) if columnwise else (1,) * (len(shape) - 1) + (16,)


def mxfp4_source(name):
    shape, dtype, block, rounding = MXFP4[name]
    data, scales = _type(shape, FP4), _type(reference.scales_shape(shape, block), ml_dtypes.float8_e8m0fnu)
    body = [f"  %d, %s = mx.quantize %x block {_block(block)} rounding {rounding} : {_type(shape, dtype)} -> "
            f"{data}, {scales}"]
    return tools.function_source(name, [f"%x: {_type(shape, dtype)}"], body, [("%d", data), ("%s", scales)])


def nvfp4_source(name):
    shape, dtype, given, swizzled, columnwise = NVFP4[name]
    block = _nvfp4_block(shape, columnwise)
    scales_shape = reference.scales_shape(shape, block)
    data, scales = _type(shape, FP4), _type(scales_shape, ml_dtypes.float8_e4m3fn)
    args, results = [f"%x: {_type(shape, dtype)}"], [("%d", data)]
    if given:
        args.append("%t: tensor<f32>")
        body = [f"  %d, %s = mx.quantize %x block {_block(block)} tensor_scale(%t : tensor<f32>) : "
                f"{_type(shape, dtype)} -> {data}, {scales}"]
    else:
        body = [f"  %d, %s, %t = mx.quantize %x block {_block(block)} : {_type(shape, dtype)} -> {data}, "
                f"{scales}, tensor<f32>"]
    if swizzled:
        tiles = _type(reference.swizzled_shape(scales_shape, 0), ml_dtypes.float8_e4m3fn)
        body.append(f"  %w = mx.swizzle %s : {scales} -> {tiles}")
        results.append(("%w", tiles))
    else:
        results.append(("%s", scales))
    if not given:
        results.append(("%t", "tensor<f32>"))
    return tools.function_source(name, args, body, results)


def dequantize_source(name):
    shape, block, nvfp4, out = DEQUANTIZE[name]
    scale_dtype = ml_dtypes.float8_e4m3fn if nvfp4 else ml_dtypes.float8_e8m0fnu
    data, scales = _type(shape, FP4), _type(reference.scales_shape(shape, block), scale_dtype)
    args = [f"%d: {data}", f"%s: {scales}"] + (["%t: tensor<f32>"] if nvfp4 else [])
    given = " tensor_scale(%t : tensor<f32>)" if nvfp4 else ""
    body = [f"  %y = mx.dequantize %d, %s block {_block(block)}{given} : {data}, {scales} -> "
            f"{_type(shape, out)}"]
    return tools.function_source(name, args, body, [("%y", _type(shape, out))])


def sources():
    return {**{n: mxfp4_source(n) for n in MXFP4}, **{n: nvfp4_source(n) for n in NVFP4},
            **{n: dequantize_source(n) for n in DEQUANTIZE}}


def build(directory, chip=None):
    build_gpu_programs(directory, sources(), chip)


pytestmark = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    return load_gpu_programs(tmp_path_factory, build, sources())





def _input(rng, shape, dtype, nan_block):
    """random_input (special values, a zero run, rows spanning 2^+-30) with, if asked, a NaN in the first
    row's last element and an Inf in the last row's first one."""
    x = random_input(rng, shape, np.float32)
    if nan_block:
        x.reshape(-1, shape[-1])[0, -1] = np.nan
        x.reshape(-1, shape[-1])[-1, 0] = -np.inf
    if dtype is np.float16:
        x = np.where(np.isfinite(x), np.clip(x, -6e4, 6e4), x)
    return x.astype(dtype)


@pytest.mark.parametrize("repeat", range(2))
@pytest.mark.parametrize("name", list(MXFP4))
def test_mxfp4_quantize(rng, libraries, name, repeat):
    shape, dtype, block, rounding = MXFP4[name]
    x = _input(rng, shape, dtype, nan_block=repeat == 1)
    run_gpu_program(libraries, name, [x], reference.quantize(x, block, "f4E2M1FN", "f8E8M0FNU", rounding))


@pytest.mark.parametrize("name", [n for n in MXFP4 if "boundaries" in n])
def test_mxfp4_ceil_boundaries(rng, libraries, name):
    """Blocks whose amaxes are where the `ceil` exponent steps (conftest.ceil_boundary_input): maxfinite
    times every power of two and the ulps beside it, subnormal, 0, the largest finite value, Inf, NaN."""
    shape, dtype, block, rounding = MXFP4[name]
    x = ceil_boundary_input(rng, shape, "f4E2M1FN", dtype)
    run_gpu_program(libraries, name, [x], reference.quantize(x, block, "f4E2M1FN", "f8E8M0FNU", rounding))


@pytest.mark.parametrize("name", ["mxfp4_bf16", "mxfp4_batched"])
def test_mxfp4_bf16_every_scale(rng, libraries, name):
    """Rows of magnitude 2^-140 to 2^125, and elements down to 2^-16 of their row's, so that the bf16x2
    arithmetic of the sm_90a kernel meets every scale with bf16 subnormals among its elements."""
    shape, dtype, block, rounding = MXFP4[name]
    x = rng.standard_normal(shape).astype(np.float32) * np.exp2(-rng.integers(0, 16, size=shape))
    rows = x.reshape(-1, shape[-1])
    rows *= np.exp2(np.linspace(-140, 125, rows.shape[0]).round())[:, None].astype(np.float32)
    x = x.astype(dtype)
    run_gpu_program(libraries, name, [x], reference.quantize(x, block, "f4E2M1FN", "f8E8M0FNU", rounding))


@pytest.mark.parametrize("repeat", range(2))
@pytest.mark.parametrize("name", list(NVFP4))
def test_nvfp4_quantize(rng, libraries, name, repeat):
    shape, dtype, given, swizzled, columnwise = NVFP4[name]
    x = _input(rng, shape, dtype, nan_block=repeat == 1)
    t = np.float32(2.0 ** rng.integers(-8, 8) * rng.uniform(1, 2)) if given else None
    if columnwise:  # [16, 1] blocks of x are the [1, 16] blocks of x.T
        data, scales, computed = reference.quantize_nvfp4(np.ascontiguousarray(x.T), t)
        data, scales = np.ascontiguousarray(data.T), np.ascontiguousarray(scales.T)
    else:
        data, scales, computed = reference.quantize_nvfp4(x, t)
    expected = [data, reference.swizzle(scales) if swizzled else scales]
    if not given:
        expected.append(np.array(computed, np.float32))
    run_gpu_program(libraries, name, [x] + ([np.array(t, np.float32)] if given else []), expected)


@pytest.mark.parametrize("t", [2.0 ** -126, 2.0 ** -121, 2.0 ** -120, 3e38, np.finfo(np.float32).max])
@pytest.mark.parametrize("name", ["nvfp4_given_f32", "nvfp4_given_swizzled"])
def test_nvfp4_extreme_tensor_scale(rng, libraries, name, t):
    """The smallest and largest tensor scales: below 2^-120 the sm_90a kernel takes its general path
    (which also serves the 0, negative, Inf and NaN scales that mx.reference rejects), from there its
    bf16x2 path, whose factors may then be subnormal."""
    shape, dtype, given, swizzled, columnwise = NVFP4[name]
    x = _input(rng, shape, dtype, nan_block=False)
    data, scales, _ = reference.quantize_nvfp4(x, np.float32(t))
    expected = [data, reference.swizzle(scales) if swizzled else scales]
    run_gpu_program(libraries, name, [x, np.array(t, np.float32)], expected)


def test_nvfp4_computed_scale_of_zeros(libraries):
    """An all-zero tensor has no finite amax: t = 1 (docs/numerics.md)."""
    shape, dtype = NVFP4["nvfp4_computed_bf16"][:2]
    x = np.zeros(shape, dtype)
    data, scales, t = reference.quantize_nvfp4(x)
    assert t == 1
    run_gpu_program(libraries, "nvfp4_computed_bf16", [x], [data, scales, np.array(t, np.float32)])


@pytest.mark.parametrize("name", list(DEQUANTIZE))
def test_fp4_dequantize(rng, libraries, name):
    shape, block, nvfp4, out = DEQUANTIZE[name]
    data = rng.integers(0, 16, size=shape, dtype=np.uint8).view(FP4)
    scales_shape = reference.scales_shape(shape, block)
    scales = rng.integers(0, 256, size=scales_shape, dtype=np.uint8)
    scales.flat[:3] = [0, 0x7F if nvfp4 else 254, 0xFF]  # smallest, largest / NaN, NaN
    if nvfp4:
        scales = scales.view(ml_dtypes.float8_e4m3fn)
        t = np.float32(2.0 ** rng.integers(-20, 20) * rng.uniform(1, 2))
        expected = reference.dequantize_nvfp4(data, scales, t, out)
        run_gpu_program(libraries, name, [data, scales, np.array(t, np.float32)], [expected])
    else:
        scales = scales.view(ml_dtypes.float8_e8m0fnu)
        run_gpu_program(libraries, name, [data, scales], [reference.dequantize(data, scales, block, out)])


def test_fp4_device_buffer_round_trip(rng):
    """FP4 goes to the device packed (half a byte an element) and comes back unpacked."""
    data = rng.integers(0, 16, size=(3, 10), dtype=np.uint8).view(FP4)
    with runtime.DeviceBuffer.from_numpy(data) as buffer:
        assert buffer.nbytes == 15
        assert_bits_equal(buffer.to_numpy(), data, "DeviceBuffer")
        assert_bits_equal(runtime.MemRef.of(buffer).to_numpy(FP4), data, "MemRef")
        assert_bits_equal(buffer.to_numpy(np.uint8), reference.pack_fp4(data).reshape(-1), "packed bytes")


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])
