"""mx.torch.fsdp: FSDP2 (`fully_shard`) all-gathering the weights of mx.torch.Linear layers quantized.

    mx.torch.convert(model, "per_tensor")
    mx.torch.fsdp.quantize_all_gather(model)          # before fully_shard
    for layer in model.layers: fully_shard(layer)
    fully_shard(model)
    ...
    optimizer.step()
    mx.torch.fsdp.precompute_scales(model)             # per-tensor, NVFP4: one all-reduce for all weights

`quantize_all_gather` wraps each mx.torch.Linear's weight in a `ShardedWeight`, a tensor subclass that
holds the high-precision tensor (what the optimizer updates and the checkpoint saves) and implements
FSDP2's all-gather extension (torch.distributed.fsdp's `fsdp_pre_all_gather` / `fsdp_post_all_gather`):
* before the gather, each rank quantizes its shard (rows of the weight) in the layer's recipe, to the
  compact format of spec section 12: FP8 or E2M1 data and E8M0, E4M3 or f32 scales. Per-tensor
  current scaling casts, and NVFP4 derives its tensor scale, with the amax of the whole weight
  (all-reduced, or precomputed for every weight at once by `precompute_scales`; the tensor scale,
  the same on every rank, does not travel); delayed scaling with the layer's delayed scale,
  identical on every rank;
* only the usage the next GEMM reads crosses the wire (TensorPlan.wire_parts): the rowwise parts in
  forward, the col parts when backward gathers again (MXFP8's columnwise quantization; per-tensor and
  delayed scaling's transposed shard, [cols, rows / world], cast+transposed with the rowwise cast's
  scale). When FSDP2 keeps the weight unsharded after forward, forward gathers both usages, except
  where the transposed operand derives from the rowwise bytes (per-tensor, delayed, 128x128): those
  gather the rowwise parts only (one usage's bytes, not two) and backward transposes them;
* after the gather, the unsharded parameter is a `GatheredWeight` carrying the parts (`mx_parts`):
  parts of row shards concatenated along rows, transposed ones along columns (one copy after
  FSDP2's gather, which concatenates along rows). The layer reads its GEMM operands from them (a byte
  transpose only where derived; the scale swizzle is in the GEMM).

The gathered bytes are what the single-GPU layer would quantize from the whole weight, bit for bit,
for the block-local recipes, NVFP4 and delayed scaling; per-tensor current scaling casts with
maxfinite / amax there (docs/torch.md). Weight shards must hold a multiple of the recipe's rows
(32 for MXFP8, 128 for blockwise, 16 for per-tensor); FSDP2 must not pad them.
"""

from __future__ import annotations

import inspect
import weakref

import torch
from torch.utils._pytree import tree_map_only

from . import _ops, distributed
from .linear import Linear, quantize

aten = torch.ops.aten
# Ops FSDP2 applies to a sharded parameter that must keep it a ShardedWeight.
_PRESERVED = {aten.empty_like.default, aten.new_zeros.default, aten.slice.Tensor, aten.copy_.default,
              aten.view.default, aten.as_strided.default, aten._to_copy.default, aten.split.Tensor,
              aten.clone.default, aten.detach.default, aten.alias.default, aten.chunk.default,
              aten._pin_memory.default, aten.new_empty_strided.default}


def _sides(plan, module) -> tuple[str, ...]:
    """The operands the next GEMMs read: the row one (fprop), or the col one in backward (dgrad),
    or both when FSDP2 keeps the weight for backward (no re-gather). Which parts they need is
    TensorPlan.wire_parts'."""
    if torch._C._current_graph_task_id() != -1:  # gathered for the backward pass
        return ("col",)
    state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
    group = state._fsdp_param_group if state is not None else None
    reshards = group is None or group.post_forward_mesh_info is not None
    return ("row",) if reshards else ("row", "col")


