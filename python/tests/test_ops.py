"""mx.quantize / dequantize / swizzle / unswizzle / scaled_matmul on numpy arrays (the CPU pipeline)
against mx.reference bit for bit, and their argument errors, raised before anything is compiled."""

import ml_dtypes
import numpy as np
import pytest

import mx
from mx import compiler, ops, reference
from conftest import assert_bits_equal, random_input


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MX_CACHE_DIR", str(tmp_path / "cache"))
    for factory in (ops.quantize_kernel, ops.dequantize_kernel, ops.swizzle_kernel, ops.scaled_matmul_kernel):
        factory.cache_clear()


@pytest.mark.parametrize("shape, dtype, block, elem, scale_type, rounding", [
    ((70, 96), np.float32, (1, 32), "f8E4M3FN", "f8E8M0FNU", "ceil"),
    ((64, 200), ml_dtypes.bfloat16, (1, 128), "f8E4M3FN", "f32", "exact"),
    ((3, 40, 64), np.float16, (1, 1, 32), "f8E5M2", "f8E8M0FNU", "floor"),
    ((256, 256), np.float32, (128, 128), "f8E4M3FN", "f32", "ceil"),
])
def test_quantize_matches_reference(rng, shape, dtype, block, elem, scale_type, rounding):
    x = random_input(rng, shape, dtype)
    data, scales = mx.quantize(x, block, elem, scale_type, rounding)
    ref_data, ref_scales = reference.quantize(x, block, elem, scale_type, rounding)
    assert_bits_equal(data, ref_data, "data")
    assert_bits_equal(scales, ref_scales, "scales")


def test_fused_rowwise_columnwise_swizzled(rng):
    x = random_input(rng, (160, 96), ml_dtypes.bfloat16)
    data, tiles, col_data, col_tiles = mx.quantize(x, (1, 32), swizzle=True, columnwise=True)
    ref_data, ref_scales = reference.quantize(x, (1, 32))
    ref_col, ref_col_scales = reference.quantize(x, (32, 1))
    assert_bits_equal(data, ref_data, "rowwise data")
    assert_bits_equal(tiles, reference.swizzle(ref_scales, 0), "rowwise tiles")
    assert_bits_equal(col_data, ref_col, "columnwise data")
    assert_bits_equal(col_tiles, reference.swizzle(ref_col_scales, 1), "columnwise tiles")


@pytest.mark.parametrize("shape, dtype, block, columnwise, scale_type, rounding", [
    ((96, 160), ml_dtypes.bfloat16, (1, 32), True, "f8E8M0FNU", "ceil"),     # MXFP8's wgrad operands
    ((2, 48, 64), np.float32, (1, 1, 32), True, "f8E8M0FNU", "floor"),
    ((80, 48), np.float16, (80, 48), False, "f32", "exact"),                # per-tensor: one block
    ((128, 256), ml_dtypes.bfloat16, (1, 128), True, "f32", "ceil"),        # 1x128 blocks along M
    ((144, 100), np.float32, (1, 128), True, "f32", "floor"),               # partial blocks both ways
    ((2, 48, 260), np.float16, (1, 1, 128), True, "f32", "exact"),
])
def test_quantize_transposed_matches_reference(rng, shape, dtype, block, columnwise, scale_type, rounding):
    """The transposed pair is the reference quantize of x^T with the pair's blocks of x transposed."""
    x = random_input(rng, shape, dtype)
    data, scales, t_data, t_scales = mx.quantize(x, block, "f8E4M3FN", scale_type, rounding,
                                                 columnwise=columnwise, transposed=True)
    x_t = np.swapaxes(x, -1, -2)
    t_block = block if columnwise else ops._transposed(block)
    ref_data, ref_scales = reference.quantize(x, block, "f8E4M3FN", scale_type, rounding)
    ref_t_data, ref_t_scales = reference.quantize(x_t, t_block, "f8E4M3FN", scale_type, rounding)
    assert t_data.shape == reference.transposed_shape(shape)
    assert_bits_equal(data, ref_data, "rowwise data")
    assert_bits_equal(scales, ref_scales, "rowwise scales")
    assert_bits_equal(t_data, ref_t_data, "transposed data")
    assert_bits_equal(t_scales, ref_t_scales, "transposed scales")
    if not columnwise and block == shape:  # one scale: the transposed bytes of the rowwise data
        assert_bits_equal(t_data, np.swapaxes(data, -1, -2), "transposed bytes")


