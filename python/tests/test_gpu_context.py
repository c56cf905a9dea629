"""No input kills the CUDA context, and no result depends on the timing of the caller's work (issue 22).

On a GPU, for one program of every kernel family (rowwise, columnwise/fused, 2-D blockwise and
per-tensor quantize, amax, delayed scaling and its update, MXFP4 and NVFP4 quantize, FP8 and FP4
dequantize, swizzle and unswizzle, the generated GEMM kernels of every recipe and a cuBLASLt GEMM):

* every argument, given as a view at a byte offset of a larger buffer (what `raw[k:].view(...)`
  makes: D1 for a GEMM operand, D2 for bf16 data at 2 bytes, D3 for E8M0 scales at 1 or 4 bytes),
  is refused through `runtime.call_mlir_function` with a clear MXRuntimeError before anything is
  launched, and copied by a Kernel (mx.compile), whose result then equals the aligned call's;
* after each refused call a torch op and an mx op on fresh tensors still succeed in the process;
* D4: a compiled function called in default mode through `MemRef.from_dlpack` reads its input after
  the work torch queued to produce it: on the legacy default stream, on a side stream current while
  `from_dlpack` asks for the tensor, and, in call-stream mode, on the call's stream; 64 calls on
  large fresh inputs each return their own input's tensor scale;
* a Kernel's result read by a Kernel on another stream is not reused by its producing stream before
  that read, however soon torch drops it.

Skipped without torch and a CUDA GPU. A GPU machine has no mx-opt, so the programs come from
mx.compile's cache: `python python/tests/test_gpu_context.py build DIR [CHIP]` compiles them into
the cache DIR where mx-opt is; run the tests with MX_CACHE_DIR=DIR.
"""

import ml_dtypes
import numpy as np
import pytest

import mx
from mx import builder, compiler, reference
from conftest import build_cache_main, gpu_target

ROW = (1, 32)
RACE_SHAPE = (16384, 16384)  # bf16: 512 MiB, so that producing it takes long enough to race
RACE_CALLS = 64


def _function(name, args, body):
    """A builder.Function named `name` with arguments (shape, dtype) given to `body(f, *values)`,
    which returns the results."""
    f = builder.Function(name)
    values = [f.arg(shape, dtype) for shape, dtype in args]
    f.returns(*body(f, *values))
    return f


def _gemm(name, a_block, b_block, a_scales, b_scales, scale_type, b_elem="f8E4M3FN"):
    m, n, k = 256, 128, 512
    return _function(name, [((m, k), "f8E4M3FN"), (a_scales, scale_type), ((n, k), b_elem), (b_scales, scale_type)],
                     lambda f, a, sa, b, sb: [f.scaled_matmul(a, sa, b, sb, a_block, b_block, "bf16")])


