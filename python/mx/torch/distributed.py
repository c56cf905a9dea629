"""mx.torch.distributed: the collectives of sharded mx.torch layers (spec section 12), on torch.distributed.

* `gather_parts`: the quantized all-gather. The compact parts of each rank's row shard (FP8 or FP4
  data, E8M0 or f32 scales; mx.linear's `PartSpec`) travel as bytes, all parts of a tensor in one
  all-gather, and are put together along each part's `gather_dim`. The scale swizzle comes after, in
  the GEMM program that reads them.
* `all_reduce_max`: the amax all-reduce of per-tensor current and delayed scaling.
* `reduce_scatter_rows`: the reduce-scatter of a partial GEMM result along its rows (tokens).

`init_process_group` joins a rank (torchrun's or a spawned one) to its group, each rank on its own
GPU; `launch` runs a function on spawned ranks (tests, benchmarks); `count_all_gather` counts what a
rank sends in all-gathers (mx's and FSDP2's).
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys

import torch
import torch.distributed as dist

from ..linear import PartSpec


def init_process_group(rank: int | None = None, world_size: int | None = None, local_rank: int | None = None,
                       backend: str | None = None) -> torch.device:
    """Joins this process to the default process group and returns its device. Each rank computes on
    one GPU, which mx's runtime addresses as cuda:0: so this sets CUDA_VISIBLE_DEVICES to the rank's
    GPU (`local_rank`, default torchrun's $LOCAL_RANK) before CUDA starts. Rank and world size come
    from torchrun's environment when not given. Without CUDA the group is gloo's on the CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK", rank or 0)) if local_rank is None else local_rank
    if torch.cuda.is_initialized() and torch.cuda.device_count() > 1:
        raise RuntimeError("mx.torch.distributed.init_process_group must run before CUDA starts in this "
                           "process (it gives the rank its own GPU as cuda:0, where mx runs)")
    if backend != "gloo":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        devices = visible.split(",") if visible else None
        if devices is None or len(devices) > 1:
            os.environ["CUDA_VISIBLE_DEVICES"] = devices[local_rank] if devices else str(local_rank)
    cuda = backend != "gloo" and torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    dist.init_process_group(backend, rank=-1 if rank is None else rank,  # -1: from the environment
                            world_size=-1 if world_size is None else world_size)
    return torch.device("cuda", 0) if cuda else torch.device("cpu")


def _rank(rank, world_size, port, backend, function, args, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    device = init_process_group(rank, world_size, rank, backend)
    try:
        results.put((rank, function(rank, device, *args)))
        dist.barrier()  # no rank tears its group down while another still talks to it
    finally:
        dist.destroy_process_group()
    # Done and torn down: leave without the interpreter's finalization, in which gloo's worker
    # threads can still release work that holds tensors and abort the process ("terminate called
    # without an active exception"; pytorch/pytorch#179291), failing a run that succeeded. A rank
    # that raised above never gets here and fails as usual.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def launch(function, world_size: int, *args, backend: str | None = None) -> list:
    """Runs `function(rank, device, *args)` on `world_size` spawned processes of this machine, each
    joined to the default group by init_process_group (`backend`: None picks NCCL where CUDA is,
    "gloo" forces the CPU); returns the results in rank order. `function` must be picklable (a
    module-level function). A rank that returns exits right after destroying its group, without
    the interpreter's finalization (atexit handlers and finalizers of that process do not run)."""
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:  # a port nothing listens on now, for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, (world_size, port, backend, function, args, results), nprocs=world_size, join=True)
    got = dict(results.get() for _ in range(world_size))
    return [got[rank] for rank in range(world_size)]


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
        stacked = per_rank[:, offset:offset + nbytes].contiguous().view(part.dtype).view(size, *part.shape)
        whole.append(concatenate(stacked, spec.gather_dim))
        offset += nbytes
    return whole


def concatenate(stacked: torch.Tensor, gather_dim: int) -> torch.Tensor:
    """The ranks' parts [ranks, rows, cols], stacked in rank order, concatenated along `gather_dim`."""
    ranks, rows, cols = stacked.shape
    if gather_dim == 0:
        return stacked.reshape(ranks * rows, cols)
    return stacked.permute(1, 0, 2).reshape(rows, ranks * cols)


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

