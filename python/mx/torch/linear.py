"""mx.torch.Linear: a drop-in `torch.nn.Linear` whose forward and backward run on mx kernels.

The call path is Transformer Engine's: forward quantizes the input (rowwise, plus the orientation
wgrad reads when the weight needs a gradient) and the weight (cached until the weight changes), and
runs the fprop GEMM; backward quantizes the output gradient and runs dgrad and wgrad:

    fprop  Y [M, N]  = X [M, K]    . W [N, K]^T
    dgrad  dX [M, K] = dY [M, N]   . (W^T) [K, N]^T
    wgrad  dW [N, K] = (dY^T) [N, M] . (X^T) [K, M]^T

Each GEMM is one `mx.scaled_matmul` with K-contiguous operands: Hopper's FP8 tensor cores read
K-major operands only, so the transposed operands are written by the quantize itself (per-tensor
and delayed scaling: the cast+transpose kernel; MXFP8: the columnwise quantization written
transposed; FP8 blockwise's 1x128 activations and gradients: their 1x128 quantization along M written
transposed, from the tensor in place), also for row shards before their gather, or made from the
compact quantized parts (mx.linear) by byte transposes (128x128 blocks, and sharded per-tensor
tensors gathered for both usages at once: TensorPlan.col_parts). Every kernel is a torch custom op
(mx.torch._ops), so `torch.compile(fullgraph=True)` traces a model of these layers. Inputs and
weights on the CPU run on the CPU pipeline.

Delayed scaling keeps its scales and amax histories in buffers (`fp8_scale_forward`,
`amax_history_forward`, `fp8_scale_backward`, `amax_history_backward`), so `state_dict()` carries
them; the update runs once per step, at the end of backward, after the last cast of the step (so
FSDP2's weight cast before the next forward uses the new scales), preceded by the amax all-reduce
over `amax_group` when the recipe's `reduce_amax` is set.

With `parallel` = "column" or "row" and a process `group`, the layer is one rank's part of a
tensor-parallel pair with sequence parallelism (Megatron-LM's layout, mx.torch.parallel).

With `fuse_wgrad_accumulation` (Transformer Engine's and Megatron-LM's), backward adds dW to
`weight.main_grad`, an f32 [out_features, in_features] tensor that the user or the framework
allocated, in the wgrad GEMM's epilogue (mx.linear's "wgrad_acc"; a plain wgrad and a torch add where
the chip's GEMM takes no accumulator), and gives the weight no gradient (None: `weight.grad` stays
as it is, and torch's gradient accumulation kernel does not run). The GEMM writes a new buffer: in
eager mode `weight.main_grad` takes it (`Tensor.set_`: the same tensor object, no copy), so it must
own its storage; under torch.compile the custom op copies the sum into it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .. import recipes
from . import _ops, distributed
from ._ops import operand

_STATE_BUFFERS = {"forward": ("fp8_scale_forward", "amax_history_forward"),
                  "backward": ("fp8_scale_backward", "amax_history_backward")}


class Parallel:
    """How a layer's tensors are split over `group` (None: not at all). "column": the input is a
    row (token) shard that forward all-gathers quantized, dX is reduce-scattered back to it; "row":
    the output is reduce-scattered to a token shard, whose gradient backward all-gathers quantized."""

    def __init__(self, kind: str | None, group=None):
        if kind not in (None, "column", "row"):
            raise ValueError(f"parallel={kind!r} is not valid; expected None, 'column' or 'row'")
        if kind is not None and group is None:
            raise ValueError(f"parallel={kind!r} needs a process group (group=)")
        self.kind, self.group = kind, group
        self.size = distributed.world(group) if kind else 1

    @property
    def sharded_role(self) -> str | None:
        return {"column": "input", "row": "grad"}.get(self.kind)


def quantize(made, t: torch.Tensor, col: bool, states, amax_group, amax=None, scale=None) -> list[torch.Tensor]:
    """The compact parts of `t`, this rank's shard of `made` (a TensorPlan). A shard that shares
    the amax of the whole tensor takes `amax` (and per-tensor scaling's `scale`) when given
    (FSDP2's precomputed ones), else all-reduces its own over `amax_group`."""
    return quantize_and_sum(made, t, col, states, amax_group, amax, scale)[0]


def quantize_and_sum(made, t: torch.Tensor, col: bool, states, amax_group, amax=None, scale=None,
                     dbias: bool = False):
    """(quantize's parts, the column sum of `t` (f32 [cols]) if `dbias`, else None): a gradient's
    bias gradient, from the kernel that writes the col parts where it computes it (per-tensor and
    delayed scaling's cast+transpose), else from the plan's column-sum kernel."""
    if isinstance(made.recipe, recipes.Delayed):
        scales, history = _ops.delayed_state(states, made.role)
        return _ops.delayed_cast(made, t, scales, history, col and made.writes_transposed, dbias)
    if made.shares_amax:
        if amax is None:
            amax = distributed.all_reduce_max(_ops.amax(t, made.key), amax_group)
        parts = _ops.cast(t, amax, made.key, col, scale, dbias)
    else:
        parts = _ops.quantize(t, made.key, col, dbias)
    return (parts[:-1], parts[-1]) if dbias else (parts, None)


def _operands(made, parts, sides, parallel: Parallel):
    """GEMM operands of `made`'s tensor (a TensorPlan) for `sides` from this rank's parts,
    all-gathered first if the tensor is sharded: only the parts that `sides` read (the usage the
    next GEMM reads)."""
    if made.shards > 1:
        specs = made.parts(made.has_col(parts))
        wanted = [i for i in made.wire_parts(sides) if i < len(parts) and specs[i].gather_dim is not None]
        gathered = distributed.gather_parts([parts[i] for i in wanted], [specs[i] for i in wanted],
                                            parallel.group)
        parts = list(parts)
        for i, whole in zip(wanted, gathered):
            parts[i] = whole
    return [operand(made, parts, side) for side in sides]


def update_scales(made, states: dict, reduce_group) -> None:
    """Delayed scaling's update of every state, in one call: the amax rows all-reduced (max) over
    `reduce_group` first when there is one, then next scales and rotated histories."""
    scales, histories = zip(*states.values())
    if reduce_group is not None:
        rows = distributed.all_reduce_max(torch.cat([h[0] for h in histories]), reduce_group)
        for history, row in zip(histories, rows.split([h.shape[1] for h in histories])):
            history[0].copy_(row)
    _ops.update_states(made, histories, scales)


class _LinearFunction(torch.autograd.Function):
    """The step of one layer. `w_col` is the weight's transposed operand, or None where backward
    takes it from `weight.mx_parts` then (FSDP2 gathers only the usage each pass reads)."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, main_grad, w_row, w_col, states, key, parallel, amax_group,
                reduce_group):
        made = _ops._PLANS[key]
        need_wgrad = weight.requires_grad
        inputs = made.tensors["input"]
        x_parts = quantize(inputs, x2d, need_wgrad, states, amax_group)
        (x_row,) = _operands(inputs, x_parts, ("row",), parallel)
        # The bias in fprop's epilogue, unless the partial outputs are summed after it (row-parallel).
        fused = bias is not None and parallel.kind != "row" and "fprop_bias" in made.gemms and \
            _ops.mlir_type(bias) == made.weight_dtype
        y = _ops.gemm(x_row, w_row, key, "fprop", bias if fused else None)
        if parallel.kind == "row":
            y = distributed.reduce_scatter_rows(y, parallel.group)
        if bias is not None and not fused:
            y = y + bias.to(y.dtype)
        ctx.save_for_backward(*x_parts, *(w_col or ()))
        ctx.key, ctx.parallel, ctx.states, ctx.parts = key, parallel, states, len(x_parts)
        ctx.amax_group, ctx.reduce_group, ctx.has_bias = amax_group, reduce_group, bias is not None
        ctx.bias_dtype = bias.dtype if bias is not None else None
        ctx.weight = weight if w_col is None else None
        ctx.main_grad = main_grad  # the fused wgrad's accumulator
        return y

    @staticmethod
    def backward(ctx, dy):
        made, parallel = _ops._PLANS[ctx.key], ctx.parallel
        saved = ctx.saved_tensors
        x_parts, w_col = saved[:ctx.parts], saved[ctx.parts:]
        if ctx.weight is not None:
            w_col = operand(made.tensors["weight"], ctx.weight.mx_parts, "col")
        need_dgrad, need_wgrad = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grads = made.tensors["grad"]
        sides = ("row", "col") if need_wgrad else ("row",)
        # The bias gradient with the quantize where the plan has it (a layer with a bias).
        dbias = ctx.has_bias and ctx.needs_input_grad[2] and grads.column_sum
        g_parts, db = quantize_and_sum(grads, dy.contiguous(), grads.col_parts(sides), ctx.states,
                                       ctx.amax_group, dbias=dbias)
        g_ops = _operands(grads, g_parts, sides, parallel)
        dx = dw = None
        if need_dgrad:
            dx = _ops.gemm(g_ops[0], w_col, ctx.key, "dgrad")
            if parallel.kind == "column":
                dx = distributed.reduce_scatter_rows(dx, parallel.group)
        if need_wgrad:
            (x_col,) = _operands(made.tensors["input"], x_parts, ("col",), parallel)
            if ctx.main_grad is None:
                dw = _ops.gemm(g_ops[1], x_col, ctx.key, "wgrad")
            else:  # into the main gradient; the weight gets no gradient (Transformer Engine's convention)
                _ops.gemm_accumulate(g_ops[1], x_col, ctx.main_grad, ctx.key, "wgrad")
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy.sum(0) if db is None else db  # f32 from mx's kernels, summed before the cast
            if parallel.kind == "row":  # dY is a token shard: the bias gradient sums all of them
                torch.distributed.all_reduce(db, group=parallel.group)
            db = db.to(ctx.bias_dtype)
        if ctx.states:  # the step's last cast is done: next step's scales
            update_scales(made, ctx.states, ctx.reduce_group)
        return dx, dw, db, None, None, None, None, None, None, None, None


def _private_apply():
    """(torch's C++ apply of _LinearFunction, functorch's unwrap_if_dead, its transforms-active test):
    what _apply calls in eager mode, all three private to torch; None where this torch lacks one of
    them, and _apply then takes the public _LinearFunction.apply."""
    try:
        return (super(torch.autograd.Function, _LinearFunction).apply,  # torch._C._FunctionBase's
                torch._C._functorch.unwrap_if_dead, torch._C._are_functorch_transforms_active)
    except AttributeError:
        return None


_PRIVATE_APPLY = _private_apply()


def _apply(*args):
    """_LinearFunction.apply. In eager mode without functorch transforms, what it does there, less
    its Python (binding no defaults, since _LinearFunction has no setup_context; ~6 us a step on this
    machine's CPU, 2-3x that on the GPU machine's): its tensor arguments unwrapped where they are
    dead functorch wrappers, then torch's C++ apply. The public apply where torch's private
    entry points are missing (_private_apply) or do not apply (tracing, functorch transforms)."""
    if _PRIVATE_APPLY is None:
        return _LinearFunction.apply(*args)
    apply, unwrap_if_dead, transforms_active = _PRIVATE_APPLY
    if torch.compiler.is_compiling() or transforms_active():
        return _LinearFunction.apply(*args)
    return apply(*[unwrap_if_dead(a) if isinstance(a, torch.Tensor) else a for a in args])


class _WeightCache(NamedTuple):
    """A weight value's quantized operands in eager mode, and whether later forwards reuse them.
    Current scaling's (and the block recipes') are reusable at once: their scales come from the
    value itself. Delayed scaling casts with a scale made from earlier amaxes, so the first cast
    of a value uses a scale that has not seen it (the layer's initial 1, or the previous value's);
    the cast after the next update (`scales_version`, the version of the scales buffer at the
    first cast, which every update's `Tensor.set_` bumps) uses a scale made from this value's
    amax, and that one is reused, as Transformer Engine reuses a weight's cast between the
    micro-batches of a step. A reused cast records no amax (the weight's history entry stays 0,
    which the update's max and most-recent rules skip), and keeps its scale: never one that
    saturates the weight, since the window's max it came from is at least the weight's amax."""
    operands: tuple
    scales_version: int | None
    reusable: bool


class Linear(torch.nn.Linear):
    """`torch.nn.Linear` (same constructor, parameters and state dict, plus delayed scaling's
    buffers) computing in FP8, MXFP4 or NVFP4 with an mx recipe (an mx.recipes object or its
    shorthand). Inputs of any rank >= 2 are flattened to
    [tokens, in_features] (tokens first). `parallel`, `group`: mx.torch.parallel's layers;
    `amax_group`: where per-tensor current and delayed scaling reduce their amaxes (default
    `group`); `fuse_wgrad_accumulation`: dW is added to `weight.main_grad` (the module's header)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 *, recipe: str | recipes.Recipe = "mxfp8", parallel: str | None = None, group=None,
                 amax_group=None, fuse_wgrad_accumulation: bool = False):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe = recipes.get(recipe)
        self._delayed = isinstance(self.recipe, recipes.Delayed)  # asked at every step
        self._reduce_amax = getattr(self.recipe, "reduce_amax", False)
        self.fuse_wgrad_accumulation = bool(fuse_wgrad_accumulation)
        self._recipe_key = _ops.recipe_key(self.recipe)  # what traced code names it by
        self.parallel = Parallel(parallel, group)
        self.amax_group = amax_group if amax_group is not None else group
        # {key: weight operands}, one entry at most (a dict: updating it is no nn.Module.__setattr__,
        # microseconds at every training step)
        self._weight_cache = {}
        self._plan_keys = {}  # eager mode's plans (keys: copyable) by input rows, dtype, device, weight dtype
        self.reset_scaling_state(device)

    def reset_scaling_state(self, device=None) -> None:
        """Delayed scaling: fresh scales (1) and amax histories (zero) on `device`, as buffers."""
        if self._delayed:
            for state, (scales, history) in _ops.new_delayed_states(self.recipe.history_len, device).items():
                self.register_buffer(_STATE_BUFFERS[state][0], scales)
                self.register_buffer(_STATE_BUFFERS[state][1], history)

    def extra_repr(self) -> str:
        extra = f", parallel={self.parallel.kind}" if self.parallel.kind else ""
        extra += ", fuse_wgrad_accumulation=True" if self.fuse_wgrad_accumulation else ""
        return super().extra_repr() + f", recipe={self.recipe.key}" + extra

    def scaling_states(self) -> dict:
        """Delayed scaling's {state: (scales, history)} buffers; empty for the other recipes. (Read
        from `_buffers` itself: nn.Module's attribute fallback costs microseconds a buffer.)"""
        if not self._delayed:
            return {}
        buffers = self._buffers
        return {state: (buffers[scales], buffers[history]) for state, (scales, history) in _STATE_BUFFERS.items()}

    def _plan(self, x2d: torch.Tensor, weight: torch.Tensor):
        """The LinearPlan of this input; in eager mode looked up in the layer's own table after the
        first call (the checks and the plan's key cost more than the lookup)."""
        if torch.compiler.is_compiling():
            return self._new_plan(x2d, weight)
        key = (x2d.shape[0], x2d.dtype, x2d.device, weight.dtype)
        made = self._plan_keys.get(key)
        if made is None:
            made = self._plan_keys[key] = self._new_plan(x2d, weight).key
        return _ops._PLANS[made]

    def _new_plan(self, x2d: torch.Tensor, weight: torch.Tensor):
        dtypes = [_ops.mlir_type(t) if t.dtype.is_floating_point else None for t in (x2d, weight)]
        if any(d not in ("f32", "bf16", "f16") for d in dtypes):
            raise TypeError(f"mx.torch.Linear computes on float32, bfloat16 or float16; got input "
                            f"{x2d.dtype} and weight {weight.dtype}")
        size, kind = self.parallel.size, self.parallel.kind
        m = x2d.shape[0] * (size if kind == "column" else 1)
        shards = ((self.parallel.sharded_role, size),) if kind else ()
        return _ops.plan(m, self.in_features, self.out_features, self._recipe_key, *dtypes,
                         _ops.target_of(x2d), shards, self.fuse_wgrad_accumulation, self.bias is not None)

    def _main_grad(self, weight: torch.Tensor) -> torch.Tensor | None:
        """The fused wgrad's accumulator, `weight.main_grad`, checked; None where this forward's
        backward computes no weight gradient or the layer does not fuse."""
        if not (self.fuse_wgrad_accumulation and weight.requires_grad and torch.is_grad_enabled()):
            return None
        name = "mx.torch.Linear(fuse_wgrad_accumulation=True)"
        if getattr(weight, "mx_parts", None) is not None:
            raise ValueError(f"{name}: FSDP2 reduce-scatters the weight's .grad, which a fused wgrad "
                             "does not produce; use FSDP2 without fuse_wgrad_accumulation")
        main_grad = getattr(weight, "main_grad", None)
        shape = (self.out_features, self.in_features)
        expected = f"a float32 tensor of shape {list(shape)} on {weight.device}"
        if not isinstance(main_grad, torch.Tensor):
            raise ValueError(f"{name} needs weight.main_grad, {expected} that the user or the framework "
                             f"allocates (as for Transformer Engine); the weight has {type(main_grad).__name__}")
        if main_grad.dtype != torch.float32 or tuple(main_grad.shape) != shape or main_grad.device != weight.device:
            raise ValueError(f"{name}: weight.main_grad must be {expected}; got a {main_grad.dtype} tensor "
                             f"of shape {list(main_grad.shape)} on {main_grad.device}")
        if not torch.compiler.is_compiling() and (
                main_grad._base is not None or not main_grad.is_contiguous()
                or main_grad.untyped_storage().nbytes() != main_grad.numel() * 4):
            # Eager mode makes main_grad take the GEMM's result buffer (Tensor.set_): a view would
            # be detached from the storage it views (a flat buffer, as Megatron-LM's DDP allocates).
            raise ValueError(f"{name}: weight.main_grad must be a contiguous tensor owning all of its "
                             f"storage ({main_grad.numel() * 4} bytes), not a view into a larger buffer: the "
                             "fused wgrad replaces its storage with the GEMM's result (Tensor.set_)")
        if hasattr(weight, "grad_added_to_main_grad"):
            # Megatron-LM's flag (its gradient hook then adds no .grad). Set here, not in backward as
            # Transformer Engine does: a torch.compile graph cannot set an attribute in backward.
            weight.grad_added_to_main_grad = True
        return main_grad

    def _weight_operands(self, made, weight, states):
        """(row operand, col operand) of the weight. FSDP2's gathered weight brings its parts; its
        col operand, unless its col parts came with them, is made in backward (None): from the col
        parts that backward's re-gather brings, or from the rowwise parts still there when FSDP2
        kept the weight unsharded (TensorPlan.col_parts). Otherwise quantized once per weight value
        in eager mode (_WeightCache): the cache holds while the parameter's version (bumped by every
        in-place update, e.g. the optimizer's step) and storage stay the same."""
        plan = made.tensors["weight"]
        gathered = getattr(weight, "mx_parts", None)
        if gathered is not None:
            col = operand(plan, gathered, "col") if not plan.derives_col and gathered[2] is not None else None
            return operand(plan, gathered, "row"), col
        if torch.compiler.is_compiling():
            return self._cast_weight(plan, weight, states)
        key = (weight._version, weight.data_ptr(), made.key)
        scales = _ops.delayed_state(states, "weight")[0] if self._delayed else None
        entry = self._weight_cache.get(key)
        if entry is not None and entry.reusable:
            return entry.operands
        operands = self._cast_weight(plan, weight, states)
        if entry is None:
            entry = _WeightCache(operands, scales._version if scales is not None else None,
                                 reusable=scales is None)
        else:  # delayed: reusable once an update has made its scale from this value's amax
            entry = entry._replace(operands=operands, reusable=scales._version != entry.scales_version)
        self._weight_cache.clear()
        self._weight_cache[key] = entry
        return operands

    def _cast_weight(self, plan, weight, states):
        """(row operand, col operand) of the weight, quantized now."""
        parts = quantize(plan, weight.detach(), True, states, self.amax_group)
        return operand(plan, parts, "row"), operand(plan, parts, "col")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"mx.torch.Linear expects [..., {self.in_features}] inputs, got {tuple(x.shape)}")
        # A 2-D input is not reshaped: reshape would alias it, a view whose backward node the
        # autograd engine would then run at every step (and so for the output).
        flat = x.dim() == 2
        x2d = (x if flat else x.reshape(math.prod(x.shape[:-1]), self.in_features)).contiguous()
        # The parameters from _parameters, where nn.Module.__getattr__ finds them too, less its
        # Python (~0.6 us an attribute on this machine's CPU); a parametrization moves them out.
        parameters = self._parameters
        weight = parameters["weight"] if "weight" in parameters else self.weight
        bias = parameters["bias"] if "bias" in parameters else self.bias
        states = self.scaling_states()
        made = self._plan(x2d, weight)
        w_row, w_col = self._weight_operands(made, weight, states)
        reduce_group = self.amax_group if self._reduce_amax else None
        y = _apply(x2d, weight, bias, self._main_grad(weight), w_row, w_col, states,
                   made.key, self.parallel, self.amax_group, reduce_group)
        # Tokens are split along the first dimension (sequence first, as Megatron-LM lays them out).
        return y if flat else y.reshape(-1, *x.shape[1:-1], self.out_features)