# name: (program, gemm lowering). One program per kernel family; shapes are small but not tile
# multiples where the kernel allows.
PROGRAMS = {
    "rowwise": (_function("rowwise", [((256, 512), "bf16")],
                          lambda f, x: (lambda d, s: [d, f.swizzle(s)])(*f.quantize(x, ROW))), "auto"),
    "fused": (_function("fused", [((96, 256), "bf16")],
                        lambda f, x: [*f.quantize(x, ROW), *f.quantize(x, (32, 1))]), "auto"),
    "blockwise_2d": (_function("blockwise_2d", [((256, 384), "f32")],
                               lambda f, x: f.quantize(x, (128, 128), scale_type="f32", rounding="ceil")), "auto"),
    "blockwise_1d": (_function("blockwise_1d", [((130, 256), "bf16")],
                               lambda f, x: f.quantize(x, (1, 128), scale_type="f32", rounding="exact")), "auto"),
    "per_tensor": (_function("per_tensor", [((128, 256), "f16")],
                             lambda f, x: f.quantize(x, (128, 256), scale_type="f32", rounding="exact")), "auto"),
    "amax": (_function("amax", [((64, 272), "bf16")], lambda f, x: [f.amax(x)]), "auto"),
    "delayed": (_function("delayed", [((128, 256), "bf16"), ((3,), "f32"), ((4, 3), "f32")],
                          lambda f, x, s, h: f.quantize_delayed(x, s, h, 1)), "auto"),
    "update": (_function("update", [((16, 8), "f32"), ((8,), "f32")],
                         lambda f, h, s: f.update_amax_history(h, s)), "auto"),
    "mxfp4": (_function("mxfp4", [((128, 256), "bf16")],
                        lambda f, x: f.quantize(x, ROW, "f4E2M1FN")), "auto"),
    "nvfp4": (_function("nvfp4", [((128, 256), "bf16")],
                        lambda f, x: f.quantize(x, (1, 16), "f4E2M1FN", "f8E4M3FN")), "auto"),
    "dequantize": (_function("dequantize", [((128, 256), "f8E4M3FN"), ((128, 8), "f8E8M0FNU")],
                             lambda f, d, s: [f.dequantize(d, s, ROW, "bf16")]), "auto"),
    "dequantize_fp4": (_function("dequantize_fp4", [((128, 256), "f4E2M1FN"), ((128, 8), "f8E8M0FNU")],
                                 lambda f, d, s: [f.dequantize(d, s, ROW, "f32")]), "auto"),
    "swizzle": (_function("swizzle", [((200, 16), "f8E8M0FNU")], lambda f, s: [f.swizzle(s)]), "auto"),
    "unswizzle": (_function("unswizzle", [((2, 4, 32, 4, 4), "f8E8M0FNU")],
                            lambda f, t: [f.unswizzle(t, (200, 16))]), "auto"),
    "gemm_mx": (_gemm("gemm_mx", ROW, ROW, (2, 4, 32, 4, 4), (1, 4, 32, 4, 4), "f8E8M0FNU"), "auto"),
    "gemm_blockwise": (_gemm("gemm_blockwise", (1, 128), (128, 128), (256, 4), (1, 4), "f32"), "auto"),
    "gemm_per_tensor": (_gemm("gemm_per_tensor", (256, 512), (128, 512), (1, 1), (1, 1), "f32", "f8E5M2"), "auto"),
    "gemm_cublas": (_gemm("gemm_cublas", (1, 128), (128, 128), (256, 4), (1, 4), "f32"), "cublas"),
    "race": (_function("race", [(RACE_SHAPE, "bf16")],
                       lambda f, x: f.quantize(x, (1, 16), "f4E2M1FN", "f8E4M3FN")), "auto"),
}


def compile_programs(target):
    """Every program for `target` (served from the cache where there is no mx-opt)."""
    return {name: mx.compile(program, target, gemm=gemm) for name, (program, gemm) in PROGRAMS.items()}


if __name__ == "__main__":
    build_cache_main(__file__, compile_programs)


torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
from mx import runtime as rt  # noqa: E402

TARGET = gpu_target()


@pytest.fixture(scope="module")
def programs():
    if TARGET is None:
        pytest.skip("mx compiles for compute capability 9.x and 10.x only")
    return compile_programs(TARGET)