def test_quantize_delayed_transposed_matches_reference(rng):
    x = random_input(rng, (48, 80), ml_dtypes.bfloat16)
    scales = np.array([2.0, 0.75, 8.0], np.float32)
    history = rng.random((4, 3), dtype=np.float32)
    kernel = ops.quantize_delayed_kernel((48, 80), "bf16", 3, 4, 1, "f8E5M2", transposed=True)
    data, scale_inv, t_data, new_history = kernel(x, scales, history)
    ref_data, ref_inv, ref_history = reference.quantize_delayed(x, scales, history, 1, "f8E5M2")
    assert_bits_equal(data, ref_data, "data")
    assert_bits_equal(t_data, ref_data.T, "transposed data")
    assert_bits_equal(scale_inv, ref_inv, "scale_inv")
    assert_bits_equal(new_history, ref_history, "new history")


@pytest.mark.parametrize("out, bias_dtype, accumulate", [
    ("f32", None, True),          # wgrad into an f32 main gradient
    ("bf16", "bf16", False),      # fprop with a bias
    ("bf16", "f32", True),
])
def test_scaled_matmul_epilogue(rng, out, bias_dtype, accumulate):
    """The epilogue adds, in f32 and before the one rounding, the bias to every row and then D: bit
    for bit the plain product's f32 values plus the same terms (the CPU pipeline sums the product in
    one order in both programs), and the reference product within the f32 summation tolerance."""
    a, a_scales = reference.quantize(random_input(rng, (48, 256), np.float32, specials=False), (1, 32))
    b, b_scales = reference.quantize(random_input(rng, (40, 256), np.float32, specials=False), (1, 32))
    shapes = (a.shape, "f8E4M3FN", a_scales.shape, "f8E8M0FNU", b.shape, "f8E4M3FN", b_scales.shape,
              "f8E8M0FNU", (1, 32), (1, 32))
    plain = ops.scaled_matmul_kernel(*shapes, "f32")(a, a_scales, b, b_scales)
    kernel = ops.scaled_matmul_kernel(*shapes, out, bias_dtype=bias_dtype, accumulate=accumulate)
    dtypes = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
    args, expected = [a, a_scales, b, b_scales], plain
    if bias_dtype:
        bias = (rng.standard_normal(40) * 100).astype(dtypes[bias_dtype])
        args.append(bias)
        expected = expected + bias.astype(np.float32)
    if accumulate:
        d = (rng.standard_normal((48, 40)) * 100).astype(dtypes[out])
        args.append(d)
        expected = expected + d.astype(np.float32)
    got = kernel(*args)
    assert_bits_equal(got, expected.astype(dtypes[out]), "epilogue")
    with_reference = reference.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32)) + (expected - plain)
    assert reference.matmul_error(got.astype(np.float32), with_reference) < 1e-2


def test_dequantize_swizzle_unswizzle(rng):
    x = random_input(rng, (130, 64), np.float32)
    data, scales = reference.quantize(x, (1, 32))
    assert_bits_equal(mx.dequantize(data, scales, (1, 32), "bf16"),
                      reference.dequantize(data, scales, (1, 32), ml_dtypes.bfloat16), "dequantize")
    tiles = mx.swizzle(scales)
    assert_bits_equal(tiles, reference.swizzle(scales), "swizzle")
    assert_bits_equal(mx.unswizzle(tiles, scales.shape), scales, "unswizzle")


def test_scaled_matmul_matches_reference(rng):
    a, a_scales = reference.quantize(random_input(rng, (48, 256), np.float32, specials=False), (1, 32))
    b, b_scales = reference.quantize(random_input(rng, (40, 256), np.float32, specials=False), (1, 32))
    got = mx.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32))
    expected = reference.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32))
    assert got.dtype == np.float32 and reference.matmul_error(got, expected) < 1e-6  # f32 summation order


def test_dtypes_as_numpy_ml_dtypes_or_names(rng):
    """Element, scale and result types may be given as numpy / ml_dtypes dtypes: the same kernels."""
    x = random_input(rng, (64, 96), np.float32)
    data, scales = mx.quantize(x, 32, ml_dtypes.float8_e5m2, np.float32, "floor")
    ref_data, ref_scales = reference.quantize(x, (1, 32), "f8E5M2", "f32", "floor")
    assert_bits_equal(data, ref_data, "data")
    assert_bits_equal(scales, ref_scales, "scales")
    back = mx.dequantize(data, scales, 32, ml_dtypes.bfloat16)
    assert_bits_equal(back, reference.dequantize(data, scales, (1, 32), ml_dtypes.bfloat16), "dequantize")
    assert ops.quantize_kernel.cache_info().currsize == 1


