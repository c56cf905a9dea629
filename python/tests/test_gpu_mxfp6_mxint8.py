"""MXFP6 and MXINT8 GPU kernels of `mx-lower-to-nvvm` against mx.reference, bit for bit, on a real GPU.

Built and loaded like test_gpu_fp4.py: `python python/tests/test_gpu_mxfp6_mxint8.py DIR [CHIP]` compiles
the programs ahead of time, and $MX_GPU_ARTIFACTS=DIR runs them on a GPU machine without MLIR. FP6 data
crosses the device boundary packed, four elements to three bytes (runtime.DeviceBuffer.from_numpy,
MemRef.to_numpy). Results land in memory filled with 0xA5 just before the call, so an unwritten byte is a
mismatch. Inputs: the conftest's random values with the spec's special values (NaN, Inf, zero blocks,
f32 subnormals), blocks that hold every code of the format exactly at scales from 2^-127 to 2^127,
rows spread over the whole f32 range, and blocks whose amaxes sit where the `ceil` exponent steps
(conftest.ceil_boundary_input); every kernel that writes these formats (rowwise, columnwise, both
fused, each with its swizzle; dequantize, vector and per-group) under both power-of-two roundings.
"""

import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import build_gpu_programs, ceil_boundary_input, load_gpu_programs, random_input, run_gpu_program

import mx
from mx import formats, ops, reference, runtime, tools

ROW, COL = (1, 32), (32, 1)
E8M0 = ml_dtypes.float8_e8m0fnu
# Quantize: input shape and dtype, element type, rounding, which parts (rowwise / columnwise) and whether
# their scales are swizzled. Rowwise K is a multiple of 16; columnwise K of 16 for FP6 (its packed rows),
# of 4 for MXINT8.
QUANTIZE = {
    "e3m2_rowwise_bf16": ((128, 256), ml_dtypes.bfloat16, "f6E3M2FN", "ceil", ("rowwise",), True),
    "e2m3_rowwise_f32_floor": ((70, 96), np.float32, "f6E2M3FN", "floor", ("rowwise",), False),
    "e3m2_rowwise_batched_f16": ((2, 3, 64), np.float16, "f6E3M2FN", "ceil", ("rowwise",), True),
    "e2m3_columnwise_bf16": ((96, 80), ml_dtypes.bfloat16, "f6E2M3FN", "ceil", ("columnwise",), True),
    "e3m2_columnwise_f32_floor": ((70, 48), np.float32, "f6E3M2FN", "floor", ("columnwise",), False),
    "e2m3_fused_bf16": ((256, 128), ml_dtypes.bfloat16, "f6E2M3FN", "ceil", ("rowwise", "columnwise"), True),
    "e3m2_fused_f32": ((100, 64), np.float32, "f6E3M2FN", "floor", ("rowwise", "columnwise"), False),
    # The staged FP6 kernel's CTA tiles are 32 rows x 256 columns: two tiles a row block here, the
    # second partial, and a partial last row block in each slice.
    "e2m3_fused_batched_f16": ((2, 40, 272), np.float16, "f6E2M3FN", "floor", ("rowwise", "columnwise"), True),
    # Rows of whole 32-element blocks, which the staged kernel's rowwise warps read a block a lane: three
    # slices of a partial last row block each, scales swizzled (each slice's rows padded to 128).
    "e3m2_fused_batched_whole_bf16": ((3, 40, 256), ml_dtypes.bfloat16, "f6E3M2FN", "ceil",
                                      ("rowwise", "columnwise"), True),
    # Three row blocks of one tile each (no swizzle, so no rows padded to 128): an odd grid.
    "e3m2_fused_three_tiles_bf16": ((96, 256), ml_dtypes.bfloat16, "f6E3M2FN", "ceil", ("rowwise", "columnwise"),
                                    False),
    # 132 row blocks (the rowwise tiles' padding included) x 4 tiles: 528 CTAs, several waves of an H100.
    "e2m3_fused_waves_bf16": ((4160, 1024), ml_dtypes.bfloat16, "f6E2M3FN", "floor", ("rowwise", "columnwise"),
                              True),
    "int8_rowwise_bf16": ((128, 256), ml_dtypes.bfloat16, "i8", "ceil", ("rowwise",), True),
    "int8_rowwise_f32_floor": ((70, 96), np.float32, "i8", "floor", ("rowwise",), False),
    "int8_columnwise_f16": ((64, 36), np.float16, "i8", "ceil", ("columnwise",), True),
    "int8_fused_bf16_floor": ((130, 68), ml_dtypes.bfloat16, "i8", "floor", ("rowwise", "columnwise"), True),
    "int8_fused_batched_f32": ((2, 40, 32), np.float32, "i8", "ceil", ("rowwise", "columnwise"), False),
    # Room for every `ceil` boundary amax of the input type in both parts (test_quantize's
    # "ceil_boundaries" inputs): the staged FP6 kernel and MXINT8's register kernel, f32 and bf16.
    "e3m2_fused_boundaries_f32": ((704, 64), np.float32, "f6E3M2FN", "ceil", ("rowwise", "columnwise"), False),
    "e2m3_fused_boundaries_bf16": ((704, 64), ml_dtypes.bfloat16, "f6E2M3FN", "ceil", ("rowwise", "columnwise"),
                                   True),
    "int8_fused_boundaries_f32": ((704, 64), np.float32, "i8", "ceil", ("rowwise", "columnwise"), False),
    "int8_fused_boundaries_bf16": ((704, 64), ml_dtypes.bfloat16, "i8", "ceil", ("rowwise", "columnwise"), True),
}
# Dequantize: data shape, element type, block, output dtype (the vector kernel where rows are whole
# chunks of one 16-byte store, 8 or 4 elements, and FP6 rows whole words, 16 elements; else the
# per-group or per-element kernel). FP6 chunks of 8 start at both halves of a word, those of 4 at every
# byte, and the tensor's last chunk of 4 takes its two words from one word earlier.
DEQUANTIZE = {
    "dequantize_e3m2_bf16": ((128, 256), "f6E3M2FN", ROW, ml_dtypes.bfloat16),
    "dequantize_e2m3_partial_cta_f16": ((33, 64), "f6E2M3FN", ROW, np.float16),
    "dequantize_e2m3_columnwise_f32": ((64, 96), "f6E2M3FN", COL, np.float32),
    "dequantize_e2m3_odd_f16": ((70, 36), "f6E2M3FN", COL, np.float16),
    "dequantize_e3m2_batched_f32": ((2, 3, 40), "f6E3M2FN", (1, 1, 32), np.float32),
    "dequantize_int8_bf16": ((128, 256), "i8", ROW, ml_dtypes.bfloat16),
    "dequantize_int8_columnwise_f32": ((64, 40), "i8", COL, np.float32),
    "dequantize_int8_odd_f16": ((70, 6), "i8", ROW, np.float16),
}


