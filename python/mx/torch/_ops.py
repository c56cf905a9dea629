"""The kernels of mx.linear's plans as torch custom ops (`torch.ops.mx.*`), with fake implementations.

Each op names its plan by key (a string, so that the op has a schema and torch.compile can put it in a
graph); `plan()` builds a plan once and registers it under its key. The fake implementations take
their shapes and dtypes from the plan (`LinearPlan.parts`), so tracing with fake tensors runs no
kernel. On CPU tensors the kernels are the CPU pipeline's (numpy in and out, converted here through
the bits), which is how mx.torch runs, and is tested, without a GPU.

    mx::quantize(x, plan, col, dbias) -> [parts]         compact parts of a shard (TensorPlan.parts)
    mx::amax(x, plan) -> amax                            per-tensor current scaling (and NVFP4's tensor
    mx::cast(x, amax, plan, col, dbias) -> [parts]       scale) of a shard: the cast with the shared
                                                         (all-reduced) amax
    mx::quantize_delayed(x, scales, history!, plan) -> (data, scales)
    mx::cast_transpose_delayed(x, scales, history!, plan) -> (data, scales, transposed data)
    mx::cast_transpose_delayed_dbias(x, scales, history!, plan) -> (..., column sum)
    mx::column_sum(x, plan) -> [cols] f32                the bias gradient, by a kernel of its own

With `dbias` (a gradient's plan with a bias: TensorPlan.column_sum) the quantize ops also return the
column sum of x (f32 [cols], last), from the kernel that writes the col parts where it computes it
(TensorPlan.fuses_column_sum), else from the plan's "dbias" kernel.
    mx::update_amax_history(histories!, scales!, plan)   every state at once
    mx::gemm(a, b, plan, name, bias?) -> c               one of mx.linear.GEMMS; an operand is [data,
                                                         scales] (and NVFP4's tensor scale); + bias: fused
    mx::gemm_accumulate(a, b, out!, plan, name)          out (f32) += a . b^T: the main gradient, fused
    mx::transpose_bytes(t) -> t^T                        FP8 bytes, for the derived transposed
                                                         operands (128x128 blocks; a sharded
                                                         per-tensor tensor gathered for both
                                                         usages at once: TensorPlan.col_parts)

`operand` turns compact parts into a GEMM operand (after any gather); it is plain torch, so a
quantize that writes GEMM-ready operands itself changes only it.

mx.torch calls the module's functions (`_ops.quantize(...)`), not `torch.ops.mx.*`: while torch.compile
traces they are the registered ops, in eager mode the implementations themselves (`_custom_op`).
Delayed scaling's casts and update go through `delayed_cast` and `update_states`, which pick the op
(of the three delayed casts, the one the cast needs) while tracing and call the shared implementation
directly in eager mode.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
import torch

from .. import compiler, formats, ops, recipes, reference
from ..linear import DELAYED_SLOTS, DELAYED_STATES, DequantizedGemm, LinearPlan, TensorPlan

Tensor = torch.Tensor
_PLANS: dict[str, LinearPlan | TensorPlan] = {}  # by key: what the ops' `plan` arguments name
_BY_ARGUMENTS: dict[tuple, LinearPlan | TensorPlan] = {}


_RECIPES: dict[str, recipes.Recipe] = {}  # by key: the recipes plans were asked for


def recipe_key(recipe: recipes.Recipe) -> str:
    """The recipe's key, which names it to `plan` and `tensor_plan` (registered)."""
    return _RECIPES.setdefault(recipe.key, recipe).key


@torch.compiler.assume_constant_result
def _registered(kind, *arguments) -> str:
    """The key of the plan `kind(*arguments)` (the recipe given by its key), built and registered
    on first use. A constant to torch.compile: tracing calls it and keeps the key (the kernels
    compile then, not in a graph)."""
    key = (kind, *arguments)
    if key not in _BY_ARGUMENTS:
        made = kind(*(_RECIPES.get(a, a) if isinstance(a, str) else a for a in arguments))
        _BY_ARGUMENTS[key] = _PLANS[made.key] = made
        for part in getattr(made, "tensors", {}).values():
            _PLANS[part.key] = part
    return _BY_ARGUMENTS[key].key


