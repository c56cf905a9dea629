"""mx from PyTorch on a GPU: compiled Kernels and the mx.ops functions on torch CUDA tensors (bit for bit
against mx.reference, on the caller's stream, results owning their memory), and mx.torch.Linear for every
recipe against a float64 product of the same quantized operands, plus a short training run against bf16,
and the fused wgrad accumulation into `weight.main_grad` against the plain wgrads summed.

Needs torch with a CUDA device; skipped otherwise. A GPU machine has no mx-opt, so its kernels come from
mx.compile's cache: `python python/tests/test_gpu_torch.py build DIR [CHIP]` compiles every program these
tests use into the cache DIR on a machine with mx-opt; run the tests there with MX_CACHE_DIR=DIR.
"""

import ml_dtypes
import numpy as np
import pytest

import mx
from mx import formats, ops, reference
import linear_cases
from conftest import assert_bits_equal, build_cache_main, gpu_target, random_input
from linear_cases import LINEAR

QUANTIZE_SHAPE = (256, 512)
OPS_SHAPES = {"quantize": (384, 256), "matmul": (256, 192, 512)}
MLP = {"batch": 256, "width": 256, "hidden": 512, "steps": 300}
TRAIN_RECIPES = ("mxfp8", "blockwise")
MICRO_BATCHES = 2  # test_training_with_micro_batches_tracks_bf16: gradient accumulation per step
ACCUMULATE_RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed")
LINEAR_RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed", *linear_cases.FP4)
COMPILE_RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed", "nvfp4")
# test_fused_wgrad_accumulation_equals_the_plain_sum: (recipe, weight dtype)
FUSED_WGRAD_CASES = (("per_tensor", "f32"), ("delayed", "f32"), ("blockwise", "f32"), ("mxfp8", "f32"),
                     ("per_tensor", "bf16"))
QUANTIZE = """
func.func @quantize(%x: tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  return %d, %s : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
}
"""


