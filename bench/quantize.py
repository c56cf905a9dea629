"""bench/quantize: MXFP8 quantization of bf16 matrices on the GPU, against its peers.

Two variants: rowwise (1x32) + swizzle, and rowwise + columnwise (32x1) fused in one kernel, both
scales swizzled (columnwise with K as the unscaled dimension).

Two steps, because the GPU machine has no MLIR:
  python bench/quantize.py build DIR      # here: compile the mx kernels (mx-opt ... -> DIR/*.so)
  python bench/quantize.py run DIR        # on the GPU: time them next to the peers, print a table
The table reports, per variant and shape, the device time of each implementation's kernels (CUPTI through
torch.profiler, median of per-iteration sums, so host launch overhead is excluded for every peer
alike) and the bandwidth counting bytes read + written: the bf16 input once, the FP8 data and the
E8M0 scales of every output. Peers measured in the same run: a device-to-device copy of the same bytes (the practical
bandwidth limit) and the same quantization written in PyTorch and compiled with torch.compile.
Before timing, every mx result is checked bit for bit against the torch.compile result.
"""

import ctypes
import statistics
import sys
from pathlib import Path

SHAPES = [(8192, 8192), (16384, 16384)]
ROOT = Path(__file__).resolve().parents[1]


VARIANTS = {"rowwise": [(1, 32)], "rowwise+columnwise": [(1, 32), (32, 1)]}


def kernel_name(variant, m, k):
    return f"mxfp8_{variant.replace('+', '_')}_{m}x{k}"


def kernel_source(variant, m, k):
    lines, results = [], []
    for index, block in enumerate(VARIANTS[variant]):
        dim = 0 if block == (1, 32) else 1
        scales = (m, k // 32) if dim == 0 else (m // 32, k)
        rows, cols = scales[dim], scales[1 - dim]
        tiles = f"tensor<{rows // 128}x{cols // 4}x32x4x4xf8E8M0FNU>"
        linear = f"tensor<{scales[0]}x{scales[1]}xf8E8M0FNU>"
        lines += [f"  %d{index}, %s{index} = mx.quantize %x block [{block[0]}, {block[1]}] : "
                  f"tensor<{m}x{k}xbf16> -> tensor<{m}x{k}xf8E4M3FN>, {linear}",
                  f"  %t{index} = mx.swizzle %s{index} unscaled_dim {dim} : {linear} -> {tiles}"]
        results += [(f"%d{index}", f"tensor<{m}x{k}xf8E4M3FN>"), (f"%t{index}", tiles)]
    types = ", ".join(t for _, t in results)
    return "\n".join([f"func.func @{kernel_name(variant, m, k)}(%x: tensor<{m}x{k}xbf16>) -> ({types}) {{",
                      *lines, f"  return {', '.join(v for v, _ in results)} : {types}", "}"])


def build(directory):
    from mx import tools
    from mx.ptx import extract_ptx
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for variant in VARIANTS:
        for m, k in SHAPES:
            name, source = kernel_name(variant, m, k), kernel_source(variant, m, k)
            tools.compile_gpu_library(source, directory / f"{name}.so")
            ptx = extract_ptx(tools.run_mx_opt(source, "--mx-lower-to-nvvm=chip=sm_90a format=isa"))
            (directory / f"{name}.ptx").write_text(ptx[0])


def torch_quantize(x, dim):
    """MXFP8 (ceil scales, docs/numerics.md) along `dim` (1: rowwise, 0: columnwise) + 128x4 swizzle,
    written with torch ops."""
    import torch
    if dim == 0:
        data, scales = torch_quantize(x.t(), 1)
        return data.t(), scales
    m, k = x.shape
    blocks = x.float().reshape(m, k // 32, 32)
    amax = blocks.abs().amax(dim=-1)
    bits = (amax / 448.0).view(torch.int32)
    exponent, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    b = torch.where(exponent == 0, (bits > 0x400000).int(), exponent + (mantissa != 0).int())
    b = torch.where(amax.isinf(), 254, b.clamp(max=254))
    factor = torch.where(b == 254, 0x400000, (254 - b) << 23).view(torch.float32)
    data = (blocks * factor[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(m, k)
    scales = b.to(torch.uint8).view(m // 128, 4, 32, k // 128, 4).permute(0, 3, 2, 1, 4).contiguous()
    return data, scales


def torch_variant(variant):
    """The PyTorch program of a variant: every output of `VARIANTS[variant]`, data contiguous."""
    def program(x):
        outputs = []
        for block in VARIANTS[variant]:
            data, scales = torch_quantize(x, 1 if block == (1, 32) else 0)
            outputs += [data.contiguous(), scales]
        return outputs
    return program


def device_time_us(fn, iters=50):
    """Median over iterations of the summed device time of every kernel/memcpy `fn` launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    per_iter = []
    for _ in range(iters):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        per_iter.append(sum(e.time_range.elapsed_us() for e in prof.events()
                            if e.device_type == torch.autograd.DeviceType.CUDA))
    return statistics.median(per_iter)


def run(directory):
    import torch
    from mx import runtime
    directory = Path(directory)
    library = runtime.load_library()
    rows = []
    for variant, blocks in VARIANTS.items():
        compiled = torch.compile(torch_variant(variant))
        for m, k in SHAPES:
            name = kernel_name(variant, m, k)
            lib = runtime.load_compiled(directory / f"{name}.so")
            x = torch.randn(m, k, device="cuda")
            x = x.mul_(torch.exp2(torch.randint(-20, 20, (m, 1), device="cuda"))).bfloat16()
            x_ref = runtime.MemRef.from_dlpack(x)
            ranks = [2, 5] * len(blocks)

            def mx_call():
                results = runtime.call_mlir_function(lib, name, [x_ref], result_ranks=ranks)
                for result in results:
                    result.free()
                return results

            # Bit-exact check against torch.compile before timing.
            results = runtime.call_mlir_function(lib, name, [x_ref], result_ranks=ranks)
            same = True
            for result, want in zip(results, compiled(x)):
                want = want.view(torch.uint8)
                got = torch.empty_like(want)
                library.mxrtMemcpyDtoD(ctypes.c_void_p(got.data_ptr()), ctypes.c_void_p(result.aligned),
                                       got.numel())
                same &= bool(torch.equal(got, want))
                result.free()

            nbytes = m * k * 2 + len(blocks) * (m * k + m * k // 32)
            src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            t_mx = device_time_us(mx_call)
            t_compile = device_time_us(lambda: compiled(x))
            t_copy = device_time_us(lambda: dst.copy_(src))
            rows.append((variant, f"{m}x{k}", same, nbytes / t_mx / 1e6, nbytes / t_compile / 1e6,
                         nbytes / t_copy / 1e6, t_mx, t_compile, t_copy))

    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| variant | shape (bf16 in) | mx == torch.compile | mx TB/s | torch.compile TB/s | copy TB/s "
          "| mx / copy | mx / torch.compile | mx us | torch.compile us | copy us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for variant, shape, same, mx_tbs, tc_tbs, copy_tbs, t_mx, t_tc, t_copy in rows:
        print(f"| {variant} | {shape} | {'yes' if same else 'NO'} | {mx_tbs:.2f} | {tc_tbs:.2f} "
              f"| {copy_tbs:.2f} | {mx_tbs / copy_tbs:.0%} | {mx_tbs / tc_tbs:.2f}x | {t_mx:.0f} "
              f"| {t_tc:.0f} | {t_copy:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        sys.exit(__doc__)
    build(sys.argv[2]) if sys.argv[1] == "build" else run(sys.argv[2])
