"""bench/gemm: `mx.scaled_matmul` compiled for Hopper (sm_90a) against cuBLAS, PyTorch and Triton.

Two steps, because the GPU machine has no MLIR:
  python bench/gemm.py build DIR [--gemm G] [--variants V;V...] [--recipes R,...] [--shapes MxNxK,...]
  python bench/gemm.py run DIR [--recipes R,...] [--shapes MxNxK,...]     # on the GPU: check, time, table
`--gemm` (auto, kernel or cublas; default kernel, the generated kernels being what is measured) is the
pipeline's gemm option (`--mx-lower-to-nvvm=chip=sm_90a`).
`--variants` adds, per recipe and shape, programs built with those `gemm-config` choices (GemmConfig.h,
e.g. "consumers=3,waves=1;epilogue=tma"), each timed as a row of its own, so that one GPU run compares
the generator's default with other tiles, clusters and epilogues on the same inputs.

Shapes (M, N, K): 4096^3, 8192^3, 16384x8192x8192, 8192x28672x8192 and the DeepSeek-V3 shapes
4096x7168x16384 and 4096x24576x1536; bf16 output; operands from torch.randn, quantized with torch ops.
Recipes (all measured in one run per shape):
  * mx (E4M3 x E4M3, E8M0 scales per [1, 32], swizzled): the compiled mx program, against cuBLAS BF16
    (torch.mm on the dequantized operands, which bf16 holds exactly), MXFP8 dequantize (torch ops, from
    the FP8 data and E8M0 bytes) + cuBLAS BF16 (both steps timed), and Triton's tl.dot_scaled (a simple
    128x128x128 kernel; on SM90 Triton upcasts to bf16 and runs a bf16 MMA);
  * blockwise (A 1x128, B 128x128, f32 power-of-two scales; A's scales GEMM-ready [K/128, M], as the
    quantize kernel writes them and as cuBLASLt reads them): the compiled mx program against cuBLASLt
    blockwise (torch._scaled_mm; where it refuses, mx.runtime.scaled_matmul = mxrtScaledMatmul);
  * wgrad (A 1x128 x B 1x128, both GEMM-ready: the weight-gradient form): against cuBLASLt VEC128_32F x
    VEC128_32F (torch._scaled_mm, else mxrtScaledMatmul);
  * per_tensor (one f32 scale amax / 448 per operand): against cuBLASLt per-tensor (torch._scaled_mm).
  * mx_e3m2, mx_e2m3, mx_e2m1, mx_int8 (MXFP6, MXFP4, MXINT8 on both operands) and mx_e4m3_e2m1 (mixed):
    the compiled mx program only (same exact kernel as mx; nothing else runs these on SM90), on random
    codes with E8M0 bytes in [120, 134]; compare with the mx row of the same run.
Every FP8 row promotes partial sums to f32 (use_fast_accum=False for the peers).
Time = median over iterations of the summed device time of every kernel one call launches (CUPTI through
torch.profiler, as bench/quantize.py): host work (the compiled function's gpu.alloc of C, its stream
setup and synchronization, the free of C after each call) is not counted, for any row. Inputs are
rotated over several copies where one set would fit in twice the L2. TFLOP/s = 2MNK / time; percent of
the dense peak of the rate the row runs at: 989 TFLOP/s for BF16-rate rows (MX on SM90 is bounded by the
BF16 tensor rate), 1979 for FP8-rate rows. "mx speedup" = peer time / mx time of the same recipe and
shape (of the default program). Every result is checked once, before timing, against the float32
product of the dequantized operands (TF32 off): relative Frobenius error, printed in the table. A program
that did not build (DIR/<name>.error), a failing call or a peer that refuses (e.g. NOT_SUPPORTED) gives an
n/a row with the reason. The ptxas -v report of each mx program (written by build) is printed before the
table, and the GPU's clocks and power before and after the run.
"""

import ctypes
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from torch_scales import pow2, pow2_ceil_bytes  # bench/ (the script's directory) is on sys.path

ROOT = Path(__file__).resolve().parents[1]

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192), (8192, 28672, 8192),
          (4096, 7168, 16384), (4096, 24576, 1536)]
RECIPES = ["mx", "blockwise", "wgrad", "per_tensor"]
# The other MX element types (A, B), run by the same exact dequantize-to-bf16 kernel as "mx"; not in the
# default --recipes: compare them with "mx" in the same run (--recipes mx,mx_e3m2,...).
MX_FORMATS = {"mx_e3m2": ("f6E3M2FN", "f6E3M2FN"), "mx_e2m3": ("f6E2M3FN", "f6E2M3FN"),
              "mx_e2m1": ("f4E2M1FN", "f4E2M1FN"), "mx_int8": ("i8", "i8"),
              "mx_e4m3_e2m1": ("f8E4M3FN", "f4E2M1FN")}
