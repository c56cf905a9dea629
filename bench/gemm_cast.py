"""bench/gemm_cast: a generated GEMM writing FP8 (the delayed cast of its product fused into the epilogue)
against the same GEMM writing its product followed by the cast, and against cuBLASLt's FP8 output.

  python bench/gemm_cast.py build DIR      # here: compile the programs into the mx.compile cache DIR
  MX_CACHE_DIR=DIR python bench/gemm_cast.py run      # on the GPU machine: print the table

Per recipe and shape (M, N, K; bf16 product, E4M3 codes, fprop's [M, K] x [N, K]):
  * fused: `mx.scaled_matmul` then `mx.quantize_delayed` of it, one program (the GEMM kernel stores the
    codes and its CTAs' amaxes; a delayed cast of those records the amax, docs/gpu.md "FP8 output");
  * unfused: the same GEMM writing its bf16 product, then the delayed cast of it (two programs, as when
    the product has another use): what the fusion saves;
  * GEMM alone (bf16 product), for reference;
  * per_tensor only: cuBLASLt's FP8 output (torch._scaled_mm with out_dtype float8_e4m3fn and
    scale_result: its D_SCALE, without the amax).
Operands: torch.randn quantized with one f32 scale per operand (per_tensor) or 1x128 x 128x128 f32
power-of-two scales (blockwise), E8M0 bytes 127 (mx). Time: CUDA events around 20 back-to-back calls,
median of 7 rounds, every configuration once per round in a rotated order; an mx call's host time (about
20-50 us) overlaps the previous call's GPU work at these sizes. Each fused result is checked against the
unfused one (codes byte for byte, the recorded amax) before timing.
"""

import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

SHAPES = [(8192, 4096, 4096), (8192, 8192, 8192), (15872, 16384, 4096)]
RECIPES = {  # A block, B block (None: per tensor), scale type
    "per_tensor": (None, None, "f32"),
    "blockwise": ((1, 128), (128, 128), "f32"),
    "mx": ((1, 32), (1, 32), "f8E8M0FNU"),
}
CAST = ("f8E4M3FN", 1, 16, 0)  # element, slots, history rows, index


def _sources(recipe, m, n, k):
    """{part: MLIR source} of the fused program, the GEMM alone and the cast alone."""
    from mx import reference, tools
    a_block, b_block, scale_type = RECIPES[recipe]
    a_block, b_block = a_block or (m, k), b_block or (n, k)
    scale = reference.SCALE_TYPES[scale_type]
    fp8 = reference.ELEMENT_TYPES["f8E4M3FN"]
    types = [tools.mlir_type((m, k), fp8), tools.mlir_type(reference.scales_shape((m, k), a_block), scale),
             tools.mlir_type((n, k), fp8), tools.mlir_type(reference.scales_shape((n, k), b_block), scale)]
    product = f"tensor<{m}x{n}xbf16>"
    cast = tools.DelayedCast(*CAST)
    name = f"{recipe}_{m}x{n}x{k}"
    return {"fused": tools.scaled_matmul_source(f"{name}_fused", types, a_block, b_block, product, cast=cast),
            "gemm": tools.scaled_matmul_source(f"{name}_gemm", types, a_block, b_block, product),
            "cast": tools.delayed_cast_source(f"{name}_cast", product, cast)}


def _kernels(recipe, m, n, k, cache=None):
    from mx import compiler
    return {part: compiler.compile(text, "sm_90a", gemm="kernel", cache=cache)
            for part, text in _sources(recipe, m, n, k).items()}


def build(directory):
    for m, n, k in SHAPES:
        for recipe in RECIPES:
            _kernels(recipe, m, n, k, directory)  # compiled into the cache
    print(f"built {len(SHAPES) * len(RECIPES) * 3} programs into {directory}")


def _operands(torch, recipe, m, n, k):
    a_block, b_block, _ = RECIPES[recipe]
    fp8 = torch.float8_e4m3fn
    a = (torch.randn(m, k, device="cuda") * 8).to(fp8)
    b = (torch.randn(n, k, device="cuda") * 8).to(fp8)
    if recipe == "mx":
        scale = lambda rows: torch.full((rows, k // 32), 127, dtype=torch.uint8, device="cuda").view(  # noqa: E731
            torch.float8_e8m0fnu)
        return a, scale(m), b, scale(n)
    if recipe == "per_tensor":
        one = torch.full((1, 1), 2.0**-3, device="cuda")
        return a, one, b, one.clone()
    return (a, torch.full((m, k // 128), 2.0**-3, device="cuda"), b,
            torch.full((n // 128, k // 128), 2.0**-3, device="cuda"))


def _time(torch, calls, rounds=7, steps=20):
    """{name: median ms a call} of `calls` ({name: fn}), each round timing every call once, rotated."""
    names = list(calls)
    for name in names:
        for _ in range(3):
            calls[name]()
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(steps):
                calls[name]()
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) / steps)
    return {name: statistics.median(t) for name, t in times.items()}


def run():
    import torch
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}\n")
    print("| recipe | M x N x K | GEMM alone (bf16) | GEMM + cast | fused | unfused / fused | cuBLASLt FP8 output | check |")
    print("|---|---|---|---|---|---|---|---|")
    for m, n, k in SHAPES:
        for recipe in RECIPES:
            kernels = _kernels(recipe, m, n, k)
            operands = _operands(torch, recipe, m, n, k)
            scales = torch.tensor([2.0**-6], device="cuda")
            history = torch.zeros(CAST[2], CAST[1], device="cuda")
            product, = kernels["gemm"].run(*operands)
            codes, inverse, recorded = kernels["cast"].run(product, scales, history)
            fused = kernels["fused"].run(*operands, scales, history)
            same = torch.equal(fused[0].view(torch.uint8), codes.view(torch.uint8)) and \
                torch.equal(fused[2], recorded) and torch.equal(fused[1], inverse)
            calls = {"gemm": lambda: kernels["gemm"].run(*operands),
                     "unfused": lambda: kernels["cast"].run(kernels["gemm"].run(*operands)[0], scales, history),
                     "fused": lambda: kernels["fused"].run(*operands, scales, history)}
            if recipe == "per_tensor":
                a, sa, b, sb = operands
                scale_result = scales.reshape(())
                calls["cublas"] = lambda: torch._scaled_mm(a, b.t(), sa.reshape(()), sb.reshape(()),
                                                           scale_result=scale_result,
                                                           out_dtype=torch.float8_e4m3fn)
            t = _time(torch, calls)
            cublas = f"{t['cublas'] * 1e3:.0f} us" if "cublas" in t else "n/a (per-tensor only)"
            print(f"| {recipe} | {m}x{n}x{k} | {t['gemm'] * 1e3:.0f} us | {t['unfused'] * 1e3:.0f} us | "
                  f"{t['fused'] * 1e3:.0f} us | {t['unfused'] / t['fused']:.2f}x | {cublas} | "
                  f"{'same as unfused' if same else 'DIFFERS from unfused'} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "build":
        build(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "run":
        run()
    else:
        sys.exit(__doc__)
