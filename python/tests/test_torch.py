"""mx.torch without a GPU: recipe objects, convert and its report, scaling state in the state dict
(training resumed from a checkpoint is bit-identical), the custom ops and their fake implementations,
fused wgrad accumulation into `weight.main_grad`, and torch.compile(fullgraph=True) of a converted
model equal to eager mode. The layers run on the CPU
pipeline (the same plans and custom ops as on the GPU). Needs torch; skipped without it.
"""

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import linear_cases  # noqa: E402
import mx.torch  # noqa: E402
from mx import recipes, reference  # noqa: E402
from mx.linear import DELAYED_STATES  # noqa: E402
from mx.torch import _ops  # noqa: E402

TRAIN_RECIPES = ["mxfp8", "blockwise", "per_tensor", "delayed",
                 recipes.Delayed(history_len=3, algorithm="most_recent", margin=1, fp8_format="hybrid"),
                 recipes.MXFP8(fp8_format="hybrid"), "mxfp4", "nvfp4"]
WIDTH, HIDDEN, TOKENS = 128, 256, 128


def _ids(recipe):
    return recipe if isinstance(recipe, str) else recipe.key


def test_recipe_objects_and_shorthands():
    assert recipes.get("delayed") == recipes.Delayed()
    assert recipes.get(recipes.PerTensor(fp8_format="hybrid")).element("grad") == "f8E5M2"
    assert recipes.MXFP8().element("grad") == "f8E4M3FN"
    assert mx.torch.recipes is recipes
    assert recipes.Delayed(history_len=4).key == \
        "delayed(fp8_format=e4m3,history_len=4,algorithm=max,margin=0,reduce_amax=True)"


@pytest.mark.parametrize("make, knob", [
    (lambda: recipes.MXFP8(fp8_format="e5m2"), "fp8_format='e5m2'"),
    (lambda: recipes.Delayed(history_len=0), "history_len=0"),
    (lambda: recipes.Delayed(history_len=2.0), "history_len=2.0"),
    (lambda: recipes.Delayed(algorithm="mean"), "algorithm='mean'"),
    (lambda: recipes.Delayed(margin=200), "margin=200"),
    (lambda: recipes.Delayed(reduce_amax="yes"), "reduce_amax='yes'"),
    (lambda: recipes.NVFP4(fp8_format="hybrid"), "fp8_format='hybrid'"),
    (lambda: recipes.get("fp8"), "unknown recipe 'fp8'"),
    (lambda: mx.torch.Linear(64, 64, recipe="mxfp6"), "unknown recipe 'mxfp6'"),
    (lambda: mx.torch.Linear(64, 64, parallel="diagonal"), "parallel='diagonal'"),
])
def test_bad_knob_is_a_value_error_naming_it(make, knob):
    with pytest.raises(ValueError, match=knob.replace("(", r"\(").replace(")", r"\)")):
        make()


class Block(torch.nn.Module):
    """A small model with a mix of layers for convert: two eligible Linears, one too narrow, one
    filtered out by name, and a Linear subclass."""

    class Head(torch.nn.Linear):
        pass

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(WIDTH, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, WIDTH, bias=False)
        self.gate = torch.nn.Linear(WIDTH, 24)
        self.lm_head = torch.nn.Linear(WIDTH, WIDTH)
        self.custom = Block.Head(WIDTH, WIDTH)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(x))
        return self.lm_head(self.down(h)) + self.gate(x).sum(-1, keepdim=True)


def test_convert_swaps_eligible_layers_and_reports():
    torch.manual_seed(0)
    model = Block()
    weight = model.up.weight
    report = mx.torch.convert(model, "blockwise", filter_fn=lambda module, name: name != "lm_head")
    assert [name for name, *_ in report.swapped] == ["up", "down"]
    assert dict(report.skipped) == {
        "gate": "out_features=24 not a multiple of 128 (blockwise)",
        "lm_head": "filter_fn", "custom": "Head is not a plain torch.nn.Linear"}
    assert isinstance(model.up, mx.torch.Linear) and model.up.weight is weight
    assert model.down.bias is None and type(model.gate) is torch.nn.Linear
    assert "2 swapped, 3 skipped" in str(report) and "swapped up [128 -> 256]" in str(report)


