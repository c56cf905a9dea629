"""bench/linear: mx.torch.Linear forward + backward against torch.nn.Linear in bf16, on one GPU.

  python bench/linear.py build DIR                 # here: compile every recipe's kernels into the cache DIR
  MX_CACHE_DIR=DIR python bench/linear.py run      # on the GPU machine: print the tables

One training step of one layer: Y = X W^T + b, then dX and dW from dY, with X and dY in bf16 and the
weight in f32 under torch.autocast for torch.nn.Linear (its GEMMs run in bf16), and mx.torch.Linear
with each recipe. Time per step: CUDA events around 20 steps after 5 warm-up steps, median of as many
rounds as the table has implementations (7 for the plain step, 5 for the training step); a round times
every implementation of the shape once, each round in another rotation of their order, so that every
implementation runs once in every position: the GPU's clock drift under sustained load (its power and
thermal limits lower the SM clock within seconds, by up to ~10% on an H100; the same GEMM kernel took
729-759 us between 10-step windows of one H200) reaches bf16 and every recipe alike rather than
whichever runs after the heaviest. A second
table gives the host's time to issue a step against it (host-bound where they meet).
TFLOP/s counts the three GEMMs (6 M N K); each mx cell also gives the step-time ratio bf16 / mx.
Every step accumulates its weight gradient into the f32 `weight.grad` (torch's AccumulateGrad add, the
same for bf16 and mx), and X's into `x.grad`: the weight never changes, as between the micro-batches of
gradient accumulation, so every recipe reuses its quantized weight (delayed scaling from its second
step on, docs/torch.md). A third table times a training step instead: the same forward and
backward, then an SGD update of the layer's parameters and every gradient set to None (torch's
`zero_grad(set_to_none=True)`, and X's too, as an activation's would be), so that every recipe
quantizes its changed weight each step. A second table times FUSED_RECIPES with `fuse_wgrad_accumulation=True`: dW
added to an f32 `weight.main_grad` in the wgrad GEMM's epilogue (no torch add), against the same bf16
steps. Then, at BREAKDOWN_SHAPE, the kernels of one step of each recipe (torch.profiler), and of the
fused per_tensor step: every kernel with its GPU time, so that one sees where a step's time goes.
"""

import os
import statistics
import sys
import time

# tokens M, in_features K, out_features N: issue 19's shapes (Transformer Engine's 5B model: M = 15872,
# hidden 4096, FFN 16384).
SHAPES = [(8192, 4096, 4096), (8192, 8192, 8192), (15872, 4096, 4096), (15872, 4096, 16384),
          (15872, 16384, 4096)]
BREAKDOWN_SHAPE = (8192, 8192, 8192)
FUSED_RECIPES = ("per_tensor", "delayed")  # the second table's, fuse_wgrad_accumulation=True


def build(directory):
    os.environ["MX_CACHE_DIR"] = directory
    from mx.linear import LinearPlan
    from mx.recipes import FP8_RECIPES
    for m, k, n in SHAPES:
        for recipe in FP8_RECIPES:
            # The layers have biases: the gradient's plan computes dbias (with its cast+transpose).
            LinearPlan(m, k, n, recipe, "bf16", "f32", "sm_90a", wgrad_accumulation=recipe in FUSED_RECIPES,
                       bias=True)


def fused_linear(k, n, recipe):
    """An mx.torch.Linear with fuse_wgrad_accumulation and its f32 weight.main_grad."""
    import torch
    from mx.torch import Linear
    layer = Linear(k, n, recipe=recipe, device="cuda", fuse_wgrad_accumulation=True)
    layer.weight.main_grad = torch.zeros(n, k, device="cuda")
    return layer


def step_times(layers, x, dy, train=False):
    """{name: (step ms, host ms)} of `layers` ({name: (module, autocast)}): the GPU time per step between
    CUDA events, and the host's time to issue a step (time.perf_counter around the 20 asynchronous
    steps); medians of one round per layer, each timing every layer once, in an order rotated per
    round, so that each layer takes each position once.
    A step whose host time reaches its step time is host-bound: the GPU waits for Python. With
    `train`, a step ends with an SGD update and every gradient set to None."""
    import torch
    optimizers = {name: torch.optim.SGD(layer.parameters(), lr=1e-6) for name, (layer, _) in layers.items()}

    def step(name):
        layer, autocast = layers[name]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            y = layer(x)
        y.backward(dy)
        if train:
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
            x.grad = None
    for name in layers:
        for _ in range(5):
            step(name)
    names = list(layers)
    runs, hosts = {name: [] for name in names}, {name: [] for name in names}
    for round_ in range(len(names)):
        for name in names[round_:] + names[:round_]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            began = time.perf_counter()
            start.record()
            for _ in range(20):
                step(name)
            end.record()
            hosts[name].append((time.perf_counter() - began) * 1e3 / 20)
            torch.cuda.synchronize()
            runs[name].append(start.elapsed_time(end) / 20)
    return {name: (statistics.median(runs[name]), statistics.median(hosts[name])) for name in names}


