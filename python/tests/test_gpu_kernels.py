"""GPU kernels of `mx-lower-to-nvvm` against mx.reference, bit for bit, on a real GPU.

Skipped without a GPU. The programs below are compiled ahead of time (mx-opt -> mlir-translate -> llc ->
shared library linked with libmx_runtime): on a machine with both MLIR and a GPU the fixture compiles
them, and on a GPU machine without MLIR it loads them from $MX_GPU_ARTIFACTS, built elsewhere with
`python python/tests/test_gpu_kernels.py DIR`. Outputs land in memory that was filled with 0xA5 just
before the call (the allocator hands the same block back), so an element the kernel forgets to write
shows up as a mismatch rather than as a lucky zero.
"""

import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, random_input

from mx import reference, runtime, tools

# name -> (input shape, input dtype, element type, scale type, rounding, swizzled)
PROGRAMS = {
    "swizzled_bf16_aligned": ((256, 512), ml_dtypes.bfloat16, "f8E4M3FN", "f8E8M0FNU", "ceil", True),
    "swizzled_bf16_odd": ((200, 264), ml_dtypes.bfloat16, "f8E4M3FN", "f8E8M0FNU", "ceil", True),
    "linear_f32_e5m2_floor": ((130, 96), np.float32, "f8E5M2", "f32", "floor", False),
    "linear_f16_e4m3": ((64, 136), np.float16, "f8E4M3FN", "f8E8M0FNU", "ceil", False),
    "swizzled_f32_e5m2": ((129, 1024), np.float32, "f8E5M2", "f8E8M0FNU", "floor", True),
}


def program_source(name):
    shape, dtype, elem, scale_type, rounding, swizzled = PROGRAMS[name]
    scales_shape = reference.scales_shape(shape, (1, 32))
    x_type = tools.mlir_type(shape, dtype)
    d_type = tools.mlir_type(shape, reference.ELEMENT_TYPES[elem])
    s_type = tools.mlir_type(scales_shape, reference.SCALE_TYPES[scale_type])
    t_shape = (-(-shape[0] // 128), -(-scales_shape[1] // 4), 32, 4, 4)
    t_type = tools.mlir_type(t_shape, reference.SCALE_TYPES[scale_type])
    out_type = t_type if swizzled else s_type
    lines = [f"func.func @{name}(%x: {x_type}) -> ({d_type}, {out_type}) {{",
             f"  %d, %s = mx.quantize %x block [1, 32] rounding {rounding} : {x_type} -> {d_type}, {s_type}"]
    if swizzled:
        lines.append(f"  %t = mx.swizzle %s : {s_type} -> {t_type}")
    lines += [f"  return %d, %{'t' if swizzled else 's'} : {d_type}, {out_type}", "}"]
    return "\n".join(lines)


def build(directory, chip="sm_90a"):
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        tools.compile_gpu_library(program_source(name), directory / f"{name}.so", chip)


pytestmark = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    directory = os.environ.get("MX_GPU_ARTIFACTS")
    if not directory:
        directory = tmp_path_factory.mktemp("gpu")
        build(directory)
    return {name: runtime.load_compiled(Path(directory) / f"{name}.so") for name in PROGRAMS}


def poison_allocator(nbytes):
    """Frees a 0xA5-filled block of `nbytes` so that the next allocation of that size reuses it."""
    buffer = runtime.DeviceBuffer(nbytes)
    runtime.load_library().mxrtMemset8(buffer.ptr, 0xA5, nbytes)
    buffer.close()


@pytest.mark.parametrize("repeat", range(2))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_quantize_kernel(rng, libraries, name, repeat):
    shape, dtype, elem, scale_type, rounding, swizzled = PROGRAMS[name]
    x = random_input(rng, shape, np.float32)
    if dtype is np.float16:
        x = np.clip(x, -6e4, 6e4)
    x = x.astype(dtype)
    ref_data, ref_scales = reference.quantize(x, (1, 32), elem, scale_type, rounding)
    if swizzled:
        ref_scales = reference.swizzle(ref_scales)
    poison_allocator(ref_data.nbytes)
    with runtime.DeviceBuffer.from_numpy(x) as device_x:
        data, scales = runtime.call_mlir_function(libraries[name], name, [device_x],
                                                  result_ranks=[2, ref_scales.ndim])
    try:
        assert_bits_equal(scales.to_numpy(ref_scales.dtype), ref_scales, "scales")
        assert_bits_equal(data.to_numpy(ref_data.dtype), ref_data, "data")
    finally:
        data.free()
        scales.free()


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])