def mlp(recipe, seed=0):
    """A bf16 MLP, converted to `recipe` unless it is None (the same weights for the same seed)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, HIDDEN), torch.nn.GELU(),
                                torch.nn.Linear(HIDDEN, WIDTH)).to(torch.bfloat16)
    if recipe is not None:
        mx.torch.convert(model, recipe)
    return model


def batches(count, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(TOKENS, WIDTH, generator=generator).bfloat16(),
             torch.randn(TOKENS, WIDTH, generator=generator)) for _ in range(count)]


def train(model, optimizer, data):
    losses = []
    for x, target in data:
        loss = torch.nn.functional.mse_loss(model(x).float(), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("recipe", TRAIN_RECIPES, ids=_ids)
def test_resume_from_state_dict_is_bit_identical(recipe):
    """Train 2 steps, checkpoint (model with its scaling state, optimizer), train 2 more; a fresh
    model loaded from the checkpoint trains the same 2 steps to the same bits."""
    data = batches(4)
    model = mlp(recipe)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train(model, optimizer, data[:2])
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    expected = train(model, optimizer, data[2:])

    resumed = mlp(recipe, seed=5)
    resumed_optimizer = torch.optim.AdamW(resumed.parameters(), lr=1e-2)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    assert train(resumed, resumed_optimizer, data[2:]) == expected
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_delayed_state_is_in_buffers():
    model = mlp("delayed")
    keys = [k for k in model.state_dict() if k.startswith("0.")]
    assert keys == ["0.weight", "0.bias", "0.fp8_scale_forward", "0.amax_history_forward",
                    "0.fp8_scale_backward", "0.amax_history_backward"]
    x, target = batches(1)[0]
    torch.nn.functional.mse_loss(model(x).float(), target).backward()
    layer = model[0]
    # After one step the update has moved the observed amaxes to the history's last row and set the
    # scales from them: maxfinite / amax.
    amax_x = x.float().abs().max()
    assert layer.amax_history_forward[-1, 0] == amax_x
    assert layer.fp8_scale_forward[0] == torch.tensor(448.0) / amax_x
    # The output gradient's amax (the first layer's is 0: its dY comes from a dgrad of gradients that
    # E4M3 with the initial scale 1 flushes to zero, as in Transformer Engine's first step).
    assert model[2].amax_history_backward[-1, 0] > 0 and model[2].fp8_scale_backward[0] > 1


@pytest.mark.parametrize("recipe", ["delayed", TRAIN_RECIPES[4]], ids=_ids)
def test_delayed_step_updates_every_state_in_one_call_without_copies(monkeypatch, recipe):
    """A delayed-scaling step calls one update program for all of the layer's states (mx.linear's
    `update`); the casts record their amaxes in the history buffers themselves (their programs
    update the history in place and do not return it), and the buffers take the update's new
    histories and scales (Tensor.set_): each stays the same tensor object (what state_dict()
    returns), and the step copies nothing (no aten.copy_)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe, dtype=torch.bfloat16)
    x = torch.randn(TOKENS, WIDTH, dtype=torch.bfloat16, requires_grad=True)
    for _ in range(2):  # compiles the kernels; the second step's weight cast is then reused
        layer(x).float().sum().backward()
    made = _ops.plan(TOKENS, WIDTH, HIDDEN, layer.recipe, "bf16", "bf16", "cpu", bias=True)
    called, call = [], _ops._call
    monkeypatch.setattr(_ops, "_call", lambda kernel, *args: called.append(kernel) or call(kernel, *args))
    buffers = dict(layer.named_buffers())
    seen = []
    for _ in range(2):
        with Ops():
            layer(x).float().sum().backward()
    assert called.count(made.update) == 2, called
    # Per step: 2 casts (X's, and dY's with the bias gradient; the weight's is reused), the update,
    # 3 GEMMs.
    assert len(called) == 2 * 6
    casts = [kernel for kernel in called if kernel.signature.name == "quantize_delayed"]
    assert len(casts) == 2 * 2 and all(kernel.signature.updated == (2,) for kernel in casts)
    assert all(b is buffers[name] for name, b in layer.named_buffers())
    assert torch.ops.aten.copy_.default not in seen
    assert layer.amax_history_forward[-1, 0] == x.float().abs().max()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_delayed_state_buffers_after_steps(compiled):
    """Delayed scaling's state over more training steps than its history holds, eager and under
    torch.compile: the layer's four buffers stay the same tensor objects, and after every step they
    hold, bit for bit, what the recipe gives: each cast's amax (input, weight, output gradient) in
    its history's row 0, then the update (mx.reference.update_amax_history) of every state."""
    torch._dynamo.reset()
    torch.manual_seed(7)
    recipe = recipes.Delayed(history_len=4)
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    step = torch.compile(layer, fullgraph=True, backend="aot_eager") if compiled else layer
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    buffers = dict(layer.named_buffers())
    expected = {state: (np.zeros((4, slots), np.float32), np.ones(slots, np.float32))
                for state, slots in DELAYED_STATES.items()}
    elements = {"forward": recipe.element("input"), "backward": recipe.element("grad")}
    for index in range(6):  # magnitudes that change every step, so that every row differs
        x = torch.randn(TOKENS, WIDTH) * 2.0 ** (index - 3)
        dy = torch.randn(TOKENS, HIDDEN) * 2.0 ** (2 - index)
        amaxes = {"forward": [x.abs().max(), layer.weight.detach().abs().max()], "backward": [dy.abs().max()]}
        step(x).backward(dy)
        optimizer.step()
        optimizer.zero_grad()
        for state, (history, scales) in expected.items():
            history[0] = amaxes[state]
            expected[state] = reference.update_amax_history(history, scales, elem=elements[state])
        assert all(b is buffers[name] for name, b in layer.named_buffers())
        for state, (history, scales) in expected.items():
            assert torch.equal(buffers[f"amax_history_{state}"], torch.from_numpy(history)), (index, state)
            assert torch.equal(buffers[f"fp8_scale_{state}"], torch.from_numpy(scales)), (index, state)
    assert (expected["forward"][0][1:] > 0).all() and (expected["backward"][0][1:] > 0).all()


