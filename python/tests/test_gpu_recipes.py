"""The recipes beyond 2-D FP8 through `mx-lower-to-nvvm` on a real GPU, against mx.reference: swizzle
kernels for batched scales and the blockwise GEMM-ready layout (bit for bit), cuBLASLt GEMMs with
batch dimensions (one call per slice), and GEMM-ready blockwise scales read by both the generated
kernel and cuBLASLt (passed through).

Skipped without a GPU. Programs are compiled ahead of time, like test_gpu_kernels.py:
    python python/tests/test_gpu_recipes.py DIR
builds them for sm_90a, and the GPU machine loads them from $MX_GPU_ARTIFACTS.
"""

import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, build_gpu_programs, load_gpu_programs, random_input

from mx import reference, runtime, tools

E8M0 = ml_dtypes.float8_e8m0fnu
F32 = np.dtype(np.float32)
# Compact scales shape, unscaled dimension, layout, element type.
SWIZZLE = {
    "swizzle_batched_rows": ((2, 3, 200, 3), 2, "tiles", E8M0),
    "swizzle_batched_columns": ((2, 7, 72), 2, "tiles", E8M0),
    "swizzle_blockwise_rows": ((250, 4), 0, "blockwise", F32),
    "swizzle_blockwise_columns": ((3, 130), 1, "blockwise", F32),
}
# A and B (shape, block), and the lowering (`gemm=`): batched per-tensor (cuBLASLt per slice), and
# 1x128 x 128x128 with A's scales GEMM-ready, on the generated kernel and on cuBLASLt.
GEMM_READY = (((200, 384), (1, 128)), ((136, 384), (128, 128)))
MATMUL = {
    "matmul_batched_per_tensor": ((((2, 3, 64, 128), (1, 1, 64, 128)), ((2, 3, 32, 128), (1, 1, 32, 128))),
                                  "cublas"),
    "matmul_gemm_ready_kernel": (GEMM_READY, "kernel"),
    "matmul_gemm_ready_cublas": (GEMM_READY, "cublas"),
}



def swizzle_source(name):
    # Separate inputs: unswizzle(swizzle(s)) would fold to s itself.
    shape, dim, layout, dtype = SWIZZLE[name]
    compact = tools.mlir_type(shape, dtype)
    swizzled = tools.mlir_type(reference.swizzled_shape(shape, dim, layout), dtype)
    body = [f"  %t = mx.swizzle %s unscaled_dim {dim} layout {layout} : {compact} -> {swizzled}",
            f"  %u = mx.unswizzle %w unscaled_dim {dim} layout {layout} : {swizzled} -> {compact}"]
    return tools.function_source(name, [f"%s: {compact}", f"%w: {swizzled}"], body, [("%t", swizzled), ("%u", compact)])


def matmul_operands(rng, name):
    """Quantized A and B (E4M3, f32 scales by `exact` rounding); A's 1x128 scales GEMM-ready."""
    operands = []
    for shape, block in MATMUL[name][0]:
        data, scales = reference.quantize(random_input(rng, shape, np.float32, specials=False), block,
                                          "f8E4M3FN", "f32", "exact")
        operands += [data, scales]
    if MATMUL[name][0] == GEMM_READY:
        operands[1] = reference.blockwise_gemm_ready(operands[1], 0)
    return operands


def result_shape(name):
    (a_shape, _), (b_shape, _) = MATMUL[name][0]
    return (*a_shape[:-1], b_shape[-2])


def matmul_source(name):
    (_, a_block), (_, b_block) = MATMUL[name][0]
    operands = matmul_operands(np.random.default_rng(0), name)  # only their types matter here
    types = [tools.mlir_type(x.shape, x.dtype) for x in operands]
    out = tools.mlir_type(result_shape(name), np.float32)
    blocks = f"lhs_block [{', '.join(map(str, a_block))}] rhs_block [{', '.join(map(str, b_block))}]"
    body = [f"  %c = mx.scaled_matmul %a, %as, %b, %bs {blocks} : {', '.join(types)} -> {out}"]
    args = [f"%{v}: {t}" for v, t in zip(("a", "as", "b", "bs"), types)]
    return tools.function_source(name, args, body, [("%c", out)])


def sources():
    return {**{n: swizzle_source(n) for n in SWIZZLE}, **{n: matmul_source(n) for n in MATMUL}}


def build(directory, chip=None):
    build_gpu_programs(directory, sources(), chip,
                       lambda name: {"gemm": MATMUL[name][1]} if name in MATMUL else {})


pytestmark = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    return load_gpu_programs(tmp_path_factory, build, sources())


def call(libraries, name, inputs, result_ranks):
    buffers = [runtime.DeviceBuffer.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    try:
        return runtime.call_mlir_function(libraries[name], name, buffers, result_ranks=result_ranks)
    finally:
        for buffer in buffers:
            buffer.close()


def random_scales(rng, shape, dtype):
    if dtype is E8M0:
        return rng.integers(0, 256, size=shape, dtype=np.uint8).view(E8M0)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))).astype(np.float32)


@pytest.mark.parametrize("name", list(SWIZZLE))
def test_swizzle_kernels(rng, libraries, name):
    shape, dim, layout, dtype = SWIZZLE[name]
    scales, other = random_scales(rng, shape, dtype), random_scales(rng, shape, dtype)
    if layout == "tiles":
        expected, swizzled_other = reference.swizzle(scales, dim), reference.swizzle(other, dim)
    else:
        expected, swizzled_other = (reference.blockwise_gemm_ready(scales, dim),
                                    reference.blockwise_gemm_ready(other, dim))
    swizzled, compact = call(libraries, name, [scales, swizzled_other], [expected.ndim, other.ndim])
    try:
        assert_bits_equal(swizzled.to_numpy(dtype), expected, "swizzled")
        assert_bits_equal(compact.to_numpy(dtype), other, "compact")
    finally:
        swizzled.free()
        compact.free()


@pytest.mark.parametrize("name", list(MATMUL))
def test_scaled_matmul(rng, libraries, name):
    """f32 output within 3e-4 of the float64 product: Hopper's FP8 tensor cores accumulate with less
    than f32 precision (see test_gpu_kernels.py and test_gpu_gemm.py)."""
    operands = matmul_operands(rng, name)
    result, = call(libraries, name, operands, [len(result_shape(name))])
    got = result.to_numpy(np.float32)
    result.free()
    (_, a_block), (_, b_block) = MATMUL[name][0]
    exact = reference.scaled_matmul(*operands, a_block, b_block)
    error = reference.matmul_error(got, exact)
    assert got.shape == result_shape(name)
    assert error < 3e-4, f"relative Frobenius error {error:.3g}"


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])