class ShardedWeight(torch.Tensor):
    """The weight of an mx.torch.Linear under FSDP2: the high-precision tensor (`_tensor`) and its
    layer (recipe and scaling state), all-gathered quantized."""

    @staticmethod
    def __new__(cls, tensor: torch.Tensor, layer):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype, layout=tensor.layout, device=tensor.device,
            requires_grad=tensor.requires_grad)

    def __init__(self, tensor: torch.Tensor, layer):
        self._tensor = tensor
        self._layer = layer if isinstance(layer, weakref.ref) else weakref.ref(layer)
        self._amax = None  # (weight version, amax [1, 1], cast scale [1] or None) from precompute_scales
        self._plans = {}  # by (rows, cols, world): see _plan

    def __repr__(self) -> str:
        return f"ShardedWeight({self._tensor!r})"

    def __reduce_ex__(self, protocol):
        """Pickled (torch.save of a state dict) as the high-precision tensor it holds: a checkpoint
        holds plain weights, and load_state_dict copies them back into the ShardedWeight."""
        return self._tensor.__reduce_ex__(protocol)

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __tensor_flatten__(self):
        return ["_tensor"], self._layer

    @staticmethod
    def __tensor_unflatten__(inner, layer, outer_size, outer_stride):
        return ShardedWeight(inner["_tensor"], layer)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        layer = next(a._layer for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, cls))
        args, kwargs = tree_map_only(cls, lambda t: t._tensor, (args, kwargs or {}))
        out = func(*args, **kwargs)
        if func not in _PRESERVED:
            return out
        return tree_map_only(torch.Tensor, lambda t: cls(t, layer), out)

    def _plan(self, rows: int, cols: int, world: int):
        """(layer, TensorPlan of the whole weight's shards); the plan looked up once per shape."""
        layer = self._layer()
        made = self._plans.get((rows, cols, world))
        if made is None:
            made = self._plans[rows, cols, world] = _ops.tensor_plan(
                "weight", rows, cols, _ops.mlir_type(self._tensor), layer.recipe, _ops.target_of(self._tensor),
                world)
        return layer, made

    def fsdp_pre_all_gather(self, mesh, outer_size, outer_stride, module, mp_policy):
        group = mesh.get_group()
        layer, plan = self._plan(outer_size[0], outer_size[1], mesh.size())
        wanted = plan.wire_parts(_sides(plan, module))
        fresh = self._amax is not None and self._amax[0] == self._tensor._version
        amax, scale = self._amax[1:] if fresh else (None, None)
        parts = plan.full(quantize(plan, self._tensor.contiguous(), 2 in wanted, layer.scaling_states(), group,
                                   amax, scale))
        specs = plan.parts(True)
        wire = tuple(i for i in wanted if specs[i].gather_dim is not None)
        # Parts that are the same on every rank (a per-tensor scale, NVFP4's tensor scale) travel
        # as metadata.
        local = {i: parts[i] for i in wanted if i not in wire}
        return tuple(parts[i].view(torch.uint8) for i in wire), (wire, local, plan.key)

    def fsdp_post_all_gather(self, outputs, metadata, param_dtype, *, out=None):
        wire, local, key = metadata
        plan = _ops._PLANS[key]
        specs = plan.parts(True)
        parts = [None] * len(specs)
        for index, tensor in zip(wire, outputs):  # FSDP2 concatenates along dim 0
            whole = tensor.view(_ops.torch_dtype(specs[index].dtype))
            if specs[index].gather_dim != 0:  # transposed parts: [cols, rows / world] shards
                whole = distributed.concatenate(whole.view(plan.shards, -1, whole.shape[1]), 1)
            parts[index] = whole
        for index, tensor in local.items():
            parts[index] = tensor
        if out is not None:
            out.mx_parts = parts
            return None
        rows, cols = plan.shape[0] * plan.shards, plan.shape[1]
        return GatheredWeight(rows, cols, self.dtype, self.device, parts), tuple(outputs)


# FSDP2 reads the hook's signature at every all-gather (to pick the arguments it passes); one made
# here spares inspect the work of deriving it from the code each time.
ShardedWeight.fsdp_pre_all_gather.__signature__ = inspect.signature(ShardedWeight.fsdp_pre_all_gather)