@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise", "per_tensor", "delayed", "nvfp4"])
def test_training_on_cpu_tracks_bf16(recipe):
    data = batches(12)
    model, baseline = mlp(recipe), mlp(None)
    losses = train(model, torch.optim.SGD(model.parameters(), lr=0.5), data)
    bf16 = train(baseline, torch.optim.SGD(baseline.parameters(), lr=0.5), data)
    assert losses[-1] < losses[0]
    assert abs(losses[-1] - bf16[-1]) < 0.1 * bf16[-1], (losses, bf16)


def test_custom_ops_are_registered_with_fake_implementations():
    from torch._subclasses.fake_tensor import FakeTensorMode
    for name in ("quantize", "amax", "cast", "quantize_delayed", "cast_transpose_delayed",
                 "cast_transpose_delayed_dbias", "column_sum", "update_amax_history", "gemm", "gemm_accumulate"):
        assert hasattr(torch.ops.mx, name), name
    made = _ops.plan(TOKENS, WIDTH, HIDDEN, recipes.MXFP8(), "bf16", "f32", "cpu")
    with FakeTensorMode():
        x = torch.empty(TOKENS, WIDTH, dtype=torch.bfloat16)
        parts = torch.ops.mx.quantize(x, made.tensors["input"].key, True)
        # The columnwise parts written transposed, GEMM-ready: [K, M] data, [K, M / 32] scales.
        assert [tuple(p.shape) for p in parts] == [(128, 128), (128, 4), (128, 128), (128, 4)]
        assert [p.dtype for p in parts] == [torch.float8_e4m3fn, torch.float8_e8m0fnu] * 2
        w = torch.empty(HIDDEN, WIDTH, dtype=torch.float8_e4m3fn)
        y = torch.ops.mx.gemm(parts[:2], [w, torch.empty(HIDDEN, 4, dtype=torch.float8_e8m0fnu)],
                              made.key, "fprop")
        assert tuple(y.shape) == (TOKENS, HIDDEN) and y.dtype == torch.bfloat16
    for op in (torch.ops.mx.quantize.default, torch.ops.mx.gemm.default):
        torch.library.opcheck(op, _sample(op, made), test_utils=("test_faketensor",))


