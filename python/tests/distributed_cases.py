"""Training runs of a small converted MLP on one process, under FSDP2 and with sequence parallelism,
for test_torch_distributed.py (2 CPU processes on gloo) and test_gpu_torch_distributed.py (2 GPUs on
NCCL, one process per GPU), and the programs they compile (`plans`, for a GPU machine without
mx-opt). Each run returns its loss curve over the same global batches and the bytes this rank
contributed to all-gathers; FSDP2 runs also check the gathered weight bytes of the first step
against mx.reference's quantize of the whole weight. FSDP2 and sequence-parallel runs also record
the GEMM operands the layers make (`_watched`): each col operand that can be the rowwise bytes
transposed (per-tensor, delayed, 128x128) must be that, bit for bit, whether it was gathered or
derived, and the byte transposes are counted. The weights are not square, so that shards put
together along the wrong dimension cannot pass.
"""

from __future__ import annotations

import collections
import contextlib

import numpy as np

WIDTH, HIDDEN, TOKENS, STEPS, LR, WORLD = 512, 256, 256, 4, 0.5, 2
RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed", "mxfp4", "nvfp4")
FUSED_RECIPES = ("per_tensor", "mxfp8")  # sequence parallel also with fuse_wgrad_accumulation


def plans(target: str, world: int = WORLD):
    """Compiles every program the runs use on `target` (the calls the layers make)."""
    from mx import recipes
    from mx.torch import _ops
    for name in RECIPES:
        recipe = recipes.get(name)
        for k, n in ((WIDTH, HIDDEN), (HIDDEN, WIDTH)):
            _ops.tensor_plan("weight", n, k, "bf16", recipe, target, world)
        for bias in (False, True):  # the MLP's layers have biases; bias-free ones get the others
            for k, n in ((WIDTH, HIDDEN), (HIDDEN, WIDTH)):
                _ops.plan(TOKENS, k, n, recipe, "bf16", "bf16", target, bias=bias)           # one process
                _ops.plan(TOKENS // world, k, n, recipe, "bf16", "bf16", target, bias=bias)  # FSDP2
            for fused in (False, True) if name in FUSED_RECIPES else (False,):
                _ops.plan(TOKENS, WIDTH, HIDDEN // world, recipe, "bf16", "bf16", target, (("input", world),),
                          fused, bias)
                _ops.plan(TOKENS, HIDDEN // world, WIDTH, recipe, "bf16", "bf16", target, (("grad", world),),
                          fused, bias)


def mlp(recipe, device, seed=0):
    import torch
    import mx.torch
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, HIDDEN), torch.nn.GELU(),
                                torch.nn.Linear(HIDDEN, WIDTH)).to(device, torch.bfloat16)
    if recipe is not None:
        mx.torch.convert(model, recipe)
    return model


def batches(device):
    import torch
    generator = torch.Generator().manual_seed(7)
    return [(torch.randn(TOKENS, WIDTH, generator=generator).bfloat16().to(device),
             torch.randn(TOKENS, WIDTH, generator=generator).to(device)) for _ in range(STEPS)]


def _step(model, optimizer, x, target, scale=1.0):
    import torch
    loss = torch.nn.functional.mse_loss(model(x).float(), target, reduction="sum") * scale
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def _main_grad_step(model, optimizer, x, target, scale):
    """_step for layers with fuse_wgrad_accumulation: each weight's main_grad starts at zero, and
    after backward becomes its .grad in the weight's dtype (the optimizer reads .grad)."""
    import torch
    weights = [layer.weight for layer in model if getattr(layer, "fuse_wgrad_accumulation", False)]
    for weight in weights:
        weight.main_grad = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
    loss = torch.nn.functional.mse_loss(model(x).float(), target, reduction="sum") * scale
    optimizer.zero_grad()
    loss.backward()
    for weight in weights:
        assert weight.grad is None, "a fused wgrad gives the weight no .grad"
        weight.grad = weight.main_grad.to(weight.dtype)
    optimizer.step()
    return loss.detach()


