"""bench/quantize: every mx quantize recipe, dequantize and (un)swizzle on the GPU, against their peers.

Two steps, because the GPU machine has no MLIR:
  python bench/quantize.py build DIR [--only PREFIX[,PREFIX...]]
                                         # here: compile every program (mx-opt ... -> DIR/<name>.so) and
                                         # write ptxas -arch=sm_90a -v of each kernel to DIR/ptxas.txt
                                         # (--only: the rows whose program name starts with a prefix)
  python bench/quantize.py run DIR [--only PREFIX[,PREFIX...]] [--iters N] [--no-torchao] [--no-compile]
                                 [--torchao-all-configs]
                                         # on the GPU: check, time, print one markdown table (--only: the
                                         # rows whose program name starts with one of the prefixes)
  python bench/quantize.py list          # the rows (name, shape, bytes, goal); needs neither torch nor MLIR
  python bench/quantize.py selftest      # the bit-exact checks of `run` on small shapes against simulated
                                         # GPU outputs (numpy + mx.reference only, no GPU)

This file builds, runs, checks and prints; the rows (one Case per mx program, with its MLIR source and
goal) are in quantize_cases.py, and the torch / torch.compile / torchao peers in quantize_peers.py.

Rows (bf16 inputs; `list` prints them): MXFP8 rowwise + columnwise fused with both scales swizzled, rowwise +
swizzle, columnwise + swizzle (8192^2 and 16384^2), rowwise + swizzle of an N-D input [8, 1024, 8192]; FP8
blockwise 1x128 and 128x128 (power-of-two f32 scales, `ceil`), and 1x128 written transposed (the 1x128 blocks
along M, GEMM-ready) alone and with the rowwise part in one kernel (mx.torch's "both" program; 8192^2 and the
5B model's 15872 x 4096, with the rowwise part alone there too); FP8 per-tensor current scaling (the amax pass
and the cast, `exact` scale amax / 448; also at 15872 x 4096, and with the transposed data from the
cast+transpose kernel, mx.torch's "both" program, at 8192^2 and 15872 x 4096); the delayed-scaling cast
(mx.quantize_delayed, history [16, 1024]; also with its transposed partner, the cast+transpose kernel,
mx.torch's program, at 8192^2 and 15872 x 4096); MXFP4 (E2M1 packed, E8M0 per [1, 32]) and NVFP4 (E2M1 packed, E4M3
per [1, 16]) with a given and with a computed tensor scale (8192^2 and 16384^2); the delayed-scaling history
update (mx.update_amax_history) of 1024 tensors, history [16, 1024], as one launch; MXFP8 dequantize to bf16
at 8192^2; swizzle and unswizzle of the E8M0 scales of 8192^2 data ([8192, 256]); MXFP6 (E3M2 and E2M3, packed
four to three bytes) and MXINT8 at 8192^2: rowwise + columnwise fused, rowwise and columnwise, each with its
scales swizzled, and dequantize to bf16.

Bytes moved = bytes read + bytes written by the computation, once each: the bf16 input, every output
(FP4 packed two to a byte, FP6 four to three bytes, scales as stored), and the small inputs (scales,
history). Per-tensor current
scaling and NVFP4 with a computed tensor scale read the input twice (an amax pass, then the cast), and
both reads are counted. The bandwidth yardstick is a device-to-device copy of the same number of bytes
(half read, half written); "% of copy" is mx's TB/s over the copy's. Goals: >= 90% of the copy for the
quantize rows and the MXFP6 / MXINT8 dequantize rows, >= 80% for the MXFP8 dequantize / swizzle /
unswizzle, < 10 us for the history update.

Times: CUPTI kernel (and memcpy / memset) device times through torch.profiler, one profiler session
per call, summed per call, and the median over the calls (50; 100 for rows under 64 MiB), so host
launch overhead is excluded for every implementation alike. The mx
programs are called through mx.runtime in call-stream mode on torch's current stream, as mx.compile
calls them on torch tensors: inputs passed by DLPack, results allocated by the program from the
stream-ordered pool (which keeps freed memory cached, as torch's allocator does for the peers) and
freed after each call. (Called in default mode instead, each result is a cuMemAlloc and a cuMemFree
per call; that measured 2-5% faster on the 8192^2 quantize rows and no different at 16384^2 or for
the swizzle, so the pool, the steady state of a torch user, is what is timed.) Peers in the same run: the copy; the same computation
written in torch ops and compiled with torch.compile (dynamic=False) where that is reasonable to write
(MXFP8, blockwise, per-tensor, delayed cast, history update, dequantize, swizzle); torchao 0.18's kernels
where torchao imports: its MXFP8 Triton kernels (triton_to_mxfp8_dim0 / dim1, triton_mx_block_rearrange,
triton_mxfp8_dequant_dim0) with the SM100 gate bypassed and the portable scale path (no sm_100a
`cvt.rp.satfinite.ue8m0x2`), to_mx for MXFP4, nvfp4_quantize for NVFP4 (eager torch ops), from_blocked for
unswizzle. A peer that cannot run prints 'n/a (reason)'.

Correctness before timing: every mx result is compared bit for bit with mx.reference (data, scales and
every other output) on 512 rows of the input (the first and last 256 rows of the flattened matrix,
block-aligned, plus the row holding the tensor's amax where the recipe has a global amax; small outputs
whole). A mismatch is printed loudly, the row is not timed, and `run` exits with status 1. Peers'
outputs are compared with mx's over the whole tensor and the result is a note (peers are not held to
the contract). Under the table: the ptxas -arch=sm_90a -v line of every kernel (from the build step).

Most of a first run on a machine is spent compiling peers: torch.compile of 19 programs, and Triton's
autotuning of torchao's kernels, which compiles every configuration it tries. torchao's configurations
with 512-row tiles take minutes each to compile (ptxas on fully unrolled code: 9 min for one on a 2-core
build host), so the tuning is limited to ROW_TILE_SIZE <= 256 (the header says so; --torchao-all-configs
restores all). On an H100 the 25 rows before MXFP6 and MXINT8 took about 2 minutes, of which 1 minute
of compiling. Where a command has a time limit, split the rows with --only (e.g. `--only mxfp8_`, then
`--only fp8_,mxfp4,nvfp4`, then `--only mxfp6,mxint8`); each row prints a progress line as soon as it
is measured.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# bench/ (the script's directory) is on sys.path
from quantize_cases import (DELAYED_INDEX, HISTORY, MXFP8, NVFP4, Blockwise, Delayed, Dequantize, MXFP4,
                            PerTensor, Swizzle, UpdateHistory, _bytes, _packed, _stored_bytes, _tiles, cases)
from quantize_peers import TORCHAO_MAX_ROW_TILE, NotAvailable, TorchAO
from torch_scales import pow2, pow2_ceil_bytes

ROOT = Path(__file__).resolve().parents[1]
CHIP = "sm_90a"
PIPELINE = f"chip={CHIP} format=bin gemm=auto"
MANIFEST = "quantize_manifest.json"
PTXAS_REPORT = "ptxas.txt"
EDGE_ROWS = 256                 # rows checked at each end of the flattened input
MiB = 1 << 20
DEVICE = "cuda"                 # where `run` puts its tensors


def _source_hash(case):
    return hashlib.sha256(case.source().encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------
# build


def _ptxas_lines(ptx_path):
    """`ptxas -arch=sm_90a -v` of one PTX file, as (entry, registers line, frame/spill line) per kernel,
    plus any other diagnostic as its own line."""
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    try:
        result = subprocess.run([ptxas, f"-arch={CHIP}", "-v", str(ptx_path), "-o", os.devnull],
                                capture_output=True, text=True)
    except OSError as exc:
        return [], [f"ptxas not run: {exc}"]
    kernels, extra = [], []
    for line in (result.stdout + result.stderr).splitlines():
        text = line.replace("ptxas info    :", "").strip()
        if "Compiling entry function" in text:
            kernels.append([text.split("'")[1], "", ""])
        elif text.startswith("Used") and kernels:
            kernels[-1][1] = text
        elif "stack frame" in text and kernels:
            kernels[-1][2] = text
        elif text and not text.startswith(("Function properties", "Compile time", "0 bytes gmem")) \
                and "bytes gmem" not in text:
            extra.append(text)
    if result.returncode:
        extra.append(f"ptxas exited with {result.returncode}")
    return kernels, extra


def _build_one(case, directory):
    from mx import tools
    from mx.ptx import extract_ptx
    source = case.source()
    (directory / f"{case.name}.mlir").write_text(source + "\n")
    for stale in (directory / f"{case.name}.so", directory / f"{case.name}.error"):
        stale.unlink(missing_ok=True)
    try:
        tools.compile_gpu_library(source, directory / f"{case.name}.so", CHIP)
        lowered = tools.run_mx_opt(source, f"--mx-lower-to-nvvm=chip={CHIP} format=isa")
    except Exception as exc:  # noqa: BLE001 (reported, and the build fails at the end)
        (directory / f"{case.name}.error").write_text(f"{exc}\n")
        return case, None, str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
    lines = []
    modules = extract_ptx(lowered)
    binaries = re.findall(r"gpu\.binary @([\w$.]+)", lowered)
    for index, ptx in enumerate(modules):
        path = directory / f"{case.name}.{index}.ptx"
        path.write_text(ptx)
        kernels, extra = _ptxas_lines(path)
        module = binaries[index] if len(binaries) == len(modules) else f"module {index}"
        atomics = " (atomics)" if "atom.global" in ptx else ""
        for entry, used, frame in kernels:
            label = module if module.startswith(entry) else f"{module}: {entry}"
            lines.append(f"{case.name}\t{label}{atomics}\t{used}\t{frame}")
        lines += [f"{case.name}\t-\t{text}\t" for text in extra]
    return case, lines or [f"{case.name}\t-\tno PTX in the lowered module\t"], None


def build(directory, only=None):
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    all_cases = [c for c in cases() if not only or c.name.startswith(tuple(only))]
    if not all_cases:
        sys.exit(f"no row's program name starts with {', '.join(only)} (see `list`)")
    report, failed = [], []
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        for case, lines, error in pool.map(lambda c: _build_one(c, directory), all_cases):
            if error:
                failed.append(case.name)
                print(f"NOT built {case.name}: {' '.join(error)}", flush=True)
            else:
                report += lines
                print(f"built {case.name}", flush=True)
    (directory / PTXAS_REPORT).write_text("\n".join(report) + "\n")
    manifest = {"pipeline": f"--mx-lower-to-nvvm={PIPELINE}",
                "programs": {c.name: _source_hash(c) for c in all_cases if c.name not in failed}}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(all_cases) - len(failed)} of {len(all_cases)} programs built in {directory} "
          f"({time.perf_counter() - started:.0f} s); ptxas -v report: {directory / PTXAS_REPORT}")
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


# ---------------------------------------------------------------------------------------------------
# run: inputs, checks, timing


def edge_rows(n, extra=None):
    """Rows checked: the first and last EDGE_ROWS (all when few), and `extra` (the amax row)."""
    import numpy as np
    rows = np.arange(n) if n <= 2 * EDGE_ROWS else np.r_[0:EDGE_ROWS, n - EDGE_ROWS:n]
    if extra is not None:
        rows = np.union1d(rows, [extra])
    return rows.astype(np.int64)


def host_bytes(tensor):
    """A torch tensor's bytes (row-major) on the host, as a flat uint8 array."""
    import torch
    t = tensor.detach()
    t = t.reshape(1) if t.dim() == 0 else t.contiguous()
    return t.view(torch.uint8).reshape(-1).cpu().numpy()


