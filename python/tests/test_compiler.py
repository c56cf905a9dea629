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
