"""bench/collectives: quantize + all-gather + swizzle on 2 GPUs, against torch.distributed's bf16 all-gather.

Two steps, because the GPU machine has no MLIR:
  python bench/collectives.py build DIR [--chunks N,...]
                                             # here: partition (mx-partition) and compile every program,
                                             # and each pipelined in N chunks (mx-pipeline-gathers)
  torchrun --standalone --nproc-per-node 2 bench/collectives.py run DIR [--iters N] [--only RECIPE,...]
      [--payloads MIB,...] [--chunks N,...] [--timeline RECIPE:MIB[:CHUNKS],...]
                                             # on the GPU machine: check, time, print one markdown table
  python bench/collectives.py list           # the rows and their bytes; needs neither torch nor MLIR

Rows: per recipe and payload, a bf16 tensor [M, 8192] split along M over the 2 GPUs (the sequence-
parallel activations of Transformer Engine's recipes), M set so that the whole bf16 tensor is 64, 128,
256 or 512 MiB. Recipes: MXFP8 (E4M3, E8M0 scales per [1, 32], 128x4 tiles), FP8 blockwise (E4M3, f32
scales per [1, 128], GEMM-ready layout), FP8 per-tensor current scaling (E4M3, the amax all-reduced, one
f32 scale), MXFP4 (E2M1, E8M0 per [1, 32]) and NVFP4 (E2M1, E4M3 per [1, 16], the tensor scale computed
from the all-reduced amax). Each GPU quantizes its shard, the compact data and scales are all-gathered,
and every GPU swizzles the gathered scales (the spec's section 12): one program per row, partitioned
by mx-partition from the annotated whole program and lowered by mx-lower-to-nvvm to NCCL calls.
With --chunks, each row also has the same program pipelined by mx-pipeline-gathers in N chunks of
rows: the quantize of chunk c + 1 runs while chunk c is exchanged (mxrtAllGatherPlaced on the side
stream, one NCCL group per chunk), the swizzle after the join; its time and ratio are the columns
"pipelined xN" (default: 1, 2 and 4 chunks; 1 keeps the quantize whole and only exchanges by the
placed gather; --chunks "" builds and times none).

Columns and goals (the issue's, per row):
* wire bytes / bf16: the bytes of the gathered data and scales over those of the bf16 tensor (<= 0.52);
* mx / bf16 time: quantize + all-gather + swizzle over torch.distributed.all_gather_into_tensor of the
  bf16 shards (<= 0.6);
* gather busbw / NCCL: the bus bandwidth of mx's all-gather alone (a program gathering the compact
  shards) over that of all_gather_into_tensor of one uint8 tensor of the same bytes (>= 0.9), bus
  bandwidth being bytes gathered x (n - 1) / n / time, as nccl-tests define it.
Times, as nccl-tests measure them: after a barrier, --iters calls enqueued back to back between two
CUDA events on the current stream, the time per call; the median of 5 such loops, of the slower rank.
The mx programs are mx.compile's Kernels (one foreign call each, mxrtInvoke) in call-stream mode on
torch's current stream (results from the stream-ordered pool, the gathered ones from the runtime's
NCCL-registered buffers, all freed in stream order); their NCCL
communicator is mx.runtime's, made once from torchrun's environment, next to torch's. Each rank sees
only its own GPU, as cuda:0 (mx.torch.distributed.init_process_group). The parts of a quantized tensor
(data, scales) are all-gathered as one NCCL group (convert-shard-to-mxrt, mxrtGroupStart/End): one
launch moves them all.

Correctness before timing: on every row each rank gathers the bf16 input with torch, runs the
unpartitioned program (quantize + swizzle of the whole tensor) on its GPU, and compares its bytes with
the partitioned program's and each pipelined program's, bit for bit; a mismatch marks the row FAILED
and `run` exits 1.
NCCL_NVLS_ENABLE=0 is set before either communicator exists.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHIP = "sm_90a"
K = 8192
PAYLOADS_MIB = (64, 128, 256, 512)
DEVICES = 2
ROUNDS = 5  # timed loops per measurement (their median)


@dataclass(frozen=True)
class Recipe:
    name: str
    elem: str          # MLIR element type of the data
    scale: str         # MLIR element type of the scales
    block: tuple | None  # None: one block over the whole tensor (per-tensor current scaling)
    layout: str | None  # swizzle layout of the gathered scales (None: no swizzle)

    def data_bytes(self, m):
        return m * K // (2 if self.elem == "f4E2M1FN" else 1)

    def scales_shape(self, m):
        return (1, 1) if self.block is None else (m // self.block[0], K // self.block[1])

    def scale_bytes(self, m):
        rows, cols = self.scales_shape(m)
        return rows * cols * (4 if self.scale == "f32" else 1)

    def swizzled_shape(self, m):
        from mx import reference
        return reference.swizzled_shape(self.scales_shape(m), 0, self.layout)


RECIPES = {r.name: r for r in (
    Recipe("mxfp8", "f8E4M3FN", "f8E8M0FNU", (1, 32), "tiles"),
    Recipe("blockwise", "f8E4M3FN", "f32", (1, 128), "blockwise"),
    Recipe("per_tensor", "f8E4M3FN", "f32", None, None),
    Recipe("mxfp4", "f4E2M1FN", "f8E8M0FNU", (1, 32), "tiles"),
    Recipe("nvfp4", "f4E2M1FN", "f8E4M3FN", (1, 16), "tiles"),
)}


def rows_of(payload_mib):
    return payload_mib * 2**20 // (2 * K)


def _t(shape, elem):
    return "tensor<" + "x".join(map(str, shape)) + f"x{elem}>"


def _program(recipe, m, kind):
    """MLIR of one program: "sharded" (quantize a [M/2, K] shard, gather, swizzle; annotated for
    mx-partition), "whole" (quantize + swizzle of [M, K] on one GPU), "gather" (all-gather of compact
    shards only)."""
    x, data = _t((m, K), "bf16"), _t((m, K), recipe.elem)
    scales = _t(recipe.scales_shape(m), recipe.scale)
    nvfp4 = recipe.scale == "f8E4M3FN"
    block = recipe.block or (m, K)
    quantized = [data, scales] + (["tensor<f32>"] if nvfp4 else [])
    tiles = _t(recipe.swizzled_shape(m), recipe.scale) if recipe.layout else None
    grid = [f"shard.grid @grid(shape = {DEVICES})"]
    split = ["  %split = shard.sharding @grid split_axes = [[0]] : !shard.sharding",
             "  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding"]
    if kind == "gather":
        args = f"%d: {data}, %s: {scales}"
        body = split + [f"  %ds = shard.shard %d to %split : {data}",
                        f"  %ss = shard.shard %s to %{'whole' if recipe.block is None else 'split'} : {scales}",
                        f"  %dw = shard.shard %ds to %whole annotate_for_users : {data}",
                        f"  %sw = shard.shard %ss to %whole annotate_for_users : {scales}"]
        results = [("%dw", data), ("%sw", scales)]
    else:
        sharded = kind == "sharded"
        args = f"%x: {x}"
        body = (split + [f"  %xs = shard.shard %x to %split : {x}"]) if sharded else \
            [f"  %xs = tensor.cast %x : {x} to {x}"]
        body.append(f"  %q:{len(quantized)} = mx.quantize %xs block [{block[0]}, {block[1]}] : {x} -> "
                    + ", ".join(quantized))
        data_value, scales_value = "%q#0", "%q#1"
        if sharded:
            body.append(f"  %dw = shard.shard %q#0 to %whole annotate_for_users : {data}")
            data_value = "%dw"
        if tiles:
            layout = " layout blockwise" if recipe.layout == "blockwise" else ""
            body.append(f"  %t = mx.swizzle %q#1{layout} : {scales} -> {tiles}")
            scales_value = "%t"
            if sharded:
                body.append(f"  %tw = shard.shard %t to %whole : {tiles}")
                scales_value = "%tw"
        results = [(data_value, data), (scales_value, tiles or scales)]
    types = ", ".join(t for _, t in results)
    function = [f"func.func @{recipe.name}_{kind}_{m}({args}) -> ({types}) {{", *body,
                f"  return {', '.join(v for v, _ in results)} : {types}", "}"]
    return "\n".join((grid if kind != "whole" else []) + function) + "\n"


def program_name(recipe, m, kind, chunks=None):
    """The function (and library) of a program; a pipelined one is the sharded one in `chunks` chunks."""
    return f"{recipe.name}_{kind}_{m}" if chunks is None else f"{recipe.name}_{kind}_x{chunks}_{m}"


def pipelined(recipe, m, chunks):
    """The sharded program renamed for its pipelined build."""
    return _program(recipe, m, "sharded").replace(f"@{program_name(recipe, m, 'sharded')}(",
                                                  f"@{program_name(recipe, m, 'sharded', chunks)}(")


def programs(chunk_counts):
    """(library name, source, mx-opt arguments before mx-lower-to-nvvm) of every program."""
    for recipe in RECIPES.values():
        for payload in PAYLOADS_MIB:
            m = rows_of(payload)
            for kind in ("sharded", "whole", "gather"):
                yield program_name(recipe, m, kind), _program(recipe, m, kind), \
                    () if kind == "whole" else ("--mx-partition",)
            for chunks in chunk_counts:
                yield program_name(recipe, m, "sharded", chunks), pipelined(recipe, m, chunks), \
                    ("--mx-partition", f"--mx-pipeline-gathers=chunks={chunks}")


def parse_chunks(text):
    return [int(c) for c in text.split(",") if c]


def build(directory, argv):
    parser = argparse.ArgumentParser(prog="bench/collectives.py build")
    parser.add_argument("--chunks", default="1,2,4", help="comma-separated chunk counts of the pipelined programs")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "python"))
    from mx import tools
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, source, passes in programs(parse_chunks(args.chunks)):
        if passes:
            source = tools.run_mx_opt(source, *passes)
        tools.compile_gpu_library(source, directory / f"{name}.so", chip=CHIP)
        print(f"built {name}", flush=True)


def list_rows():
    print("| recipe | payload (bf16) | M | data + scales gathered | wire bytes / bf16 |")
    print("|---|---|---|---|---|")
    for recipe in RECIPES.values():
        for payload in PAYLOADS_MIB:
            m = rows_of(payload)
            wire = recipe.data_bytes(m) + recipe.scale_bytes(m)
            print(f"| {recipe.name} | {payload} MiB | {m} | {wire / 2**20:.1f} MiB | "
                  f"{wire / (m * K * 2):.3f} |")


#===--------------------------------------------------------------------------------------------===#
# run (under torchrun, one process per GPU)
#===--------------------------------------------------------------------------------------------===#

def load(directory, recipe, m, kind, chunks=None):
    """The compiled program as mx.compile's Kernel: called with torch tensors through mxrtInvoke (one
    foreign call) in call-stream mode on torch's current stream, its results torch tensors freed in
    stream order."""
    from mx import compiler
    name = program_name(recipe, m, kind, chunks)
    return compiler.Kernel(Path(directory) / f"{name}.so", CHIP, name)


def timed_us(fn, iterations, rounds=ROUNDS):
    """Time per call of `fn` as nccl-tests measure it: after a barrier, `iterations` calls enqueued
    back to back between two CUDA events on the current stream, the total over `iterations`; the
    median of `rounds` such loops, the slower rank's. Host time per call shows only where the host
    cannot keep the GPU busy."""
    import torch
    import torch.distributed as dist

    def barrier():
        dist.barrier()
        torch.cuda.synchronize()
    median = torch.tensor([statistics.median(loop_times(fn, iterations, rounds, barrier))], device="cuda")
    dist.all_reduce(median, op=dist.ReduceOp.MAX)
    return median.item()


def loop_times(fn, iterations, rounds, barrier):
    """After 3 warm-up calls, `rounds` times: `barrier()`, then `iterations` calls of `fn` enqueued back
    to back between two CUDA events on the current stream; the time per call of each loop (us)."""
    import torch
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / iterations)
    return times


def busbw(nbytes, us):
    return nbytes * (DEVICES - 1) / DEVICES / (us * 1e-6) / 1e9


def same_bytes(got, want):
    import torch
    return len(got) == len(want) and all(
        a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
        for a, b in zip(got, want))


def run_row(directory, recipe, payload, iterations, rank, chunk_counts):
    import torch
    import torch.distributed as dist
    m = rows_of(payload)
    shard_rows = m // DEVICES
    generator = torch.Generator(device="cuda").manual_seed(1234 + rank)
    x = (torch.randn(shard_rows, K, device="cuda", generator=generator) *
         torch.exp2(torch.randint(-8, 8, (shard_rows, 1), device="cuda", generator=generator))).bfloat16()
    sharded, whole, gather = (load(directory, recipe, m, kind) for kind in ("sharded", "whole", "gather"))
    pipelines = {chunks: load(directory, recipe, m, "sharded", chunks) for chunks in chunk_counts}

    # Check: the partitioned program's bytes are the whole program's on the gathered input.
    full = torch.empty(m, K, dtype=torch.bfloat16, device="cuda")
    dist.all_gather_into_tensor(full, x)
    # torch's communicator and mx's are separate: never leave a kernel of one in flight while the other
    # launches (NCCL's rule for concurrent communicators).
    torch.cuda.synchronize()
    want = whole(full)
    check = same_bytes(sharded(x), want)
    checks = {chunks: same_bytes(program(x), want) for chunks, program in pipelines.items()}
    torch.cuda.synchronize()
    del full, want

    gathered_bf16 = torch.empty(m, K, dtype=torch.bfloat16, device="cuda")
    t_bf16 = timed_us(lambda: dist.all_gather_into_tensor(gathered_bf16, x), iterations)
    t_mx = timed_us(lambda: sharded(x), iterations)
    t_pipelined = {chunks: timed_us(lambda: program(x), iterations) for chunks, program in pipelines.items()}
    # The compact shards of this rank (their values do not matter to the gather).
    data = torch.zeros(recipe.data_bytes(shard_rows), dtype=torch.uint8, device="cuda").view(shard_rows, -1)
    scale_rows = recipe.scales_shape(m)[0] // (1 if recipe.block is None else DEVICES)
    scale_bytes = recipe.scale_bytes(m) // (1 if recipe.block is None else DEVICES)
    scales = torch.zeros(scale_bytes, dtype=torch.uint8, device="cuda").view(scale_rows, -1)
    if recipe.scale == "f32":
        scales = scales.view(torch.float32)
    t_gather = timed_us(lambda: gather(data, scales), iterations)
    wire = recipe.data_bytes(m) + recipe.scale_bytes(m)
    flat = torch.empty(wire // DEVICES, dtype=torch.uint8, device="cuda")
    gathered = torch.empty(wire, dtype=torch.uint8, device="cuda")
    t_nccl = timed_us(lambda: dist.all_gather_into_tensor(gathered, flat), iterations)
    torch.cuda.synchronize()
    return {"recipe": recipe.name, "payload": payload, "wire": wire / (m * K * 2), "t_bf16": t_bf16,
            "t_mx": t_mx, "bw_mx": busbw(wire, t_gather), "bw_nccl": busbw(wire, t_nccl),
            "check": check and all(checks.values()), "pipelined": t_pipelined}


def timeline(directory, recipe, payload, rank, chunks=None, calls=4):
    """Device activity (kernels, copies) of `calls` back-to-back calls of the sharded program on this
    rank (pipelined in `chunks` chunks if given; torch.profiler, CUPTI): [(start us from the first,
    duration us, stream, name)]. Both ranks must call it (the program gathers)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile
    m = rows_of(payload)
    x = torch.randn(m // DEVICES, K, device="cuda").bfloat16()
    sharded = load(directory, recipe, m, "sharded", chunks)
    for _ in range(3):
        sharded(x)
    # The barrier inside the profiled region: each rank's profiler starts in its own time, and a call
    # that one rank issues before the other's profiler is up waits for it in the gather.
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        dist.barrier()
        torch.cuda.synchronize()
        for _ in range(calls):
            sharded(x)
        torch.cuda.synchronize()
    events = sorted((e.time_range.start, e.time_range.elapsed_us(), e.device_resource_id, e.name)
                    for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    # From the program's first activity on (the barrier's own kernels come before it).
    prefix = program_name(recipe, m, "sharded", chunks)
    ours = [start for start, _, _, name in events if name.startswith(prefix)]
    if not ours:
        raise RuntimeError("the profiler saw no kernel of the program")
    first = ours[0]
    return [(start - first, us, stream, name) for start, us, stream, name in events if start >= first]


def print_timeline(recipe, payload, chunks, events, device):
    program = f"{recipe} {payload} MiB" + (f" pipelined x{chunks}" if chunks else "")
    print(f"\nTimeline of {program}, rank 0 ({device}): each device activity of back-to-back "
          "calls, its start after the first one's, its duration, its stream\n")
    print("| start (us) | duration (us) | gap before (us) | stream | activity |\n|---|---|---|---|---|")
    end = 0.0
    for start, us, stream, name in events:
        short = name if len(name) <= 70 else name[:67] + "..."
        print(f"| {start:.1f} | {us:.1f} | {max(start - end, 0.0):.1f} | {stream} | `{short}` |")
        end = max(end, start + us)


def print_table(rows, device, chunk_counts):
    print(f"\n{DEVICES} x {device}, K = {K}, bf16 [M, K] split along M\n")
    pipelined = "".join(f" pipelined x{c} | x{c} / bf16 |" for c in chunk_counts)
    print("| recipe | payload (bf16) | wire bytes / bf16 (goal <= 0.52) | bf16 all-gather | mx quantize + "
          "all-gather + swizzle | mx / bf16 (goal <= 0.6) |" + pipelined + " mx gather busbw | NCCL busbw, "
          "same bytes | ratio (goal >= 0.9) | check |")
    print("|---|---|---|---|---|---|" + "---|---|" * len(chunk_counts) + "---|---|---|---|")
    mark = lambda ok: "" if ok else " (missed)"  # noqa: E731
    for r in rows:
        ratio, bw = r["t_mx"] / r["t_bf16"], r["bw_mx"] / r["bw_nccl"]
        cells = "".join(f" {r['pipelined'][c]:.0f} us | {r['pipelined'][c] / r['t_bf16']:.2f}"
                        f"{mark(r['pipelined'][c] / r['t_bf16'] <= 0.6)} |" for c in chunk_counts)
        print(f"| {r['recipe']} | {r['payload']} MiB | {r['wire']:.3f}{mark(r['wire'] <= 0.52)} | "
              f"{r['t_bf16']:.0f} us | {r['t_mx']:.0f} us | {ratio:.2f}{mark(ratio <= 0.6)} |{cells} "
              f"{r['bw_mx']:.0f} GB/s | {r['bw_nccl']:.0f} GB/s | {bw:.2f}{mark(bw >= 0.9)} | "
              f"{'ok' if r['check'] else 'FAILED'} |")


def parse_timelines(text, chunk_counts):
    """[(recipe, payload MiB, chunks or None)] of --timeline's RECIPE:MIB[:CHUNKS] items; exits with what
    is wrong with an item that names no program of the build."""
    timelines = []
    for item in filter(None, text.split(",")):
        fields = item.split(":")
        ok = 2 <= len(fields) <= 3 and fields[0] in RECIPES and all(f.isdigit() for f in fields[1:])
        ok = ok and int(fields[1]) in PAYLOADS_MIB and (len(fields) == 2 or int(fields[2]) in chunk_counts)
        if not ok:
            sys.exit(f"--timeline: {item!r} must be RECIPE:MIB[:CHUNKS], RECIPE one of {', '.join(RECIPES)}, "
                     f"MIB one of {PAYLOADS_MIB}, CHUNKS one of --chunks ({chunk_counts})")
        timelines.append((RECIPES[fields[0]], int(fields[1]), int(fields[2]) if len(fields) == 3 else None))
    return timelines


def run(directory, argv):
    parser = argparse.ArgumentParser(prog="bench/collectives.py run")
    parser.add_argument("--iters", type=int, default=20, help="calls per timed loop")
    parser.add_argument("--only", default="", help="comma-separated recipes")
    parser.add_argument("--payloads", default=",".join(map(str, PAYLOADS_MIB)),
                        help="comma-separated bf16 payloads in MiB, of " + ",".join(map(str, PAYLOADS_MIB)))
    parser.add_argument("--chunks", default="1,2,4", help="comma-separated chunk counts of the pipelined "
                        "programs (built with the same --chunks)")
    parser.add_argument("--timeline", default="", help="comma-separated RECIPE:MIB[:CHUNKS] rows whose "
                        "device activity of back-to-back calls of the sharded program (or of its pipelined "
                        "build in CHUNKS chunks) is printed after the table")
    args = parser.parse_args(argv)
    chunk_counts = parse_chunks(args.chunks)
    timelines = parse_timelines(args.timeline, chunk_counts)
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    sys.path.insert(0, str(ROOT / "python"))
    import torch
    import torch.distributed as dist
    from mx import runtime
    from mx.torch import distributed as mx_distributed
    rank = int(os.environ["RANK"])
    # Each rank's GPU as its cuda:0, where mx's Kernels run; torch's group and mx's communicator on it.
    mx_distributed.init_process_group()
    runtime.init_process_group(device=0)
    recipes = [RECIPES[name] for name in args.only.split(",")] if args.only else list(RECIPES.values())
    payloads = [int(p) for p in args.payloads.split(",")]
    if not set(payloads) <= set(PAYLOADS_MIB):
        sys.exit(f"--payloads: each of {payloads} must be one of {PAYLOADS_MIB} (the programs built)")
    rows = []
    for recipe in recipes:
        for payload in payloads:
            start = time.monotonic()
            rows.append(run_row(directory, recipe, payload, args.iters, rank, chunk_counts))
            if rank == 0:
                print(f"measured {recipe.name} {payload} MiB in {time.monotonic() - start:.1f} s", flush=True)
    if rank == 0:
        print_table(rows, torch.cuda.get_device_name(), chunk_counts)
    for recipe, payload, chunks in timelines:
        events = timeline(directory, recipe, payload, rank, chunks)
        if rank == 0:
            print_timeline(recipe.name, payload, chunks, events, torch.cuda.get_device_name())
    runtime.destroy_process_group()
    dist.destroy_process_group()
    return 0 if all(r["check"] for r in rows) else 1


def main(argv):
    if len(argv) >= 2 and argv[0] == "build":
        build(argv[1], argv[2:])
        return 0
    if len(argv) >= 2 and argv[0] == "run":
        return run(argv[1], argv[2:])
    if argv[:1] == ["list"]:
        list_rows()
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