def make_x(shape, seed):
    """bf16 normal values, each row scaled by 2^[-8, 8)."""
    import torch
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(shape, device=DEVICE, generator=g)
    x *= torch.exp2(torch.randint(-8, 8, (*shape[:-1], 1), device=DEVICE, generator=g).float())
    return x.to(torch.bfloat16)


def make_inputs(case, seed):
    """(torch inputs of the mx program in order, host data for the check)."""
    import ml_dtypes
    import numpy as np
    import torch
    if case.uses_x:
        x = make_x(case.shape, seed)
        x2 = x.reshape(-1, case.k)
        extra = None
        if case.amax_row:
            extra = int(torch.argmax(x2.abs().reshape(-1)).item()) // case.k
        rows = edge_rows(x2.shape[0], extra)
        x_rows = host_bytes(x2[torch.as_tensor(rows, device=DEVICE)]).view(ml_dtypes.bfloat16)
        host = {"rows": rows, "x_rows": x_rows.reshape(len(rows), case.k)}
        inputs = [x]
        if isinstance(case, Delayed):
            g = torch.Generator(device=DEVICE).manual_seed(seed + 1)
            scales = (torch.exp2(torch.randint(-6, 2, (HISTORY[1],), device=DEVICE, generator=g).float())
                      * (torch.rand(HISTORY[1], device=DEVICE, generator=g) + 0.5))
            history = torch.rand(HISTORY, device=DEVICE, generator=g) * 100
            inputs += [scales, history]
            host["scales"], host["history"] = (host_bytes(scales).view(np.float32),
                                               host_bytes(history).view(np.float32).reshape(HISTORY))
        if isinstance(case, NVFP4) and case.given:
            t = x.float().abs().amax() / torch.tensor(2688.0, device=DEVICE)
            inputs.append(t)
            host["t"] = host_bytes(t).view(np.float32)[0]
        return inputs, host
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    if isinstance(case, UpdateHistory):
        history = torch.rand(case.shape, device=DEVICE, generator=g)
        history *= torch.exp2(torch.randint(-20, 20, (1, case.shape[1]), device=DEVICE, generator=g).float())
        scales = torch.rand(case.shape[1], device=DEVICE, generator=g) + 0.5
        return [history, scales], {"history": host_bytes(history).view(np.float32).reshape(case.shape),
                                   "scales": host_bytes(scales).view(np.float32)}
    if isinstance(case, Dequantize):
        if case.elem == "f8E4M3FN":
            data, scales = torch_mxfp8_linear(make_x(case.shape, seed))
        else:  # any bytes are codes (FP6 packed); the scales over E8M0's range
            row_bytes = _stored_bytes(case.elem, case.k)
            data = torch.randint(0, 256, (case.shape[0], row_bytes), device=DEVICE, dtype=torch.uint8, generator=g)
            scales = torch.randint(96, 160, case.scales_shape(), device=DEVICE, dtype=torch.uint8, generator=g)
        rows = edge_rows(case.shape[0])
        index = torch.as_tensor(rows, device=DEVICE)
        host = {"rows": rows,
                "data_rows": host_bytes(data[index]).reshape(len(rows), _stored_bytes(case.elem, case.k)),
                "scale_rows": host_bytes(scales[index]).reshape(len(rows), case.k // 32)}
        return [data, scales], host
    if isinstance(case, Swizzle):
        shape = _tiles(case.shape, 0) if case.unswizzle else case.shape
        source = torch.randint(0, 255, shape, device=DEVICE, dtype=torch.uint8, generator=g)
        return [source], {"source": host_bytes(source).reshape(shape)}
    raise TypeError(f"no inputs for {type(case).__name__}")


def torch_mxfp8_linear(x):
    """Rowwise MXFP8 of 2-D x with compact scales, as uint8 tensors (the dequantize row's input)."""
    import torch
    m, k = x.shape
    blocks = x.float().reshape(m, k // 32, 32)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=-1))
    data = (blocks * pow2(b, -1)[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(m, k)
    return data.view(torch.uint8), b.to(torch.uint8).contiguous()


def compare(pairs):
    """Mismatch messages of (label, got, expected) pairs, compared as raw bytes."""
    import numpy as np
    problems = []
    for label, got, want in pairs:
        g, w = _bytes(got), _bytes(want)
        if g.size != w.size:
            problems.append(f"{label}: {g.size} bytes, expected {w.size}")
            continue
        bad = np.flatnonzero(g != w)
        if bad.size:
            problems.append(f"{label}: {bad.size} of {g.size} bytes differ; first at byte {bad[0]}: "
                            f"got {g[bad[0]]:#04x}, expected {w[bad[0]]:#04x}")
    return problems


def peer_agreement(peer_outputs, mx_outputs, labels):
    """'bits = mx' or which outputs differ (a note, not a failure)."""
    import numpy as np
    notes = []
    for label, got, ours in zip(labels, peer_outputs, mx_outputs):
        if got is None:
            continue
        g = host_bytes(got)
        if g.size != ours.size:
            notes.append(f"{label}: {g.size} bytes vs mx {ours.size}")
        elif not np.array_equal(g, ours):
            notes.append(f"{label}: {int(np.count_nonzero(g != ours))} bytes differ")
    return "bits = mx" if not notes else "differs from mx: " + "; ".join(notes)


def device_time_us(fn, iterations):
    """Median over `iterations` calls of the summed device time of every kernel / memcpy / memset one
    call launches (CUPTI through torch.profiler, one profiler session per call, so host work and the
    gaps between calls are not counted). Returns (median us, device activities per call).

    One session per call, not one for all calls: back to back (calls split from one session), the mx
    programs at 16384^2, which allocate and free their outputs in every call, measured 13-15% slower
    on an H100 while the copy did not move."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
    cuda = torch.autograd.DeviceType.CUDA
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    per_iteration, counts = [], []
    for _ in range(iterations):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type == cuda]
        per_iteration.append(sum(e.time_range.elapsed_us() for e in events))
        counts.append(len(events))
    if not any(per_iteration):
        raise RuntimeError("the profiler saw no device activity")
    return statistics.median(per_iteration), statistics.median(counts)


def copy_time_us(nbytes, iterations):
    """The yardstick: a device-to-device copy moving `nbytes` (half read, half written)."""
    import torch
    src = torch.empty(max(1, nbytes // 2), dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    return device_time_us(lambda: dst.copy_(src), iterations)[0]


def kernel_floor_note(nbytes, iterations):
    """What an SM kernel costs at this size: a 1-element kernel and an elementwise copy of `nbytes`
    (half read, half written) as int32, each timed like the rows."""
    import torch
    tiny = torch.zeros(1, device=DEVICE)
    src = torch.zeros(max(1, nbytes // 8), dtype=torch.int32, device=DEVICE)
    dst = torch.empty_like(src)
    floor = device_time_us(lambda: tiny.add_(1), iterations)[0]
    copy = device_time_us(lambda: torch.add(src, 0, out=dst), iterations)[0]
    return (f"a 1-element torch kernel takes {floor:.1f} us, torch's elementwise kernel moving the "
            f"same bytes {copy:.1f} us")


class Row:
    def __init__(self, case):
        self.case = case
        self.t_mx = self.t_copy = self.t_compile = self.t_torchao = None
        self.kernels = None         # device activities (kernels, memsets, copies) per mx call
        self.compile_note = "not run" if case.torch_program() is not None else case.torch_reason
        self.torchao_note = "n/a (not run)"
        self.check = "not run"
        self.notes = []
        self.failed = False


class Programs:
    """The mx programs of DIR: loaded on demand, checked against the build manifest."""

    def __init__(self, directory):
        from mx import runtime
        self.directory = Path(directory)
        manifest = self.directory / MANIFEST
        self.manifest = json.loads(manifest.read_text()) if manifest.is_file() else {"programs": {}}
        self.runtime = runtime
        self.library = runtime.load_library()

    def load(self, case):
        library = self.directory / f"{case.name}.so"
        if not library.is_file():
            error = self.directory / f"{case.name}.error"
            raise RuntimeError(f"{library.name} not built" + (f": {error.read_text().strip()[-300:]}"
                                                              if error.is_file() else ""))
        built = self.manifest["programs"].get(case.name)
        if built != _source_hash(case):
            raise RuntimeError(f"{library.name} was built from another source (rebuild DIR with this "
                               "bench/quantize.py)")
        return self.runtime.load_compiled(library)

    def caller(self, case, inputs):
        """call(keep): runs the program in call-stream mode on torch's current stream, as mx.compile
        runs it on torch tensors (results from the stream-ordered pool, which keeps freed memory
        cached like torch's allocator); keep=True returns each result's bytes on the host; the
        results are freed either way, in stream order."""
        import torch
        lib = self.load(case)
        memrefs = [self.runtime.MemRef.from_dlpack(t.view(torch.uint8) if t.element_size() == 1 else t)
                   for t in inputs]
        specs = case.outputs()
        ranks = [rank for _, _, rank in specs]

        stream = torch.cuda.current_stream().cuda_stream

        def call(keep=False):
            import numpy as np
            self.library.mxrtSetCallStream(stream, 1)
            try:
                results = self.runtime.call_mlir_function(lib, case.name, memrefs, result_ranks=ranks)
            finally:
                self.library.mxrtSetCallStream(None, 0)
            try:
                if not keep:
                    return None
                host = []
                for (label, nbytes, _), result in zip(specs, results):
                    out = np.empty(nbytes, np.uint8)
                    status = self.library.mxrtMemcpyDtoH(out.ctypes.data, ctypes.c_void_p(result.aligned), nbytes)
                    if status:
                        raise RuntimeError(f"copying {label} back failed: {self.runtime.last_error()}")
                    host.append(out)
                return host
            finally:
                for result in results:
                    if self.library.mxrtFreeAsync(result.allocated, stream):
                        raise RuntimeError(f"freeing a result failed: {self.runtime.last_error()}")
        return call


def iterations_for(case, requested):
    if requested:
        return requested
    return 100 if case.nbytes() < 64 * MiB else 50


def run_case(case, programs, tao, args, seed):
    import torch
    row = Row(case)
    started = time.perf_counter()
    try:
        inputs, host = make_inputs(case, seed)
        call = programs.caller(case, inputs)
        outs = call(keep=True)
    except Exception as exc:  # noqa: BLE001 (an n/a row; the run fails at the end)
        row.failed, row.check = True, "n/a"
        row.notes.append(f"mx: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        return row
    problems = compare(case.check(host, outs))
    if problems:
        row.failed, row.check = True, "MISMATCH"
        row.compile_note = row.torchao_note = "n/a (mx result wrong: not timed)"
        for problem in problems:
            print(f"!!! MISMATCH {case.name}: {problem}", flush=True)
        row.notes.append("mx does not match mx.reference: " + "; ".join(problems)[:300])
        return row
    row.check = ("ok, " + ("all" if "rows" not in host or len(host["rows"]) == case.rows
                           else f"{len(host['rows'])} rows"))
    iterations = iterations_for(case, args["iters"])
    labels = [label for label, _, _ in case.outputs()]

    try:
        row.t_mx, row.kernels = device_time_us(call, iterations)
        row.t_copy = copy_time_us(case.nbytes(), iterations)
        if case.reports_kernel_floor:
            row.notes.append(kernel_floor_note(case.nbytes(), iterations))
    except Exception as exc:  # noqa: BLE001 (an n/a row; the run fails at the end)
        row.failed = True
        row.notes.append(f"timing failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        return row

    program = case.torch_program()
    if program is not None and not args["no_compile"]:
        try:
            compiled = torch.compile(program, dynamic=False)
            row.compile_note = peer_agreement(compiled(*inputs), outs, labels)
            row.t_compile = device_time_us(lambda: compiled(*inputs), iterations)[0]
        except Exception as exc:  # noqa: BLE001
            row.compile_note = f"n/a ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})"
        torch.cuda.empty_cache()
    elif program is not None:
        row.compile_note = "n/a (--no-compile)"

    if args["no_torchao"]:
        row.torchao_note = "n/a (--no-torchao)"
    else:
        try:
            peer, what = case.torchao_program(tao)
            agreement = peer_agreement(peer(*inputs), outs, labels)
            row.t_torchao = device_time_us(lambda: peer(*inputs), iterations)[0]
            row.torchao_note = f"{what}: {agreement}"
        except NotAvailable as exc:
            row.torchao_note = f"n/a ({exc})"
        except Exception as exc:  # noqa: BLE001
            row.torchao_note = f"n/a ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        torch.cuda.empty_cache()
    row.notes.append(f"mx device activities per call: {row.kernels:g}; {iterations} iterations; "
                     f"{time.perf_counter() - started:.0f} s")
    return row


# ---------------------------------------------------------------------------------------------------
# run: report


def _size(nbytes):
    if nbytes >= 10 ** 6:
        return f"{nbytes / 1e6:.1f} MB"
    return f"{nbytes / 1e3:.1f} kB"


def _us(t):
    return "n/a" if t is None else (f"{t:.1f}" if t < 100 else f"{t:.0f}")


def _met(row):
    kind, value = row.case.goal
    if row.t_mx is None:
        return "n/a"
    if kind == "us":
        return "yes" if row.t_mx < value else "no"
    return "yes" if row.t_copy and row.t_copy / row.t_mx >= value else "no"


def print_table(rows):
    print("| kernel / recipe | shape | bytes moved | mx us | mx TB/s | copy TB/s | % of copy | goal | met "
          "| torch.compile us | mx speedup vs torch.compile | torchao us | mx speedup vs torchao | check "
          "| notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        case, nbytes = row.case, row.case.nbytes()
        tbs = "n/a" if row.t_mx is None else f"{nbytes / row.t_mx / 1e6:.2f}"
        copy = "n/a" if row.t_copy is None else f"{nbytes / row.t_copy / 1e6:.2f}"
        ratio = "n/a" if row.t_mx is None or row.t_copy is None else f"{row.t_copy / row.t_mx:.0%}"
        speedup = {name: ("n/a" if t is None or row.t_mx is None else f"{t / row.t_mx:.2f}x")
                   for name, t in (("compile", row.t_compile), ("torchao", row.t_torchao))}
        compile_us = _us(row.t_compile) if row.t_compile is not None else (
            row.compile_note if row.compile_note.startswith("n/a") else f"n/a ({row.compile_note})")
        torchao_us = _us(row.t_torchao) if row.t_torchao is not None else row.torchao_note
        notes = []
        if row.t_compile is not None:
            notes.append(f"torch.compile: {row.compile_note}")
        if row.t_torchao is not None:
            notes.append(f"torchao {row.torchao_note}")
        notes += row.notes
        cells = [case.title, case.shape_text, _size(nbytes), _us(row.t_mx), tbs, copy, ratio, case.goal_text(),
                 _met(row), compile_us, speedup["compile"], torchao_us, speedup["torchao"], row.check,
                 "; ".join(notes)]
        print("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")


def print_ptxas(directory, names):
    report = Path(directory) / PTXAS_REPORT
    print(f"\nptxas -arch={CHIP} -v, per kernel (from the build step, {report.name}):")
    if not report.is_file():
        print("  no report (build DIR first)")
        return
    for line in report.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) == 4 and fields[0] in names:
            program, kernel, used, frame = fields
            print(f"  {program} / {kernel}: " + "; ".join(f for f in (used, frame) if f))


def _parse_run_args(argv):
    args = {"only": None, "iters": None, "no_torchao": False, "no_compile": False, "torchao_all_configs": False}
    i = 0
    while i < len(argv):
        if argv[i] == "--only":
            args["only"] = [s for s in argv[i + 1].split(",") if s]
            i += 2
        elif argv[i] == "--iters":
            args["iters"] = int(argv[i + 1])
            i += 2
        elif argv[i] in ("--no-torchao", "--no-compile", "--torchao-all-configs"):
            args[argv[i][2:].replace("-", "_")] = True
            i += 1
        else:
            sys.exit(f"unknown option {argv[i]}\n\n{__doc__}")
    return args


def run(directory, argv=()):
    import torch
    args = _parse_run_args(list(argv))
    started = time.perf_counter()
    directory = Path(directory)
    import torch._dynamo
    for key in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, key):
            setattr(torch._dynamo.config, key, max(getattr(torch._dynamo.config, key), 512))
    programs = Programs(directory)
    cc = programs.runtime.compute_capability()
    if cc != (9, 0):
        print(f"warning: the programs are {CHIP} code; this GPU is compute capability {cc}")
    tao = None if args["no_torchao"] else TorchAO(None if args["torchao_all_configs"] else TORCHAO_MAX_ROW_TILE)
    selected = [c for c in cases() if not args["only"] or c.name.startswith(tuple(args["only"]))]
    if not selected:
        sys.exit(f"no row's program name starts with {', '.join(args['only'])} (see `list`)")
    rows = []
    for index, case in enumerate(selected):
        row = run_case(case, programs, tao, args, seed=1000 + index)
        rows.append(row)
        ratio = "" if row.t_mx is None or row.t_copy is None else (
            f" ({case.nbytes() / row.t_mx / 1e6:.2f} TB/s, {row.t_copy / row.t_mx:.0%} of copy)")
        times = ", ".join(f"{peer} " + ("n/a" if t is None else f"{_us(t)} us")
                          for peer, t in (("copy", row.t_copy), ("torch.compile", row.t_compile),
                                          ("torchao", row.t_torchao)))
        print(f"[{time.perf_counter() - started:4.0f} s] {case.name}: check {row.check}; mx "
              f"{'n/a' if row.t_mx is None else _us(row.t_mx) + ' us'}{ratio}; {times}", flush=True)
        for note in row.notes:
            print(f"    {note}", flush=True)
        torch.cuda.empty_cache()

    props = torch.cuda.get_device_properties(0)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    print()
    print(f"GPU: {props.name} ({props.multi_processor_count} SMs, L2 {props.L2_cache_size >> 20} MiB), "
          f"torch {torch.__version__} (CUDA {torch.version.cuda}), Triton {triton_version}")
    if tao is None:
        print("torchao: not used (--no-torchao)")
    elif tao.error:
        print(f"torchao: {tao.error}")
    else:
        print(f"torchao {tao.version}: MXFP8 Triton kernels' SM100 gate {tao.gate}; {tao.tuning}")
    print(f"mx programs: {programs.manifest.get('pipeline', 'unknown pipeline')} ({directory})")
    runtime_lib = os.environ.get("MX_RUNTIME_LIB")
    print("command: " + (f"MX_RUNTIME_LIB={runtime_lib} " if runtime_lib else "") + "python3 " + " ".join(sys.argv))
    print("times: median device time per call (CUPTI); TB/s = bytes moved / time; % of copy = mx TB/s / copy "
          "TB/s (a D2D copy of the same bytes); speedups = peer time / mx time")
    print()
    print_table(rows)
    print_ptxas(directory, {row.case.name for row in rows})
    print(f"\n(run took {time.perf_counter() - started:.0f} s)")
    failed = [row.case.name for row in rows if row.failed]
    if failed:
        sys.exit(f"FAILED (mx result wrong or not run): {', '.join(failed)}")


# ---------------------------------------------------------------------------------------------------
# list, selftest


def list_cases():
    print("| program | kernel / recipe | shape | bytes moved | goal | torch.compile |")
    print("|---|---|---|---|---|---|")
    for case in cases():
        tc = "yes" if case.torch_program() is not None else case.torch_reason
        print(f"| {case.name} | {case.title} | {case.shape_text} | {_size(case.nbytes())} | {case.goal_text()} "
              f"| {tc} |")


def simulated_outputs(case, host_full):
    """What the mx program must return for small full inputs, from mx.reference (selftest)."""
    import numpy as np
    from mx import reference
    if isinstance(case, MXFP8):
        out = []
        for part in case.parts:
            block, _, dim = case.layout(part)
            data, scales = reference.quantize(host_full["x"], block, case.elem)
            out += [_packed(case.elem, data), _bytes(reference.swizzle(scales, dim))]
        return out
    if isinstance(case, Blockwise):
        out = []
        for part in case.parts:
            transposed = part == "transposed"
            x = np.ascontiguousarray(host_full["x"].T) if transposed else host_full["x"]
            data, scales = reference.quantize(x, (1 if transposed else case.block_rows, 128), "f8E4M3FN",
                                              "f32", "ceil")
            out += [_bytes(data), _bytes(scales)]
        return out
    if isinstance(case, PerTensor):
        data, scale = reference.quantize(host_full["x"], case.shape, "f8E4M3FN", "f32", "exact")
        return [_bytes(a) for a in [data, scale, *[data.T, scale] * case.both]]
    if isinstance(case, Delayed):
        data, inv, history = reference.quantize_delayed(host_full["x"], host_full["scales"],
                                                        host_full["history"], DELAYED_INDEX)
        return [_bytes(a) for a in [data, inv, *[data.T] * case.both, history]]
    if isinstance(case, MXFP4):
        data, scales = reference.quantize(host_full["x"], (1,) * (len(case.shape) - 1) + (32,), "f4E2M1FN")
        return [_bytes(reference.pack_fp4(data)), _bytes(scales)]
    if isinstance(case, NVFP4):
        data, scales, t = reference.quantize_nvfp4(host_full["x"], host_full.get("t"))
        return [_bytes(reference.pack_fp4(data)), _bytes(scales)] + ([] if case.given else
                                                                    [_bytes(np.array([t], np.float32))])
    if isinstance(case, UpdateHistory):
        return [_bytes(a) for a in reference.update_amax_history(host_full["history"], host_full["scales"])]
    if isinstance(case, Dequantize):
        import ml_dtypes
        return [_bytes(reference.dequantize(reference.unpack(host_full["data"], case.elem),
                                            host_full["scales"].view(ml_dtypes.float8_e8m0fnu), (1, 32),
                                            ml_dtypes.bfloat16))]
    if isinstance(case, Swizzle):
        import ml_dtypes
        source = host_full["source"].view(ml_dtypes.float8_e8m0fnu)
        if case.unswizzle:
            return [_bytes(reference.unswizzle(source, case.shape, 0))]
        return [_bytes(reference.swizzle(source, 0))]
    raise TypeError(type(case).__name__)


def selftest():
    """The checks of `run` on small shapes: simulated correct outputs must pass, and one flipped byte
    inside the checked rows of any output must be reported."""
    import ml_dtypes
    import numpy as np
    from mx import reference
    global EDGE_ROWS
    EDGE_ROWS = 128
    rng = np.random.default_rng(0)
    small = [MXFP8((512, 256), ("rowwise", "columnwise")), MXFP8((640, 128), ("rowwise",)),
             MXFP8((512, 384), ("columnwise",)), MXFP8((3, 256, 128), ("rowwise",)),
             Blockwise((512, 256), 1), Blockwise((768, 256), 128), Blockwise((512, 384), 1, ("rowwise", "transposed")),
             Blockwise((768, 256), 1, ("transposed",)), PerTensor((512, 256)), PerTensor((512, 384), both=True),
             Delayed((512, 128)), Delayed((512, 384), both=True),
             MXFP4((512, 128)), NVFP4((512, 128), True), NVFP4((512, 128), False), UpdateHistory((16, 64)),
             Dequantize((512, 256)), Swizzle((512, 8), False), Swizzle((512, 8), True)]
    for elem in ["f6E3M2FN", "f6E2M3FN", "i8"]:
        small += [MXFP8((512, 256), ("rowwise", "columnwise"), elem), MXFP8((640, 128), ("rowwise",), elem),
                  Dequantize((512, 256), elem)]
    for case in small:
        host_full, host = {}, {}
        if case.uses_x:
            x = rng.standard_normal(case.shape).astype(np.float32)
            x *= np.exp2(rng.integers(-8, 8, (*case.shape[:-1], 1))).astype(np.float32)
            x = x.astype(ml_dtypes.bfloat16)
            x2 = x.reshape(-1, case.k)
            extra = int(np.argmax(np.abs(x2.astype(np.float32)))) // case.k if case.amax_row else None
            rows = edge_rows(x2.shape[0], extra)
            host_full["x"], host = x, {"rows": rows, "x_rows": x2[rows]}
            if isinstance(case, Delayed):
                host_full["scales"] = host["scales"] = (rng.random(HISTORY[1]) + 0.1).astype(np.float32)
                host_full["history"] = host["history"] = (rng.random(HISTORY) * 100).astype(np.float32)
            if isinstance(case, NVFP4) and case.given:
                host_full["t"] = host["t"] = np.float32(reference.amax(x) / np.float32(2688))
        elif isinstance(case, UpdateHistory):
            host_full["history"] = host["history"] = rng.random(case.shape).astype(np.float32)
            host_full["scales"] = host["scales"] = (rng.random(case.shape[1]) + 0.5).astype(np.float32)
        elif isinstance(case, Dequantize):
            data, scales = reference.quantize(rng.standard_normal(case.shape).astype(np.float32), (1, 32),
                                              case.elem)
            data, scales = reference.pack(data), scales.view(np.uint8)
            rows = edge_rows(case.shape[0])
            host_full = {"data": data, "scales": scales}
            host = {"rows": rows, "data_rows": data[rows], "scale_rows": scales[rows]}
        elif isinstance(case, Swizzle):
            shape = _tiles(case.shape, 0) if case.unswizzle else case.shape
            host_full["source"] = host["source"] = rng.integers(0, 255, shape, dtype=np.uint8)
        outs = simulated_outputs(case, host_full)
        sizes = [n for _, n, _ in case.outputs()]
        assert [o.size for o in outs] == sizes, f"{case.name}: output sizes {[o.size for o in outs]} != {sizes}"
        problems = compare(case.check(host, outs))
        assert not problems, f"{case.name}: correct outputs rejected: {problems}"
        for index, out in enumerate(outs):   # a flipped byte in the first checked row must be seen
            bad = [o.copy() for o in outs]
            bad[index][0] ^= 0x01
            assert compare(case.check(host, bad)), f"{case.name}: corrupted output {index} not detected"
        case.source()
        print(f"selftest {case.name}: ok ({len(outs)} outputs, {case.nbytes()} bytes)")
    print("selftest passed")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if len(sys.argv) > 2 and sys.argv[2].startswith("-"):
        sys.exit(__doc__)  # an option where DIR goes (e.g. --help): not a directory to create
    if command == "build" and len(sys.argv) == 3:
        build(sys.argv[2])
    elif command == "build" and len(sys.argv) == 5 and sys.argv[3] == "--only":
        build(sys.argv[2], [s for s in sys.argv[4].split(",") if s])
    elif command == "run" and len(sys.argv) >= 3:
        run(sys.argv[2], sys.argv[3:])
    elif command == "list" and len(sys.argv) == 2:
        list_cases()
    elif command == "selftest" and len(sys.argv) == 2:
        selftest()
    else:
        sys.exit(__doc__)
