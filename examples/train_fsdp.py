"""FSDP2 training of a model whose Linear layers compute with mx kernels and all-gather FP8 weights.

A stack of MLP blocks learns to imitate a fixed random teacher network. mx.torch.convert swaps its
eligible nn.Linear layers for mx.torch.Linear (and reports what it swapped), mx.torch.fsdp makes FSDP2
all-gather the weights quantized (the compact FP8 format instead of bf16), and after each optimizer
step mx.torch.fsdp.precompute_scales computes every weight's per-tensor scale with one all-reduce.
Rank 0 prints the report, the loss of each step and the bytes it sent in all-gathers.

Each rank runs on its own GPU (mx.torch.distributed.init_process_group makes it cuda:0, where mx
runs); without CUDA the ranks run on the CPU (gloo, and mx's CPU pipeline).

Run from the repository root, with 2 ranks:
    .venv/bin/torchrun --nproc-per-node 2 examples/train_fsdp.py
or let the script start its 2 ranks itself:
    .venv/bin/python examples/train_fsdp.py
On a GPU machine without mx-opt, compile its programs here first and run it there with
MX_CACHE_DIR=DIR:
    .venv/bin/python examples/train_fsdp.py build DIR [sm_90a|sm_100a]
"""

import os
import sys

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.distributed.is_available():
    print("examples/train_fsdp.py needs torch with torch.distributed: skipped")
    sys.exit(0)

import mx.torch  # noqa: E402
from mx.torch import distributed  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

WIDTH, TOKENS, STEPS, RANKS = 256, 256, 5, 2
RECIPE = mx.torch.recipes.PerTensor()


def build(directory, chip="sm_90a"):
    """Compiles the programs the ranks run on `chip` into mx.compile's cache `directory`."""
    os.environ["MX_CACHE_DIR"] = directory
    from mx.torch import _ops
    for k, n in ((WIDTH, 2 * WIDTH), (2 * WIDTH, WIDTH)):
        _ops.plan(TOKENS, k, n, RECIPE, "bf16", "bf16", chip, bias=True)  # the layers have biases
        _ops.tensor_plan("weight", n, k, "bf16", RECIPE, chip, RANKS)


def blocks(count):
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(WIDTH, 2 * WIDTH), torch.nn.GELU(),
                                                     torch.nn.Linear(2 * WIDTH, WIDTH))
                                 for _ in range(count)], torch.nn.Linear(WIDTH, 8))


def train(rank, device):
    torch.manual_seed(0)  # the same model and teacher on every rank
    model = blocks(2).to(device, torch.bfloat16)
    teacher = blocks(1).to(device, torch.bfloat16)
    report = mx.torch.convert(model, RECIPE)      # the 8-wide head is too narrow: it stays nn.Linear
    mx.torch.fsdp.quantize_all_gather(model)      # before fully_shard
    for block in model[:-1]:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator(device).manual_seed(1 + rank)  # each rank its own data
    for step in range(STEPS):
        x = torch.randn(TOKENS, WIDTH, device=device, generator=generator).bfloat16()
        with distributed.count_all_gather() as sent:
            loss = torch.nn.functional.mse_loss(model(x).float(), teacher(x).float().detach())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            mx.torch.fsdp.precompute_scales(model)  # one all-reduce for every weight's scale
        torch.distributed.all_reduce(loss)  # the mean over ranks (gloo has no AVG)
        loss /= torch.distributed.get_world_size()
        if rank == 0:
            if step == 0:
                print(report)
            print(f"step {step}: loss {loss.item():.5f}, {sent['bytes'] / 1024:.0f} KiB all-gathered by rank 0")
    return loss.item()


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:
        build(*sys.argv[2:])
    elif "LOCAL_RANK" in os.environ:  # started by torchrun
        device = distributed.init_process_group()
        train(torch.distributed.get_rank(), device)
        torch.distributed.barrier()  # no rank tears its group down while another still talks to it
        torch.distributed.destroy_process_group()
    else:
        distributed.launch(train, RANKS)