@pytest.mark.parametrize("dtype, name", [
    ("f8E4M3FN", "f8E4M3FN"), (ml_dtypes.float8_e4m3fn, "f8E4M3FN"), (np.dtype(ml_dtypes.bfloat16), "bf16"),
    (np.float16, "f16"), ("float32", "f32"), (ml_dtypes.float4_e2m1fn, "f4E2M1FN"), ("e4m3", None),
    (np.complex64, None), ([1, 2], None), (None, None),
])
def test_element_type_names(dtype, name):
    assert compiler.element_type_name(dtype) == name


def test_torch_dtypes_name_mlir_types():
    torch = pytest.importorskip("torch")
    assert compiler.element_type_name(torch.float8_e4m3fn) == "f8E4M3FN"
    assert compiler.element_type_name(torch.bfloat16) == "bf16"
    assert compiler.element_type_name(torch.uint8) is None  # carries several mx types


def test_block_shorthand_and_batched_default(rng):
    """block=32 is (1, 32) on a matrix and (1, 1, 32) on a 3-D tensor, which the default is."""
    x = random_input(rng, (3, 40, 64), ml_dtypes.bfloat16)
    data, scales = mx.quantize(x)
    ref_data, ref_scales = reference.quantize(x, (1, 1, 32))
    assert_bits_equal(data, ref_data, "data")
    assert_bits_equal(scales, ref_scales, "scales")
    assert_bits_equal(mx.dequantize(data, scales, 32), reference.dequantize(data, scales, (1, 1, 32)),
                      "dequantize")
    # K-outer operands take an int block along K, their second-to-last dimension.
    a, a_scales = reference.quantize(random_input(rng, (64, 48), np.float32, specials=False), (32, 1))
    b, b_scales = reference.quantize(random_input(rng, (40, 64), np.float32, specials=False), (1, 32))
    got = mx.scaled_matmul(a, a_scales, b, b_scales, 32, 32, a_layout="k_outer")
    expected = reference.scaled_matmul(a, a_scales, b, b_scales, (32, 1), (1, 32), a_layout="k_outer")
    assert reference.matmul_error(got, expected) < 1e-6


def test_nvfp4_tensor_scale_flows_through(rng):
    """quantize's NVFP4 tensor scale is what dequantize and scaled_matmul take."""
    x = random_input(rng, (64, 128), np.float32, specials=False)
    w = random_input(rng, (48, 128), np.float32, specials=False)
    xd, xs, xt = mx.quantize(x, 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn)
    wd, ws, wt = mx.quantize(w, 16, "f4E2M1FN", "f8E4M3FN")
    ref_xd, ref_xs, ref_xt = reference.quantize_nvfp4(x)
    assert xt.shape == () and xt == ref_xt
    assert_bits_equal(mx.dequantize(xd, xs, 16, tensor_scale=xt),
                      reference.dequantize_nvfp4(ref_xd, ref_xs, ref_xt), "dequantize")
    got = mx.scaled_matmul(xd, xs, wd, ws, 16, 16, tensor_scales=(xt, wt))
    expected = reference.scaled_matmul(xd, xs, wd, ws, (1, 16), (1, 16), a_tensor_scale=xt, b_tensor_scale=wt)
    assert reference.matmul_error(got, expected) < 1e-6


def test_help_and_dir_show_the_api():
    import pydoc
    for name in ("quantize", "dequantize", "swizzle", "unswizzle", "scaled_matmul", "compile", "Kernel"):
        assert name in dir(mx) and name in mx.__all__
    text = pydoc.render_doc(mx, renderer=pydoc.plaintext)
    assert "quantize(x, block" in text and "scaled_matmul(a, a_scales" in text


def test_gpu_kernel_without_a_driver_says_so():
    """Where libcuda.so.1 does not load (a machine without an NVIDIA driver, like CI), running code
    compiled for a GPU is a GPUUnavailableError that says why, not ctypes' bare OSError."""
    from mx import runtime
    if runtime.device_available():
        pytest.skip("this machine has a GPU")
    try:
        runtime.load_library()
    except runtime.GPUUnavailableError:
        pass
    except OSError:
        pytest.skip("libmx_runtime.so is not built here")
    else:
        pytest.skip("the NVIDIA driver loads here (a GPU-less machine with a driver)")
    with pytest.raises(runtime.GPUUnavailableError, match="no NVIDIA driver .* cannot run here"):
        mx.quantize(np.ones((64, 64), np.float32), target="sm_90a")


