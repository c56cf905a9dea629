"""Shared test helpers: fresh random inputs with the spec's special values, bit-exact comparison.

The tests import the installed `mx` package (utils/setup.sh installs python/ editable into .venv).
"""
import math
import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest


SPECIALS = np.array([0.0, -0.0, 1e-40, -3e-42, 1e-44, 448.0, -448.0, 464.0, 57344.0, 61440.0, 1e30, np.inf,
                     -np.inf, np.nan, 2.0**-9, 2.0**-10 * 1.5, 2.0**-16, 2.0**-17 * 3], np.float32)


def gpu_target():
    """mx's target for the CUDA GPU (mx.ops' mapping of the compute capability), or None where mx
    compiles for no chip of that capability."""
    from mx import ops
    try:
        return ops._chip("cuda")
    except ValueError:
        return None


@pytest.fixture
def rng(request):
    seed = np.random.SeedSequence().entropy
    request.node.user_properties.append(("seed", seed))
    print(f"seed = {seed}")
    return np.random.default_rng(seed)


def random_input(rng, shape, dtype, specials=True):
    """Normal values scaled by 2^[-30, 30] per row, plus planted special values and a zero run."""
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.exp2(rng.integers(-30, 30, size=shape[:-1] + (1,))).astype(np.float32)
    if specials:
        flat = x.reshape(-1)
        where = rng.choice(flat.size, size=min(flat.size, 3 * SPECIALS.size), replace=False)
        flat[where] = np.resize(SPECIALS, where.size)
        flat[: min(flat.size, 40)] = 0.0  # an all-zero block (or a zero prefix of one)
    return x.astype(dtype)


def ceil_boundary_amaxes(elem, dtype):
    """Block amaxes of input type `dtype` (f32, bf16 or f16) where the `ceil` E8M0 exponent of `elem`
    steps, or where its integer form (CeilScaleExponent.h) needs its own care: maxfinite M times every
    power of two that `dtype` holds (the quotient exactly 2^k, subnormal ones included), each with one
    and two ulps of `dtype` either side (at 2^-127 the quotient one ulp above rounds down onto it), the
    smallest and the largest subnormals, 0, the largest finite value, +Inf and NaN."""
    from mx import reference
    dt = np.dtype(dtype)
    uint = np.uint16 if dt.itemsize == 2 else np.uint32
    inf_bits = int(np.array(np.inf, dt).view(uint))
    with np.errstate(over="ignore"):  # the powers past dtype's range become Inf, dropped below
        at = (np.exp2(np.arange(-160.0, 129.0)) * reference.max_finite(elem)).astype(dt)
    wide = at.astype(np.float32)
    at = at[np.isfinite(wide) & (wide > 0)]
    near = (at.view(uint).astype(np.int64)[:, None] + np.arange(-2, 3)).ravel()
    smallest_normal = int(np.array(ml_dtypes.finfo(dt).smallest_normal, dt).view(uint))
    special = [0, 1, 2, 3, smallest_normal - 1, smallest_normal, inf_bits - 2, inf_bits - 1, inf_bits]
    bits = np.unique(np.concatenate([near, special]))
    bits = bits[(bits >= 0) & (bits <= inf_bits)].astype(uint)
    return np.append(bits.view(dt), np.array(np.nan, dt))