def kernel_breakdown(layer, x, dy, autocast):
    """[(kernel name, GPU ms)] of one step, in launch order (torch.profiler): the third, as the timed
    steps are (delayed scaling reuses an unchanged weight's cast from then on)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            y = layer(x)
        y.backward(dy)
    step()
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return [(e.name, e.time_range.elapsed_us() / 1e3) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]


def print_breakdown(name, kernels):
    total = sum(ms for _, ms in kernels)
    print(f"\n{name}: {len(kernels)} kernels, {total:.3f} ms of GPU time\n")
    print("| kernel | ms | share |\n|---|---|---|")
    for kernel, ms in kernels:
        short = kernel if len(kernel) <= 80 else kernel[:77] + "..."
        print(f"| `{short}` | {ms:.3f} | {100 * ms / total:.0f}% |")


def run():
    import torch
    from mx.recipes import FP8_RECIPES as RECIPES
    from mx.torch import Linear
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    header = "| M x K x N | torch.nn.Linear bf16 | " + " | ".join(f"mx {r}" for r in RECIPES) + " |\n" + \
        "|---|---|" + "---|" * len(RECIPES)
    print(header)
    host_rows, train_rows = [], []
    bf16, fused = {}, {recipe: {} for recipe in FUSED_RECIPES}
    for m, k, n in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        flops = 6 * m * n * k
        layers = {"bf16": (torch.nn.Linear(k, n, device="cuda"), True)}
        layers.update({recipe: (Linear(k, n, recipe=recipe, device="cuda"), False) for recipe in RECIPES})
        layers.update({f"{recipe}, fused": (fused_linear(k, n, recipe), False) for recipe in FUSED_RECIPES})
        times = step_times(layers, x, dy)
        base, base_host = times["bf16"]
        bf16[m, k, n] = base
        cells, hosts = [f"{base:.2f} ms ({flops / base / 1e9:.0f} TFLOP/s)"], [f"{base_host:.2f} / {base:.2f}"]
        for recipe in RECIPES:
            ms, host = times[recipe]
            cells.append(f"{ms:.2f} ms ({flops / ms / 1e9:.0f} TFLOP/s, {base / ms:.2f}x)")
            hosts.append(f"{host:.2f} / {ms:.2f}")
        for recipe in FUSED_RECIPES:
            fused[recipe][m, k, n] = times[f"{recipe}, fused"][0]
        print(f"| {m} x {k} x {n} | " + " | ".join(cells) + " |")
        host_rows.append(f"| {m} x {k} x {n} | " + " | ".join(hosts) + " |")
        del layers
        layers = {"bf16": (torch.nn.Linear(k, n, device="cuda"), True)}
        layers.update({recipe: (Linear(k, n, recipe=recipe, device="cuda"), False) for recipe in RECIPES})
        times = step_times(layers, x, dy, train=True)
        base = times["bf16"][0]
        train_rows.append(f"| {m} x {k} x {n} | {base:.2f} ms | " + " | ".join(
            f"{times[r][0]:.2f} ms ({base / times[r][0]:.2f}x)" for r in RECIPES) + " |")
        del x, dy, layers
        torch.cuda.empty_cache()
    print("\nHost time to issue a step / step time, ms (host-bound where they meet):\n")
    print(header)
    print("\n".join(host_rows))
    print("\nTraining step (the same, then an SGD update and every gradient set to None), ms and bf16 / mx:\n")
    print(header)
    print("\n".join(train_rows))
    print("\nFused wgrad accumulation (fuse_wgrad_accumulation=True, dW into an f32 weight.main_grad in the "
          "wgrad GEMM), against the same bf16 steps:\n")
    print("| recipe | " + " | ".join(f"{m} x {k} x {n}" for m, k, n in SHAPES) + " |")
    print("|---|" + "---|" * len(SHAPES))
    print("| torch.nn.Linear bf16 | " + " | ".join(f"{bf16[s]:.2f} ms" for s in SHAPES) + " |")
    for recipe, times in fused.items():
        print(f"| mx {recipe}, fused | " + " | ".join(
            f"{times[m, k, n]:.2f} ms ({6 * m * n * k / times[m, k, n] / 1e9:.0f} TFLOP/s, "
            f"{bf16[m, k, n] / times[m, k, n]:.2f}x)" for m, k, n in SHAPES) + " |")
    m, k, n = BREAKDOWN_SHAPE
    print(f"\nOne step's kernels at {m} x {k} x {n}:")
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    print_breakdown("torch.nn.Linear bf16", kernel_breakdown(torch.nn.Linear(k, n, device="cuda"), x, dy, True))
    for recipe in RECIPES:
        print_breakdown(f"mx {recipe}", kernel_breakdown(Linear(k, n, recipe=recipe, device="cuda"), x, dy, False))
    print_breakdown(f"mx {FUSED_RECIPES[0]}, fused wgrad accumulation",
                    kernel_breakdown(fused_linear(k, n, FUSED_RECIPES[0]), x, dy, False))


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"] and len(sys.argv) == 3:
        build(sys.argv[2])
    elif sys.argv[1:] == ["run"]:
        run()
    else:
        sys.exit(__doc__)
