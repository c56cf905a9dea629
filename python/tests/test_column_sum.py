"""mx.column_sum (a linear layer's bias gradient) on the CPU pipeline against the float64 column sum,
within the contract's bound (docs/numerics.md), and the reference model itself."""

import ml_dtypes
import numpy as np
import pytest

import mx
from mx import ops, reference
from conftest import assert_column_sum, random_input


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MX_CACHE_DIR", str(tmp_path / "cache"))
    ops.column_sum_kernel.cache_clear()


@pytest.mark.parametrize("shape", [(48, 16), (80, 144), (4160, 16), (1, 32), (64, 64)])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_cpu_matches_float64(rng, shape, dtype):
    x = random_input(rng, shape, dtype)
    assert_column_sum(mx.column_sum(x), x)


def test_special_columns():
    """One column per special case: -0 (stays -0), +0 with -0 (+0), NaN, +Inf with -Inf (NaN), +Inf,
    the largest finite f32 twice (overflows to +Inf in f32), subnormals (exact), cancellation."""
    top = np.float32(np.finfo(np.float32).max)
    tiny = np.float32(2.0 ** -149)
    columns = [[-0.0, -0.0, -0.0], [0.0, -0.0, -0.0], [1.0, np.nan, 2.0], [np.inf, -np.inf, 1.0],
               [np.inf, 1.0, -5.0], [top, top, 0.0], [tiny, tiny, tiny], [1e30, 1.0, -1e30],
               [3.0, 0.5, 0.25]]
    x = np.array(columns, np.float32).T.copy()
    got = mx.column_sum(x)
    assert np.signbit(got[0]) and got[0] == 0 and not np.signbit(got[1])
    assert np.isnan(got[2]) and np.isnan(got[3]) and got[4] == np.inf and got[5] == np.inf
    assert got[6] == np.float32(3 * 2.0 ** -149) and got[8] == 3.75
    assert abs(float(got[7]) - 1.0) <= reference.column_sum_bound(x)[7]


def test_reference():
    x = np.array([[1.0, -0.0], [2.0, -0.0]], ml_dtypes.bfloat16)
    ref = reference.column_sum(x)
    assert ref.dtype == np.float32 and ref.tolist() == [3.0, 0.0] and np.signbit(ref[1])
    np.testing.assert_array_equal(reference.column_sum_bound(x), [3 * 2.0 ** -24, 0.0])
    with pytest.raises(ValueError, match="matrix"):
        reference.column_sum(np.zeros((2, 3, 4), np.float32))


def test_argument_errors():
    with pytest.raises(ValueError, match="column_sum takes a matrix"):
        mx.column_sum(np.zeros((2, 3, 16), np.float32))
    with pytest.raises(ValueError, match="input dtype"):
        mx.column_sum(np.zeros((2, 16), np.float64))
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        mx.column_sum([[1.0]])