@pytest.mark.parametrize("role,shards", [("input", 1), ("grad", 2)])
def test_blockwise_col_parts_are_the_transposed_quantize(rng, role, shards):
    """FP8 blockwise's col parts (1x128 blocks along the rows) are quantized from the tensor in place
    (the plan's "both": mx.quantize transposed, no torch transpose) and are, bit for bit, the rowwise
    1x128 quantize of the transposed tensor or sequence-parallel shard (mx.reference)."""
    from conftest import assert_bits_equal, random_input
    from mx import reference
    rows = 2 * TOKENS
    made = _ops.tensor_plan(role, rows, HIDDEN, "f32", "blockwise", "cpu", shards)
    assert set(made.kernels) == {"row", "both"}
    x = random_input(rng, (rows // shards, HIDDEN), np.float32)
    parts = torch.ops.mx.quantize(torch.from_numpy(x), made.key, True)
    elem = made.recipe.element(role)
    expected = [*reference.quantize(x, (1, 128), elem, "f32", "ceil"),
                *reference.quantize(np.ascontiguousarray(x.T), (1, 128), elem, "f32", "ceil")]
    assert [tuple(p.shape) for p in parts] == [spec.shape for spec in made.parts()]
    for index, (got, want) in enumerate(zip(parts, expected)):
        got = got.view(torch.uint8) if got.element_size() == 1 else got
        assert_bits_equal(got.numpy(), want, f"part {index}")


def _sample(op, made):
    x = torch.randn(TOKENS, WIDTH).bfloat16()
    if op is torch.ops.mx.quantize.default:
        return (x, made.tensors["input"].key, True)
    xd, xs = torch.ops.mx.quantize(x, made.tensors["input"].key, False)
    wd, ws = torch.ops.mx.quantize(torch.randn(HIDDEN, WIDTH), made.tensors["weight"].key, False)
    return ([xd, xs], [wd, ws], made.key, "fprop")


def _gradient(parameter):
    """What backward accumulated for a parameter: its main gradient where it has one (fused wgrad
    accumulation, which leaves .grad None), else .grad."""
    main_grad = getattr(parameter, "main_grad", None)
    return parameter.grad if main_grad is None else main_grad


def assert_compiled_equals_eager(make, inputs, loss, **options):
    """Trains `make()` and a torch.compile(fullgraph=True, **options) of another `make()` on the
    same `inputs` (loss(model output, index) each); their gradients (main gradients where
    parameters have them) and buffers must be equal. Dynamo starts afresh: each call compiles the
    same forward code again, for new modules, and would soon reach its recompile limit."""
    torch._dynamo.reset()
    eager, compiled = make(), make()
    step = torch.compile(compiled, fullgraph=True, **options)
    for index, x in enumerate(inputs):
        for run in (eager, step):
            loss(run(x), index).backward()
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.equal(_gradient(a), _gradient(b)), name
    for (name, a), b in zip(eager.named_buffers(), compiled.buffers()):
        assert torch.equal(a, b), name


def bias_free_pair(recipe, width, hidden, device, **options):
    """Two bias-free converted bf16 Linears (`options` to convert): what Inductor compiles around
    the mx ops is then only reshapes (a bias-gradient reduction or a fused activation it generates
    may round differently from eager mode). With fuse_wgrad_accumulation, each weight gets a random
    f32 main gradient (the same for the same seed)."""
    torch.manual_seed(0)
    made = torch.nn.Sequential(torch.nn.Linear(width, hidden, bias=False),
                               torch.nn.Linear(hidden, width, bias=False)).to(device, torch.bfloat16)
    mx.torch.convert(made, recipe, **options)
    if options.get("fuse_wgrad_accumulation"):
        for weight in made.parameters():
            weight.main_grad = torch.randn(weight.shape, device=device)
    return made


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed"])
def test_eager_step_bypasses_the_op_dispatcher(recipe):
    """Eager mode calls the kernels' implementations, not torch.ops.mx.* (whose dispatch was most of
    a step's host time on the GPU machine): no mx:: op in the profiler's CPU events of one step,
    while the registered ops stay what torch.compile traces (test_compile_fullgraph_equals_eager)."""
    from torch.profiler import ProfilerActivity, profile
    model = mlp(recipe)
    x, _ = batches(1)[0]
    model(x).float().sum().backward()  # compiles and caches the kernels
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x).float().sum().backward()
    dispatched = sorted({e.name for e in prof.events() if e.name.startswith("mx::")})
    assert not dispatched, dispatched


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed"])
def test_step_without_torchs_private_apply_is_the_same(monkeypatch, recipe):
    """Where torch lacks the private entry points that the eager step calls (a torch release may drop
    them), mx.torch.Linear takes the public autograd.Function.apply: the same output and gradients,
    bit for bit, as the private path (which this torch has), and a torch without one of them is
    recognized."""
    import mx.torch.linear as linear_module
    assert linear_module._PRIVATE_APPLY is not None  # this torch has them
    results = []
    for private in (linear_module._PRIVATE_APPLY, None):
        monkeypatch.setattr(linear_module, "_PRIVATE_APPLY", private)
        torch.manual_seed(0)
        layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
        x = torch.randn(16, WIDTH, requires_grad=True)
        y = layer(x)
        y.float().square().sum().backward()
        results.append([y.detach(), x.grad, layer.weight.grad, layer.bias.grad])
    for got, want in zip(*results):
        assert torch.equal(got, want)
    monkeypatch.delattr(torch._C, "_are_functorch_transforms_active")  # as a torch without it
    assert linear_module._private_apply() is None


@pytest.mark.parametrize("recipe", ["per_tensor", "blockwise"])
def test_eager_step_adds_no_view_nodes(recipe):
    """A 2-D input is neither reshaped nor its output (a view's node would run in every backward):
    the output's node is the layer's own; a 3-D input, reshaped, computes the same bits."""
    torch.manual_seed(5)
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    x = torch.randn(TOKENS, WIDTH, requires_grad=True)
    x3 = x.detach().reshape(2, TOKENS // 2, WIDTH).requires_grad_()
    dy = torch.randn(TOKENS, HIDDEN)
    y = layer(x)
    assert type(y.grad_fn).__name__ == "_LinearFunctionBackward" and y._base is None
    y.backward(dy)
    dw = layer.weight.grad.clone()
    layer.weight.grad = None
    y3 = layer(x3)
    assert y3.shape == (2, TOKENS // 2, HIDDEN) and torch.equal(y3.reshape(TOKENS, HIDDEN), y)
    y3.backward(dy.reshape(2, TOKENS // 2, HIDDEN))
    assert torch.equal(x3.grad.reshape(TOKENS, WIDTH), x.grad) and torch.equal(layer.weight.grad, dw)


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed"])
def test_weight_is_quantized_once_per_value(monkeypatch, recipe):
    """Eager mode's weight cache: forwards of an unchanged weight quantize it once; an in-place update
    (a new version) or new storage quantizes it again, and the output is a fresh layer's, bit for bit.
    Delayed scaling casts a new value again after the next update (the first cast's scale has not
    seen the value), and from then on reuses that cast."""
    from mx.torch import linear
    torch.manual_seed(6)
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    x = torch.randn(TOKENS, WIDTH)
    roles = []
    quantize = linear.quantize
    monkeypatch.setattr(linear, "quantize", lambda made, *a, **k: roles.append(made.role) or quantize(made, *a, **k))

    def weight_quantizes(step):
        roles.clear()
        y = step()
        return roles.count("weight"), y

    def train_step():  # forward and backward: delayed scaling's update runs in backward
        y = layer(x)
        y.float().sum().backward()
        return y
    delayed = recipe == "delayed"
    assert weight_quantizes(lambda: layer(x))[0] == 1
    assert weight_quantizes(lambda: layer(x))[0] == delayed  # no update since: delayed casts again
    assert weight_quantizes(train_step)[0] == delayed
    assert weight_quantizes(train_step)[0] == delayed  # the cast after the first update
    assert weight_quantizes(train_step)[0] == 0  # reused from now on
    assert weight_quantizes(lambda: layer(x))[0] == 0
    with torch.no_grad():
        layer.weight.mul_(0.5)
    count, y = weight_quantizes(lambda: layer(x))
    fresh = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    fresh.load_state_dict(layer.state_dict())
    assert count == 1 and torch.equal(y, fresh(x))
    layer.weight.data = layer.weight.data.clone() * 2
    assert weight_quantizes(lambda: layer(x))[0] == 1
    assert weight_quantizes(lambda: layer(x))[0] == delayed


def test_delayed_reused_weight_keeps_its_scale_and_records_nothing():
    """A delayed layer whose weight does not change reuses the cast made after the first update:
    its output then equals the output of a layer that casts the weight with that scale (the
    scale at the reusing cast), the weight's history entry records nothing (0 before each
    update), and the weight's scale stays what that amax gave (max rule, window of 4)."""
    torch.manual_seed(7)
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=mx.recipes.Delayed(history_len=4))
    x = torch.randn(TOKENS, WIDTH)
    forward, _ = layer.scaling_states()["forward"]
    slot = 1  # the weight's column of the forward state
    amax = layer.weight.detach().abs().max().item()
    for step in range(8):
        y = layer(x)
        history = layer.scaling_states()["forward"][1]
        recorded = history[0, slot].item()
        assert recorded == (amax if step < 2 else 0.0), (step, recorded)
        if step == 2:
            fresh = mx.torch.Linear(WIDTH, HIDDEN, recipe=mx.recipes.Delayed(history_len=4))
            fresh.load_state_dict(layer.state_dict())
            # The fresh layer casts its weight with the same scale as the reused cast (made at
            # step 1 with the scale that step 0's update gave, unchanged since).
            assert torch.equal(fresh(x), y)
        y.float().sum().backward()
        scale = layer.scaling_states()["forward"][0][slot].item()
        assert scale == np.float32(448.0) / np.float32(amax), (step, scale)


@pytest.mark.parametrize("recipe", ["mxfp8", "per_tensor", "delayed", "nvfp4"])
def test_compile_fullgraph_equals_eager(recipe):
    """torch.compile(fullgraph=True) traces forward and backward of a converted model without graph
    breaks, and computes the same bits as eager mode."""
    data = batches(2)
    assert_compiled_equals_eager(lambda: mlp(recipe), [x for x, _ in data],
                                 lambda y, i: torch.nn.functional.mse_loss(y.float(), data[i][1]),
                                 backend="aot_eager")


@pytest.mark.parametrize("recipe", ["mxfp8", "delayed", "nvfp4"])
def test_inductor_fullgraph_equals_eager(recipe):
    """The default backend (Inductor, C++ on the CPU): the mx ops stay opaque, and gradients and
    scaling state equal eager mode's bit for bit (the loss stays outside the compiled model)."""
    assert_compiled_equals_eager(lambda: bias_free_pair(recipe, WIDTH, HIDDEN, "cpu"),
                                 [x for x, _ in batches(2)], lambda y, i: y.float().square().mean())


@pytest.mark.parametrize("recipe,backend", [("per_tensor", "aot_eager"), ("delayed", "aot_eager"),
                                            ("per_tensor", "inductor")])
def test_compile_fused_wgrad_accumulation_equals_eager(recipe, backend):
    """Under torch.compile(fullgraph=True) the fused wgrad's custom op (mutating main_grad) traces
    without graph breaks, and the main gradients equal eager mode's (Tensor.set_) bit for bit."""
    assert_compiled_equals_eager(
        lambda: bias_free_pair(recipe, WIDTH, HIDDEN, "cpu", fuse_wgrad_accumulation=True),
        [x for x, _ in batches(2)], lambda y, i: y.float().square().mean(), backend=backend)


@pytest.mark.parametrize("recipe,dtype", [("per_tensor", torch.float32), ("delayed", torch.float32),
                                          ("mxfp8", torch.float32), ("blockwise", torch.float32),
                                          ("nvfp4", torch.float32), ("per_tensor", torch.bfloat16)])
def test_fused_wgrad_accumulation_equals_the_plain_sum(recipe, dtype):
    """main_grad after micro-batches of fused steps is its start plus the plain wgrads (the GEMM
    tolerance; the sum is rounded once per step in the GEMM, to f32 also for bf16 weights); the
    weight gets no gradient."""
    linear_cases.check_fused_wgrad_accumulation(recipe, "cpu", dtype)


def test_fused_wgrad_step_runs_the_accumulating_gemm(monkeypatch):
    """A fused step runs the plan's "wgrad_acc" kernel (main_grad in its epilogue) and not the plain
    wgrad, and passes main_grad to it as D."""
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe="per_tensor", fuse_wgrad_accumulation=True)
    layer.weight.main_grad = torch.randn(HIDDEN, WIDTH)
    made = _ops.plan(TOKENS, WIDTH, HIDDEN, layer.recipe, "f32", "f32", "cpu", wgrad_accumulation=True)
    called, call = [], _ops._call
    monkeypatch.setattr(_ops, "_call", lambda kernel, *args: called.append((kernel, args)) or call(kernel, *args))
    layer(torch.randn(TOKENS, WIDTH)).sum().backward()
    kernels = [kernel for kernel, _ in called]
    assert kernels.count(made.gemms["wgrad_acc"]) == 1 and made.gemms["wgrad"] not in kernels
    (args,) = [args for kernel, args in called if kernel is made.gemms["wgrad_acc"]]
    assert args[-1] is layer.weight.main_grad


@pytest.mark.parametrize("recipe", ["per_tensor", "nvfp4"])
def test_fused_wgrad_accumulation_without_an_accumulating_gemm(monkeypatch, recipe):
    """Where the chip's GEMM takes no accumulator (FP4 on sm_90a, cuBLASLt's GEMMs: no "wgrad_acc"
    in the plan) the plain wgrad is added by torch: the same bits as autograd's accumulation of
    f32 weight gradients."""
    from linear_cases import LINEAR
    made = _ops.plan(LINEAR["m"], LINEAR["k"], LINEAR["n"], recipes.get(recipe), "bf16", "f32", "cpu",
                     wgrad_accumulation=True)
    monkeypatch.delitem(made.gemms, "wgrad_acc")
    main_grad, expected = linear_cases.check_fused_wgrad_accumulation(recipe, "cpu")
    assert torch.equal(main_grad, expected)


def test_fused_wgrad_accumulation_needs_a_main_grad_of_its_own():
    """A missing or wrong weight.main_grad is an error of forward naming what was expected (none is
    needed without gradients); a view into a flat buffer (Megatron-LM's DDP) is refused in eager
    mode, which replaces main_grad's storage. The state dict is a plain layer's."""
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe="per_tensor", fuse_wgrad_accumulation=True)
    assert "fuse_wgrad_accumulation=True" in repr(layer)
    assert list(layer.state_dict()) == list(mx.torch.Linear(WIDTH, HIDDEN, recipe="per_tensor").state_dict())
    x = torch.randn(TOKENS, WIDTH)
    with torch.no_grad():
        layer(x)
    with pytest.raises(ValueError, match=r"needs weight.main_grad, a float32 tensor of shape \[256, 128\] "
                                         r"on cpu .* the weight has NoneType"):
        layer(x)
    flat = torch.zeros(2 * HIDDEN * WIDTH)
    for main_grad, what in [(torch.zeros(HIDDEN, WIDTH, dtype=torch.bfloat16), r"got a torch.bfloat16 tensor"),
                            (torch.zeros(WIDTH, HIDDEN), r"of shape \[128, 256\] on cpu"),
                            (flat[:HIDDEN * WIDTH].view(HIDDEN, WIDTH), "not a view into a larger buffer"),
                            (torch.zeros(WIDTH, HIDDEN).t(), "not a view into a larger buffer")]:
        layer.weight.main_grad = main_grad
        with pytest.raises(ValueError, match=what):
            layer(x)
    assert not flat.any()


@pytest.mark.parametrize("recipe", linear_cases.FP4)
def test_fp4_linear_against_float64(recipe):
    """The FP4 recipes' forward, dgrad and wgrad on the CPU pipeline against float64 products of
    the operands mx.reference quantizes (test_gpu_torch.py runs every recipe on a GPU)."""
    linear_cases.check_linear_against_float64(recipe, "cpu")


@pytest.mark.parametrize("chip", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("recipe", linear_cases.FP4)
def test_fp4_plans_compile_for_the_gpus(recipe, chip):
    """The FP4 plans compile for both chips without a GPU (a GPU machine gets them ahead of time):
    the GEMMs dequantize on sm_90a and go to cuBLASLt (swizzled scales) on sm_100a, and a sequence-
    parallel input shard takes the amax of the whole tensor (NVFP4's tensor scale)."""
    from mx.linear import DequantizedGemm, LinearPlan
    made = LinearPlan(TOKENS, WIDTH, HIDDEN, recipe, "bf16", "f32", chip, (("input", 2),),
                      wgrad_accumulation=True)
    assert set(made.gemms) == {"fprop", "dgrad", "wgrad"}  # no epilogue: a torch matmul or cuBLASLt
    assert all(isinstance(g, DequantizedGemm) == (chip == "sm_90a") for g in made.gemms.values())
    assert set(made.tensors["input"].kernels) == ({"amax", "cast", "col_cast"} if recipe == "nvfp4"
                                                  else {"row", "col"})


@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise"])
def test_both_usages_quantize_in_one_kernel(monkeypatch, recipe):
    """The "both" program of a gradient (or activation): its rowwise operand and the one written
    transposed, GEMM-ready, for wgrad, is one quantize kernel on sm_90a, which reads the tensor once:
    MXFP8's [1, 32] with its columnwise quantization, FP8 blockwise's [1, 128] with the 1x128 blocks
    along M (the programs' MLIR taken from mx.compiler, lowered here without a GPU)."""
    from mx import compiler, ops, tools
    from mx.linear import TensorPlan
    monkeypatch.setattr(compiler, "compile", lambda program, target, **_: program.to_mlir())
    ops.quantize_kernel.cache_clear()  # memoized Kernels of other tests would hide the programs
    try:
        plan = TensorPlan("grad", TOKENS, HIDDEN, "bf16", recipe, "sm_90a")
    finally:
        ops.quantize_kernel.cache_clear()
    lowered = tools.run_mx_opt(plan.kernels["both"], "--mx-lower-to-nvvm=chip=sm_90a format=isa")
    assert lowered.count("gpu.launch_func") == 1, lowered.count("gpu.launch_func")


@pytest.mark.parametrize("chip", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise", "per_tensor", "delayed"])
def test_fp8_plans_compile_for_the_gpus(recipe, chip):
    """The FP8 plans compile for both chips without a GPU, and fprop fuses the bias and wgrad the
    main gradient's accumulation only where the chip generates the GEMM (every FP8 recipe on sm_90a,
    MX on tcgen05): sm_100a's FP8 per-tensor and blockwise GEMMs are cuBLASLt's, which mx lowers
    without epilogue operands, so the bias and the main gradient are added after the GEMM there."""
    from mx.linear import LinearPlan
    made = LinearPlan(TOKENS, WIDTH, HIDDEN, recipe, "bf16", "bf16", chip, wgrad_accumulation=True)
    fused = chip == "sm_90a" or recipe == "mxfp8"
    assert {"fprop_bias", "wgrad_acc"} & set(made.gemms) == ({"fprop_bias", "wgrad_acc"} if fused else set())


@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise", "per_tensor", "delayed", "nvfp4"])
def test_bias_grad_is_the_column_sum_of_dy(monkeypatch, recipe):
    """The bias gradient comes from mx's column sum of dY (from the program that writes the col parts
    where the recipe has one, from the "dbias" kernel otherwise; never torch's dy.sum): over three backward
    passes accumulating into bias.grad, it stays within the column sum's bound (docs/numerics.md)
    of the float64 sums of the dYs, plus one f32 rounding of the accumulation per step."""
    layer = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    made = _ops.plan(TOKENS, WIDTH, HIDDEN, layer.recipe, "f32", "f32", "cpu", bias=True)
    grads = made.tensors["grad"]
    assert grads.column_sum and "dbias" in grads.kernels
    assert grads.fuses_column_sum == (recipe in ("per_tensor", "delayed", "blockwise", "mxfp8"))
    monkeypatch.setattr(torch.Tensor, "sum", lambda *a, **k: pytest.fail("dy.sum in backward"))
    generator = torch.Generator().manual_seed(3)
    total, bound = np.zeros(HIDDEN), np.zeros(HIDDEN)
    for step in range(3):
        x = torch.randn(TOKENS, WIDTH, generator=generator)
        dy = torch.randn(TOKENS, HIDDEN, generator=generator) * 2.0 ** (8 * step - 8)
        layer(x).backward(dy)
        total += dy.double().numpy().sum(axis=0)
        bound += reference.column_sum_bound(dy.numpy()) + 2.0 ** -24 * np.abs(total)
    assert layer._plan_keys and all(key.endswith(":bias") for key in layer._plan_keys.values())
    error = np.abs(layer.bias.grad.double().numpy() - total)
    assert np.all(error <= bound), (error.max(), bound.min())


@pytest.mark.parametrize("recipe", ["per_tensor", "delayed", "blockwise"])
def test_frozen_bias_drops_the_fused_column_sum(recipe):
    """A layer whose bias takes no gradient keeps its biased plan, whose cast+transpose kernels also
    return the column sum: the quantize ops then return just the compact parts (as many as
    TensorPlan.parts, which the fakes of torch.compile promise), and the step's input and weight
    gradients are those of the same layer with a trainable bias, bit for bit."""
    torch.manual_seed(5)
    trained = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    frozen = mx.torch.Linear(WIDTH, HIDDEN, recipe=recipe)
    frozen.load_state_dict(trained.state_dict())
    frozen.bias.requires_grad_(False)
    x, dy = torch.randn(TOKENS, WIDTH), torch.randn(TOKENS, HIDDEN)
    grads = []
    for layer in (trained, frozen):
        xi = x.clone().requires_grad_()
        layer(xi).backward(dy)
        grads.append((xi.grad, layer.weight.grad))
    assert frozen.bias.grad is None and trained.bias.grad is not None
    for a, b in zip(*grads):
        assert torch.equal(a, b)
    made = _ops._PLANS[next(iter(frozen._plan_keys.values()))].tensors["grad"]
    if "both" in made.kernels:
        assert len(_ops.quantize(dy, made.key, True)) == len(made.parts(True))


def test_layers_without_bias_compute_no_column_sum():
    """A plan without a bias has no column-sum kernel and its quantize kernels return what they
    did before (no extra output or cost); a bias-free layer asks for that plan."""
    from mx.linear import LinearPlan
    for recipe in ("per_tensor", "delayed", "mxfp8"):
        plain = LinearPlan(TOKENS, WIDTH, HIDDEN, recipe, "bf16", "bf16", "cpu")
        biased = LinearPlan(TOKENS, WIDTH, HIDDEN, recipe, "bf16", "bf16", "cpu", bias=True)
        assert plain.key + ":bias" == biased.key
        assert not plain.tensors["grad"].column_sum and "dbias" not in plain.tensors["grad"].kernels
        for name, kernel in plain.tensors["grad"].kernels.items():
            extra = biased.tensors["grad"].fuses_column_sum and name.endswith("both")
            assert len(biased.tensors["grad"].kernels[name].signature.results) == len(kernel.signature.results) + extra, name
    layer = mx.torch.Linear(WIDTH, HIDDEN, bias=False, recipe="per_tensor")
    layer(torch.randn(TOKENS, WIDTH)).sum().backward()
    assert not any(key.endswith(":bias") for key in layer._plan_keys.values())


@pytest.mark.parametrize("chip", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("recipe", ["per_tensor", "delayed", "mxfp8", "blockwise"])
def test_bias_plans_compile_for_the_gpus(recipe, chip):
    """Plans with a bias compile for both chips: the program that writes the col parts returns the
    column sum (the GPU lowering fuses it into per-tensor and delayed scaling's cast+transpose
    kernel and 1x128 blockwise's strip kernel), and the column-sum kernel of its own is there for a
    gradient quantized without them."""
    from mx.linear import LinearPlan
    made = LinearPlan(TOKENS, WIDTH, HIDDEN, recipe, "bf16", "bf16", chip, bias=True)
    grads = made.tensors["grad"]
    assert "dbias" in grads.kernels and grads.fuses_column_sum


@pytest.mark.parametrize("recipe", linear_cases.FP4)
def test_dequantized_gemm_matches_scaled_matmul(monkeypatch, recipe):
    """sm_90a's FP4 GEMM (both operands dequantized, then a matmul, then NVFP4's tensor scales:
    mx.linear.DequantizedGemm), run with the CPU's kernels, against mx.scaled_matmul of the same
    operands."""
    from mx import ops
    from mx.linear import DequantizedGemm
    made = _ops.plan(TOKENS, WIDTH, HIDDEN, recipes.get(recipe), "bf16", "f32", "cpu")
    x = torch.randn(TOKENS, WIDTH).bfloat16()
    w = torch.randn(HIDDEN, WIDTH) * 1e-3  # an NVFP4 tensor scale far from 1
    operands = [torch.ops.mx.quantize(t, made.tensors[role].key, False) for t, role in ((x, "input"), (w, "weight"))]
    expected = torch.ops.mx.gemm(*operands, made.key, "fprop").float()
    block = made.recipe.block("input", 1, 1)
    dequantize = [ops.dequantize_kernel(shape, "f4E2M1FN", (shape[0], shape[1] // block[1]), made.recipe.scale_type,
                                        block, "bf16", made.recipe.tensor_scaled, target="cpu")
                  for shape in ((TOKENS, WIDTH), (HIDDEN, WIDTH))]
    monkeypatch.setitem(made.gemms, "fprop", DequantizedGemm(*dequantize, "bf16"))
    got = torch.ops.mx.gemm(*operands, made.key, "fprop").float()
    assert torch.linalg.norm(got - expected) / torch.linalg.norm(expected) < 4e-3