ALL_RECIPES = RECIPES + list(MX_FORMATS)
PEAK_BF16, PEAK_FP8 = 989.0, 1979.0
RECIPE_TITLES = {"mx": "MXFP8 (E8M0 1x32)", "blockwise": "FP8 blockwise 1x128 x 128x128",
                 "wgrad": "FP8 blockwise 1x128 x 1x128 (wgrad)", "per_tensor": "FP8 per-tensor",
                 **{r: "MX " + " x ".join(elems) + " (E8M0 1x32)" for r, elems in MX_FORMATS.items()}}


def kernel_name(recipe, m, n, k, variant=0):
    return f"gemm_{recipe}_{m}x{n}x{k}" + (f"_v{variant}" if variant else "")


def kernel_source(recipe, m, n, k, variant=0):
    from mx import tools
    elements = MX_FORMATS.get(recipe, ("f8E4M3FN", "f8E4M3FN"))
    if recipe == "mx" or recipe in MX_FORMATS:
        a_scales = f"tensor<{m // 128}x{k // 128}x32x4x4xf8E8M0FNU>"
        b_scales = f"tensor<{n // 128}x{k // 128}x32x4x4xf8E8M0FNU>"
        blocks = ([1, 32], [1, 32])
    elif recipe in ("blockwise", "wgrad"):
        # GEMM-ready 1x128 scales [K/128, R/4, 4] (mx.swizzle layout blockwise).
        a_scales = f"tensor<{k // 128}x{m // 4}x4xf32>"
        b_scales = (f"tensor<{n // 128}x{k // 128}xf32>" if recipe == "blockwise"
                    else f"tensor<{k // 128}x{n // 4}x4xf32>")
        blocks = ([1, 128], [128, 128] if recipe == "blockwise" else [1, 128])
    else:
        a_scales = b_scales = "tensor<1x1xf32>"
        blocks = ([m, k], [n, k])
    types = [f"tensor<{m}x{k}x{elements[0]}>", a_scales, f"tensor<{n}x{k}x{elements[1]}>", b_scales]
    return tools.scaled_matmul_source(kernel_name(recipe, m, n, k, variant), types, *blocks,
                                      f"tensor<{m}x{n}xbf16>")


# ---------------------------------------------------------------------------------------------------
# build


