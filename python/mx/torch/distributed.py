"""mx.torch.distributed: the collectives of sharded mx.torch layers (spec section 12), on torch.distributed.

* `gather_parts`: the quantized all-gather. The compact parts of each rank's row shard (FP8 or FP4
  data, E8M0 or f32 scales; mx.linear's `PartSpec`) travel as bytes, all parts of a tensor in one
  all-gather, and are put together along each part's `gather_dim`. The scale swizzle comes after, in
  the GEMM program that reads them.
* `all_reduce_max`: the amax all-reduce of per-tensor current and delayed scaling.
* `reduce_scatter_rows`: the reduce-scatter of a partial GEMM result along its rows (tokens).

`count_all_gather` counts what a rank sends in all-gathers (mx's and FSDP2's), for tests and
benchmarks.
"""

from __future__ import annotations

import collections
import contextlib

import torch
import torch.distributed as dist

from ..linear import PartSpec


@contextlib.contextmanager
def count_all_gather():
    """Counts, in a Counter it yields, the "bytes" this rank contributes to every
    torch.distributed.all_gather_into_tensor (FSDP2 and gather_parts call it) and the "calls"."""
    counter = collections.Counter()
    original = dist.all_gather_into_tensor

    def counting(output, input, *args, **kwargs):
        counter["bytes"] += input.numel() * input.element_size()
        counter["calls"] += 1
        return original(output, input, *args, **kwargs)

    dist.all_gather_into_tensor = counting
    try:
        yield counter
    finally:
        dist.all_gather_into_tensor = original


def world(group) -> int:
    return dist.get_world_size(group)


def gather_parts(parts: list[torch.Tensor], specs: list[PartSpec], group) -> list[torch.Tensor]:
    """The parts of the whole tensor from every rank's parts of its row shard (rank order)."""
    size = world(group)
    payload = torch.cat([p.contiguous().view(-1).view(torch.uint8) for p in parts])
    gathered = torch.empty(size * payload.numel(), dtype=torch.uint8, device=payload.device)
    dist.all_gather_into_tensor(gathered, payload, group=group)
    per_rank = gathered.view(size, payload.numel())
    whole, offset = [], 0
    for part, spec in zip(parts, specs):
        nbytes = part.numel() * part.element_size()
        chunk = per_rank[:, offset:offset + nbytes].contiguous().view(part.dtype).view(size, *part.shape)
        offset += nbytes
        if spec.gather_dim == 0:
            whole.append(chunk.reshape(size * part.shape[0], *part.shape[1:]))
        else:
            whole.append(chunk.permute(1, 0, 2).reshape(part.shape[0], size * part.shape[1]))
    return whole


def all_reduce_max(t: torch.Tensor, group) -> torch.Tensor:
    """t, all-reduced (max) over `group` in place; NaN anywhere gives NaN everywhere."""
    # The NaN flags travel with the values (one collective): a max need not propagate NaN.
    both = torch.cat([t.reshape(-1), torch.isnan(t).reshape(-1).to(t.dtype)])
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    values, nan = both.split(t.numel())
    return t.copy_(torch.where(nan > 0, float("nan"), values).view_as(t))


def reduce_scatter_rows(t: torch.Tensor, group) -> torch.Tensor:
    """This rank's rows of the sum over `group` of the [rows, cols] partial results `t`."""
    size = world(group)
    out = t.new_empty(t.shape[0] // size, *t.shape[1:])
    dist.reduce_scatter_tensor(out, t.contiguous(), group=group)
    return out

