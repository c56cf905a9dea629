"""mx.column_sum on a GPU (a linear layer's bias gradient): the standalone kernel and the one fused
into the cast+transpose kernel of current and delayed per-tensor scaling and into FP8 blockwise's
strip kernel, against the float64 column sum within the contract's bound (docs/numerics.md); the
fused and the standalone sums equal bit for bit (the same order of additions), and the fused
kernels' casts equal mx.reference's. Also the delayed casts that record their amax in the caller's
history, up to 262656 CTAs (the recording of docs/gpu.md's `mx.quantize_delayed` row).

Needs torch with a CUDA device; skipped otherwise. A GPU machine has no mx-opt, so its kernels come
from mx.compile's cache: `python python/tests/test_gpu_column_sum.py build DIR [CHIP]` compiles every
program these tests use into the cache DIR on a machine with mx-opt (utils/gpu-tests.sh does);
run the tests there with MX_CACHE_DIR=DIR.
"""

import ml_dtypes
import numpy as np
import pytest

from mx import ops, reference
from conftest import assert_bits_equal, assert_column_sum, build_cache_main, gpu_target, random_input

# Standalone: any rows; fused: rows and columns multiples of 16 (the cast+transpose kernel's).
STANDALONE = [((1, 16), "f32"), ((33, 144), "bf16"), ((48, 16), "f16"), ((70, 16), "f32"),
              ((80, 144), "bf16"), ((4160, 16), "f32"), ((4160, 144), "bf16")]
FUSED = [((48, 144), "bf16"), ((80, 16), "f32"), ((4160, 144), "bf16"), ((1024, 1024), "f16")]
# FP8 blockwise's strip kernel (1x128 rowwise and transposed): rows ending inside a 128-row block (a
# 64-row tile partly past them, a tile and strips wholly past them), columns ending inside the
# kernel's 128-column CTA, whole blocks, f32 (the kernel asks for two CTAs an SM).
BLOCKWISE_FUSED = [((80, 16), "bf16"), ((192, 144), "f16"), ((4160, 144), "bf16"), ((256, 256), "bf16"),
                   ((1024, 1024), "f32"), ((128, 384), "f32")]
ELEM = "f8E5M2"  # a gradient's element under "hybrid"
# Delayed casts of many CTAs (the flat kernel's 16 Ki elements a CTA, the cast+transpose kernel's two
# 64 x 64 tiles side by side): 3968 / 7936 (bench/linear.py's M = 15872), 2061 / 4257 (odd counts, the
# last CTA's second tile past the matrix), 15872 / 31744 (4 reducers) and 131328 / 262656 CTAs (17
# reducers; 32 reducers, slices of two rounds: 2^31 + 2^22 elements, 4 GiB of bf16).
RECORD_SHAPES = [(15872, 4096), (8208, 4112), (15872, 16384), (32768, 65664)]
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def current_kernel(shape, dtype, target):
    """Current scaling's cast+transpose with the column sum: (data, scales, data^T, scales, sum)."""
    return ops.quantize_kernel(shape, dtype, shape, ELEM, "f32", "exact", transposed=True, column_sum=True,
                               target=target)


def delayed_kernel(shape, dtype, target):
    """Delayed scaling's cast+transpose with the column sum: (data, scale_inv, data^T, history, sum)."""
    return ops.quantize_delayed_kernel(shape, dtype, 1, 4, 0, ELEM, True, True, target=target)


def delayed_in_place_kernel(shape, dtype, transposed, target):
    """Delayed scaling's cast of tensor 1 of 3 (with `transposed`, the cast+transpose and the column
    sum) recording its amax in the history argument itself: (data, scale_inv[, data^T, sum])."""
    return ops.quantize_delayed_kernel(shape, dtype, 3, 4, 1, ELEM, transposed, transposed, True, target=target)


def blockwise_kernel(shape, dtype, target):
    """FP8 blockwise 1x128 with its transposed quantization and the column sum: (data, scales,
    data^T, scales^T, sum)."""
    return ops.quantize_kernel(shape, dtype, (1, 128), "f8E4M3FN", "f32", "ceil", columnwise=True,
                               transposed=True, column_sum=True, target=target)


def programs(target):
    for shape, dtype in STANDALONE + FUSED + BLOCKWISE_FUSED:
        ops.column_sum_kernel(shape, dtype, target=target)
    for shape, dtype in BLOCKWISE_FUSED:
        blockwise_kernel(shape, dtype, target)
    for shape, dtype in FUSED:
        current_kernel(shape, dtype, target)
        delayed_kernel(shape, dtype, target)
        for transposed in (False, True):
            delayed_in_place_kernel(shape, dtype, transposed, target)
    for shape in RECORD_SHAPES:
        for transposed in (False, True):
            delayed_in_place_kernel(shape, "bf16", transposed, target)


if __name__ == "__main__":
    build_cache_main(__file__, programs)


torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
TARGET = gpu_target()
from test_gpu_torch import from_numpy, to_numpy  # noqa: E402  (torch tensors <-> bits)


@pytest.mark.parametrize("shape, dtype", STANDALONE)
def test_standalone_against_float64(rng, shape, dtype):
    x = random_input(rng, shape, DTYPES[dtype])
    got = ops.column_sum_kernel(shape, dtype, target=TARGET)(from_numpy(x))
    assert_column_sum(to_numpy(got, np.float32), x)


def test_special_columns():
    """-0 columns stay -0, NaN and +Inf with -Inf give NaN, an f32 overflow gives +Inf, subnormals add
    exactly, and rows past a 64-row tile do not count (M = 70, one of STANDALONE's programs)."""
    x = np.zeros((70, 16), np.float32)
    x[:, 0] = -0.0
    x[5, 1] = np.nan
    x[3, 2], x[69, 2] = np.inf, -np.inf
    x[:2, 3] = np.finfo(np.float32).max
    x[:, 4] = 2.0 ** -149
    x[:, 5] = 1.0
    got = to_numpy(ops.column_sum_kernel(x.shape, "f32", target=TARGET)(from_numpy(x)), np.float32)
    assert got[0] == 0 and np.signbit(got[0]) and not np.signbit(got[6])
    assert np.isnan(got[1]) and np.isnan(got[2]) and got[3] == np.inf
    assert got[4] == np.float32(70 * 2.0 ** -149) and got[5] == 70.0


@pytest.mark.parametrize("shape, dtype", FUSED)
@pytest.mark.parametrize("scaling", ["current", "delayed"])
def test_fused_equals_standalone_and_float64(rng, shape, dtype, scaling):
    x = random_input(rng, shape, DTYPES[dtype])
    xt = from_numpy(x)
    if scaling == "current":
        data, scales, data_t, _, got = current_kernel(shape, dtype, TARGET)(xt)
        ref_data, ref_scales = reference.quantize(x, shape, ELEM, "f32", "exact")
        assert_bits_equal(to_numpy(scales, np.float32), ref_scales, "scales")
    else:
        scale = np.array([2.0 ** -20], np.float32)
        history = np.zeros((4, 1), np.float32)
        data, _, data_t, new_history, got = delayed_kernel(shape, dtype, TARGET)(
            xt, from_numpy(scale), from_numpy(history))
        ref_data, _, ref_history = reference.quantize_delayed(x, scale, history, 0, ELEM)
        assert_bits_equal(to_numpy(new_history, np.float32), ref_history, "history")
    assert_bits_equal(to_numpy(data, ml_dtypes.float8_e5m2), ref_data, "data")
    assert_bits_equal(to_numpy(data_t, ml_dtypes.float8_e5m2), np.ascontiguousarray(ref_data.T), "transposed")
    got = to_numpy(got, np.float32)
    assert_column_sum(got, x)
    alone = to_numpy(ops.column_sum_kernel(shape, dtype, target=TARGET)(xt), np.float32)
    assert_bits_equal(got, alone, "fused against standalone")


@pytest.mark.parametrize("shape, dtype", BLOCKWISE_FUSED)
def test_blockwise_fused_equals_standalone(rng, shape, dtype):
    """The strip kernel of FP8 blockwise sums the columns in the tile kernel's order: its column sum
    equals the standalone kernel's bit for bit (special values, -0 and all-zero runs included) and
    is within the float64 bound; both quantizations as mx.reference's."""
    x = random_input(rng, shape, DTYPES[dtype])
    x[:, 1] = -0.0  # a -0 column stays -0
    x[min(3, shape[0] - 1), 2] = np.inf
    xt = from_numpy(x)
    data, scales, data_t, scales_t, got = blockwise_kernel(shape, dtype, TARGET)(xt)
    for (d, sc), source, what in (((data, scales), x, "rowwise"), ((data_t, scales_t), x.T, "transposed")):
        ref_data, ref_scales = reference.quantize(np.ascontiguousarray(source), (1, 128), "f8E4M3FN", "f32",
                                                  "ceil")
        assert_bits_equal(to_numpy(d, ml_dtypes.float8_e4m3fn), ref_data, f"{what} data")
        assert_bits_equal(to_numpy(sc, np.float32), ref_scales, f"{what} scales")
    got = to_numpy(got, np.float32)
    assert_column_sum(got, x)
    alone = to_numpy(ops.column_sum_kernel(shape, dtype, target=TARGET)(xt), np.float32)
    assert_bits_equal(got, alone, "fused against standalone")