def _ptxas_report(source, options, directory, name):
    """ptxas -v of every PTX module the program embeds (written next to the library)."""
    from mx import tools
    from mx.ptx import extract_ptx
    lowered = tools.run_mx_opt(source, f"--mx-lower-to-nvvm=chip=sm_90a format=isa {options}")
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    lines = []
    for index, ptx in enumerate(extract_ptx(lowered)):
        path = directory / f"{name}.{index}.ptx"
        path.write_text(ptx)
        try:
            result = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(path), "-o", os.devnull],
                                    capture_output=True, text=True)
            lines += [line.rstrip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
            if result.returncode:
                lines.append(f"ptxas exited with {result.returncode}")
        except OSError as exc:
            lines.append(f"ptxas not run: {exc}")
    return lines or ["no PTX in the lowered module"]


def build(directory, gemm="kernel", variants=(), recipes=RECIPES, shapes=SHAPES):
    """Compiles every (recipe, shape) program, the default and one per `gemm-config` variant."""
    from mx import tools
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    configs = ["", *variants]
    (directory / "gemm_BUILD.txt").write_text(
        f"--mx-lower-to-nvvm=chip=sm_90a format=bin gemm={gemm}\n" + "".join(f"{c}\n" for c in configs))
    for recipe in recipes:
        for m, n, k in shapes:
            for variant, config in enumerate(configs):
                name, source = kernel_name(recipe, m, n, k, variant), kernel_source(recipe, m, n, k, variant)
                library, error, report = (directory / f"{name}{ext}" for ext in (".so", ".error", ".ptxas.txt"))
                for stale in (library, error, report):
                    stale.unlink(missing_ok=True)
                options = f"gemm={gemm}" + (f" gemm-config={config}" if config else "")
                try:
                    tools.compile_gpu_library(source, library, "sm_90a", gemm=gemm,
                                              options=f"gemm-config={config}" if config else "")
                    report.write_text("\n".join(_ptxas_report(source, options, directory, name)) + "\n")
                    print(f"built {library}")
                except Exception as exc:  # noqa: BLE001 (the run step prints the reason as an n/a row)
                    library.with_suffix(".o").unlink(missing_ok=True)
                    lines = str(exc).strip().splitlines() or [type(exc).__name__]
                    reason = next((line for line in lines if "error" in line), lines[-1]).strip()
                    error.write_text(f"pipeline {options}: {reason}\n\n{exc}\n")
                    print(f"NOT built {name}: {reason}")


def read_variants(directory):
    """The gemm-config of each program variant of DIR (variant 0: the generator's choice)."""
    summary = Path(directory) / "gemm_BUILD.txt"
    lines = summary.read_text().splitlines()[1:] if summary.is_file() else []
    return lines or [""]


# ---------------------------------------------------------------------------------------------------
# run: quantization and peers in torch




def quantize_mx(x):
    """MXFP8: E4M3 data [R, K] and E8M0 bytes (uint8) [R, K/32] (linear), ceil scales."""
    import torch
    r, k = x.shape
    blocks = x.float().view(r, k // 32, 32)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=-1))
    data = (blocks * pow2(b, -1)[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(r, k)
    return data, b.to(torch.uint8)


def swizzle(scale_bytes):
    """Linear [R, C] -> 128x4 tiles [R/128, C/4, 32, 4, 4] (spec section 4; R % 128 == C % 4 == 0)."""
    r, c = scale_bytes.shape
    return scale_bytes.view(r // 128, 4, 32, c // 4, 4).permute(0, 3, 2, 1, 4).contiguous()


def dequantize_mx(data, scale_bytes):
    """The dequantize peer, in torch ops: bf16 = bf16(E4M3) * bf16(2^(b-127)) (exact for b >= 1)."""
    import torch
    r, k = data.shape
    scale = (scale_bytes.to(torch.int32) << 23).view(torch.float32).to(torch.bfloat16)
    return (data.view(r, k // 32, 32).to(torch.bfloat16) * scale[..., None]).view(r, k)


def quantize_blockwise(x, rows_per_block):
    """FP8 blockwise, rows_per_block = 1 (1x128) or 128 (128x128): E4M3 data and f32 power-of-two
    scales [R / rows_per_block, K/128]."""
    import torch
    r, k = x.shape
    blocks = x.float().view(r // rows_per_block, rows_per_block, k // 128, 128)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=(1, 3)))
    data = (blocks * pow2(b, -1)[:, None, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return data.view(r, k), pow2(b, 1).contiguous()


def quantize_per_tensor(x):
    import torch
    scale = (x.float().abs().amax() / 448.0).reshape(1, 1)
    return (x.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale.contiguous()


def dequantized_f32(kind, data, scales):
    """f32 values of quantized data: kind "mx" (E8M0 bytes [R, K/32]), "1x128", "128x128", "tensor"."""
    import torch
    r, k = data.shape
    if kind == "mx":
        scale = (scales.to(torch.int32) << 23).view(torch.float32)
        return (data.float().view(r, k // 32, 32) * scale[..., None]).view(r, k)
    if kind == "1x128":
        return (data.float().view(r, k // 128, 128) * scales[..., None]).view(r, k)
    if kind == "128x128":
        return (data.float().view(r // 128, 128, k // 128, 128) * scales[:, None, :, None]).view(r, k)
    return data.float() * scales


def copies(tensors, sets):
    """`sets` input sets: the tensors themselves, then clones (same values, other memory)."""
    return [tuple(tensors)] + [tuple(t.clone() for t in tensors) for _ in range(sets - 1)]


TRITON_CONFIGS = [  # BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages; the first that compiles is used
    (128, 128, 128, 8, 3), (128, 128, 128, 8, 2), (128, 128, 64, 4, 3)]
_TRITON_KERNEL = None


def _triton_kernel():
    global _TRITON_KERNEL
    if _TRITON_KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def mx_dot_scaled(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
            # A [M, K] e4m3, A scales [M, K/32] e8m0 bytes, B [N, K] e4m3, B scales [N, K/32]; C bf16.
            pid = tl.program_id(0)
            num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
            group = GROUP_M * num_n
            first_m = (pid // group) * GROUP_M
            size_m = tl.minimum(num_m - first_m, GROUP_M)
            pid_m = first_m + (pid % group) % size_m
            pid_n = (pid % group) // size_m
            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            offs_s = tl.arange(0, BLOCK_K // 32)
            a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
            b_ptrs = b_ptr + offs_n[None, :] * K + offs_k[:, None]
            as_ptrs = as_ptr + offs_m[:, None] * (K // 32) + offs_s[None, :]
            bs_ptrs = bs_ptr + offs_n[:, None] * (K // 32) + offs_s[None, :]
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for _ in range(0, tl.cdiv(K, BLOCK_K)):
                acc = tl.dot_scaled(tl.load(a_ptrs), tl.load(as_ptrs), "e4m3",
                                    tl.load(b_ptrs), tl.load(bs_ptrs), "e4m3", acc)
                a_ptrs += BLOCK_K
                b_ptrs += BLOCK_K
                as_ptrs += BLOCK_K // 32
                bs_ptrs += BLOCK_K // 32
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16))

        _TRITON_KERNEL = mx_dot_scaled
    return _TRITON_KERNEL


def triton_dot_scaled(a, sa, b, sb, config):
    import torch
    import triton
    m, k = a.shape
    n = b.shape[0]
    block_m, block_n, block_k, warps, stages = config
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    _triton_kernel()[grid](a, sa, b, sb, c, m, n, k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                           GROUP_M=8, num_warps=warps, num_stages=stages)
    return c


class _TorchBuffer:
    """What mx.runtime.scaled_matmul needs of a DeviceBuffer (ptr, nbytes), for a torch tensor."""

    def __init__(self, tensor):
        self.tensor, self.ptr, self.nbytes = tensor, tensor.data_ptr(), tensor.numel() * tensor.element_size()


def mxrt_scaled_matmul(a, sa, a_mode, b, sb, b_mode):
    import torch
    from mx import runtime
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    f8 = runtime.ElemType.F8E4M3
    runtime.scaled_matmul(m, n, k, _TorchBuffer(a), f8, _TorchBuffer(sa), a_mode, _TorchBuffer(b), f8,
                          _TorchBuffer(sb), b_mode, _TorchBuffer(c), runtime.ElemType.BF16)
    return c


# ---------------------------------------------------------------------------------------------------
# run: timing


def device_time_us(calls, iterations):
    """Median over iterations of the summed device time of every kernel / memcpy / memset one call
    launches (CUPTI via torch.profiler); call i uses input set i % len(calls)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for i in range(3):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    per_iter = []
    for i in range(iterations):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            calls[i % len(calls)]()
            torch.cuda.synchronize()
        per_iter.append(sum(e.time_range.elapsed_us() for e in prof.events()
                            if e.device_type == torch.autograd.DeviceType.CUDA))
    if not any(per_iter):
        raise RuntimeError("the profiler saw no device activity")
    return statistics.median(per_iter)


def iterations_for(call):
    """Fewer iterations for slow rows: ~20 s of profiled calls at most per row, 10..30 iterations."""
    import torch
    torch.cuda.synchronize()
    start = time.perf_counter()
    call()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return max(10, min(30, int(1.0 / max(seconds, 1e-6))))


def relative_error(got, ref):
    diff = (got.float() - ref).double().norm()
    return float(diff / ref.double().norm())


class Row:
    def __init__(self, shape, recipe, impl, peak, ours=False):
        self.shape, self.recipe, self.impl, self.peak, self.ours = shape, recipe, impl, peak, ours
        self.time_us = self.error = None
        self.notes = []

    def fail(self, reason):
        self.time_us = None
        self.notes.append("n/a: " + " ".join(str(reason).split())[:160])


def measure(row, call, ref, sets=1, check=None):
    """Checks one result (check(), default call(0)) against `ref`, then times call(i) over `sets` input
    sets; any failure makes the row n/a with the reason."""
    import torch
    row.time_us = row.error = None
    try:
        got = (check or (lambda: call(0)))()
        row.error = relative_error(got, ref)
        del got
        calls = [lambda i=i: call(i) for i in range(sets)]
        row.time_us = device_time_us(calls, iterations_for(calls[0]))
    except Exception as exc:  # noqa: BLE001 (a peer that fails is reported, not fatal)
        row.fail(f"{type(exc).__name__}: {exc}")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def input_sets(nbytes):
    """How many copies of the inputs to rotate so that one set plus the others exceed twice the L2."""
    import torch
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return 1 if nbytes >= 2 * l2 else min(4, math.ceil(2 * l2 / nbytes))


class Compiled:
    """The mx programs of DIR, loaded on demand; `reason` says why one cannot run."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.variants = read_variants(directory)
        self.runtime_error = None
        try:
            from mx import runtime
            runtime.load_library()
            cc = runtime.compute_capability()
            if cc != (9, 0):
                self.runtime_error = f"the programs are sm_90a code; this GPU is compute capability {cc}"
        except Exception as exc:  # noqa: BLE001
            self.runtime_error = f"libmx_runtime: {exc}"

    def load(self, name):
        from mx import runtime
        if self.runtime_error:
            raise RuntimeError(self.runtime_error)
        library = self.directory / f"{name}.so"
        if not library.is_file():
            error = self.directory / f"{name}.error"
            reason = error.read_text().splitlines()[0] if error.is_file() else "not built"
            raise RuntimeError(f"{library.name} missing: {reason}")
        return runtime.load_compiled(library)


def mx_call(lib, name, operands, shapes=None):
    """A call of the compiled program on torch tensors (passed through DLPack, FP8 / E8M0 as bytes; or,
    with `shapes`, as memrefs of those logical shapes on the tensors' bytes: packed FP4 / FP6).
    The program returns C in a fresh device buffer: call(keep=True) copies it into a torch tensor,
    call() frees it at once; either way it is freed."""
    import torch
    from mx import runtime
    if shapes is None:
        memrefs = [runtime.MemRef.from_dlpack(t.view(torch.uint8) if t.element_size() == 1 else t)
                   for t in operands]
    else:
        memrefs = [runtime.MemRef(t.data_ptr(), shape) for t, shape in zip(operands, shapes)]
        for memref, tensor in zip(memrefs, operands):
            memref.owner = tensor
    m, n = (shapes or [t.shape for t in operands])[0][0], (shapes or [t.shape for t in operands])[2][0]

    def call(keep=False):
        result, = runtime.call_mlir_function(lib, name, memrefs, result_ranks=[2])
        try:
            if not keep:
                return None
            if result.shape != (m, n):
                raise RuntimeError(f"result shape {result.shape}, expected {(m, n)}")
            out = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
            runtime.load_library().mxrtMemcpyDtoD(ctypes.c_void_p(out.data_ptr()),
                                                  ctypes.c_void_p(result.aligned), out.numel() * 2)
            return out
        finally:
            result.free()
    return call


def bench_shape(shape, compiled, recipes):
    import torch
    m, n, k = shape
    rows = []
    torch.manual_seed(m + n + k)
    xa = torch.randn(m, k, device="cuda")
    xb = torch.randn(n, k, device="cuda")

    def add(recipe, impl, peak, call, ref, sets, check=None, ours=False):
        row = Row(shape, recipe, impl, peak, ours)
        measure(row, call, ref, sets, check)
        rows.append(row)
        return row
    add.rows = rows

    def add_ours(recipe, operand_sets, ref, shapes=None):
        """A row per program variant of the recipe: the default, then each gemm-config."""
        peak = PEAK_BF16 if recipe == "mx" or recipe in MX_FORMATS else PEAK_FP8
        for variant, config in enumerate(compiled.variants):
            name = kernel_name(recipe, m, n, k, variant)
            impl = "mx (compiled)" + (f" [{config}]" if config else "")
            try:
                lib = compiled.load(name)
                calls = [mx_call(lib, name, operands, shapes) for operands in operand_sets]
            except Exception as exc:  # noqa: BLE001 (not built, no runtime, ...: an n/a row)
                row = Row(shape, recipe, impl, peak, ours=variant == 0)
                row.fail(exc)
                rows.append(row)
                continue
            # The check copies C out (keep=True); the timed calls free C at once, outside device time.
            add(recipe, impl, peak, lambda i: calls[i](), ref, len(calls),
                check=lambda: calls[0](keep=True), ours=variant == 0)

    benches = {"mx": bench_mx, "blockwise": bench_blockwise, "wgrad": bench_wgrad,
               "per_tensor": bench_per_tensor}
    for recipe in recipes:
        if recipe in MX_FORMATS:
            bench_mx_format(shape, recipe, add_ours)
        else:
            benches[recipe](shape, xa, xb, add, add_ours)
        torch.cuda.empty_cache()
    return rows


def bench_mx(shape, xa, xb, add, add_ours):
    """MX: E4M3 x E4M3, E8M0 per 1x32: mx, cuBLAS BF16, dequantize + cuBLAS BF16, Triton."""
    import torch
    m, n, k = shape
    a, sa = quantize_mx(xa)
    b, sb = quantize_mx(xb)
    ref = dequantized_f32("mx", a, sa) @ dequantized_f32("mx", b, sb).t()
    sets = input_sets(m * k + n * k + sa.numel() + sb.numel())
    add_ours("mx", copies((a, swizzle(sa), b, swizzle(sb)), sets), ref)
    deq = copies((dequantize_mx(a, sa), dequantize_mx(b, sb)), input_sets(2 * (m * k + n * k)))
    add("mx", "cuBLAS BF16 (torch.mm, dequantized operands)", PEAK_BF16,
        lambda i: torch.mm(deq[i][0], deq[i][1].t()), ref, len(deq))
    deq[:] = []
    raw = copies((a, sa, b, sb), sets)
    row = add("mx", "MXFP8 dequantize (torch ops) + cuBLAS BF16", PEAK_BF16,
              lambda i: torch.mm(dequantize_mx(raw[i][0], raw[i][1]), dequantize_mx(raw[i][2], raw[i][3]).t()),
              ref, sets)
    if row.time_us is not None:
        try:
            calls = [lambda i=i: (dequantize_mx(raw[i][0], raw[i][1]), dequantize_mx(raw[i][2], raw[i][3]))
                     for i in range(sets)]
            row.notes.append(f"of which dequantize {device_time_us(calls, iterations_for(calls[0])):.0f} us")
        except Exception as exc:  # noqa: BLE001
            row.notes.append(f"dequantize alone not timed: {exc}")
    for config in TRITON_CONFIGS:  # the first configuration that runs
        row = add("mx", "Triton tl.dot_scaled", PEAK_BF16,
                  lambda i: triton_dot_scaled(*raw[i], config), ref, sets)
        if row.time_us is not None:
            row.notes.append("tile {}x{}x{}, {} warps, {} stages".format(*config))
            break
        if config != TRITON_CONFIGS[-1]:
            add.rows.pop()


def random_mx_operand(rows, k, elem, generator):
    """Random codes of `elem` [rows, k] as device memory holds them (FP4 two and FP6 four to three bytes
    per element group, little-endian), E8M0 bytes [rows, k/32] in [120, 134], and the f32 values."""
    import numpy as np
    import torch
    from mx import formats
    fmt = formats.get(elem)
    codes = torch.randint(0, 1 << fmt.bits, (rows, k), device="cuda", generator=generator, dtype=torch.int32)
    if elem == "f8E4M3FN":  # no NaN codes
        codes = torch.where(codes & 0x7F == 0x7F, codes - 1, codes)
    table = np.arange(1 << fmt.bits, dtype=np.uint8)
    if fmt.int_fraction_bits is not None:  # MXINT8: two's complement codes times 2^-fraction bits
        table = np.ldexp(table.view(np.int8).astype(np.float32), -fmt.int_fraction_bits)
    values = torch.tensor(table.view(fmt.dtype).astype(np.float32) if fmt.int_fraction_bits is None
                          else table, device="cuda")[codes.long()]
    scale_bytes = torch.randint(120, 135, (rows, k // 32), device="cuda", generator=generator,
                                dtype=torch.int32)
    ref = (values.view(rows, k // 32, 32) * torch.exp2(scale_bytes.float() - 127)[..., None]).view(rows, k)
    if fmt.packed_elements > 1:  # element i of a group in bits [bits * i, bits * (i + 1))
        group = codes.view(rows, k // fmt.packed_elements, fmt.packed_elements)
        shifts = torch.arange(fmt.packed_elements, device="cuda", dtype=torch.int32) * fmt.bits
        word = (group << shifts).sum(-1)
        codes = torch.stack([(word >> (8 * i)) & 0xFF for i in range(fmt.packed_bytes)], -1)
    return codes.to(torch.uint8).reshape(rows, -1), scale_bytes.to(torch.uint8), ref


def bench_mx_format(shape, recipe, add_ours):
    """An MX format pair on the exact kernel: random codes and scales, checked against their f32 product."""
    import torch
    m, n, k = shape
    generator = torch.Generator(device="cuda").manual_seed(m + n + k)
    a_elem, b_elem = MX_FORMATS[recipe]
    a, sa, ra = random_mx_operand(m, k, a_elem, generator)
    b, sb, rb = random_mx_operand(n, k, b_elem, generator)
    ref = ra @ rb.t()
    del ra, rb
    sets = input_sets(a.numel() + b.numel() + sa.numel() + sb.numel())
    shapes = [(m, k), (m // 128, k // 128, 32, 4, 4), (n, k), (n // 128, k // 128, 32, 4, 4)]
    add_ours(recipe, copies((a, swizzle(sa), b, swizzle(sb)), sets), ref, shapes)


def gemm_ready(scales):
    """1x128 scales [R, K/128] -> the GEMM-ready [K/128, R/4, 4] (R % 4 == 0): the transposed layout that
    the quantize kernel writes and cuBLASLt reads."""
    rows, blocks = scales.shape
    return scales.t().contiguous().view(blocks, rows // 4, 4)


def bench_blockwise(shape, xa, xb, add, add_ours, wgrad=False):
    """FP8 blockwise, A 1x128 x B 128x128 (or 1x128 for the wgrad form), f32 power-of-two scales: mx,
    cuBLASLt."""
    import torch
    from mx import runtime
    m, n, k = shape
    recipe = "wgrad" if wgrad else "blockwise"
    a, sa = quantize_blockwise(xa, 1)
    b, sb = quantize_blockwise(xb, 1 if wgrad else 128)
    ref = dequantized_f32("1x128", a, sa) @ dequantized_f32("1x128" if wgrad else "128x128", b, sb).t()
    sets = input_sets(m * k + n * k)
    bw = copies((a, sa, b, sb), sets)
    add_ours(recipe, [(s[0], gemm_ready(s[1]), s[2], gemm_ready(s[3]) if wgrad else s[3]) for s in bw], ref)
    # torch._scaled_mm(A, B^T): 1x128 scales [R, K/128] outer-dim-major (column-major, which is the
    # GEMM-ready [K/128, R] in memory); B^T's 128x128 scales [K/128, N/128], the transpose of B's
    # row-major [N/128, K/128].
    bw_torch = [(s[0], s[1].t().contiguous().t(), s[2].t(),
                 s[3].t().contiguous() if wgrad else s[3].t()) for s in bw]
    row = add(recipe, "cuBLASLt blockwise (torch._scaled_mm)", PEAK_FP8,
              lambda i: torch._scaled_mm(bw_torch[i][0], bw_torch[i][2], scale_a=bw_torch[i][1],
                                         scale_b=bw_torch[i][3], out_dtype=torch.bfloat16,
                                         use_fast_accum=False), ref, sets)
    if row.time_us is None:  # torch refused: the same cuBLASLt mode through mx's runtime
        add.rows.pop()
        refused = "; ".join(row.notes)
        b_mode = runtime.ScaleMode.VEC128_F32 if wgrad else runtime.ScaleMode.BLK128X128_F32
        row = add(recipe, "cuBLASLt blockwise (mxrtScaledMatmul)", PEAK_FP8,
                  lambda i: mxrt_scaled_matmul(bw[i][0], bw[i][1], runtime.ScaleMode.VEC128_F32,
                                               bw[i][2], bw[i][3], b_mode), ref, sets)
        row.notes.insert(0, f"torch._scaled_mm {refused}")


def bench_wgrad(shape, xa, xb, add, add_ours):
    bench_blockwise(shape, xa, xb, add, add_ours, wgrad=True)


def bench_per_tensor(shape, xa, xb, add, add_ours):
    """FP8 per-tensor, one f32 scale (amax / 448) per operand: mx, cuBLASLt."""
    import torch
    m, n, k = shape
    a, sa = quantize_per_tensor(xa)
    b, sb = quantize_per_tensor(xb)
    ref = dequantized_f32("tensor", a, sa) @ dequantized_f32("tensor", b, sb).t()
    pt = copies((a, sa, b, sb), input_sets(m * k + n * k))
    add_ours("per_tensor", pt, ref)
    add("per_tensor", "cuBLASLt per-tensor (torch._scaled_mm)", PEAK_FP8,
        lambda i: torch._scaled_mm(pt[i][0], pt[i][2].t(), scale_a=pt[i][1].reshape(()),
                                   scale_b=pt[i][3].reshape(()), out_dtype=torch.bfloat16,
                                   use_fast_accum=False), ref, len(pt))


# ---------------------------------------------------------------------------------------------------
# run: report


def _cublaslt_version():
    for soname in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"):
        try:
            version = ctypes.CDLL(soname).cublasLtGetVersion
        except (OSError, AttributeError):
            continue
        version.restype = ctypes.c_size_t
        v = version()
        return f"{v // 10000}.{v // 100 % 100}.{v % 100} ({soname})"
    return "unknown"


def _nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def print_ptxas(directory, recipes, shapes):
    """One line per program of the build step's ptxas -v: registers, spills, and any warning."""
    print("ptxas -arch=sm_90a -v of each mx program (from the build step):")
    keys = ("bytes stack", "Used", "Warning", "warning", "Performance", "ptxas exited", "not run")
    for recipe in recipes:
        for m, n, k in shapes:
            for variant, config in enumerate(read_variants(directory)):
                name = kernel_name(recipe, m, n, k, variant)
                report = Path(directory) / f"{name}.ptxas.txt"
                if not report.is_file():
                    print(f"  {name}: no report (not built)")
                    continue
                lines = [" ".join(line.replace("ptxas info    :", "").split())
                         for line in report.read_text().splitlines() if any(key in line for key in keys)]
                print(f"  {name}{f' [{config}]' if config else ''}: {'; '.join(lines)}")


def gpu_state():
    """The SM clock, its maximum, the power draw and limit, and any throttle reason, as nvidia-smi says."""
    fields = "clocks.sm,clocks.max.sm,power.draw,power.limit,clocks_throttle_reasons.active,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip() if out.returncode == 0 else f"nvidia-smi failed: {out.stderr.strip()}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi not run: {exc}"


def print_table(rows, directory):
    import torch
    print()
    props = torch.cuda.get_device_properties(0)
    smi = _nvidia_smi()
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    pipeline = Path(directory) / "gemm_BUILD.txt"
    pipeline = pipeline.read_text().splitlines()[0] if pipeline.is_file() else "unknown"
    runtime_lib = os.environ.get("MX_RUNTIME_LIB")
    command = (f"MX_RUNTIME_LIB={runtime_lib} " if runtime_lib else "") + "python3 " + " ".join(sys.argv)
    print(f"GPU: {props.name} ({props.multi_processor_count} SMs, L2 {props.L2_cache_size >> 20} MiB"
          + (f"; driver, SM clock, max SM clock: {smi}" if smi else "") + ")")
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), cuBLASLt {_cublaslt_version()}, "
          f"Triton {triton_version}")
    print(f"mx programs: {pipeline}")
    print(f"command: {command}")
    print("times: median device time per call (CUPTI), bf16 output; error: relative Frobenius vs the f32 "
          "product of the dequantized operands")
    print()
    print("| M x N x K | recipe | implementation | device us | TFLOP/s | % of peak | mx speedup | rel. error "
          "| notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        m, n, k = row.shape
        ours = next((r for r in rows if r.ours and r.shape == row.shape and r.recipe == row.recipe), None)
        if row.time_us is None:
            t = tflops = pct = "n/a"
        else:
            flops = 2.0 * m * n * k / (row.time_us * 1e-6) / 1e12
            t, tflops, pct = f"{row.time_us:.0f}", f"{flops:.0f}", f"{flops / row.peak:.0%} of {row.peak:.0f}"
        if row.ours:
            speedup = "-"
        elif ours is None or ours.time_us is None or row.time_us is None:
            speedup = "n/a"
        else:
            speedup = f"{row.time_us / ours.time_us:.2f}x"
        error = "n/a" if row.error is None else f"{row.error:.2e}"
        notes = "; ".join(row.notes).replace("|", "/")
        print(f"| {m}x{n}x{k} | {RECIPE_TITLES[row.recipe]} | {row.impl} | {t} | {tflops} | {pct} | {speedup} "
              f"| {error} | {notes} |")


def run(directory, recipes=RECIPES, shapes=SHAPES):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 references
    torch.backends.cudnn.allow_tf32 = False
    directory = Path(directory)
    started = time.perf_counter()
    compiled = Compiled(directory)
    if compiled.runtime_error:
        print(f"mx programs cannot run: {compiled.runtime_error}")
    print_ptxas(directory, recipes, shapes)
    print(f"GPU state before (SM clock, max, power, limit, throttle reasons, temperature): {gpu_state()}")
    rows = []
    for shape in shapes:
        shape_rows = bench_shape(shape, compiled, recipes)
        for row in shape_rows:
            status = f"{row.time_us:.0f} us" if row.time_us is not None else "n/a"
            error = "" if row.error is None else f", error {row.error:.2e}"
            print(f"{'x'.join(map(str, shape))} {row.recipe} {row.impl}: {status}{error} {'; '.join(row.notes)}",
                  flush=True)
        rows += shape_rows
        print(f"GPU state after {'x'.join(map(str, shape))}: {gpu_state()}", flush=True)
    print_table(rows, directory)
    print(f"\n(run took {time.perf_counter() - started:.0f} s)")


def profile(directory, recipes, shapes, variants):
    """Calls each selected program twice (a warm-up, then the call to profile), for ncu: e.g.
    `ncu -k kernel --launch-skip 1 --launch-count 1 python3 bench/gemm.py profile DIR --variants 1`."""
    import torch
    compiled = Compiled(directory)
    if compiled.runtime_error:
        sys.exit(f"mx programs cannot run: {compiled.runtime_error}")
    for m, n, k in shapes:
        xa, xb = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        for recipe in recipes:
            a, sa = quantize_per_tensor(xa) if recipe == "per_tensor" else quantize_blockwise(xa, 1)
            b, sb = (quantize_per_tensor(xb) if recipe == "per_tensor"
                     else quantize_blockwise(xb, 128 if recipe == "blockwise" else 1))
            if recipe in ("blockwise", "wgrad"):
                sa = gemm_ready(sa)
                sb = gemm_ready(sb) if recipe == "wgrad" else sb
            for variant in variants:
                name = kernel_name(recipe, m, n, k, variant)
                call = mx_call(compiled.load(name), name, (a, sa, b, sb))
                for _ in range(2):
                    call()
                torch.cuda.synchronize()
                print(f"profiled {name} [{compiled.variants[variant]}]", flush=True)


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("build", "run", "profile"))
    parser.add_argument("directory")
    parser.add_argument("--gemm", default="kernel", choices=("auto", "kernel", "cublas"),
                        help="the pipeline's gemm option (default kernel: the generated kernels are what is measured)")
    parser.add_argument("--variants", default="",
                        help="build: gemm-config choices separated by ';'; profile: variant numbers, e.g. 0,2")
    parser.add_argument("--recipes", default=",".join(RECIPES),
                        help=f"some of {ALL_RECIPES} (default: {','.join(RECIPES)})")
    parser.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES))
    args = parser.parse_args(argv)
    recipes = [r for r in args.recipes.split(",") if r]
    unknown = [r for r in recipes if r not in ALL_RECIPES]
    if unknown:
        parser.error(f"unknown recipes {unknown}; expected some of {ALL_RECIPES}")
    try:
        shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",") if s]
    except ValueError:
        parser.error(f"--shapes must be MxNxK,... (got {args.shapes!r})")
    if any(len(s) != 3 or min(s) < 1 for s in shapes):
        parser.error(f"--shapes must be MxNxK,... (got {args.shapes!r})")
    if args.step == "build":
        build(args.directory, args.gemm, [v for v in args.variants.split(";") if v], recipes, shapes)
    elif args.step == "profile":
        profile(args.directory, recipes, shapes, [int(v) for v in args.variants.split(",") if v] or [0])
    else:
        run(args.directory, recipes, shapes)


if __name__ == "__main__":
    main(sys.argv[1:])
