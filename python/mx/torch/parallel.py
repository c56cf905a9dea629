"""mx.torch.parallel: tensor-parallel Linear layers with sequence parallelism (Megatron-LM's layout).

    up = mx.torch.parallel.column(full_up, group)      # X token shard -> all-gather (quantized) -> X W_r^T
    down = mx.torch.parallel.row(full_down, group)     # partial Y -> reduce-scatter -> Y token shard

A column-parallel layer holds rows [r N/w, (r+1) N/w) of the weight (its output features) and takes a
token shard of the input: forward all-gathers the input quantized (the rowwise parts fprop reads;
backward gathers the columnwise parts wgrad reads) and dX is reduce-scattered back to token shards.
A row-parallel layer holds columns [r K/w, (r+1) K/w) (its input features): forward reduce-scatters
its partial output to token shards, backward all-gathers the output gradient quantized (rowwise for
dgrad, columnwise for wgrad). What crosses the wire is the compact format of spec section 12;
per-tensor current scaling all-reduces the amax over the layer's `amax_group` (default: `group`)
before the cast, and delayed scaling the amax history at each update. With
`fuse_wgrad_accumulation`, each rank's wgrad GEMM adds its shard's dW to that shard's own
`weight.main_grad` (mx.torch.Linear's option; the framework allocates one per rank's weight).
"""

from __future__ import annotations

import torch

from .. import recipes
from .linear import Linear


def _split(linear: torch.nn.Linear, group, kind: str, recipe, amax_group, fuse_wgrad_accumulation) -> Linear:
    rank, size = torch.distributed.get_rank(group), torch.distributed.get_world_size(group)
    out_features, in_features = linear.out_features, linear.in_features
    if kind == "column":
        rows = slice(rank * out_features // size, (rank + 1) * out_features // size)
        weight, bias = linear.weight[rows], linear.bias[rows] if linear.bias is not None else None
    else:
        cols = slice(rank * in_features // size, (rank + 1) * in_features // size)
        weight, bias = linear.weight[:, cols], linear.bias
    if (out_features if kind == "column" else in_features) % size:
        raise ValueError(f"mx.torch.parallel.{kind}: {linear} does not split into {size} equal parts")
    layer = Linear(weight.shape[1], weight.shape[0], bias is not None, device=weight.device,
                   dtype=weight.dtype, recipe=recipe, parallel=kind, group=group, amax_group=amax_group,
                   fuse_wgrad_accumulation=fuse_wgrad_accumulation)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def column(linear: torch.nn.Linear, group, recipe: str | recipes.Recipe = "mxfp8", amax_group=None,
           fuse_wgrad_accumulation: bool = False) -> Linear:
    """This rank's column-parallel part of `linear` (the same on every rank): its output rows."""
    return _split(linear, group, "column", recipe, amax_group, fuse_wgrad_accumulation)


def row(linear: torch.nn.Linear, group, recipe: str | recipes.Recipe = "mxfp8", amax_group=None,
        fuse_wgrad_accumulation: bool = False) -> Linear:
    """This rank's row-parallel part of `linear` (the same on every rank): its input columns."""
    return _split(linear, group, "row", recipe, amax_group, fuse_wgrad_accumulation)
