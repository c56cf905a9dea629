"""mx.compile on the CPU: signatures read from the library, argument checks, result ownership, the disk
cache (hits, tool identity, serving without mx-opt), and the builder, all against mx.reference bit for bit."""

import gc

import ml_dtypes
import numpy as np
import pytest

import mx
from mx import builder, compiler, reference, toolchain, tools
from conftest import assert_bits_equal, random_input

QUANTIZE = """
func.func @quantize(%x: tensor<70x96xf32>) -> (tensor<70x96xf8E4M3FN>, tensor<70x3xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<70x96xf32> -> tensor<70x96xf8E4M3FN>, tensor<70x3xf8E8M0FNU>
  return %d, %s : tensor<70x96xf8E4M3FN>, tensor<70x3xf8E8M0FNU>
}
"""


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_text_program_matches_reference(rng, cache):
    kernel = mx.compile(QUANTIZE, "cpu", cache=cache)
    assert str(kernel.signature) == ("@quantize(tensor<70x96xf32>) -> "
                                     "(tensor<70x96xf8E4M3FN>, tensor<70x3xf8E8M0FNU>)")
    for _ in range(2):
        x = random_input(rng, (70, 96), np.float32)
        data, scales = kernel(x)
        ref_data, ref_scales = reference.quantize(x, (1, 32))
        assert_bits_equal(data, ref_data, "data")
        assert_bits_equal(scales, ref_scales, "scales")


def test_builder_program_batched_swizzle(rng, cache):
    f = builder.Function("q")
    x = f.arg((2, 130, 64), "bf16")
    data, scales = f.quantize(x, (1, 1, 32), rounding="floor")
    f.returns(data, f.swizzle(scales))
    kernel = mx.compile(f, "cpu", cache=cache)
    value = random_input(rng, (2, 130, 64), ml_dtypes.bfloat16)
    got_data, got_tiles = kernel(value)
    ref_data, ref_scales = reference.quantize(value, (1, 1, 32), rounding="floor")
    assert_bits_equal(got_data, ref_data, "data")
    assert_bits_equal(got_tiles, np.stack([reference.swizzle(s) for s in ref_scales]), "tiles")


def test_run_returns_the_results_as_a_list(rng, cache):
    """Kernel.run gives the results as a list whatever their number (what mx.torch takes); calling
    the Kernel gives the only result itself, or a tuple of them: the same values."""
    kernel = mx.compile(QUANTIZE, "cpu", cache=cache)
    f = builder.Function("amax")
    f.returns(f.amax(f.arg((70, 96), "f32")))
    amax = mx.compile(f, "cpu", cache=cache)
    x = random_input(rng, (70, 96), np.float32)
    listed, called = kernel.run(x), kernel(x)
    assert isinstance(listed, list) and isinstance(called, tuple) and len(listed) == len(called) == 2
    for got, want, name in zip(listed, called, ("data", "scales")):
        assert_bits_equal(got, want, name)
    (single,) = amax.run(x)
    assert isinstance(amax(x), np.ndarray)
    assert_bits_equal(single, amax(x), "amax")