def plan(m: int, k: int, n: int, recipe: recipes.Recipe | str, dtype: str, weight_dtype: str, target: str,
         shards: tuple[tuple[str, int], ...] = (), wgrad_accumulation: bool = False,
         bias: bool = False) -> LinearPlan:
    """The LinearPlan of these shapes (built, its kernels compiled, on first use), registered;
    `recipe` a recipe or (in traced code) its recipe_key."""
    key = recipe if isinstance(recipe, str) else recipe_key(recipe)
    return _PLANS[_registered(LinearPlan, m, k, n, key, dtype, weight_dtype, target, tuple(shards),
                              wgrad_accumulation, bias)]


def tensor_plan(role: str, rows: int, cols: int, wide: str, recipe: recipes.Recipe | str, target: str,
                shards: int = 1) -> TensorPlan:
    """The TensorPlan of one role's tensor (FSDP2's weight shards), registered."""
    key = recipe if isinstance(recipe, str) else recipe_key(recipe)
    return _PLANS[_registered(TensorPlan, role, rows, cols, wide, key, target, shards)]


def torch_dtype(mlir_type: str) -> torch.dtype:
    return getattr(torch, compiler.TORCH_DTYPES[mlir_type][0])


# uint8 carries several types (FP8 bytes, packed FP6): it names none.
_MLIR_TYPES = {getattr(torch, torch_name): name for torch_name, name in formats.TORCH_NAMES.items()
               if hasattr(torch, torch_name)}


def mlir_type(tensor: Tensor) -> str:
    """The MLIR element type of a torch tensor (of any subclass: FSDP2's weights are)."""
    if tensor.dtype not in _MLIR_TYPES:
        raise TypeError(f"torch dtype {tensor.dtype} is not an mx element type")
    return _MLIR_TYPES[tensor.dtype]


def target_of(tensor: Tensor) -> str:
    """The mx target computing on `tensor`: the CPU pipeline, or the chip of its GPU."""
    return ops._target_of([tensor], None)


_CARRIERS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def _to_torch(array: np.ndarray) -> Tensor:
    """A CPU kernel's numpy result as a torch tensor with the same bits (packed types packed, as
    torch and the GPU hold them)."""
    fmt = formats.BY_DTYPE[array.dtype]
    dtype = fmt.name
    if fmt.packed:
        array = fmt.pack(array)
    carrier = {1: np.uint8, 2: np.int16, 4: np.int32}[array.dtype.itemsize]
    bits = np.ascontiguousarray(array).view(carrier).reshape(array.shape)  # 0-D stays 0-D
    return torch.from_numpy(bits).view(torch_dtype(dtype))


def _call(kernel: compiler.Kernel, *args: Tensor) -> list[Tensor]:
    """The kernel's results; the arguments it updates in place (its signature's `updated`) take
    their new values."""
    if kernel.target != "cpu":
        return kernel.run(*args)
    # numpy views of a clone (a tensor shared with numpy can no longer be resized: FSDP2 does), but
    # of the arguments themselves where the kernel updates them
    updated = kernel.signature.updated
    hosts = [ops._host(a if i in updated else a.clone(), mlir_type(a)) for i, a in enumerate(args)]
    results = kernel.run(*hosts)
    for i in updated:
        if not args[i].is_contiguous():  # the kernel updated a contiguous copy
            args[i].copy_(_to_torch(hosts[i]))
    return [_to_torch(r) for r in results]


def _custom_op(name: str, mutates_args=()):
    """Registers the decorated function as the torch custom op mx::`name` and returns what mx.torch
    calls: the registered op while torch.compile traces (the graph holds the op, its fake runs), the
    function itself in eager mode. Eager mode needs none of torch's custom-op dispatch (mx.torch's
    autograd is its own autograd.Function), which took about two thirds of an mx.torch.Linear
    step's host time on the H100 machine (cProfile, bench/RESULTS.md): enough to leave the GPU idle
    between kernels at M x K x N = 8192 x 4096 x 4096.

    A kernel either updates an argument in place itself (its signature's `updated`: delayed
    scaling's casts record their amax in the history) or returns its new value in a new buffer. An
    op with `mutates_args` is written `fn(store, *args)`, calling `store(argument, new value)` for
    the latter: the registered op copies the value into the argument (functionalization expects
    the argument's memory mutated), eager mode makes the argument take the kernel's buffer
    (`Tensor.set_`: the same tensor object, a module's buffer say, and no copy kernel)."""
    def register(fn):
        implementation = fn
        if mutates_args:
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def implementation(*args, **kwargs):
                return fn(Tensor.copy_, *args, **kwargs)
            implementation.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
        op = torch.library.custom_op(f"mx::{name}", mutates_args=mutates_args)(implementation)
        eager = functools.partial(fn, Tensor.set_) if mutates_args else fn

        @functools.wraps(implementation)
        def call(*args, **kwargs):
            if torch.compiler.is_compiling():
                return op(*args, **kwargs)
            return eager(*args, **kwargs)

        call.register_fake = op.register_fake
        return call
    return register