def _type(shape, dtype):
    return tools.mlir_type(shape, dtype)


def _block(block):
    return f"[{', '.join(map(str, block))}]"


def _part_block(shape, part):
    batch = (1,) * (len(shape) - 2)
    return batch + (ROW if part == "rowwise" else COL)


def quantize_source(name):
    shape, dtype, elem, rounding, parts, swizzled = QUANTIZE[name]
    body, results = [], []
    for i, part in enumerate(parts):
        block = _part_block(shape, part)
        scales_shape = reference.scales_shape(shape, block)
        data, scales = _type(shape, formats.get(elem).dtype), _type(scales_shape, E8M0)
        body.append(f"  %d{i}, %s{i} = mx.quantize %x block {_block(block)} rounding {rounding} : "
                    f"{_type(shape, dtype)} -> {data}, {scales}")
        results.append((f"%d{i}", data))
        if swizzled:
            dim = len(shape) - (2 if part == "rowwise" else 1)
            tiles = _type(reference.swizzled_shape(scales_shape, dim), E8M0)
            body.append(f"  %t{i} = mx.swizzle %s{i} unscaled_dim {dim} : {scales} -> {tiles}")
            results.append((f"%t{i}", tiles))
        else:
            results.append((f"%s{i}", scales))
    return tools.function_source(name, [f"%x: {_type(shape, dtype)}"], body, results)