@pytest.mark.parametrize("shape, dtype", FUSED)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("entry", [3e38, -0.0, np.nan])
def test_delayed_in_place(rng, shape, dtype, transposed, entry):
    """A delayed cast whose history argument is `mx.updated` records its amax in the caller's history
    buffer (one kernel, no history returned): the entry [0, 1] becomes the amax whatever amax it held
    (larger, -0 or NaN), the other entries stay, twice in a row (the second amax smaller than the
    first: the entry is set, not raised); data, transposed data and column sum as the reference's."""
    kernel = delayed_in_place_kernel(shape, dtype, transposed, TARGET)
    assert kernel.signature.updated == (2,)
    scales = (rng.random(3) + 0.5).astype(np.float32)
    history = np.abs(rng.standard_normal((4, 3))).astype(np.float32)
    history[0, 1] = entry
    buffer = from_numpy(history)
    x = random_input(rng, shape, DTYPES[dtype])
    for _ in range(2):
        results = kernel(from_numpy(x), from_numpy(scales), buffer)
        ref_data, _, history = reference.quantize_delayed(x, scales, history, 1, ELEM)
        assert_bits_equal(to_numpy(buffer, np.float32), history, "history")
        assert_bits_equal(to_numpy(results[0], ml_dtypes.float8_e5m2), ref_data, "data")
        if transposed:
            assert_bits_equal(to_numpy(results[2], ml_dtypes.float8_e5m2), np.ascontiguousarray(ref_data.T),
                              "transposed")
            assert_column_sum(to_numpy(results[3], np.float32), x)
        x = (x * 0.5).astype(x.dtype)


def record_positions(shape, transposed):
    """An element in each CTA of the delayed cast's kernel that the recording treats apart: the
    first ones, those around a reducer's slice of 8192 partials, the last CTA that only publishes,
    the reducers (the last min(ceil(n / 8192), 32) CTAs, the very last storing the entry), one in
    the middle. The CTAs as PerTensorScaling.cpp cuts them: two 64 x 64 tiles side by side, row by
    row, for the cast+transpose kernel (an odd CTA's element in its second tile where that is in
    the matrix), 16 Ki consecutive elements for the flat one."""
    rows, cols = shape
    if transposed:
        cta_cols = -(-cols // 128)
        n = -(-rows // 64) * cta_cols
        def element(cta):
            col = (cta % cta_cols) * 128
            return (cta // cta_cols) * 64, col + 64 if cta % 2 and col + 64 < cols else col
    else:
        n = -(-rows * cols // 16384)
        def element(cta):
            return divmod(cta * 16384, cols)
    reducers = min(-(-n // 8192), 32)
    ctas = {0, 1, 8191, 8192, 16384, n // 2, n - reducers - 1, n - reducers, n - 2, n - 1}
    return [element(cta) for cta in sorted(c for c in ctas if 0 <= c < n)]


@pytest.mark.parametrize("shape", RECORD_SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_delayed_records_many_ctas(rng, shape, transposed):
    """The amax that a delayed cast of up to 262656 CTAs records in place equals numpy's max |x|,
    bit for bit, whatever the entry held: x is -0 everywhere (amax +0, not -0) but for values in
    the CTAs of record_positions; each of those CTAs holds the largest value in turn (a partial
    that a publisher, a reducer's slice, a level-2 partial or the last reducer's own lost would
    show); a NaN (negative) in one CTA gives 0x7FC00000. The other history entries stay."""
    kernel = delayed_in_place_kernel(shape, "bf16", transposed, TARGET)
    positions = record_positions(shape, transposed)
    at = tuple(torch.tensor(axis, device="cuda") for axis in zip(*positions))
    x = torch.full(shape, -0.0, dtype=torch.bfloat16, device="cuda")
    scales = from_numpy(np.ones(3, np.float32))
    history = np.abs(rng.standard_normal((4, 3))).astype(np.float32)
    buffer = from_numpy(history)
    entries = iter([3e38, -0.0, np.nan, 0.0] * (len(positions) + 2))

    def check(values, what):
        history[0, 1] = next(entries)
        buffer.copy_(from_numpy(history))
        x[at] = from_numpy(values.astype(ml_dtypes.bfloat16))
        kernel(x, scales, buffer)
        magnitudes = np.abs(values.astype(ml_dtypes.bfloat16).astype(np.float32))
        history[0, 1] = np.nan if np.isnan(magnitudes).any() else magnitudes.max()
        expected = history.copy()
        if np.isnan(expected[0, 1]):
            expected.view(np.uint32)[0, 1] = 0x7FC00000
        assert_bits_equal(to_numpy(buffer, np.float32), expected, f"history, {what}")

    check(np.full(len(positions), -0.0), "all -0")
    signs = rng.choice([-1.0, 1.0], len(positions))
    for i, position in enumerate(positions):
        values = signs * rng.uniform(0.5, 1.0, len(positions))
        values[i] = signs[i] * 1.5
        check(values, f"the largest in the CTA of element {position}")
    values = signs * rng.uniform(0.5, 1.0, len(positions))
    values[len(positions) // 2] = -np.nan
    check(values, "a NaN")

