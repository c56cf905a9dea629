"""bench/quantize: MXFP8 rowwise quantize + swizzle of bf16 matrices on the GPU, against its peers.

Two steps, because the GPU machine has no MLIR:
  python bench/quantize.py build DIR      # here: compile the mx kernels (mx-opt ... -> DIR/*.so)
  python bench/quantize.py run DIR        # on the GPU: time them next to the peers, print a table
The table reports, per shape, the device time of each implementation's kernels (CUPTI through
torch.profiler, median of per-iteration sums, so host launch overhead is excluded for every peer
alike) and the bandwidth counting bytes read + written: the bf16 input, the FP8 data and the E8M0
scales. Peers measured in the same run: a device-to-device copy of the same bytes (the practical
bandwidth limit) and the same quantization written in PyTorch and compiled with torch.compile.
Before timing, every mx result is checked bit for bit against the torch.compile result.
"""

import ctypes
import statistics
import sys
from pathlib import Path

SHAPES = [(8192, 8192), (16384, 16384)]
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def kernel_name(m, k):
    return f"mxfp8_rowwise_swizzled_{m}x{k}"


def build(directory):
    from mx import tools
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for m, k in SHAPES:
        c = k // 32
        t = f"tensor<{m // 128}x{c // 4}x32x4x4xf8E8M0FNU>"
        source = f"""
func.func @{kernel_name(m, k)}(%x: tensor<{m}x{k}xbf16>) -> (tensor<{m}x{k}xf8E4M3FN>, {t}) {{
  %d, %s = mx.quantize %x block [1, 32] : tensor<{m}x{k}xbf16> -> tensor<{m}x{k}xf8E4M3FN>, tensor<{m}x{c}xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<{m}x{c}xf8E8M0FNU> -> {t}
  return %d, %t : tensor<{m}x{k}xf8E4M3FN>, {t}
}}"""
        tools.compile_gpu_library(source, directory / f"{kernel_name(m, k)}.so")
        ptx = tools.extract_ptx(tools.run_mx_opt(source, "--mx-lower-to-nvvm=chip=sm_90a format=isa"))
        (directory / f"{kernel_name(m, k)}.ptx").write_text(ptx[0])


def torch_quantize(x):
    """MXFP8 rowwise (ceil scales, docs/numerics.md) + 128x4 swizzle, written with torch ops."""
    import torch
    m, k = x.shape
    blocks = x.float().view(m, k // 32, 32)
    amax = blocks.abs().amax(dim=-1)
    bits = (amax / 448.0).view(torch.int32)
    exponent, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    b = torch.where(exponent == 0, (bits > 0x400000).int(), exponent + (mantissa != 0).int())
    b = torch.where(amax.isinf(), 254, b.clamp(max=254))
    factor = torch.where(b == 254, 0x400000, (254 - b) << 23).view(torch.float32)
    data = (blocks * factor[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(m, k)
    scales = b.to(torch.uint8).view(m // 128, 4, 32, k // 128, 4).permute(0, 3, 2, 1, 4).contiguous()
    return data, scales


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
    compiled = torch.compile(torch_quantize)
    rows = []
    for m, k in SHAPES:
        name = kernel_name(m, k)
        lib = runtime.load_compiled(directory / f"{name}.so")
        x = torch.randn(m, k, device="cuda").mul_(torch.exp2(torch.randint(-20, 20, (m, 1),
                                                                             device="cuda"))).bfloat16()
        x_ref = runtime.MemRef(x.data_ptr(), (m, k))

        def mx_call():
            data, scales = runtime.call_mlir_function(lib, name, [x_ref], result_ranks=[2, 5])
            return data, scales

        data, scales = mx_call()
        ref_data, ref_scales = compiled(x)
        torch.cuda.synchronize()
        got_data = torch.empty_like(ref_data.view(torch.uint8))
        got_scales = torch.empty_like(ref_scales)
        runtime.load_library().mxrtMemcpyDtoD(ctypes.c_void_p(got_data.data_ptr()),
                                              ctypes.c_void_p(data.aligned), got_data.numel())
        runtime.load_library().mxrtMemcpyDtoD(ctypes.c_void_p(got_scales.data_ptr()),
                                              ctypes.c_void_p(scales.aligned), got_scales.numel())
        data.free()
        scales.free()
        same = bool(torch.equal(got_data, ref_data.view(torch.uint8)) and torch.equal(got_scales, ref_scales))

        def mx_timed():
            d, s = mx_call()
            d.free()
            s.free()

        nbytes = m * k * 2 + m * k + m * k // 32
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        t_mx = device_time_us(mx_timed)
        t_compile = device_time_us(lambda: compiled(x))
        t_copy = device_time_us(lambda: dst.copy_(src))
        copy_tbs = nbytes / t_copy / 1e6
        rows.append((f"{m}x{k}", same, nbytes / t_mx / 1e6, nbytes / t_compile / 1e6, copy_tbs,
                     t_mx, t_compile, t_copy))

    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| shape (bf16 in) | mx == torch.compile | mx TB/s | torch.compile TB/s | copy TB/s "
          "| mx / copy | mx / torch.compile | mx us | torch.compile us | copy us |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape, same, mx_tbs, tc_tbs, copy_tbs, t_mx, t_tc, t_copy in rows:
        print(f"| {shape} | {'yes' if same else 'NO'} | {mx_tbs:.2f} | {tc_tbs:.2f} | {copy_tbs:.2f} "
              f"| {mx_tbs / copy_tbs:.0%} | {mx_tbs / tc_tbs:.2f}x | {t_mx:.0f} | {t_tc:.0f} | {t_copy:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        sys.exit(__doc__)
    build(sys.argv[2]) if sys.argv[1] == "build" else run(sys.argv[2])