class GatheredWeight(torch.Tensor):
    """FSDP2's unsharded weight of an mx.torch.Linear: a [N, K] tensor of the weight's dtype whose
    values exist only quantized, as the compact parts `mx_parts` (data, scales, col_data,
    col_scales; None where not gathered). It supports what FSDP2 and autograd do to a parameter."""

    @staticmethod
    def __new__(cls, rows, cols, dtype, device, parts):
        return torch.Tensor._make_wrapper_subclass(cls, (rows, cols), dtype=dtype, device=device)

    def __init__(self, rows, cols, dtype, device, parts):
        self.mx_parts = parts

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self) -> str:
        return f"GatheredWeight({tuple(self.shape)}, {self.dtype}, quantized)"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func in (aten.detach.default, aten.alias.default, aten.as_strided.default, aten.view.default):
            source = args[0]
            if func in (aten.as_strided.default, aten.view.default) and tuple(args[1]) != tuple(source.shape):
                raise NotImplementedError(f"{func} of an FSDP2-gathered mx weight to another shape")
            return cls(*source.shape, source.dtype, source.device, source.mx_parts)
        raise NotImplementedError(f"{func} on an FSDP2-gathered mx weight (it exists only quantized; "
                                  "mx.torch.Linear reads its parts)")


def quantize_all_gather(model: torch.nn.Module, group=None) -> list[str]:
    """Wraps the weight of every mx.torch.Linear of `model` in a ShardedWeight, before fully_shard;
    layers without an amax group get `group` (default: the whole world, FSDP2's default). Returns
    the names of the wrapped layers."""
    wrapped = []
    for name, layer in model.named_modules():
        if isinstance(layer, Linear) and not isinstance(layer.weight, ShardedWeight):
            layer.weight = torch.nn.Parameter(ShardedWeight(layer.weight.data, layer),
                                              requires_grad=layer.weight.requires_grad)
            if layer.amax_group is None:
                layer.amax_group = group if group is not None else torch.distributed.group.WORLD
            wrapped.append(name)
    return wrapped


@torch.no_grad()
def precompute_scales(model: torch.nn.Module) -> int:
    """Per-tensor current scaling and NVFP4 under FSDP2: the amax of every wrapped weight whose
    shards share one (TensorPlan.shares_amax), with ONE all-reduce (max) for all of them, and
    per-tensor scaling's cast scales from them, for all weights of an element type at once; call it
    after optimizer.step(). The next all-gathers cast with them (a weight changed since recomputes
    its own). Returns the number of weights."""
    shards, amaxes, elements, group = [], [], [], None
    for layer in model.modules():
        if not isinstance(layer, Linear):
            continue
        weight = layer.weight
        local = weight.to_local() if hasattr(weight, "to_local") else weight
        if not isinstance(local, ShardedWeight):
            continue
        layer_group = weight.device_mesh.get_group() if hasattr(weight, "device_mesh") else layer.amax_group
        size = torch.distributed.get_world_size(layer_group)
        _, plan = local._plan(local.shape[0] * size, local.shape[1], size)
        if not plan.shares_amax:
            continue
        group = layer_group
        shards.append(local)
        amaxes.append(_ops.amax(local._tensor.contiguous(), plan.key))
        elements.append(None if plan.recipe.tensor_scaled else plan.recipe.element(plan.role))
    if shards:
        reduced = distributed.all_reduce_max(torch.cat(amaxes), group).reshape(-1)
        scales = [None] * len(shards)
        for elem in set(elements) - {None}:
            chosen = [i for i, e in enumerate(elements) if e == elem]
            index = torch.tensor(chosen, device=reduced.device) if len(chosen) < len(shards) else None
            made = _ops.current_scale(reduced if index is None else reduced[index], elem)
            for i, scale in zip(chosen, made.split(1)):
                scales[i] = scale
        for shard, amax, scale in zip(shards, reduced.split(1), scales):
            shard._amax = (shard._tensor._version, amax.reshape(1, 1), scale)
    return len(shards)