def programs(target):
    """Compiles (or finds in the cache) every program the tests run; the same calls the tests make."""
    from mx.linear import LinearPlan
    mx.compile(QUANTIZE, target)
    rows, cols = OPS_SHAPES["quantize"]
    ops.quantize_kernel((rows, cols), "bf16", (1, 32), swizzle=True, columnwise=True, target=target)
    ops.dequantize_kernel((rows, cols), "f8E4M3FN", (rows, cols // 32), "f8E8M0FNU", (1, 32), "bf16",
                          target=target)
    m, n, k = OPS_SHAPES["matmul"]
    ops.scaled_matmul_kernel((m, k), "f8E4M3FN", (m, k // 32), "f8E8M0FNU", (n, k), "f8E4M3FN",
                             (n, k // 32), "f8E8M0FNU", (1, 32), (1, 32), "f32", target=target)
    for bias in (False, True):  # layers with and without one (a plan with a bias computes dbias)
        for recipe in LINEAR_RECIPES:
            LinearPlan(LINEAR["m"], LINEAR["k"], LINEAR["n"], recipe, "bf16", "f32", target, bias=bias)
        for recipe, weight_dtype in FUSED_WGRAD_CASES:  # also every kernel of the plain plan
            LinearPlan(LINEAR["m"], LINEAR["k"], LINEAR["n"], recipe, "bf16", weight_dtype, target,
                       wgrad_accumulation=True, bias=bias)
        for recipe in TRAIN_RECIPES:
            for k_, n_ in ((MLP["width"], MLP["hidden"]), (MLP["hidden"], MLP["width"])):
                LinearPlan(MLP["batch"], k_, n_, recipe, "bf16", "f32", target, bias=bias)
        for recipe in ACCUMULATE_RECIPES:
            for k_, n_ in ((MLP["width"], MLP["hidden"]), (MLP["hidden"], MLP["width"])):
                LinearPlan(MLP["batch"] // MICRO_BATCHES, k_, n_, recipe, "bf16", "f32", target, bias=bias)
    for recipe in COMPILE_RECIPES:  # test_compile_fullgraph_equals_eager's bf16 model
        for k_, n_ in ((MLP["width"], MLP["hidden"]), (MLP["hidden"], MLP["width"])):
            LinearPlan(MLP["batch"], k_, n_, recipe, "bf16", "bf16", target)


if __name__ == "__main__":
    build_cache_main(__file__, programs)


torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
TARGET = gpu_target()


def to_numpy(t, dtype):
    """A CUDA tensor's bits as a numpy array of `dtype`."""
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[np.dtype(dtype).itemsize]
    return t.contiguous().view(carrier).cpu().numpy().view(dtype)


def from_numpy(a):
    carrier = {1: np.uint8, 2: np.int16, 4: np.int32}[a.dtype.itemsize]
    torch_dtype = getattr(torch, formats.BY_DTYPE[a.dtype].torch[0])
    return torch.from_numpy(a.view(carrier).copy()).cuda().view(torch_dtype)


def test_kernel_on_torch_tensors_on_a_side_stream(rng):
    kernel = mx.compile(QUANTIZE, TARGET)
    x_host = random_input(rng, QUANTIZE_SHAPE, ml_dtypes.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = from_numpy(x_host)
        data, scales = kernel(x)
        assert data.dtype == torch.float8_e4m3fn and scales.dtype == torch.float8_e8m0fnu
        assert data.is_cuda and tuple(scales.shape) == (256, 16)
    stream.synchronize()
    ref_data, ref_scales = reference.quantize(x_host, (1, 32))
    assert_bits_equal(to_numpy(data, ml_dtypes.float8_e4m3fn), ref_data, "data")
    assert_bits_equal(to_numpy(scales, ml_dtypes.float8_e8m0fnu), ref_scales, "scales")


def test_kernel_argument_errors():
    kernel = mx.compile(QUANTIZE, TARGET)
    with pytest.raises(TypeError, match="argument 0 must be tensor<256x512xbf16>, got a float32 tensor"):
        kernel(torch.zeros(QUANTIZE_SHAPE, device="cuda"))
    with pytest.raises(TypeError, match="got a bfloat16 tensor of shape .* on cpu"):
        kernel(torch.zeros(QUANTIZE_SHAPE, dtype=torch.bfloat16))


def test_results_are_freed_with_their_tensors():
    kernel = mx.compile(QUANTIZE, TARGET)
    x = torch.randn(QUANTIZE_SHAPE, device="cuda", dtype=torch.bfloat16)
    kernel(x)
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    for _ in range(2000):  # 270 MB of results in all, each dropped at once
        kernel(x)
    torch.cuda.synchronize()
    assert free_before - torch.cuda.mem_get_info()[0] < 64 << 20


def test_ops_on_torch_match_reference(rng):
    rows, cols = OPS_SHAPES["quantize"]
    x_host = random_input(rng, (rows, cols), ml_dtypes.bfloat16)
    data, tiles, col_data, col_tiles = mx.quantize(from_numpy(x_host), (1, 32), swizzle=True, columnwise=True)
    ref_data, ref_scales = reference.quantize(x_host, (1, 32))
    ref_col, ref_col_scales = reference.quantize(x_host, (32, 1))
    torch.cuda.synchronize()
    assert_bits_equal(to_numpy(data, ml_dtypes.float8_e4m3fn), ref_data, "data")
    assert_bits_equal(to_numpy(tiles, ml_dtypes.float8_e8m0fnu), reference.swizzle(ref_scales, 0), "tiles")
    assert_bits_equal(to_numpy(col_data, ml_dtypes.float8_e4m3fn), ref_col, "columnwise data")
    assert_bits_equal(to_numpy(col_tiles, ml_dtypes.float8_e8m0fnu), reference.swizzle(ref_col_scales, 1),
                      "columnwise tiles")
    y = mx.dequantize(from_numpy(ref_data), from_numpy(ref_scales), (1, 32), "bf16")
    assert_bits_equal(to_numpy(y, ml_dtypes.bfloat16),
                      reference.dequantize(ref_data, ref_scales, (1, 32), ml_dtypes.bfloat16), "dequantize")

    m, n, k = OPS_SHAPES["matmul"]
    a, a_scales = reference.quantize(random_input(rng, (m, k), np.float32, specials=False), (1, 32))
    b, b_scales = reference.quantize(random_input(rng, (n, k), np.float32, specials=False), (1, 32))
    c = mx.scaled_matmul(*map(from_numpy, (a, a_scales, b, b_scales)), (1, 32), (1, 32))
    expected = reference.scaled_matmul(a, a_scales, b, b_scales, (1, 32), (1, 32))
    assert reference.matmul_error(c.cpu().numpy(), expected) < 1e-5


@pytest.mark.parametrize("recipe", LINEAR_RECIPES)
def test_linear_against_float64(recipe):
    """Forward, dgrad and wgrad of one step against float64 products of the same quantized operands
    (the spec's bf16 tolerance), and against torch.nn.Linear in float64 (the quantization error)."""
    linear_cases.check_linear_against_float64(recipe, "cuda")


@pytest.mark.parametrize("recipe,weight_dtype", FUSED_WGRAD_CASES)
def test_fused_wgrad_accumulation_equals_the_plain_sum(recipe, weight_dtype):
    """fuse_wgrad_accumulation: weight.main_grad (f32, a random nonzero start) after 3 micro-batches
    is the start plus the plain layer's wgrads (the GEMM tolerance), the same tensor object; the
    weight gets no gradient."""
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[weight_dtype]
    linear_cases.check_fused_wgrad_accumulation(recipe, "cuda", dtype)


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed"])
def test_fused_wgrad_step_launches_no_torch_kernel(recipe):
    """The main gradient's sum is the wgrad GEMM's epilogue (the plan's "wgrad_acc"), not a torch add
    after it: a fused step launches only mx's kernels, as many as a plain step that accumulates
    nothing."""
    from mx.torch import Linear
    x = torch.randn(LINEAR["m"], LINEAR["k"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(LINEAR["m"], LINEAR["n"], device="cuda", dtype=torch.bfloat16)
    fused = Linear(LINEAR["k"], LINEAR["n"], bias=False, recipe=recipe, device="cuda",
                   fuse_wgrad_accumulation=True)
    fused.weight.main_grad = torch.randn(LINEAR["n"], LINEAR["k"], device="cuda")
    plain = Linear(LINEAR["k"], LINEAR["n"], bias=False, recipe=recipe, device="cuda")
    kernels = {name: [k for k in step_kernels(layer, x, dy) if "HtoD" not in k]
               for name, layer in (("fused", fused), ("plain", plain))}
    print(f"{recipe}: {kernels}")
    torch_kernels = [k for k in kernels["fused"] if "at::native" in k]
    assert kernels["fused"] and not torch_kernels, f"torch kernels in the fused {recipe} step: {torch_kernels}"
    assert len(kernels["fused"]) == len(kernels["plain"]), kernels


def _train(make_linear, seed, micro_batches=1):
    """(mean of the first 10, mean of the last 20) losses of an MLP (biased layers) learning a fixed
    teacher for MLP["steps"] optimizer steps; each step's batch in `micro_batches` backward passes
    whose gradients accumulate before the step."""
    torch.manual_seed(seed)
    width, hidden = MLP["width"], MLP["hidden"]
    model = torch.nn.Sequential(make_linear(width, hidden), torch.nn.GELU(), make_linear(hidden, width)).cuda()
    teacher = torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.Tanh(),
                                  torch.nn.Linear(hidden, width)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator(device="cuda").manual_seed(seed)
    losses = []
    for _ in range(MLP["steps"]):
        x = torch.randn(MLP["batch"], width, device="cuda", generator=generator)
        with torch.no_grad():
            target = teacher(x)
        optimizer.zero_grad()
        loss = 0.0
        for xs, ts in zip(x.chunk(micro_batches), target.chunk(micro_batches)):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                part = torch.nn.functional.mse_loss(model(xs.bfloat16()).float(), ts) / micro_batches
            part.backward()
            loss += part.item()
        optimizer.step()
        losses.append(loss)
    return float(np.mean(losses[:10])), float(np.mean(losses[-20:]))


@pytest.mark.parametrize("recipe", TRAIN_RECIPES)
def test_training_tracks_bf16(recipe):
    """An MLP trained on mx Linears reaches the loss a bf16 MLP reaches on the same data."""
    from mx.torch import Linear
    start, bf16 = _train(lambda i, o: torch.nn.Linear(i, o), seed=1)
    _, fp8 = _train(lambda i, o: Linear(i, o, recipe=recipe), seed=1)
    print(f"{recipe}: initial loss {start:.4f}, final loss bf16 {bf16:.4f}, mx {fp8:.4f}")
    assert fp8 < 0.5 * start, "the mx MLP did not learn"
    assert abs(fp8 - bf16) <= 0.1 * bf16 + 1e-3, f"final loss {fp8:.4f} vs bf16 {bf16:.4f}"


@pytest.mark.parametrize("recipe", ACCUMULATE_RECIPES)
def test_training_with_micro_batches_tracks_bf16(recipe):
    """Issue 19's accuracy check: the same 300 steps with biased layers and the gradients of
    MICRO_BATCHES micro-batches accumulated per step reach bf16's loss, for every FP8 recipe."""
    from mx.torch import Linear
    start, bf16 = _train(lambda i, o: torch.nn.Linear(i, o), seed=2, micro_batches=MICRO_BATCHES)
    _, fp8 = _train(lambda i, o: Linear(i, o, recipe=recipe), seed=2, micro_batches=MICRO_BATCHES)
    print(f"{recipe}, {MICRO_BATCHES} micro-batches: initial loss {start:.4f}, final loss bf16 {bf16:.4f}, "
          f"mx {fp8:.4f}")
    assert fp8 < 0.5 * start, "the mx MLP did not learn"
    assert abs(fp8 - bf16) <= 0.1 * bf16 + 1e-3, f"final loss {fp8:.4f} vs bf16 {bf16:.4f}"


def test_weight_is_quantized_once_per_value(monkeypatch):
    """Micro-batches reuse the quantized weight; an optimizer step (an in-place update) requantizes it."""
    import mx.torch.linear
    from mx.torch import Linear
    calls = []
    original = mx.torch.linear.quantize_and_sum  # every quantize of a layer goes through it
    monkeypatch.setattr(mx.torch.linear, "quantize_and_sum",
                        lambda made, *a, **k: calls.append(made.role) or original(made, *a, **k))
    layer = Linear(LINEAR["k"], LINEAR["n"], recipe="mxfp8", device="cuda")
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(LINEAR["m"], LINEAR["k"], device="cuda", dtype=torch.bfloat16)
        layer(x).float().sum().backward()
    assert calls.count("weight") == 1 and calls.count("input") == 3 and calls.count("grad") == 3
    optimizer.step()
    layer(x).float().sum().backward()
    assert calls.count("weight") == 2


def step_kernels(layer, x, dy, weight_changed=False):
    """The names of the CUDA kernels that one training step of `layer` launches (torch.profiler),
    after a first step that compiles and caches everything; `weight_changed`: as after an
    optimizer step (the weight's version bumped), so that no quantized weight is reused."""
    from torch.profiler import ProfilerActivity, profile
    layer(x).backward(dy)
    x.grad = layer.weight.grad = None  # no gradient accumulation kernels in the step below
    if layer.bias is not None:
        layer.bias.grad = None
    if weight_changed:
        torch.autograd.graph.increment_version(layer.weight)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        layer(x).backward(dy)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed", "mxfp8", "blockwise"])
def test_step_launches_no_transpose_or_copy(recipe):
    """The K-outer operands of dgrad and wgrad are written transposed by the quantize kernels
    (cast+transpose; MXFP8's columnwise and FP8 blockwise's 1x128 quantization along M, by the
    strip kernel from the tensor in place): one step of a Linear launches mx's kernels only, no
    torch transpose or copy kernel. The step reuses the weight's operands quantized by the first step (the weight did not
    change); FP8 blockwise's 128x128 weight byte-transposes its rowwise data once per weight value,
    which this step does not show."""
    from mx.torch import Linear
    layer = Linear(LINEAR["k"], LINEAR["n"], bias=False, recipe=recipe, device="cuda")
    x = torch.randn(LINEAR["m"], LINEAR["k"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(LINEAR["m"], LINEAR["n"], device="cuda", dtype=torch.bfloat16)
    kernels = step_kernels(layer, x, dy)
    print(f"{recipe}: {kernels}")
    assert kernels, "the profiler saw no kernel"
    torch_kernels = [k for k in kernels if "at::native" in k or "transpose" in k.lower() or "copy" in k.lower()]
    assert not torch_kernels, f"torch kernels in the {recipe} step: {torch_kernels}"


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed", "mxfp8", "blockwise"])
def test_bias_grad_is_no_torch_reduction(recipe):
    """The bias gradient of a step is mx's column sum of dY, not torch's dy.sum(0): a biased step
    launches no torch kernel, and one kernel more than a bias-free step where the quantize kernel
    sums the columns (per-tensor and delayed's cast+transpose, blockwise's strip kernel: the
    partials' sum), two more elsewhere (MXFP8: the column-sum kernel's tiles and partials)."""
    from mx.torch import Linear
    x = torch.randn(LINEAR["m"], LINEAR["k"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(LINEAR["m"], LINEAR["n"], device="cuda", dtype=torch.bfloat16)
    kernels = {bias: [k for k in step_kernels(Linear(LINEAR["k"], LINEAR["n"], bias=bias, recipe=recipe,
                                                     device="cuda"), x, dy) if "HtoD" not in k]
               for bias in (False, True)}
    print(f"{recipe}: {kernels[True]}")
    torch_kernels = [k for k in kernels[True] if "at::native" in k]
    assert not torch_kernels, f"torch kernels in the biased {recipe} step: {torch_kernels}"
    extra = 1 if recipe in ("per_tensor", "delayed", "blockwise") else 2
    assert len(kernels[True]) == len(kernels[False]) + extra, kernels


def test_delayed_step_launches_no_more_than_per_tensor():
    """Delayed scaling's training step launches no more than current scaling's: its casts record
    the amaxes in the layer's histories themselves (one launch each, no copy of the history;
    current scaling's are a memset, the amax pass and the cast), the update of every state is one
    kernel, and its new histories and scales are the kernel's buffers (no memcpy back into the
    module's). Counted
    after a weight change (an optimizer step), so that both cast the weight; the GEMMs' tensor-map
    uploads (Memcpy HtoD, the same GEMMs in both, as many as new addresses) are left out. With the
    weight unchanged, current scaling reuses its quantized weight, and delayed scaling casts it
    once more after the first update, then reuses that cast: the counts of that step (the second
    after the layer's first) are printed."""
    from mx.torch import Linear
    x = torch.randn(LINEAR["m"], LINEAR["k"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(LINEAR["m"], LINEAR["n"], device="cuda", dtype=torch.bfloat16)
    layers = {recipe: Linear(LINEAR["k"], LINEAR["n"], bias=False, recipe=recipe, device="cuda")
              for recipe in ("per_tensor", "delayed")}
    for changed in (False, True):
        kernels = {recipe: [k for k in step_kernels(layer, x, dy, changed) if "HtoD" not in k]
                   for recipe, layer in layers.items()}
        print(f"weight changed: {changed}: " + ", ".join(f"{r} {len(k)}: {k}" for r, k in kernels.items()))
    delayed = kernels["delayed"]
    assert sum("update_amax_histories" in k for k in delayed) == 1, delayed
    assert sum("quantize_delayed" in k for k in delayed) == 3, delayed
    assert not [k for k in delayed if "Memcpy" in k or "Memset" in k], delayed
    assert len(delayed) <= len(kernels["per_tensor"]), kernels


@pytest.mark.parametrize("recipe", COMPILE_RECIPES)
def test_compile_fullgraph_equals_eager(recipe):
    """torch.compile(fullgraph=True) with the default backend (Inductor) of two converted bf16
    Linears: no graph break, and two training steps give the eager mode's gradients and scaling
    state, bit for bit."""
    from test_torch import assert_compiled_equals_eager, bias_free_pair
    generator = torch.Generator(device="cuda").manual_seed(3)
    inputs = [torch.randn(MLP["batch"], MLP["width"], device="cuda", generator=generator).bfloat16()
              for _ in range(2)]
    assert_compiled_equals_eager(lambda: bias_free_pair(recipe, MLP["width"], MLP["hidden"], "cuda"),
                                 inputs, lambda y, i: y.float().square().mean())
