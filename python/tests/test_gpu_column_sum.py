"""mx.column_sum on a GPU (a linear layer's bias gradient): the standalone kernel and the one fused
into the cast+transpose kernel of current and delayed per-tensor scaling, against the float64
column sum within the contract's bound (docs/numerics.md); the fused and the standalone sums equal
bit for bit (the same order of additions), and the fused kernel's casts equal mx.reference's.

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
ELEM = "f8E5M2"  # a gradient's element under "hybrid"
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


def programs(target):
    for shape, dtype in STANDALONE + FUSED:
        ops.column_sum_kernel(shape, dtype, target=target)
    for shape, dtype in FUSED:
        current_kernel(shape, dtype, target)
        delayed_kernel(shape, dtype, target)
        for transposed in (False, True):
            delayed_in_place_kernel(shape, dtype, transposed, target)


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