def _empty(x: Tensor, shape, mlir: str) -> Tensor:
    """A fake result of logical `shape` (packed types hold fewer bytes than elements)."""
    shape = formats.get(mlir).stored_shape(tuple(shape))
    return torch.empty(shape, dtype=torch_dtype(mlir), device=x.device)


# ---------------------------------------------------------------------------------------------------
# Quantize
# ---------------------------------------------------------------------------------------------------

def _with_column_sum(made: TensorPlan, x: Tensor, parts: list[Tensor], sums: list[Tensor],
                     dbias: bool) -> list[Tensor]:
    """A quantize kernel's `parts`, with the column sum of x last where `dbias` asks for it: `sums`,
    the kernel's results after its parts ([the sum] where it computed it, TensorPlan.fuses_column_sum;
    dropped without `dbias`, as a layer whose bias takes no gradient asks), else the "dbias"
    kernel's."""
    if dbias:
        parts.append(sums[0] if sums else _column_sum(made, x))
    return parts


def _column_sum(made: TensorPlan, x: Tensor) -> Tensor:
    return _call(made.kernels["dbias"], x)[0]


@_custom_op("quantize")
def quantize(x: Tensor, plan: str, col: bool, dbias: bool = False) -> list[Tensor]:
    """The compact parts of `x` (a TensorPlan's tensor or shard), with the col parts if `col`, and
    its column sum last if `dbias`."""
    made = _PLANS[plan]
    kernels = made.kernels
    if "both" in kernels and col:  # the rowwise parts and the transposed ones, from x in place
        results = _call(kernels["both"], x)
        count = len(made.parts(True))
        return _with_column_sum(made, x, results[:count], results[count:], dbias)
    parts = _call(kernels["row"], x)
    if col and "col" in kernels:  # FP4: the transposed shard quantized rowwise
        parts[2:2] = _transposed_parts(kernels["col"], x)
    return _with_column_sum(made, x, parts, [], dbias)


def _transposed_parts(kernel: compiler.Kernel, x: Tensor, *amax: Tensor) -> list[Tensor]:
    """(data, scales) of x^T quantized rowwise; NVFP4's tensor scale, the same as x's (the same
    amax), is left out: the rowwise quantize's serves both."""
    return _call(kernel, x.t().contiguous(), *amax)[:2]


@quantize.register_fake
def _(x, plan, col, dbias=False):
    return _fake_parts(x, plan, col, dbias)


@_custom_op("amax")
def amax(x: Tensor, plan: str) -> Tensor:
    """max |x| (f32, NaN if any NaN; NVFP4: of the finite elements), shaped [1, 1]."""
    return _call(_PLANS[plan].kernels["amax"], x)[0].reshape(1, 1)


@amax.register_fake
def _(x, plan):
    return x.new_empty((1, 1), dtype=torch.float32)


def current_scale(amax: Tensor, elem: str) -> Tensor:
    """The cast scales of per-tensor current scaling from the amaxes of whole tensors (any shape ->
    [n]: [1, 1] -> [1]), Transformer Engine's maxfinite / amax in f32, with the spec's special
    tensors: amax 0 gives 1 (zeros stay zeros), NaN gives NaN (every element NaN), Inf gives
    maxfinite / f32 max (finite elements to zero, infinities saturated)."""
    maxfinite = reference.max_finite(elem)
    amax = amax.reshape(-1)
    scale = torch.where(torch.isinf(amax), maxfinite / torch.finfo(torch.float32).max, maxfinite / amax)
    return torch.where(amax == 0, 1.0, scale).to(torch.float32)


