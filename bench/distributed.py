"""bench/distributed: an FSDP2 training step of a stack of mx.torch.Linear layers on 2 GPUs, per recipe,
against the same stack of torch.nn.Linear under bf16 FSDP2, in the same run.

  python bench/distributed.py build DIR                 # here: compile every recipe's kernels into the cache DIR
  MX_CACHE_DIR=DIR python bench/distributed.py run      # on the GPU machine: print the table

The model: LAYERS layers of HIDDEN x HIDDEN (bias-free) Linear with bf16 parameters, each layer its
own FSDP2 unit (fully_shard per layer, then the root), TOKENS tokens per rank; a step is forward,
backward and an SGD step (and, for per-tensor current scaling, mx.torch.fsdp.precompute_scales: one
all-reduce for every weight's amax). mx layers all-gather their weights quantized
(mx.torch.fsdp.quantize_all_gather). Time per step: CUDA events around STEPS steps after WARMUP steps,
median of RUNS runs, on rank 0; bytes: what rank 0 sends in the step's all-gathers
(mx.torch.distributed.count_all_gather). One process per GPU (torch.multiprocessing), each seeing
only its own GPU; NCCL_NVLS_ENABLE=0.
"""

import os
import statistics
import sys

LAYERS, HIDDEN, TOKENS, WORLD = 4, 8192, 8192, 2
WARMUP, STEPS, RUNS = 3, 10, 5
RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed")


def build(directory, chip="sm_90a"):
    os.environ["MX_CACHE_DIR"] = directory
    from mx import recipes
    from mx.torch import _ops
    for name in RECIPES:
        recipe = recipes.get(name)
        _ops.plan(TOKENS, HIDDEN, HIDDEN, recipe, "bf16", "bf16", chip)
        _ops.tensor_plan("weight", HIDDEN, HIDDEN, "bf16", recipe, chip, WORLD)


def model(recipe, device):
    import torch
    from torch.distributed.fsdp import fully_shard
    import mx.torch
    torch.manual_seed(0)
    stack = torch.nn.Sequential(*[torch.nn.Linear(HIDDEN, HIDDEN, bias=False) for _ in range(LAYERS)])
    stack = stack.to(device, torch.bfloat16)
    if recipe is not None:
        mx.torch.convert(stack, recipe)
        mx.torch.fsdp.quantize_all_gather(stack)
    for layer in stack:
        fully_shard(layer)
    fully_shard(stack)
    return stack


def measure(recipe, device):
    """(median ms per step, bytes all-gathered per step) of rank 0's view of one recipe's model."""
    import torch
    import mx.torch
    from mx.torch import distributed
    stack = model(recipe, device)
    optimizer = torch.optim.SGD(stack.parameters(), lr=1e-3)
    x = torch.randn(TOKENS, HIDDEN, device=device, dtype=torch.bfloat16)

    def step():
        stack(x).float().square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if recipe is not None:
            mx.torch.fsdp.precompute_scales(stack)

    for _ in range(WARMUP):
        step()
    with distributed.count_all_gather() as counter:
        step()
    runs = []
    for _ in range(RUNS):
        torch.distributed.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(STEPS):
            step()
        end.record()
        torch.cuda.synchronize()
        runs.append(start.elapsed_time(end) / STEPS)
    return statistics.median(runs), counter["bytes"]


def rank_main(rank, device):
    import torch
    rows = {recipe: measure(recipe, device) for recipe in (None, *RECIPES)}
    return torch.cuda.get_device_name(), torch.__version__, rows


def run():
    from mx.torch import distributed
    name, version, rows = distributed.launch(rank_main, WORLD)[0]
    base_ms, base_bytes = rows[None]
    print(f"{WORLD} x {name}, torch {version}; {LAYERS} layers {HIDDEN} x {HIDDEN}, {TOKENS} tokens per rank\n")
    print("| FSDP2 step | ms per step | speedup over bf16 | MB all-gathered per step (rank 0) | bytes vs bf16 |")
    print("|---|---|---|---|---|")
    for recipe, (ms, sent) in rows.items():
        label = "bf16 (torch.nn.Linear)" if recipe is None else f"mx {recipe}"
        print(f"| {label} | {ms:.2f} | {base_ms / ms:.2f}x | {sent / 2**20:.1f} | {sent / base_bytes:.3f}x |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"] and len(sys.argv) in (3, 4):
        build(*sys.argv[2:])
    elif sys.argv[1:] == ["run"]:
        run()
    else:
        sys.exit(__doc__)