def single(recipe, device):
    """The loss curve on one process over the global batches."""
    import torch
    model = mlp(recipe, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    return [_step(model, optimizer, x, t, 1 / t.numel()).item() for x, t in batches(device)]


def _expected_weight_bytes(recipe, weight) -> bytes:
    """The first step's quantized weight bytes (rowwise data), by mx.reference on the whole weight."""
    from mx import recipes, reference
    w = weight.detach().float().cpu().numpy()
    recipe = recipes.get(recipe)
    if isinstance(recipe, recipes.Delayed):  # the first step casts with scale 1
        data, _, _ = reference.quantize_delayed(w, np.ones(2, np.float32), np.zeros((16, 2), np.float32), 1)
    elif recipe.per_tensor:  # current scaling of shards: x * (448 / amax of the whole weight)
        scale = np.float32(448) / reference.amax(w)
        data, _, _ = reference.quantize_delayed(w, np.array([scale], np.float32), np.zeros((1, 1), np.float32), 0)
    else:
        data = _block_quantize(recipe, "weight", w)[0]
    return _packed(data).tobytes()


def _block_quantize(recipe, role, x32):
    """mx.reference's rowwise quantize of `x32` in a block-scaled recipe: (data, scales), and
    NVFP4's tensor scale (computed from the whole tensor)."""
    from mx import reference
    if recipe.tensor_scaled:
        return list(reference.quantize_nvfp4(x32))
    return list(reference.quantize(x32, recipe.block(role, *x32.shape), recipe.element(role), recipe.scale_type))


def _packed(data):
    """Data as it is in memory: FP4 two elements a byte."""
    from mx import reference
    return reference.pack_fp4(data) if data.dtype.itemsize == 1 and "float4" in str(data.dtype) else data


@contextlib.contextmanager
def _watched():
    """While open: the row and col GEMM operands ((data, scales), on the CPU) that mx.torch.Linear
    makes of every tensor whose col operand can be its rowwise bytes transposed, by (plan key,
    side) in call order, and the number of byte transposes (calls of _ops.transpose_bytes)."""
    from mx.torch import _ops, linear
    seen = {"operands": collections.defaultdict(list), "transposes": 0}
    operand, transpose = linear.operand, _ops.transpose_bytes

    def recording(made, parts, side):
        result = operand(made, parts, side)
        if made.col_derivable:
            seen["operands"][made.key, side].append([t.detach().cpu().clone() for t in result[:2]])
        return result

    def counting(t):
        seen["transposes"] += 1
        return transpose(t)

    linear.operand, _ops.transpose_bytes = recording, counting
    try:
        yield seen
    finally:
        linear.operand, _ops.transpose_bytes = operand, transpose


def _transposes_checked(seen) -> dict:
    """Compares each recorded col operand with the transpose of the row operand of the same tensor
    made in the same order (the same step): "checked" pairs, the plan keys of those that differ
    ("bad"), and the byte "transposes"."""
    import torch

    def bytes_of(t):  # (contiguous() keeps the strides of a transposed [n, 1])
        return t.clone(memory_format=torch.contiguous_format).view(torch.uint8)

    checked, bad = 0, set()
    operands = seen["operands"]
    for key in {key for key, side in operands if side == "col"}:
        for row, col in zip(operands[key, "row"], operands[key, "col"], strict=True):
            checked += 1
            if not all(torch.equal(bytes_of(r.t()), bytes_of(c)) for r, c in zip(row, col)):
                bad.add(key)
    return {"checked": checked, "bad": sorted(bad), "transposes": seen["transposes"]}


def fsdp(rank, world, recipe, device, reshard=True):
    """FSDP2 over `world` ranks, each on its token shard of the global batches; quantized weight
    all-gather for mx recipes (recipe None: bf16 FSDP2). `reshard`: FSDP2's reshard_after_forward
    (False: the weights stay gathered from forward to backward)."""
    import torch
    import mx.torch.fsdp
    from mx.torch import distributed
    expected = [_expected_weight_bytes(recipe, mlp(None, device)[i].weight) for i in (0, 2)] if recipe else None
    model = _sharded(recipe, device, reshard)
    gathered = []
    if recipe is not None:
        for i in (0, 2):
            model[i].register_forward_pre_hook(
                lambda layer, args: gathered.append(layer.weight.mx_parts[0].view(torch.uint8).cpu().clone().numpy().tobytes()))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses, sent = [], []
    rows = slice(rank * TOKENS // world, (rank + 1) * TOKENS // world)
    with _watched() as seen:
        for x, target in batches(device):
            with distributed.count_all_gather() as counter:
                loss = _step(model, optimizer, x[rows], target[rows], 1 / target.numel())
                if recipe is not None:
                    mx.torch.fsdp.precompute_scales(model)
            torch.distributed.all_reduce(loss)
            losses.append(loss.item())
            sent.append(counter["bytes"])
    weights_equal = expected is None or gathered[:2] == expected
    return {"losses": losses, "bytes": sent, "weights_equal": weights_equal,
            "operands": _transposes_checked(seen)}


def _sharded(recipe, device, reshard=True):
    import mx.torch.fsdp
    from torch.distributed.fsdp import fully_shard
    model = mlp(recipe, device)
    mx.torch.fsdp.quantize_all_gather(model)
    for layer in (model[0], model[2]):
        fully_shard(layer, reshard_after_forward=reshard)
    fully_shard(model)
    return model


def fsdp_resume(rank, world, recipe, device):
    """FSDP2: a step, torch.save of the state dict, more steps; a fresh model loaded from the saved
    state trains those steps to the same losses (True when it does)."""
    import io
    import torch
    rows = slice(rank * TOKENS // world, (rank + 1) * TOKENS // world)
    data = [(x[rows], t[rows], 1 / t.numel()) for x, t in batches(device)]
    model = _sharded(recipe, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    _step(model, optimizer, *data[0])
    saved = io.BytesIO()
    torch.save(model.state_dict(), saved)
    expected = [_step(model, optimizer, *batch).item() for batch in data[1:]]
    saved.seek(0)
    resumed = _sharded(recipe, device)
    resumed.load_state_dict(torch.load(saved, weights_only=False))
    optimizer = torch.optim.SGD(resumed.parameters(), lr=LR)
    return [_step(resumed, optimizer, *batch).item() for batch in data[1:]] == expected


def sequence_parallel(rank, world, recipe, device, fused=False):
    """A column-parallel up and a row-parallel down projection over `world` ranks (token shards in
    and out), from the one-process model's weights. `fused`: the layers fuse their wgrad
    accumulation into each weight's f32 main_grad, zeroed before and handed to the optimizer (as
    the weight's gradient) after each backward, as Megatron-LM does."""
    import torch
    import mx.torch.parallel
    from mx.torch import distributed
    full = mlp(None, device)
    group = torch.distributed.group.WORLD
    model = torch.nn.Sequential(
        mx.torch.parallel.column(full[0], group, recipe, fuse_wgrad_accumulation=fused), torch.nn.GELU(),
        mx.torch.parallel.row(full[2], group, recipe, fuse_wgrad_accumulation=fused))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    rows = slice(rank * TOKENS // world, (rank + 1) * TOKENS // world)
    losses, sent = [], []
    step = _main_grad_step if fused else _step
    with _watched() as seen:
        for x, target in batches(device):
            with distributed.count_all_gather() as counter:
                loss = step(model, optimizer, x[rows], target[rows], 1 / target.numel())
            torch.distributed.all_reduce(loss)
            losses.append(loss.item())
            sent.append(counter["bytes"])
    return {"losses": losses, "bytes": sent, "operands": _transposes_checked(seen)}


def sharded_quantize(rank, world, recipe, device):
    """Each rank quantizes its row shard of one tensor as the layers do, and gathers the compact
    parts; the result must be mx.reference's quantize of the whole tensor, bit for bit (spec
    section 12). Two tensors: random values, and the same with special values (NaN, Inf, ...).
    Returns the names of the parts that differ."""
    return [f"{name} ({kind})" for kind, specials in (("finite", False), ("specials", True))
            for name in _sharded_quantize(rank, world, recipe, device, specials)]


def _sharded_quantize(rank, world, recipe, device, specials):
    import ml_dtypes
    import torch
    from conftest import random_input
    from mx import recipes
    from mx.torch import _ops, distributed
    from mx.torch.linear import quantize
    recipe = recipes.get(recipe)
    rng = np.random.default_rng(np.random.SeedSequence(11))
    whole = random_input(rng, (TOKENS, WIDTH), ml_dtypes.bfloat16, specials)
    x = torch.from_numpy(whole.view(np.int16)).view(torch.bfloat16).to(device)
    plan = _ops.tensor_plan("input", TOKENS, WIDTH, "bf16", recipe, _ops.target_of(x), world)
    rows = slice(rank * TOKENS // world, (rank + 1) * TOKENS // world)
    states = _ops.new_delayed_states(16, device) if isinstance(recipe, recipes.Delayed) else {}
    if states:  # a delayed scale that is not 1, the same on every rank
        states["forward"][0].fill_(448 / 3.0)
    group = torch.distributed.group.WORLD
    parts = quantize(plan, x[rows].contiguous(), True, states, group)
    specs = plan.parts(plan.has_col(parts))
    wire = [i for i, spec in enumerate(specs) if spec.gather_dim is not None]
    gathered = dict(zip(wire, distributed.gather_parts([parts[i] for i in wire], [specs[i] for i in wire], group)))
    w32 = whole.astype(np.float32)
    expected = _expected_parts(recipe, w32, states)
    bad = []
    for i, want in enumerate(expected):
        got = gathered.get(i, parts[i]).contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
        if got.tobytes() != np.ascontiguousarray(want).tobytes():
            bad.append(specs[i].name)
    return bad


def _expected_parts(recipe, w32, states):
    """mx.reference's compact parts of the whole tensor `w32` (input role)."""
    from mx import recipes, reference
    if recipe.per_tensor:
        # Delayed: the state's scale; current: x * (448 / amax); NaN: NaN everywhere; Inf: 448 / f32 max.
        # The col parts: the data transposed (cast+transposed shards, gathered along columns), the
        # same scale.
        if isinstance(recipe, recipes.Delayed):
            scales = states["forward"][0].cpu().numpy()
        else:
            amax = reference.amax(w32)
            scales = np.array([np.float32(448) / (np.finfo(np.float32).max if np.isinf(amax) else amax)],
                              np.float32)
        data, scale_inv, _ = reference.quantize_delayed(w32, scales, np.zeros((16, len(scales)), np.float32), 0)
        return [data, scale_inv, np.ascontiguousarray(data.T), scale_inv]
    parts = _block_quantize(recipe, "input", w32)
    # The transposed tensor quantized rowwise: also MXFP8's columnwise parts, written transposed
    # (NVFP4: the same tensor scale, the last part).
    parts[2:2] = _block_quantize(recipe, "input", np.ascontiguousarray(w32.T))[:2]
    return [_packed(np.asarray(p)) for p in parts]


def everything(rank, world, recipe, device):
    """One spawn per recipe: the FSDP2 runs (resharding after forward or not), the sequence-parallel
    run and the sharded quantize, and the keys of the plans they used (which `plans` must build)."""
    from mx.torch import _ops
    result = {"fsdp": fsdp(rank, world, recipe, device),
              "fsdp_kept": fsdp(rank, world, recipe, device, reshard=False) if recipe else None,
              "fsdp_resume": fsdp_resume(rank, world, recipe, device) if recipe else None,
              "sequence_parallel": sequence_parallel(rank, world, recipe, device) if recipe else None,
              "sequence_parallel_fused": sequence_parallel(rank, world, recipe, device, fused=True)
              if recipe in FUSED_RECIPES else None,
              "sharded_quantize": sharded_quantize(rank, world, recipe, device) if recipe else None}
    return result | {"plans": sorted(_ops._PLANS)}


def fails_on_last_rank(rank, world, device):
    """Raises on the last rank: launch must report it, although a rank that returns exits at once."""
    if rank == world - 1:
        raise RuntimeError(f"rank {rank} fails")
    return rank


def _run(rank, device, name, args):
    return globals()[name](rank, WORLD, *args, device.type)


def spawn(name, device, *args):
    """Runs `name(rank, WORLD, *args, device)` on WORLD spawned ranks (gloo on the CPU, NCCL on one
    GPU each); the results in rank order."""
    from mx.torch import distributed
    return distributed.launch(_run, WORLD, name, args, backend="gloo" if device == "cpu" else "nccl")