@_custom_op("cast")
def cast(x: Tensor, amax: Tensor, plan: str, col: bool, scale: Tensor | None = None,
         dbias: bool = False) -> list[Tensor]:
    """The compact parts of the shard `x` with `amax` [1, 1] of the whole tensor: per-tensor
    (data, scales) cast with `scale` [1] (default current_scale(amax); FSDP2's weights bring theirs,
    computed for all weights at once), and with `col` the transposed data written by the same
    kernel and its scales (the same); NVFP4's parts (the col ones if `col`) quantized with that
    amax (the tensor scale derived from it). The column sum of x last if `dbias`."""
    made = _PLANS[plan]
    if made.recipe.tensor_scaled:
        parts = _call(made.kernels["cast"], x, amax.reshape(()))
        if col:
            parts[2:2] = _transposed_parts(made.kernels["col_cast"], x, amax.reshape(()))
        return _with_column_sum(made, x, parts, [], dbias)
    if scale is None:
        scale = current_scale(amax, made.recipe.element(made.role))
    # The cast is mx.quantize_delayed of one slot; the history it records the amax in is not kept.
    history = _zero_history(x.device)
    if col and made.writes_transposed:  # cast+transpose of the shard: [cols, rows] data, same scale
        data, scale_inv, data_t, _, *sums = _call(made.kernels["cast_both"], x, scale, history)
        return _with_column_sum(made, x, [data, scale_inv, data_t, scale_inv], sums, dbias)
    data, scale_inv, _ = _call(made.kernels["cast"], x, scale, history)
    return _with_column_sum(made, x, [data, scale_inv], [], dbias)


@cast.register_fake
def _(x, amax, plan, col, scale=None, dbias=False):
    return _fake_parts(x, plan, col, dbias)


_ZERO_HISTORIES: dict[torch.device, Tensor] = {}


def _zero_history(device: torch.device) -> Tensor:
    """A [1, 1] f32 zero on `device`, made once: the history operand of a cast, which the kernels
    read and never write (their history argument is not `mx.updated`: they return a new one)."""
    history = _ZERO_HISTORIES.get(device)
    if history is None:
        history = _ZERO_HISTORIES[device] = torch.zeros((1, 1), dtype=torch.float32, device=device)
    return history


def _delayed(store, made: TensorPlan, x: Tensor, scales: Tensor, history: Tensor, col: bool,
             dbias: bool) -> tuple[list[Tensor], Tensor | None]:
    """(compact parts, column sum of x if `dbias`) of `x` cast with its delayed scale, with the col
    parts (the transposed data from the same kernel, "delayed_both"; the col scales are the same
    scales) if `col`: the ops' implementation. The kernel records the amax in `history` itself where
    it updates it in place (its signature's `updated`: TensorPlan's delayed kernels), else returns
    the new history after the parts, which is then stored. The column sum comes from the
    cast+transpose kernel where it computes it (TensorPlan.fuses_column_sum), else from "dbias"."""
    kernel = made.kernels["delayed_both" if col else "delayed"]
    results = _call(kernel, x, scales, history)
    count = 2 + col
    if 2 not in kernel.signature.updated:
        store(history, results.pop(count))
    parts = results[:count]
    if col:
        parts.append(parts[1])
    if not dbias:
        return parts, None
    return parts, results[count] if len(results) > count else _column_sum(made, x)


def delayed_cast(made: TensorPlan, x: Tensor, scales: Tensor, history: Tensor, col: bool,
                 dbias: bool = False) -> tuple[list[Tensor], Tensor | None]:
    """What mx.torch calls for a delayed cast: `_delayed`'s (parts, column sum or None). While
    torch.compile traces, through the ops (quantize_delayed and column_sum; cast_transpose_delayed or
    its _dbias form); in eager mode `_delayed` itself, with `Tensor.set_` as the ops' eager store: the
    same kernels, without the layers of the ops' calls (a step of delayed scaling is host-bound)."""
    if not torch.compiler.is_compiling():
        return _delayed(Tensor.set_, made, x, scales, history, col, dbias)
    if col and dbias:
        data, scale_inv, data_t, sums = cast_transpose_delayed_dbias(x, scales, history, made.key)
        return [data, scale_inv, data_t, scale_inv], sums
    if col:
        data, scale_inv, data_t = cast_transpose_delayed(x, scales, history, made.key)
        return [data, scale_inv, data_t, scale_inv], None
    parts = list(quantize_delayed(x, scales, history, made.key))
    return parts, column_sum(x, made.key) if dbias else None