def fresh_argument(spec, generator):
    """A valid random argument of `spec`: FP4 packed, E8M0 bytes near 2^0, and f32 tensors of at most
    1024 elements (scales, amax histories) positive."""
    shape = tuple(spec.shape)
    if spec.dtype == "f4E2M1FN":
        shape = shape[:-1] + (shape[-1] // 2,)
        return torch.randint(0, 256, shape, dtype=torch.uint8, device="cuda", generator=generator)
    if spec.dtype == "f8E8M0FNU":
        return torch.randint(120, 135, shape, dtype=torch.uint8, device="cuda", generator=generator)
    values = torch.randn(shape, device="cuda", generator=generator)
    if spec.dtype == "f32" and values.numel() <= 1024:
        values = values.abs() + 0.5
    return values.to(getattr(torch, compiler.TORCH_DTYPES[spec.dtype][0]))


def fresh_arguments(kernel, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [fresh_argument(spec, generator) for spec in kernel.signature.args]


def offsets(tensor):
    """Byte offsets that misalign a view of `tensor`'s dtype: its element size, 4 and 8 (those that
    are whole elements)."""
    size = tensor.element_size()
    return sorted({o for o in (size, 4, 8) if o >= size and o % size == 0 and o % 16})


def offset_copy(tensor, offset):
    """`tensor`'s values in a view `offset` bytes into a flat buffer (raw[offset:].view(...))."""
    nbytes = tensor.numel() * tensor.element_size()
    raw = torch.empty(nbytes + 256, dtype=torch.uint8, device="cuda")
    view = raw[offset:offset + nbytes].view(tensor.dtype).view(tensor.shape)
    view.copy_(tensor)
    assert view.data_ptr() % 16
    return view


def bits(tensor):
    """The bytes of `tensor`, in its shape (a 0-D one as one element: torch views no 0-D tensor as
    bytes of another size)."""
    tensor = tensor.contiguous()
    return (tensor.reshape(1) if tensor.dim() == 0 else tensor).view(torch.uint8).cpu()


def memref(spec, tensor):
    """The MemRef a C caller would pass: from DLPack (1-byte types through their uint8 view, which
    every DLPack consumer knows), or by hand for packed FP4, whose memref has the logical shape."""
    if spec.dtype == "f4E2M1FN":
        view = rt.MemRef(tensor.data_ptr(), spec.shape)
        view.owner = tensor
        return view
    return rt.MemRef.from_dlpack(tensor.view(torch.uint8) if tensor.element_size() == 1 else tensor)


def assert_context_alive(programs):
    """A torch op and an mx op on fresh tensors: both fail once the context is dead."""
    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    assert torch.isfinite((x.float() * 2).sum()).item()
    data, tiles = programs["rowwise"](x)
    torch.cuda.synchronize()
    host = x.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
    ref_data, ref_scales = reference.quantize(host, ROW)
    assert np.array_equal(bits(data).numpy(), ref_data.view(np.uint8))
    assert np.array_equal(bits(tiles).numpy(), reference.swizzle(ref_scales).view(np.uint8))


def cases():
    return [name for name in PROGRAMS if name != "race"]


@pytest.mark.parametrize("name", cases())
def test_misaligned_arguments_are_refused_before_any_launch(programs, name):
    """D1-D3 and every other family: through call_mlir_function (the C ABI), each argument at each
    misaligning offset is an MXRuntimeError naming it, nothing runs, and the context lives."""
    kernel = programs[name]
    library = rt.load_compiled(kernel.path)
    signature = kernel.signature
    ranks = [len(spec.shape) for spec in signature.results]
    arguments = fresh_arguments(kernel)
    for index, spec in enumerate(signature.args):
        for offset in offsets(arguments[index]):
            given = list(arguments)
            given[index] = offset_copy(arguments[index], offset)
            views = [memref(s, t) for s, t in zip(signature.args, given)]
            with pytest.raises(rt.MXRuntimeError) as error:
                rt.call_mlir_function(library, name, views, result_ranks=ranks)
            assert error.value.status == rt.Status.INVALID_ARGUMENT
            assert f"@{name} argument {index}: device pointer" in str(error.value)
            assert "16-byte aligned" in str(error.value) and "Nothing of the call was launched" in str(error.value)
            assert_context_alive(programs)
    # The same call with the arguments where torch put them runs.
    views = [memref(s, t) for s, t in zip(signature.args, arguments)]
    for result in rt.call_mlir_function(library, name, views, result_ranks=ranks):
        result.free()
    assert_context_alive(programs)


@pytest.mark.parametrize("name", cases())
def test_kernels_copy_misaligned_torch_views(programs, name):
    """The same views given to a Kernel (mx.compile) are copied first: the results are those of the
    aligned arguments, bit for bit."""
    kernel = programs[name]
    arguments = fresh_arguments(kernel, seed=1)
    expected = kernel(*arguments)
    expected = [bits(t) for t in (expected if isinstance(expected, tuple) else (expected,))]
    for index in range(len(arguments)):
        for offset in offsets(arguments[index]):
            given = list(arguments)
            given[index] = offset_copy(arguments[index], offset)
            got = kernel(*given)
            got = got if isinstance(got, tuple) else (got,)
            for position, (a, b) in enumerate(zip(got, expected)):
                assert torch.equal(bits(a), b), f"{name} result {position} with argument {index} at +{offset}"
    assert_context_alive(programs)


def test_gemm_operand_at_one_byte(programs):
    """D1 as reported: a contiguous view at an element offset of a flat buffer, raw[1:].view(...), as
    the A operand of an MX GEMM, through call_mlir_function: refused, not launched."""
    kernel = programs["gemm_mx"]
    library = rt.load_compiled(kernel.path)
    a, a_scales, b, b_scales = fresh_arguments(kernel, seed=2)
    raw = torch.empty(a.numel() + 1, dtype=torch.uint8, device="cuda")
    view = raw[1:].view(torch.float8_e4m3fn).view(a.shape)
    view.copy_(a)
    args = [memref(spec, t) for spec, t in zip(kernel.signature.args, (view, a_scales, b, b_scales))]
    with pytest.raises(rt.MXRuntimeError, match="@gemm_mx argument 0: device pointer .* is 1 bytes past"):
        rt.call_mlir_function(library, "gemm_mx", args, result_ranks=[2])
    assert_context_alive(programs)


def _race_call(library, x, memref_of_x=None):
    """The race program on `x` through call_mlir_function (default mode): its tensor scale."""
    view = memref_of_x if memref_of_x is not None else rt.MemRef.from_dlpack(x)
    data, scales, t = rt.call_mlir_function(library, "race", [view], result_ranks=[2, 2, 0])
    value = t.to_numpy(np.float32)
    for result in (data, scales, t):
        result.free()
    return value


def _expected_scale(x):
    """NVFP4's computed tensor scale: the finite amax / (448 * 6), one correctly rounded f32 division
    (numpy's: torch divides a CUDA tensor by a scalar as a multiply by its reciprocal, 1 ulp off at
    times)."""
    return x.abs().amax().float().cpu().numpy() / np.float32(2688.0)


def _zeros_written_late(value):
    """A large zero tensor that the current stream sets to `value` only after a 50 ms sleep."""
    x = torch.zeros(RACE_SHAPE, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)
    x.fill_(value)
    return x


def test_default_mode_orders_after_the_legacy_stream(programs):
    """D4, deterministic: the input is written after a 50 ms sleep queued on the legacy default
    stream (torch's default); the call made at once must read the written values."""
    library = rt.load_compiled(programs["race"].path)
    x = _zeros_written_late(3.0)
    assert _race_call(library, x) == np.float32(3.0) / np.float32(2688.0)


def test_from_dlpack_orders_after_the_current_side_stream(programs):
    """The tensor is written on a side stream; `from_dlpack` made while that stream is current asks
    torch for the tensor on the legacy stream, which then waits for the side stream's work."""
    library = rt.load_compiled(programs["race"].path)
    with torch.cuda.stream(torch.cuda.Stream()):
        x = _zeros_written_late(5.0)
        view = rt.MemRef.from_dlpack(x)
    assert _race_call(library, x, view) == np.float32(5.0) / np.float32(2688.0)


def test_call_stream_mode_orders_after_its_stream(programs):
    """A Kernel runs on torch's current stream (call-stream mode), after what was queued there."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        _, _, t = programs["race"](_zeros_written_late(7.0))
    side.synchronize()
    assert t.cpu().numpy() == np.float32(7.0) / np.float32(2688.0)


def test_fresh_inputs_called_at_once_many_times(programs):
    """D4 as reported: a large input that torch has just produced, called at once through
    MemRef.from_dlpack in default mode, many times, with a different magnitude each time so that
    reading an older tensor at the same address shows. Every tensor scale is its own input's."""
    library = rt.load_compiled(programs["race"].path)
    for i in range(RACE_CALLS):
        x = torch.randn(RACE_SHAPE, device="cuda", dtype=torch.bfloat16).mul_(2.0 ** (i % 16 - 8))
        got = _race_call(library, x)
        assert got == _expected_scale(x), f"call {i}: tensor scale {got} is not its input's"
        del x


def test_result_freed_while_another_stream_reads_it(programs):
    """A Kernel's result is freed on the stream that produced it when torch drops it. A Kernel that
    reads it on another stream, still queued then, must read it before the producing stream can
    reuse the memory: the runtime orders the free after the reader's stream (FSDP2 casts weights,
    and delayed scaling's state with them, on its copy-in stream). Here the read waits 50 ms while
    the default stream allocates and fills same-sized results at once; the read must see the
    original scales, freshly random in each trial."""
    rng = np.random.default_rng()
    side = torch.cuda.Stream()
    for trial in range(4):
        scales = torch.from_numpy(rng.integers(0, 255, (200, 16), dtype=np.uint8)).cuda()
        tiles = programs["swizzle"](scales)  # on the default stream
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)
            back = programs["unswizzle"](tiles)
        del tiles
        others = [programs["swizzle"](torch.full_like(scales, 7 + i)) for i in range(8)]
        torch.cuda.synchronize()
        assert torch.equal(back.view(torch.uint8), scales), f"trial {trial}: the read saw reused memory"
        del others