def ceil_boundary_input(rng, shape, elem, dtype):
    """An input of `shape` and `dtype` whose [1, 32] and [32, 1] blocks take their amaxes from
    ceil_boundary_amaxes (shuffled, cycled, random signs): in each 32 x 32 tile they sit on the
    diagonal, which every rowwise and every columnwise block of the tile crosses once, and every other
    element is a random fraction of the smaller of its two blocks' amaxes (Inf and NaN count as the
    largest finite value). A [rows, cols] matrix holds rows * cols / 32 of them."""
    dt = np.dtype(dtype)
    amaxes = rng.permutation(ceil_boundary_amaxes(elem, dt).astype(np.float64))
    rows, cols = shape[-2:]
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    slot = lambda row, col: (row * (-(-cols // 32)) + col // 32) % amaxes.size  # noqa: E731
    diagonal = (r % 32) == (c % 32)
    finite = np.where(np.isfinite(amaxes), np.abs(amaxes), float(ml_dtypes.finfo(dt).max))
    # The diagonal element of the row block of (r, c) is at column c - c % 32 + r % 32, that of its
    # column block at row r - r % 32 + c % 32: each is its block's amax.
    row_amax = finite[slot(r, c - c % 32 + r % 32)]
    col_amax = finite[slot(r - r % 32 + c % 32, c)]
    x = np.where(diagonal, amaxes[slot(r, c)], rng.random((rows, cols)) * np.minimum(row_amax, col_amax))
    x = x * rng.choice([-1.0, 1.0], size=x.shape)
    return np.broadcast_to(x, shape).astype(dt)


def assert_bits_equal(actual, expected, what):
    a, e = actual.view(np.uint8 if actual.itemsize == 1 else f"uint{8 * actual.itemsize}"), \
        expected.view(np.uint8 if expected.itemsize == 1 else f"uint{8 * expected.itemsize}")
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    bad = np.argwhere(a != e)
    assert bad.size == 0, (f"{what}: {len(bad)} of {a.size} differ; first at {tuple(bad[0])}: "
                           f"got {a[tuple(bad[0])]:#x}, expected {e[tuple(bad[0])]:#x}")


def assert_column_sum(actual, x, what="column sum"):
    """`actual` [N] f32 is mx.column_sum's contract for x [M, N] (docs/numerics.md): NaN where the
    float64 sum is NaN, the same infinity where it is infinite, else within (M - 1) * 2^-24 *
    sum |x| of the float64 sum (the exact one, to float64's error)."""
    from mx import reference
    actual = np.asarray(actual)
    assert actual.dtype == np.float32 and actual.shape == (x.shape[1],), f"{what}: {actual.dtype} {actual.shape}"
    with np.errstate(invalid="ignore"):
        exact = np.asarray(x).astype(np.float32).astype(np.float64).sum(axis=0)
    nan = np.isnan(exact)
    assert np.array_equal(np.isnan(actual), nan), f"{what}: NaN at {np.flatnonzero(np.isnan(actual) != nan)[:8]}"
    inf = np.isinf(exact)
    assert np.array_equal(actual[inf], exact[inf].astype(np.float32)), f"{what}: infinities differ"
    finite = ~nan & ~inf
    error = np.abs(actual[finite].astype(np.float64) - exact[finite])
    bound = reference.column_sum_bound(x)[finite]
    bad = np.flatnonzero(error > bound)
    assert bad.size == 0, (f"{what}: {bad.size} columns off the bound; first: error {error[bad[0]]:.3g} > "
                           f"{bound[bad[0]]:.3g}")
    zeros = finite & (exact == 0)
    assert np.array_equal(np.signbit(actual[zeros]), np.all(np.signbit(np.asarray(x).astype(np.float32)), axis=0)[zeros]), \
        f"{what}: the sign of a zero sum (-0 only from a column of -0)"


def matmul_operands(rng, m, n, k, a_block, b_block, scale_type, swizzled, b_elem="f8E4M3FN"):
    """Quantized random GEMM operands A [m, k] (E4M3) and B [n, k], scales swizzled if asked."""
    from mx import reference
    a, a_scales = reference.quantize(random_input(rng, (m, k), np.float32, specials=False), a_block,
                                     "f8E4M3FN", scale_type)
    b, b_scales = reference.quantize(random_input(rng, (n, k), np.float32, specials=False), b_block,
                                     b_elem, scale_type)
    if swizzled:
        a_scales, b_scales = reference.swizzle(a_scales), reference.swizzle(b_scales)
    return a, a_scales, b, b_scales


def linear_scales(data, scales, block):
    """An operand's scales in the compact layout, from that layout, MX's 128x4 tiles (5-D) or FP8
    blockwise's GEMM-ready [KB, R'/4, 4] (3-D)."""
    from mx import reference
    shape = reference.scales_shape(data.shape, block)
    if scales.ndim == 5:
        return reference.unswizzle(scales, shape)
    if scales.ndim == 3:
        return reference.blockwise_compact(scales, shape, 0)
    return scales


def exact_matmul(a, a_scales, b, b_scales, a_block, b_block):
    """The float64 product of the dequantized operands (scales in any layout: linear_scales)."""
    from mx import reference

    def operand(data, scales, block):
        return reference.dequantize(data, linear_scales(data, scales, block), block).astype(np.float64)
    return operand(a, a_scales, a_block) @ operand(b, b_scales, b_block).T


def build_gpu_programs(directory, sources, chip=None, lowering=lambda name: {}):
    """Compiles each `name: source` of `sources` ahead of time into DIRECTORY/name.so for `chip`;
    `lowering(name)` gives extra options of tools.compile_gpu_library (`gemm`, or another `chip`)."""
    from mx import tools
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        options = {"chip": chip, **lowering(name)}
        tools.compile_gpu_library(source, directory / f"{name}.so", **options)


def load_gpu_programs(tmp_path_factory, build, names):
    """The compiled GPU test programs `names`, loaded from $MX_GPU_ARTIFACTS (built elsewhere with the
    test module's `build`), or built here into a temporary directory first."""
    from mx import runtime
    directory = os.environ.get("MX_GPU_ARTIFACTS")
    if not directory:
        directory = tmp_path_factory.mktemp("gpu")
        build(directory)
    return {name: runtime.load_compiled(Path(directory) / f"{name}.so") for name in names}


def run_gpu_program(libraries, name, inputs, expected):
    """Calls compiled program `name` on host arrays and checks every result against `expected`, bit for
    bit. The results land in memory just filled with 0xA5 (blocks of their sizes, which the allocator
    hands back), so an element a kernel forgets to write is a mismatch, not a lucky zero."""
    from mx import formats, runtime
    expected = [np.asarray(a) for a in expected]
    for array in expected:
        fmt = formats.BY_DTYPE.get(array.dtype)
        nbytes = math.prod(fmt.stored_shape(array.shape)) if fmt and fmt.packed else array.nbytes
        poison = runtime.DeviceBuffer(nbytes)
        runtime.load_library().mxrtMemset8(poison.ptr, 0xA5, nbytes)
        poison.close()
    buffers = [runtime.DeviceBuffer.from_numpy(np.require(a, requirements="C")) for a in inputs]
    results = runtime.call_mlir_function(libraries[name], name, buffers,
                                         result_ranks=[a.ndim for a in expected])
    try:
        for index, (result, want) in enumerate(zip(results, expected)):
            assert_bits_equal(result.to_numpy(want.dtype), want, f"{name} result {index}")
    finally:
        for result in results:
            result.free()
        for buffer in buffers:
            buffer.close()


def build_cache_main(test_file, compile_programs):
    """The `python <test file> build CACHE_DIR [CHIP]` entry point of a GPU test module whose programs
    come from mx.compile's cache: runs `compile_programs(chip)` with $MX_CACHE_DIR = CACHE_DIR on a
    machine with mx-opt, for the GPU machine (which has none) to be served from that directory."""
    if len(sys.argv) < 3 or sys.argv[1] != "build":
        sys.exit(f"usage: {Path(test_file).name} build CACHE_DIR [CHIP]")
    os.environ["MX_CACHE_DIR"] = sys.argv[2]
    compile_programs(sys.argv[3] if len(sys.argv) > 3 else "sm_90a")
    sys.exit(0)