@_custom_op("quantize_delayed", mutates_args=("history",))
def quantize_delayed(store, x: Tensor, scales: Tensor, history: Tensor, plan: str) -> tuple[Tensor, Tensor]:
    """(data, scales) of `x` cast with its delayed scale; records its amax in `history`. (A tuple:
    functionalization takes no list result from an op that mutates.)"""
    data, scale_inv = _delayed(store, _PLANS[plan], x, scales, history, False, False)[0]
    return data, scale_inv


@quantize_delayed.register_fake
def _(x, scales, history, plan):
    return tuple(_fake_parts(x, plan, False))


@_custom_op("cast_transpose_delayed", mutates_args=("history",))
def cast_transpose_delayed(store, x: Tensor, scales: Tensor, history: Tensor,
                           plan: str) -> tuple[Tensor, Tensor, Tensor]:
    """quantize_delayed, plus the transposed data (the GEMM-ready col_data) from the same kernel;
    the col_scales are the same scales."""
    return tuple(_delayed(store, _PLANS[plan], x, scales, history, True, False)[0][:3])


@cast_transpose_delayed.register_fake
def _(x, scales, history, plan):
    return tuple(_fake_parts(x, plan, True)[:3])


@_custom_op("cast_transpose_delayed_dbias", mutates_args=("history",))
def cast_transpose_delayed_dbias(store, x: Tensor, scales: Tensor, history: Tensor,
                                 plan: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """cast_transpose_delayed and the column sum of x (f32 [cols]): a gradient's bias gradient, from
    the same kernel (TensorPlan.fuses_column_sum). An op of its own: an op that mutates returns a
    tuple of fixed length."""
    parts, sums = _delayed(store, _PLANS[plan], x, scales, history, True, True)
    return (*parts[:3], sums)


@cast_transpose_delayed_dbias.register_fake
def _(x, scales, history, plan):
    return tuple(_fake_parts(x, plan, True, True)[:3]) + (_fake_column_sum(x),)


@_custom_op("column_sum")
def column_sum(x: Tensor, plan: str) -> Tensor:
    """The column sum of x (f32 [cols]) by the plan's "dbias" kernel: the bias gradient where no
    quantize of x computes it."""
    return _column_sum(_PLANS[plan], x)


@column_sum.register_fake
def _(x, plan):
    return _fake_column_sum(x)


def _fake_column_sum(x: Tensor) -> Tensor:
    return x.new_empty((x.shape[1],), dtype=torch.float32)


def _fake_parts(x: Tensor, plan: str, col: bool, dbias: bool = False) -> list[Tensor]:
    parts = [_empty(x, spec.shape, spec.dtype) for spec in _PLANS[plan].parts(col)]
    return parts + [_fake_column_sum(x)] * dbias


def _update(store, made: LinearPlan, histories, scales) -> None:
    """Delayed scaling's once-per-step update of every state (the histories and scales of
    DELAYED_STATES, in order), in one call of the plan's update: next scales, rotated histories,
    each stored in its argument."""
    state = [t for pair in zip(histories, scales) for t in pair]
    for tensor, new in zip(state, _call(made.update, *state)):
        store(tensor, new)


def update_states(made: LinearPlan, histories, scales) -> None:
    """What mx.torch calls for the update: the op update_amax_history while torch.compile traces, in
    eager mode its implementation `_update` with `Tensor.set_` (the layer's buffers take the new
    values: the same buffer objects, no copy kernel)."""
    if torch.compiler.is_compiling():
        update_amax_history(list(histories), list(scales), made.key)
    else:
        _update(Tensor.set_, made, histories, scales)


@_custom_op("update_amax_history", mutates_args=("histories", "scales"))
def update_amax_history(store, histories: list[Tensor], scales: list[Tensor], plan: str) -> None:
    """Delayed scaling's once-per-step update of every state (`_update`)."""
    _update(store, _PLANS[plan], histories, scales)


@update_amax_history.register_fake
def _(histories, scales, plan):
    return None


# ---------------------------------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------------------------------

@_custom_op("gemm")
def gemm(a: list[Tensor], b: list[Tensor], plan: str, name: str, bias: Tensor | None = None) -> Tensor:
    """a . b^T of two GEMM operands ([rows, K] data, scales, and NVFP4's tensor scale) of one of
    the plan's GEMMs; with `bias` (of the weight's dtype, where the plan has the GEMM's "_bias"
    kernel) added in the GEMM's epilogue."""
    if bias is not None:
        return _call(_PLANS[plan].gemms[name + "_bias"], *a[:2], *b[:2], *a[2:], *b[2:], bias)[0]
    kernel = _PLANS[plan].gemms[name]
    if isinstance(kernel, DequantizedGemm):
        # NVFP4: dequantized with tensor scale 1 (exact), the tensor scales' product multiplies
        # the result, as cuBLASLt's alpha.
        unit = [torch.ones((), dtype=torch.float32, device=a[0].device)] * (len(a) > 2)
        c = _call(kernel.lhs, *a[:2], *unit)[0] @ _call(kernel.rhs, *b[:2], *unit)[0].t()
        return (c.float() * (a[2] * b[2])).to(c.dtype) if unit else c
    return _call(kernel, *a[:2], *b[:2], *a[2:], *b[2:])[0]


@gemm.register_fake
def _(a, b, plan, name, bias=None):
    made = _PLANS[plan]
    dtype = made.weight_dtype if name == "wgrad" else made.dtype
    return a[0].new_empty((a[0].shape[0], b[0].shape[0]), dtype=torch_dtype(dtype))


@_custom_op("gemm_accumulate", mutates_args=("out",))
def gemm_accumulate(store, a: list[Tensor], b: list[Tensor], out: Tensor, plan: str, name: str) -> None:
    """`out` (f32, [rows of a, rows of b]) += a . b^T for one of the plan's GEMMs (wgrad into a
    main gradient): in the GEMM's epilogue where the plan has its "_acc" kernel (one read of `out`,
    the sum rounded once to f32), else the plain GEMM (rounded to its result type) added by torch."""
    fused = _PLANS[plan].gemms.get(name + "_acc")
    if fused is not None:
        total = _call(fused, *a[:2], *b[:2], *a[2:], *b[2:], out)[0]
    else:
        total = out + gemm(a, b, plan, name)
    store(out, total)


@gemm_accumulate.register_fake
def _(a, b, out, plan, name):
    return None


# ---------------------------------------------------------------------------------------------------
# Compact parts -> GEMM operands, and the per-role quantize of one tensor
# ---------------------------------------------------------------------------------------------------

@_custom_op("transpose_bytes")
def transpose_bytes(t: Tensor) -> Tensor:
    """t^T (2-D), contiguous, copied as bytes (FP8 data and E8M0 scales). An op of its own so that
    compilers copy bytes and need not know the FP8 and E8M0 dtypes (Inductor's CPU code does not)."""
    return t.view(torch.uint8).t().contiguous().view(t.dtype)


@transpose_bytes.register_fake
def _(t):
    return t.new_empty((t.shape[1], t.shape[0]))


def operand(made: TensorPlan, parts: list[Tensor], side: str) -> tuple[Tensor, ...]:
    """The GEMM operand (data, scales[, tensor scale]) [rows, K] of a tensor from its (gathered)
    compact parts: "row" is the tensor as it is, "col" its transpose. NVFP4's tensor scale, the
    last part, serves both."""
    tensor_scale = (parts[-1],) if made.recipe.tensor_scaled else ()
    if side == "row":
        return parts[0], parts[1], *tensor_scale
    if len(parts) == 4 + len(tensor_scale) and parts[2] is not None:
        # Written transposed by the quantize (GEMM-ready), or the transposed tensor quantized rowwise.
        return parts[2], parts[3], *tensor_scale
    if not made.col_derivable:
        raise ValueError(f"mx.torch: the {made.role}'s transposed operand needs its col parts")
    # 128x128 blocks, or one scale gathered rowwise only (TensorPlan.col_parts): transpose what is there.
    return transpose_bytes(parts[0]), parts[1].t().contiguous()


def delayed_state(states: dict[str, tuple[Tensor, Tensor]], role: str) -> tuple[Tensor, Tensor]:
    """The (scales, history) of the delayed-scaling state that `role` belongs to."""
    return states[DELAYED_SLOTS[role][0]]


def new_delayed_states(history_len: int, device=None) -> dict[str, tuple[Tensor, Tensor]]:
    """Fresh delayed-scaling states: scales 1, zero histories."""
    return {state: (torch.ones(slots, dtype=torch.float32, device=device),
                    torch.zeros(history_len, slots, dtype=torch.float32, device=device))
            for state, slots in DELAYED_STATES.items()}