@pytest.mark.parametrize("elem", sorted(compiler.TORCH_DTYPES))
def test_gpu_results_are_exported_as_torch_imports_them(elem):
    """The DLPack type of a GPU Kernel's result (mxrtInvoke's export): FP8 and E8M0 results carry
    DLPack's float8 codes, which torch imports as their torch dtypes (no view at every call); packed
    FP4 and FP6 keep their uint8 carrier, which the call views. Checked by importing, in torch, a
    DLPack tensor of that type made here over host memory."""
    import ctypes
    torch = pytest.importorskip("torch")
    from mx import dlpack
    code, bits = compiler._result_dlpack_type(torch, elem)
    wanted = getattr(torch, compiler.TORCH_DTYPES[elem][0], None)
    memory, shape = (ctypes.c_uint8 * 16)(*range(16)), (ctypes.c_int64 * 1)(16 * 8 // bits)
    managed = dlpack.DLManagedTensor()
    tensor = managed.dl_tensor
    tensor.data, tensor.ndim, tensor.shape = ctypes.addressof(memory), 1, shape
    tensor.device.device_type = dlpack.KDL_CPU
    tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = code, bits, 1
    imported = torch.utils.dlpack.from_dlpack(dlpack.capsule(ctypes.addressof(managed)))
    assert imported.untyped_storage().nbytes() == 16
    if elem in ("f8E4M3FN", "f8E5M2", "f8E8M0FNU"):
        assert (code, imported.dtype) != (dlpack.DL_TYPES[elem][0], torch.uint8) and imported.dtype == wanted
    else:
        assert imported.dtype == wanted or (code, bits) == dlpack.DL_TYPES[elem]


def test_results_own_their_memory(rng, cache):
    """Each result is a fresh array that outlives the call and the other results, freed by numpy."""
    kernel = mx.compile(QUANTIZE, "cpu", cache=cache)
    x = random_input(rng, (70, 96), np.float32)
    kept = [kernel(x)[1] for _ in range(20)]
    gc.collect()
    expected = reference.quantize(x, (1, 32))[1]
    for scales in kept:
        assert_bits_equal(scales, expected, "scales kept after later calls")
    assert kept[0].ctypes.data != kept[1].ctypes.data


def test_returning_an_argument_or_a_constant(cache):
    source = """
    func.func @f(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<2x2xf32>) {
      %c = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
      return %x, %c : tensor<4x8xf32>, tensor<2x2xf32>
    }"""
    kernel = mx.compile(source, "cpu", cache=cache)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    same, constant = kernel(x)
    x[0, 0] = 99.0
    assert same[0, 0] == 0.0, "a returned argument must be a copy, not the caller's buffer"
    np.testing.assert_array_equal(constant, [[1, 2], [3, 4]])
    del same, constant
    gc.collect()


@pytest.mark.parametrize("args, message", [
    ((), "takes 1 arguments, got 0"),
    ((np.zeros((70, 95), np.float32),), "argument 0 must be tensor<70x96xf32>, got an array of shape (70, 95)"),
    ((np.zeros((70, 96), np.float64),), "argument 0 must be tensor<70x96xf32>, got an array of shape (70, 96) "
                                        "and dtype float64"),
    (("x",), "argument 0 must be tensor<70x96xf32>, got a str"),
])
def test_mismatched_arguments_name_the_argument(cache, args, message):
    kernel = mx.compile(QUANTIZE, "cpu", cache=cache)
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kernel(*args)


def test_compile_errors_carry_the_diagnostic(cache):
    bad = QUANTIZE.replace("70x3xf8E8M0FNU", "70x4xf8E8M0FNU")
    with pytest.raises(compiler.CompileError, match="scales"):
        mx.compile(bad, "cpu", cache=cache)
    with pytest.raises(ValueError, match="unknown target 'sm_80'"):
        mx.compile(QUANTIZE, "sm_80", cache=cache)
    with pytest.raises(ValueError, match="no public function @nope"):
        mx.compile(QUANTIZE, "cpu", entry="nope", cache=cache).signature


def test_cache_hit_runs_no_tool(cache, monkeypatch):
    first = mx.compile(QUANTIZE, "cpu", cache=cache)
    monkeypatch.setattr(tools, "_run", lambda *a, **k: pytest.fail("a cached program was compiled again"))
    assert mx.compile(QUANTIZE, "cpu", cache=cache).path == first.path


def test_new_toolchain_is_a_miss_and_no_toolchain_is_served_from_the_cache(cache, monkeypatch):
    first = mx.compile(QUANTIZE, "cpu", cache=cache)
    monkeypatch.setattr(toolchain, "toolchain_id", lambda *tools_: "a-rebuilt-mx-opt")
    rebuilt = mx.compile(QUANTIZE, "cpu", cache=cache)
    assert rebuilt.path != first.path

    def missing(*tools_):
        raise FileNotFoundError("cannot find mx-opt")
    monkeypatch.setattr(toolchain, "toolchain_id", missing)
    assert mx.compile(QUANTIZE, "cpu", cache=cache).path == rebuilt.path  # the newest build
    with pytest.raises(compiler.CompileError, match="holds no library of this program for sm_90a"):
        mx.compile(QUANTIZE, "sm_90a", cache=cache)


def test_gpu_program_compiles_without_a_gpu(cache):
    """Compiling for a chip needs no GPU (loading does), so GPU programs are built here and shipped."""
    kernel = mx.compile(QUANTIZE.replace("f32", "bf16"), "sm_90a", cache=cache)
    assert kernel.path.is_file() and kernel.path.parent.parent.parent == cache


def test_arguments_stay_unwritten_and_shared_results_are_copies(cache):
    source = """
    func.func @f(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
      %y = arith.addf %x, %x : tensor<4x8xf32>
      return %y, %y : tensor<4x8xf32>, tensor<4x8xf32>
    }"""
    kernel = mx.compile(source, "cpu", cache=cache)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    first, second = kernel(x)
    np.testing.assert_array_equal(x, np.arange(32, dtype=np.float32).reshape(4, 8))
    np.testing.assert_array_equal(first, 2 * x)
    np.testing.assert_array_equal(second, 2 * x)
    assert first.ctypes.data != second.ctypes.data
    del first, second
    gc.collect()


def test_delayed_history_of_the_caller_is_kept(rng, cache, monkeypatch):
    from mx import ops
    monkeypatch.setenv("MX_CACHE_DIR", str(cache))
    ops.quantize_delayed_kernel.cache_clear()
    kernel = ops.quantize_delayed_kernel((32, 64), "f32", 3, 4, 1)
    x, scales = random_input(rng, (32, 64), np.float32), np.array([1, 2, 4], np.float32)
    history = rng.random((4, 3), dtype=np.float32)
    kept = history.copy()
    data, scale_inv, new_history = kernel(x, scales, history)
    assert_bits_equal(history, kept, "the caller's history")
    for got, expected, what in zip((data, scale_inv, new_history),
                                   reference.quantize_delayed(x, scales, kept, 1), ("data", "scale_inv", "history")):
        assert_bits_equal(got, expected, what)


SCALARS = """
func.func @offset(%x: tensor<4xi32>, %n: i32, %s: f32) -> (tensor<4xi32>, tensor<4xf32>) {
  %nn = tensor.splat %n : tensor<4xi32>
  %y = arith.addi %x, %nn : tensor<4xi32>
  %f = tensor.splat %s : tensor<4xf32>
  return %y, %f : tensor<4xi32>, tensor<4xf32>
}
"""


@pytest.mark.parametrize("n, s, error, message", [
    (2**31, 1.0, ValueError, r"argument 1 \(i32\) must be in \[-2\*\*31, 2\*\*31\), got 2147483648"),
    (-2**31 - 1, 1.0, ValueError, r"must be in \[-2\*\*31, 2\*\*31\)"),
    (1.5, 1.0, TypeError, "argument 1 must be i32, got 1.5"),
    (True, 1.0, TypeError, "argument 1 must be i32, got True"),
    (1, 1e39, ValueError, r"argument 2 \(f32\) 1e\+39 is out of f32's range"),
    (1, "2", TypeError, "argument 2 must be f32, got '2'"),
])
def test_scalar_arguments_out_of_range(cache, n, s, error, message):
    """ctypes would wrap 2**31 to -2**31 and round 1e39 to inf without a word."""
    kernel = mx.compile(SCALARS, cache=cache)
    with pytest.raises(error, match=message):
        kernel(np.zeros(4, np.int32), n, s)


def test_scalar_arguments_in_range(cache):
    kernel = mx.compile(SCALARS, cache=cache)
    y, f = kernel(np.arange(4, dtype=np.int32), np.int32(2**31 - 4), float("inf"))
    assert y.tolist() == [2**31 - 4, 2**31 - 3, 2**31 - 2, 2**31 - 1] and np.isinf(f).all()
