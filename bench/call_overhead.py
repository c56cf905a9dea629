"""bench/call_overhead: what a compiled mx Kernel costs on the host, per call.

  python bench/call_overhead.py cpu             # here: [1024, 1024] f32 MXFP8 quantize on the CPU
  python bench/call_overhead.py build DIR       # here: compile the GPU programs into the cache DIR
  MX_CACHE_DIR=DIR python bench/call_overhead.py gpu   # on the GPU machine

cpu: the first call of mx.compile's Kernel (compile or cache load), then the median of 20 later calls,
next to tools.cpu_quantize (mx-opt + mlir-runner on every call) and the numpy reference.
gpu: for a tiny program (a [128, 128] quantize, a few µs of GPU time) the host time per call in a loop
of asynchronous calls is the host overhead, since the GPU keeps up; the device time of the same kernel
comes from CUDA events over a loop; torch's own per-op host time (x.add_(0)) is the yardstick. Both for
the Kernel and for mx.quantize (which adds the per-shape lookup).
"""

import os
import statistics
import sys
import time

import numpy as np

import mx
from mx import ops, reference, tools

CPU_SHAPE, GPU_SHAPE = (1024, 1024), (128, 128)


def quantize_kernel(shape, dtype, target):
    """The MXFP8 rowwise quantize Kernel that mx.quantize runs for this shape (the same program)."""
    return ops.quantize_kernel(shape, dtype, (1, 32), target=target)


def cpu():
    x = np.random.default_rng(0).standard_normal(CPU_SHAPE).astype(np.float32)
    start = time.perf_counter()
    kernel = quantize_kernel(CPU_SHAPE, "f32", "cpu")
    kernel(x)
    first = time.perf_counter() - start
    times = []
    for _ in range(20):
        start = time.perf_counter()
        kernel(x)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    tools.cpu_quantize(x, (1, 32))
    through_runner = time.perf_counter() - start
    start = time.perf_counter()
    reference.quantize(x, (1, 32))
    numpy_reference = time.perf_counter() - start
    print(f"| CPU [1024, 1024] f32 quantize | time |\n|---|---|\n"
          f"| first call (mx.compile + call) | {first * 1e3:.1f} ms |\n"
          f"| later calls, median of 20 | {statistics.median(times) * 1e3:.2f} ms |\n"
          f"| tools.cpu_quantize (mx-opt + mlir-runner per call) | {through_runner * 1e3:.0f} ms |\n"
          f"| numpy reference | {numpy_reference * 1e3:.1f} ms |")


def gpu():
    import torch
    x = torch.randn(GPU_SHAPE, device="cuda", dtype=torch.bfloat16)
    kernel = quantize_kernel(GPU_SHAPE, "bf16", "sm_90a")
    calls = {"Kernel call": lambda: kernel(x), "mx.quantize": lambda: mx.quantize(x),
             "torch x.add_(0)": lambda: x.add_(0)}
    rows = []
    for name, call in calls.items():
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n = 2000
        start = time.perf_counter()
        start_event.record()
        for _ in range(n):
            call()
        end_event.record()
        host = (time.perf_counter() - start) / n
        torch.cuda.synchronize()
        device = start_event.elapsed_time(end_event) * 1e-3 / n
        rows.append(f"| {name} | {host * 1e6:.1f} µs | {device * 1e6:.1f} µs |")
    print(f"| {torch.cuda.get_device_name()}: [128, 128] bf16 MXFP8 quantize | host time per call | "
          "wall per call (events; the GPU waits on the host when this equals the host time) |\n|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"] and len(sys.argv) == 3:
        os.environ["MX_CACHE_DIR"] = sys.argv[2]
        quantize_kernel(GPU_SHAPE, "bf16", "sm_90a")
    elif sys.argv[1:] == ["cpu"]:
        cpu()
    elif sys.argv[1:] == ["gpu"]:
        gpu()
    else:
        sys.exit(__doc__)