def dequantize_source(name):
    shape, elem, block, out = DEQUANTIZE[name]
    data, scales = _type(shape, formats.get(elem).dtype), _type(reference.scales_shape(shape, block), E8M0)
    body = [f"  %y = mx.dequantize %d, %s block {_block(block)} : {data}, {scales} -> {_type(shape, out)}"]
    return tools.function_source(name, [f"%d: {data}", f"%s: {scales}"], body, [("%y", _type(shape, out))])


def sources():
    return {**{n: quantize_source(n) for n in QUANTIZE}, **{n: dequantize_source(n) for n in DEQUANTIZE}}


# mx.ops on torch CUDA tensors: input shape of the quantize and dequantize of each format.
OPS_SHAPE = (256, 384)


def ops_kernels(target):
    """The mx.ops kernels test_ops_on_torch calls, compiled into (or found in) mx.compile's cache."""
    for elem in ["f6E3M2FN", "i8"]:
        ops.quantize_kernel(OPS_SHAPE, "bf16", (1, 32), elem, swizzle=True, columnwise=True, target=target)
        ops.dequantize_kernel(OPS_SHAPE, elem, (OPS_SHAPE[0], OPS_SHAPE[1] // 32), "f8E8M0FNU", (1, 32),
                              "bf16", target=target)


def build(directory, chip=None):
    """The test programs into DIRECTORY, and the mx.ops kernels into DIRECTORY/cache."""
    build_gpu_programs(directory, sources(), chip)
    os.environ["MX_CACHE_DIR"] = str(Path(directory) / "cache")
    ops_kernels(chip or "sm_90a")


pytestmark = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    return load_gpu_programs(tmp_path_factory, build, sources())


def expected_quantize(name, x):
    shape, _, elem, rounding, parts, swizzled = QUANTIZE[name]
    expected = []
    for part in parts:
        data, scales = reference.quantize(x, _part_block(shape, part), elem, "f8E8M0FNU", rounding)
        dim = len(shape) - (2 if part == "rowwise" else 1)
        expected += [data, reference.swizzle(scales, dim) if swizzled else scales]
    return expected


def _narrow(x, dtype):
    if dtype is np.float16:
        x = np.where(np.isfinite(x), np.clip(x, -6e4, 6e4), x)
    return x.astype(dtype)


def every_code_input(rng, shape, elem, dtype):
    """Every code of `elem` decoded exactly, shuffled, each row times a power of two drawn from
    2^-126..2^126 (2^-10..2^10 for f16 inputs, whose range is narrower): every code meets blocks whose
    scales spread over E8M0's range, and the blocks' elements are exact in the input type."""
    fmt = formats.get(elem)
    count = int(np.prod(shape))
    if elem == "i8":
        codes = rng.permutation(np.resize(np.arange(-127, 128, dtype=np.int8), count))
    else:
        codes = rng.permutation(np.resize(np.arange(1 << fmt.bits, dtype=np.uint8), count)).view(fmt.dtype)
    values = reference.element_values(codes).reshape(shape)
    low, high = (-10, 11) if dtype is np.float16 else (-126, 127)
    rows = values.reshape(-1, shape[-1])
    rows *= np.exp2(rng.integers(low, high, size=(rows.shape[0], 1))).astype(np.float32)
    return values.astype(dtype)


@pytest.mark.parametrize("inputs", ["random", "every_code", "spread", "ceil_boundaries"])
@pytest.mark.parametrize("name", list(QUANTIZE))
def test_quantize(rng, libraries, name, inputs):
    shape, dtype, elem = QUANTIZE[name][:3]
    if inputs == "ceil_boundaries":  # blocks whose amaxes are where the `ceil` exponent steps
        x = ceil_boundary_input(rng, shape, elem, dtype)
    elif inputs == "random":
        x = _narrow(random_input(rng, shape, np.float32), dtype)
        flat = x.reshape(-1, shape[-1])
        flat[0, -1], flat[-1, 0] = np.nan, -np.inf        # a NaN block and an Inf block
    elif inputs == "every_code":
        x = every_code_input(rng, shape, elem, dtype)
    else:  # rows from 2^-140 to 2^125 with elements down to 2^-24 of their row's
        x = rng.standard_normal(shape).astype(np.float32) * np.exp2(-rng.integers(0, 24, size=shape))
        rows = x.reshape(-1, shape[-1])
        rows *= np.exp2(np.linspace(-140, 125, rows.shape[0]).round())[:, None].astype(np.float32)
        x = _narrow(x, dtype)
    run_gpu_program(libraries, name, [x], expected_quantize(name, x))


@pytest.mark.parametrize("name", list(DEQUANTIZE))
def test_dequantize(rng, libraries, name):
    """Every code under scale bytes over E8M0's range, 0 (2^-127), 254 and the NaN byte included."""
    shape, elem, block, out = DEQUANTIZE[name]
    fmt = formats.get(elem)
    count = int(np.prod(shape))
    if elem == "i8":
        data = rng.integers(-128, 128, size=shape, dtype=np.int8)
    else:
        data = rng.permutation(np.resize(np.arange(1 << fmt.bits, dtype=np.uint8), count))
        data = data.reshape(shape).view(fmt.dtype)
    scales = rng.integers(0, 256, size=reference.scales_shape(shape, block), dtype=np.uint8)
    scales.flat[:4] = [0, 254, 255, 127]
    scales = scales.view(E8M0)
    run_gpu_program(libraries, name, [data, scales], [reference.dequantize(data, scales, block, out)])


@pytest.mark.parametrize("elem", ["f6E3M2FN", "i8"])
def test_ops_on_torch(rng, monkeypatch, elem):
    """mx.quantize and mx.dequantize on torch CUDA tensors: FP6 comes back as its packed bytes (a uint8
    tensor, 3/4 of the logical last dimension) and goes in as one, named by `elem`; MXINT8 as int8."""
    torch = pytest.importorskip("torch")
    artifacts = os.environ.get("MX_GPU_ARTIFACTS")
    if artifacts:  # no mx-opt on a GPU machine: the kernels come from the cache built with the programs
        monkeypatch.setenv("MX_CACHE_DIR", str(Path(artifacts) / "cache"))
    x = random_input(rng, OPS_SHAPE, np.float32).astype(ml_dtypes.bfloat16)
    x_gpu = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
    data, scales, col_data, col_scales = mx.quantize(x_gpu, (1, 32), elem, swizzle=True, columnwise=True)
    fmt = formats.get(elem)
    assert tuple(data.shape) == fmt.stored_shape(OPS_SHAPE)
    assert data.dtype == (torch.uint8 if fmt.packed else torch.int8)
    for (got, got_scales), block, dim in [((data, scales), ROW, 0), ((col_data, col_scales), COL, 1)]:
        want, want_scales = reference.quantize(x, block, elem)
        np.testing.assert_array_equal(got.cpu().numpy().view(np.uint8), reference.pack(want))
        np.testing.assert_array_equal(got_scales.cpu().view(torch.uint8).numpy(),
                                      reference.swizzle(want_scales, dim).view(np.uint8))
    want, want_scales = reference.quantize(x, ROW, elem)
    scales_gpu = torch.from_numpy(want_scales.view(np.uint8)).cuda().view(torch.float8_e8m0fnu)
    back = mx.dequantize(data, scales_gpu, ROW, "bf16", elem=elem)
    np.testing.assert_array_equal(back.cpu().view(torch.int16).numpy(),
                                  reference.dequantize(want, want_scales, ROW, ml_dtypes.bfloat16).view(np.int16))


@pytest.mark.parametrize("elem", ["f6E3M2FN", "f6E2M3FN"])
def test_fp6_device_buffer_round_trip(rng, elem):
    """FP6 goes to the device packed (four elements in three bytes) and comes back unpacked."""
    fmt = formats.get(elem)
    data = rng.integers(0, 64, size=(3, 8), dtype=np.uint8).view(fmt.dtype)
    with runtime.DeviceBuffer.from_numpy(data) as buffer:
        assert buffer.nbytes == 18
        np.testing.assert_array_equal(buffer.to_numpy().view(np.uint8), data.view(np.uint8))
        np.testing.assert_array_equal(buffer.to_numpy(np.uint8), reference.pack(data).reshape(-1))


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])