def test_repeated_calls_reuse_one_kernel(rng):
    x = random_input(rng, (64, 64), np.float32)
    mx.quantize(x)
    mx.quantize(x * 2)
    assert ops.quantize_kernel.cache_info().misses == 1


@pytest.mark.parametrize("call, message", [
    (lambda: mx.quantize(np.zeros((4, 64), np.complex64)), "numpy dtype complex64 is not an mx element type"),
    (lambda: mx.quantize(np.zeros((4, 64), np.int32)), "input dtype i32 is not one of f32, bf16, f16"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float64)), "input dtype f64 is not one of f32, bf16, f16"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float32), (1, 1, 32)), "block (1, 1, 32) has 3 entries but the "
                                                                   "input (4, 64) has rank 2"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float32), elem="f8E4M3"), "element type f8E4M3 is not one of"),
    (lambda: mx.quantize(np.zeros((4, 64), np.float32), rounding="up"), "rounding up is not one of"),
    (lambda: mx.quantize(np.zeros((64, 64), np.float32), (2, 32), swizzle=True),
     "swizzled scales need a block of one row or one column"),
    (lambda: mx.scaled_matmul(*reference.quantize(np.ones((32, 96), np.float32), (1, 32)),
                              *reference.quantize(np.ones((32, 64), np.float32), (1, 32)), (1, 32), (1, 32)),
     "has K = 96 but rhs (32, 64) (k_contiguous) has K = 64"),
    (lambda: mx.scaled_matmul(*reference.quantize(np.ones((32, 48), np.float32), (1, 32)),
                              *reference.quantize(np.ones((32, 48), np.float32), (1, 32)), (1, 32), (1, 32)),
     "K = 48 is not a multiple of the lhs block's K extent 32"),
    (lambda: mx.dequantize(*reference.quantize(np.ones((32, 64), np.float32), (1, 32)), (1, 16)),
     "scales have shape (32, 2); data (32, 64) in blocks (1, 16) needs (32, 4)"),
    (lambda: mx.quantize(np.ones((4, 64), np.float32), (1, 32.7)), "block (1, 32.7) has the non-integer entry 32.7"),
    (lambda: mx.quantize(np.ones((4, 64), np.float32), "32"), "block must be an int or a sequence of ints"),
    (lambda: mx.quantize([[1.0] * 64] * 4), "x must be a numpy array or a torch tensor, got list"),
    (lambda: mx.quantize(np.ones((4, 64), np.float32), rounding="even"), "rounding even is not one of ceil, "
                                                                        "floor, exact"),
    (lambda: mx.quantize(np.ones((4, 64), np.float32), elem=np.float16), "element type float16 is not one of"),
    (lambda: mx.swizzle(np.ones((64, 2), ml_dtypes.float8_e8m0fnu), unscaled_dim=5),
     "unscaled_dim 5 is not one of the last two dimensions (0 or 1) of the scales (64, 2)"),
    (lambda: mx.dequantize(*reference.quantize(np.ones((32, 64), np.float32), (1, 32)), 32,
                           tensor_scale=np.float32(2)), "tensor_scale must be a numpy array or a torch tensor"),
    (lambda: mx.dequantize(*reference.quantize(np.ones((32, 64), np.float32), (1, 32)), 32,
                           tensor_scale=np.ones(1, np.float32)), "tensor_scale must be a 0-D float32 tensor"),
    (lambda: mx.scaled_matmul(*reference.quantize(np.ones((32, 64), np.float32), (1, 32)),
                              *reference.quantize(np.ones((32, 64), np.float32), (1, 32)), 32, 32,
                              a_layout="k_inner"), "lhs layout k_inner is not one of k_contiguous, k_outer"),
])
def test_errors_before_compiling(monkeypatch, call, message):
    monkeypatch.setattr(compiler, "compile", lambda *a, **k: pytest.fail("compiled a bad call"))
    with pytest.raises((ValueError, TypeError)) as error:
        call()
    assert message in str(error.value)


def test_verifier_rejections_are_value_errors():
    """A combination only the op's verifier knows to be wrong (E4M3 scales are NVFP4's, for FP4 data)
    is a ValueError with the verifier's words, not a CompileError with mx-opt's command line."""
    with pytest.raises(ValueError, match="'mx.quantize' op f8E4M3FN scales are NVFP4's and need f4E2M1FN data"):
        mx.quantize(np.ones((4, 64), np.float32), elem="f8E4M3FN", scale_type="f8E4M3FN")
