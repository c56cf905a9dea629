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

Rows (bf16 inputs; `list` prints them): MXFP8 rowwise + columnwise fused with both scales swizzled,
rowwise + swizzle, columnwise + swizzle (8192^2 and 16384^2), rowwise + swizzle of an N-D input
[8, 1024, 8192]; FP8 blockwise 1x128 and 128x128 (power-of-two f32 scales, `ceil`), and 1x128 written
transposed (the 1x128 blocks along M, GEMM-ready) alone and with the rowwise part in one kernel (mx.torch's
"both" program; 8192^2 and the 5B model's 15872 x 4096, with the rowwise part alone there too); FP8 per-tensor
current scaling (the amax pass and the cast, `exact` scale amax / 448); the delayed-scaling cast
(mx.quantize_delayed, history [16, 1024]); MXFP4 (E2M1 packed, E8M0 per [1, 32]) and NVFP4 (E2M1 packed,
E4M3 per [1, 16]) with a given and with a computed tensor scale (8192^2 and 16384^2); the delayed-scaling
history update (mx.update_amax_history) of 1024 tensors, history [16, 1024], as one launch; MXFP8
dequantize to bf16 at 8192^2; swizzle and unswizzle of the E8M0 scales of 8192^2 data ([8192, 256]);
MXFP6 (E3M2 and E2M3, packed four to three bytes) and MXINT8 at 8192^2: rowwise + columnwise fused,
rowwise and columnwise, each with its scales swizzled, and dequantize to bf16; and the candidate of the
staged fused MXFP6 kernel, `mxfp6_*_rowwise_columnwise_v1_8192x8192` (convert-mx-to-gpu's
staged-variant, docs/gpu.md), which `--only mxfp6_e3m2_rowwise_columnwise,mxfp6_e2m3_rowwise_columnwise`
measures with the kernel it is a candidate for.

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

from torch_scales import pow2, pow2_ceil_bytes  # bench/ (the script's directory) is on sys.path

ROOT = Path(__file__).resolve().parents[1]
CHIP = "sm_90a"
PIPELINE = f"chip={CHIP} format=bin gemm=auto"
MANIFEST = "quantize_manifest.json"
PTXAS_REPORT = "ptxas.txt"
QUANTIZE_GOAL, OTHER_GOAL, UPDATE_GOAL_US = 0.90, 0.80, 10.0
HISTORY = (16, 1024)            # delayed scaling: history rows x tensors
DELAYED_INDEX = 3               # the tensor whose cast mx.quantize_delayed benchmarks
EDGE_ROWS = 256                 # rows checked at each end of the flattened input
TORCHAO_MAX_ROW_TILE = 256      # torchao's Triton autotuning: configurations with at most this many rows
MiB = 1 << 20
DEVICE = "cuda"                 # where `run` puts its tensors


# ---------------------------------------------------------------------------------------------------
# The rows: one Case per mx program.


def _t(shape, elem):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def _dims(shape):
    return "x".join(map(str, shape))


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _tiles(scales_shape, unscaled_dim):
    """mx.swizzle's shape for compact scales (mx.reference's, imported when first needed)."""
    from mx import reference
    return reference.swizzled_shape(scales_shape, unscaled_dim)


def _block(block):
    return "[" + ", ".join(map(str, block)) + "]"


def _function(name, args, body, results):
    types = ", ".join(t for _, t in results)
    return "\n".join([f"func.func @{name}({', '.join(args)}) -> ({types}) {{", *body,
                      f"  return {', '.join(v for v, _ in results)} : {types}", "}"])


class NotAvailable(Exception):
    """A peer that is not run for this row; the message is the reason printed in the table."""


class Case:
    """One row: an mx program, its inputs, the bytes it moves, its check and its peers.

    outputs(): (label, bytes, rank) of each result, in order. check(host, outs) compares the results
    (`outs`: the raw bytes of each, whole) with mx.reference on the rows in `host`; it returns a list
    of (label, got bytes, expected bytes)."""
    title = ""
    goal = ("copy", QUANTIZE_GOAL)
    uses_x = True               # the input is a bf16 tensor x of self.shape
    amax_row = False            # the recipe has a global amax: the checked rows include its row
    torch_reason = "not written"
    # Rows of a few us also report the device times of a 1-element torch kernel (the fixed cost of
    # any kernel, which the copy, a memcpy, does not pay) and of torch's elementwise kernel moving
    # the same bytes (an int32 add of 0, 16-byte accesses): the copy as an SM kernel does it.
    reports_kernel_floor = False
    options = ""                # more --mx-lower-to-nvvm options of this row's program

    def __init__(self, shape):
        self.shape = tuple(shape)

    @property
    def rows(self):
        return _prod(self.shape[:-1])

    @property
    def k(self):
        return self.shape[-1]

    @property
    def shape_text(self):
        return _dims(self.shape) + (" bf16" if self.uses_x else "")

    def goal_text(self):
        kind, value = self.goal
        return f"< {value:g} us" if kind == "us" else f">= {value:.0%} of copy"

    # torch peers; None when not written (torch_reason says why)
    def torch_program(self):
        return None

    def torchao_program(self, tao):
        raise NotAvailable("no torchao kernel for this recipe")


def _select(raw, rows, row_bytes):
    """Rows `rows` of a row-major matrix stored as raw bytes, `row_bytes` each."""
    import numpy as np
    return np.asarray(raw).reshape(-1, row_bytes)[rows]


def _bytes(array):
    import numpy as np
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


# The MX element types of the MX rows: name prefix and title of each.
MX_FORMATS = {"f8E4M3FN": ("mxfp8", "MXFP8"), "f6E3M2FN": ("mxfp6_e3m2", "MXFP6 E3M2"),
              "f6E2M3FN": ("mxfp6_e2m3", "MXFP6 E2M3"), "i8": ("mxint8", "MXINT8")}


def _stored_bytes(elem, elements):
    """Bytes of `elements` elements of `elem` in device memory (FP6: 4 in 3)."""
    from mx import formats
    return formats.get(elem).stored_shape((elements,))[0]


def _packed(elem, data):
    """An element array as device memory holds it, as bytes."""
    from mx import reference
    return _bytes(reference.pack(data))


class MXFP8(Case):
    """MX (E8M0 per 32, `ceil`) with the scales swizzled: rowwise [1, 32], columnwise [32, 1], or both
    from one read (the strip kernel); MXFP8 (E4M3) unless `elem` says another MX element type.
    `variant` > 0 builds a candidate of the fused kernel that stages its tile (packed formats:
    convert-mx-to-gpu's staged-variant), named `..._v<variant>_<shape>`."""

    def __init__(self, shape, parts, elem="f8E4M3FN", variant=0):
        super().__init__(shape)
        self.parts = tuple(parts)          # "rowwise" / "columnwise"
        self.elem = elem
        prefix, title = MX_FORMATS[elem]
        tag = f"_v{variant}" if variant else ""
        self.name = f"{prefix}_" + "_".join(self.parts) + tag + "_" + _dims(self.shape)
        self.options = f"staged-variant={variant}" if variant else ""
        if self.parts == ("rowwise", "columnwise"):
            self.title = f"{title} rowwise + columnwise fused, both scales swizzled" + \
                (f" (staged-variant={variant})" if variant else "")
        else:
            self.title = f"{title} {self.parts[0]} + swizzle" + (" (N-D input)" if len(self.shape) > 2 else "")
        if elem != "f8E4M3FN":
            self.torch_reason = "not written: only MXFP8 in torch ops"

    def layout(self, part):
        """(block, compact scales shape, unscaled dim) of one output."""
        rank, s = len(self.shape), self.shape
        if part == "rowwise":
            return (1,) * (rank - 1) + (32,), (*s[:-1], s[-1] // 32), rank - 2
        return (1,) * (rank - 2) + (32, 1), (*s[:-2], s[-2] // 32, s[-1]), rank - 1

    def source(self):
        x = _t(self.shape, "bf16")
        data = _t(self.shape, self.elem)
        body, results = [], []
        for i, part in enumerate(self.parts):
            block, scales, dim = self.layout(part)
            linear, tiles = _t(scales, "f8E8M0FNU"), _t(_tiles(scales, dim), "f8E8M0FNU")
            body += [f"  %d{i}, %s{i} = mx.quantize %x block {_block(block)} rounding ceil : {x} -> {data}, {linear}",
                     f"  %t{i} = mx.swizzle %s{i} unscaled_dim {dim} : {linear} -> {tiles}"]
            results += [(f"%d{i}", data), (f"%t{i}", tiles)]
        return _function(self.name, [f"%x: {x}"], body, results)

    def outputs(self):
        out = []
        for part in self.parts:
            _, scales, dim = self.layout(part)
            out += [(f"{part} data", _stored_bytes(self.elem, _prod(self.shape)), len(self.shape)),
                    (f"{part} scales (swizzled)", _prod(_tiles(scales, dim)), len(self.shape) + 3)]
        return out

    def nbytes(self):
        return 2 * _prod(self.shape) + sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        import ml_dtypes
        from mx import reference
        rows, xs = host["rows"], host["x_rows"]
        pairs = []
        for i, part in enumerate(self.parts):
            block, scales_shape, dim = self.layout(part)
            tiles = outs[2 * i + 1].view(ml_dtypes.float8_e8m0fnu).reshape(_tiles(scales_shape, dim))
            linear = reference.unswizzle(tiles, scales_shape, dim).reshape(-1, scales_shape[-1])
            if part == "rowwise":
                want_data, want_scales = reference.quantize(xs, (1, 32), self.elem)
                got_scales = linear[rows]
            else:
                want_data, want_scales = reference.quantize(xs, (32, 1), self.elem)
                got_scales = linear[rows[::32] // 32]
            row_bytes = _stored_bytes(self.elem, self.k)
            pairs += [(f"{part} data", _select(outs[2 * i], rows, row_bytes),
                       _packed(self.elem, want_data).reshape(len(rows), row_bytes)),
                      (f"{part} scales", got_scales, want_scales)]
        return pairs

    def torch_program(self):
        if self.elem != "f8E4M3FN":
            return None
        parts, k = self.parts, self.k

        def program(x):
            x2 = x.reshape(-1, k)
            outputs = []
            for part in parts:
                data, tiles = torch_mxfp8(x2, 1 if part == "rowwise" else 0)
                outputs += [data.contiguous(), tiles]
            return outputs
        return program

    def torchao_program(self, tao):
        if self.elem != "f8E4M3FN":
            raise NotAvailable("no torchao kernel for this element type")
        kernels = tao.triton_kernels()
        parts, k = self.parts, self.k

        def program(x):
            outputs = []
            for part in parts:
                if part == "rowwise":
                    data, scales = kernels.triton_to_mxfp8_dim0(x, 32, "rceil")
                    outputs += [data, kernels.triton_mx_block_rearrange(scales.reshape(-1, k // 32))]
                else:   # data [M, K] column-major, scales [K, M/32]: swizzled as ours with unscaled_dim 1
                    data, scales = kernels.triton_to_mxfp8_dim1(x, 32, "rceil")
                    outputs += [data, kernels.triton_mx_block_rearrange(scales)]
            return outputs
        names = " + ".join("triton_to_mxfp8_dim0" if p == "rowwise" else "triton_to_mxfp8_dim1" for p in parts)
        return program, f"{names} + triton_mx_block_rearrange (Triton, SM100 gate bypassed)"


class Blockwise(Case):
    """FP8 blockwise: E4M3 with f32 power-of-two scales (`ceil`) per [1, 128] or [128, 128]. 1x128 may
    also be written transposed ("transposed": the 1x128 blocks along the rows, [K, M] data and [K, M/128]
    scales, GEMM-ready for wgrad) alone or with the rowwise part ("rowwise", "transposed"): mx.torch's
    "both" program of activations and gradients, one kernel reading the input once."""

    def __init__(self, shape, block_rows, parts=("rowwise",)):
        super().__init__(shape)
        self.block_rows, self.parts = block_rows, tuple(parts)
        kind = {("rowwise",): ("", ""), ("transposed",): ("transposed_", "transposed "),
                ("rowwise", "transposed"): ("both_", "rowwise + transposed, one kernel ")}[self.parts]
        self.name = f"fp8_blockwise_{block_rows}x128_{kind[0]}{_dims(shape)}"
        self.title = f"FP8 blockwise {block_rows}x128 {kind[1]}(f32 scales)"

    def layout(self, part):
        """(data shape, scales shape, input as quantized) of one output."""
        m, k = self.shape
        if part == "transposed":
            return (k, m), (k, m // 128), True
        return (m, k), (m // self.block_rows, k // 128), False

    def source(self):
        x = _t(self.shape, "bf16")
        body, results = [], []
        for i, part in enumerate(self.parts):
            shape, scales_shape, transposed = self.layout(part)
            data, scales = _t(shape, "f8E4M3FN"), _t(scales_shape, "f32")
            block = [1, 128] if transposed else [self.block_rows, 128]
            body.append(f"  %d{i}, %s{i} = mx.quantize %x{' transposed' * transposed} block {_block(block)} "
                        f"rounding ceil : {x} -> {data}, {scales}")
            results += [(f"%d{i}", data), (f"%s{i}", scales)]
        return _function(self.name, [f"%x: {x}"], body, results)

    def outputs(self):
        out = []
        for part in self.parts:
            shape, scales_shape, _ = self.layout(part)
            out += [(f"{part} data", _prod(shape), 2), (f"{part} scales", 4 * _prod(scales_shape), 2)]
        return out

    def nbytes(self):
        return 2 * _prod(self.shape) + sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        """Rowwise: the checked rows; transposed: their columns, whole 128-row blocks of x."""
        import numpy as np
        from mx import reference
        rows, xs = host["rows"], host["x_rows"]
        pairs = []
        for i, part in enumerate(self.parts):
            shape, scales_shape, transposed = self.layout(part)
            scales = outs[2 * i + 1].view(np.float32).reshape(scales_shape)
            if transposed:
                want_data, want_scales = reference.quantize(np.ascontiguousarray(xs.T), (1, 128), "f8E4M3FN",
                                                            "f32", "ceil")
                got_data = np.asarray(outs[2 * i]).reshape(shape)[:, rows]
                got_scales = scales[:, rows[::128] // 128]
            else:
                want_data, want_scales = reference.quantize(xs, (self.block_rows, 128), "f8E4M3FN", "f32", "ceil")
                got_data = _select(outs[2 * i], rows, self.k)
                got_scales = scales[rows[::self.block_rows] // self.block_rows]
            pairs += [(f"{part} data", got_data, want_data), (f"{part} scales", got_scales, want_scales)]
        return pairs

    def torch_program(self):
        block_rows, parts = self.block_rows, self.parts
        return lambda x: [a for part in parts
                          for a in torch_blockwise(x.t().contiguous() if part == "transposed" else x,
                                                   1 if part == "transposed" else block_rows)]

class PerTensor(Case):
    """FP8 per-tensor current scaling: scale = amax / 448 (`exact`), data = x / scale; two kernels."""
    amax_row = True

    def __init__(self, shape):
        super().__init__(shape)
        self.name = f"fp8_per_tensor_{_dims(shape)}"
        self.title = "FP8 per-tensor current scaling (amax pass + cast)"

    def source(self):
        x, data = _t(self.shape, "bf16"), _t(self.shape, "f8E4M3FN")
        body = [f"  %d, %s = mx.quantize %x block {_block(self.shape)} rounding exact : {x} -> {data}, "
                "tensor<1x1xf32>"]
        return _function(self.name, [f"%x: {x}"], body, [("%d", data), ("%s", "tensor<1x1xf32>")])

    def outputs(self):
        return [("data", _prod(self.shape), 2), ("scale", 4, 2)]

    def nbytes(self):
        return 2 * _prod(self.shape) + 2 * _prod(self.shape) + _prod(self.shape) + 4

    def check(self, host, outs):
        from mx import reference
        xs = host["x_rows"]
        want_data, want_scale = reference.quantize(xs, xs.shape, "f8E4M3FN", "f32", "exact")
        return [("data", _select(outs[0], host["rows"], self.k), want_data), ("scale", outs[1], want_scale)]

    def torch_program(self):
        return lambda x: list(torch_per_tensor(x))


class Delayed(Case):
    """mx.quantize_delayed: sat(x * scales[i]) to E4M3, scale_inv = 1 / scales[i], amax into history."""
    amax_row = True

    def __init__(self, shape):
        super().__init__(shape)
        self.name = f"fp8_delayed_{_dims(shape)}"
        self.title = f"FP8 delayed-scaling cast + amax (history {_dims(HISTORY)})"

    def source(self):
        x, data = _t(self.shape, "bf16"), _t(self.shape, "f8E4M3FN")
        s, h, inv = _t(HISTORY[1:], "f32"), _t(HISTORY, "f32"), "tensor<1x1xf32>"
        body = [f"  %d, %i, %h1 = mx.quantize_delayed %x, %s, %h index {DELAYED_INDEX} : {x}, {s}, {h} -> "
                f"{data}, {inv}, {h}"]
        return _function(self.name, [f"%x: {x}", f"%s: {s}", f"%h: {h}"], body,
                         [("%d", data), ("%i", inv), ("%h1", h)])

    def outputs(self):
        return [("data", _prod(self.shape), 2), ("scale_inv", 4, 2), ("history", 4 * _prod(HISTORY), 2)]

    def nbytes(self):   # x, the scale read, data, scale_inv, the history copied with one entry set
        return 2 * _prod(self.shape) + 4 + _prod(self.shape) + 4 + 2 * 4 * _prod(HISTORY)

    def check(self, host, outs):
        import numpy as np
        from mx import reference
        data, inv, history = reference.quantize_delayed(host["x_rows"], host["scales"], host["history"],
                                                        DELAYED_INDEX)
        return [("data", _select(outs[0], host["rows"], self.k), data), ("scale_inv", outs[1], inv),
                ("history", outs[2].view(np.float32), history)]

    def torch_program(self):
        return lambda x, scales, history: list(torch_delayed(x, scales, history, DELAYED_INDEX))


class MXFP4(Case):
    """MXFP4: E2M1 (packed) with E8M0 scales per [1, 32], `ceil`, compact scales."""

    def __init__(self, shape):
        super().__init__(shape)
        self.name = f"mxfp4_rowwise_{_dims(shape)}"
        self.title = "MXFP4 rowwise (E2M1 packed, E8M0 [1, 32])"
        self.torch_reason = "not written: E2M1 rounding in torch ops"

    def scales_shape(self):
        return (*self.shape[:-1], self.k // 32)

    def source(self):
        x, data, scales = _t(self.shape, "bf16"), _t(self.shape, "f4E2M1FN"), _t(self.scales_shape(), "f8E8M0FNU")
        body = [f"  %d, %s = mx.quantize %x block [1, 32] rounding ceil : {x} -> {data}, {scales}"]
        return _function(self.name, [f"%x: {x}"], body, [("%d", data), ("%s", scales)])

    def outputs(self):
        return [("data (packed)", _prod(self.shape) // 2, 2), ("scales", _prod(self.scales_shape()), 2)]

    def nbytes(self):
        return 2 * _prod(self.shape) + sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        from mx import reference
        rows = host["rows"]
        data, scales = reference.quantize(host["x_rows"], (1, 32), "f4E2M1FN", "f8E8M0FNU", "ceil")
        return [("data", _select(outs[0], rows, self.k // 2), reference.pack_fp4(data)),
                ("scales", _select(outs[1], rows, self.k // 32), scales)]

    def torchao_program(self, tao):
        to_mx, rceil = tao.mx_tensor().to_mx, tao.config().ScaleCalculationMode.RCEIL
        import torch

        def program(x):
            scales, data = to_mx(x, torch.float4_e2m1fn_x2, 32, rceil)
            return [data, scales]
        return program, "to_mx(float4_e2m1fn_x2, RCEIL) (eager torch ops)"


class NVFP4(Case):
    """NVFP4: E2M1 (packed) with E4M3 scales per [1, 16] and an f32 tensor scale, given or computed
    (amax / 2688 over the finite elements: an amax pass first)."""

    def __init__(self, shape, given):
        super().__init__(shape)
        self.given = given
        self.amax_row = not given
        self.name = f"nvfp4_{'given' if given else 'computed'}_{_dims(shape)}"
        self.title = f"NVFP4 (E4M3 [1, 16]), tensor scale {'given' if given else 'computed (amax pass + cast)'}"
        self.torch_reason = "not written: E2M1 rounding in torch ops"

    def scales_shape(self):
        return (*self.shape[:-1], self.k // 16)

    def source(self):
        x, data, scales = _t(self.shape, "bf16"), _t(self.shape, "f4E2M1FN"), _t(self.scales_shape(), "f8E4M3FN")
        if self.given:
            body = [f"  %d, %s = mx.quantize %x block [1, 16] tensor_scale(%t : tensor<f32>) : {x} -> {data}, {scales}"]
            return _function(self.name, [f"%x: {x}", "%t: tensor<f32>"], body, [("%d", data), ("%s", scales)])
        body = [f"  %d, %s, %t = mx.quantize %x block [1, 16] : {x} -> {data}, {scales}, tensor<f32>"]
        return _function(self.name, [f"%x: {x}"], body, [("%d", data), ("%s", scales), ("%t", "tensor<f32>")])

    def outputs(self):
        out = [("data (packed)", _prod(self.shape) // 2, 2), ("scales", _prod(self.scales_shape()), 2)]
        return out + ([] if self.given else [("tensor scale", 4, 0)])

    def nbytes(self):
        reads = 2 * _prod(self.shape) * (1 if self.given else 2)
        return reads + 4 + sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        import numpy as np
        from mx import reference
        rows = host["rows"]
        data, scales, t = reference.quantize_nvfp4(host["x_rows"], host.get("t"))
        pairs = [("data", _select(outs[0], rows, self.k // 2), reference.pack_fp4(data)),
                 ("scales", _select(outs[1], rows, self.k // 16), scales)]
        return pairs + ([] if self.given else [("tensor scale", outs[2], np.array([t], np.float32))])

    def torchao_program(self, tao):
        nvfp4 = tao.nvfp4_tensor()
        import torch
        if self.given:
            def program(x, t):
                scales, data = nvfp4.nvfp4_quantize(x, 16, t)
                return [data, scales]
            return program, "nvfp4_quantize(per_tensor_scale=t) (eager torch ops)"

        def computed(x):
            t = nvfp4.per_tensor_amax_to_scale(torch.amax(torch.abs(x)))
            scales, data = nvfp4.nvfp4_quantize(x, 16, t)
            return [data, scales, t]
        return computed, "per_tensor_amax_to_scale(amax) + nvfp4_quantize (eager torch ops)"


class UpdateHistory(Case):
    """mx.update_amax_history (`max`, margin 0, E4M3) of every tensor in one launch."""
    goal = ("us", UPDATE_GOAL_US)
    uses_x = False

    def __init__(self, shape):
        super().__init__(shape)
        self.name = f"fp8_update_amax_history_{_dims(shape)}"
        self.title = f"FP8 delayed-scaling history update, {shape[1]} tensors (one launch)"

    @property
    def shape_text(self):
        return f"history {_dims(self.shape)} f32"

    def source(self):
        h, s = _t(self.shape, "f32"), _t(self.shape[1:], "f32")
        body = [f"  %h1, %s1 = mx.update_amax_history %h, %s element f8E4M3FN algorithm max margin 0 : "
                f"{h}, {s} -> {h}, {s}"]
        return _function(self.name, [f"%h: {h}", f"%s: {s}"], body, [("%h1", h), ("%s1", s)])

    def outputs(self):
        return [("history", 4 * _prod(self.shape), 2), ("scales", 4 * self.shape[1], 1)]

    def nbytes(self):
        return 2 * sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        import numpy as np
        from mx import reference
        history, scales = reference.update_amax_history(host["history"], host["scales"], "max", 0)
        return [("history", outs[0].view(np.float32), history), ("scales", outs[1].view(np.float32), scales)]

    def torch_program(self):
        return lambda history, scales: list(torch_update_history(history, scales))


class Dequantize(Case):
    """MX dequantize: data (E4M3 unless `elem` says another MX element type; FP6 packed) and compact
    E8M0 scales [M, K/32] -> bf16."""
    goal = ("copy", OTHER_GOAL)
    uses_x = False

    def __init__(self, shape, elem="f8E4M3FN"):
        super().__init__(shape)
        self.elem = elem
        prefix, title = MX_FORMATS[elem]
        self.name = f"{prefix}_dequantize_{_dims(shape)}"
        self.title = f"{title} dequantize -> bf16"
        if elem != "f8E4M3FN":
            self.torch_reason = "not written: only MXFP8 in torch ops"
            self.goal = ("copy", QUANTIZE_GOAL)   # issue 23: the new formats' kernels, both ways

    @property
    def shape_text(self):
        return f"{_dims(self.shape)} {self.elem} + {_dims(self.scales_shape())} E8M0"

    def scales_shape(self):
        return (self.shape[0], self.k // 32)

    def source(self):
        data, scales, out = _t(self.shape, self.elem), _t(self.scales_shape(), "f8E8M0FNU"), _t(self.shape, "bf16")
        body = [f"  %y = mx.dequantize %d, %s block [1, 32] : {data}, {scales} -> {out}"]
        return _function(self.name, [f"%d: {data}", f"%s: {scales}"], body, [("%y", out)])

    def outputs(self):
        return [("bf16", 2 * _prod(self.shape), 2)]

    def nbytes(self):
        return _stored_bytes(self.elem, _prod(self.shape)) + _prod(self.scales_shape()) + 2 * _prod(self.shape)

    def check(self, host, outs):
        import ml_dtypes
        from mx import reference
        data = reference.unpack(host["data_rows"], self.elem)
        scales = host["scale_rows"].view(ml_dtypes.float8_e8m0fnu)
        want = reference.dequantize(data, scales, (1, 32), ml_dtypes.bfloat16)
        return [("bf16", _select(outs[0], host["rows"], 2 * self.k), want)]

    def torch_program(self):
        if self.elem != "f8E4M3FN":
            return None
        return lambda data, scales: [torch_dequantize(data, scales)]

    def torchao_program(self, tao):
        import torch
        if self.elem != "f8E4M3FN":
            raise NotAvailable("no torchao kernel for this element type")
        kernels = tao.triton_kernels(gated=False)

        def program(data, scales):
            return [kernels.triton_mxfp8_dequant_dim0(data.view(torch.float8_e4m3fn), scales, torch.bfloat16, 32)]
        return program, "triton_mxfp8_dequant_dim0 (Triton)"


class Swizzle(Case):
    """mx.swizzle (unswizzle=False) or mx.unswizzle of the E8M0 scales of rowwise MXFP8 data: compact
    [R, C] <-> 128x4 tiles [R/128, C/4, 32, 4, 4]."""
    goal = ("copy", OTHER_GOAL)
    uses_x = False
    reports_kernel_floor = True

    def __init__(self, shape, unswizzle):
        super().__init__(shape)
        self.unswizzle = unswizzle
        op = "unswizzle" if unswizzle else "swizzle"
        self.name = f"mxfp8_{op}_{_dims(shape)}"
        self.title = f"{op} (E8M0 scales of {shape[0]}x{shape[1] * 32} rowwise)"

    @property
    def shape_text(self):
        return f"{_dims(self.shape)} E8M0"

    def source(self):
        linear, tiles = _t(self.shape, "f8E8M0FNU"), _t(_tiles(self.shape, 0), "f8E8M0FNU")
        if self.unswizzle:
            body = [f"  %u = mx.unswizzle %w unscaled_dim 0 : {tiles} -> {linear}"]
            return _function(self.name, [f"%w: {tiles}"], body, [("%u", linear)])
        body = [f"  %t = mx.swizzle %s unscaled_dim 0 : {linear} -> {tiles}"]
        return _function(self.name, [f"%s: {linear}"], body, [("%t", tiles)])

    def outputs(self):
        if self.unswizzle:
            return [("compact scales", _prod(self.shape), 2)]
        return [("tiles", _prod(_tiles(self.shape, 0)), 5)]

    def nbytes(self):
        return _prod(self.shape) + _prod(_tiles(self.shape, 0))

    def check(self, host, outs):
        import ml_dtypes
        from mx import reference
        source = host["source"].view(ml_dtypes.float8_e8m0fnu)
        if self.unswizzle:
            return [("compact scales", outs[0], reference.unswizzle(source, self.shape, 0))]
        return [("tiles", outs[0], reference.swizzle(source, 0))]

    def torch_program(self):
        rows, cols = self.shape
        if self.unswizzle:
            return lambda tiles: [tiles.permute(0, 3, 2, 1, 4).reshape(rows, cols).contiguous()]
        return lambda scales: [torch_swizzle(scales)]

    def torchao_program(self, tao):
        if self.unswizzle:
            from_blocked, (rows, cols) = tao.utils().from_blocked, self.shape
            return (lambda tiles: [from_blocked(tiles.reshape(-1), rows, cols)],
                    "from_blocked (torch ops)")
        kernels = tao.triton_kernels(gated=False)
        return (lambda scales: [kernels.triton_mx_block_rearrange(scales)],
                "triton_mx_block_rearrange (Triton)")


def cases():
    """Every row, in table order."""
    big = [(8192, 8192), (16384, 16384)]
    rows = []
    rows += [MXFP8(s, ("rowwise", "columnwise")) for s in big]
    rows += [MXFP8(s, ("rowwise",)) for s in big]
    rows += [MXFP8(s, ("columnwise",)) for s in big]
    rows += [MXFP8((8, 1024, 8192), ("rowwise",))]
    rows += [Blockwise(s, 1) for s in big] + [Blockwise(s, 128) for s in big]
    # The 1x128 "both" program of mx.torch (bench/linear's blockwise step quantizes X and dY so), and
    # its transposed part alone, at 8192^2 and at the 5B model's M x K (15872 x 4096).
    rows += [Blockwise((15872, 4096), 1)]
    for shape in [big[0], (15872, 4096)]:
        rows += [Blockwise(shape, 1, ("rowwise", "transposed")), Blockwise(shape, 1, ("transposed",))]
    rows += [PerTensor(s) for s in big]
    rows += [Delayed(s) for s in big]
    rows += [MXFP4(s) for s in big]
    rows += [NVFP4(s, True) for s in big] + [NVFP4(s, False) for s in big]
    rows += [UpdateHistory(HISTORY)]
    rows += [Dequantize((8192, 8192)), Swizzle((8192, 256), False), Swizzle((8192, 256), True)]
    for elem in ["f6E3M2FN", "f6E2M3FN", "i8"]:
        rows += [MXFP8(big[0], ("rowwise", "columnwise"), elem), MXFP8(big[0], ("rowwise",), elem),
                 MXFP8(big[0], ("columnwise",), elem), Dequantize(big[0], elem)]
    # The candidate of the staged fused FP6 kernel (staged-variant 1), measured against its row above.
    rows += [MXFP8(big[0], ("rowwise", "columnwise"), elem, 1) for elem in ["f6E3M2FN", "f6E2M3FN"]]
    return rows


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
        tools.compile_gpu_library(source, directory / f"{case.name}.so", CHIP, options=case.options)
        lowered = tools.run_mx_opt(source, f"--mx-lower-to-nvvm=chip={CHIP} format=isa {case.options}".rstrip())
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
# torch programs of the same computations (compiled with torch.compile in `run`)




def torch_mxfp8(x, dim):
    """MXFP8 along `dim` (1: rowwise, 0: columnwise) of 2-D x: E4M3 data [M, K] and the 128x4-swizzled
    E8M0 bytes (columnwise: tiled with K as the unscaled dimension)."""
    import torch
    if dim == 0:
        data, tiles = torch_mxfp8(x.t(), 1)
        return data.t(), tiles
    m, k = x.shape
    blocks = x.float().reshape(m, k // 32, 32)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=-1))
    data = (blocks * pow2(b, -1)[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(m, k)
    return data, torch_swizzle(b.to(torch.uint8))


def torch_swizzle(scale_bytes):
    """Compact [R, C] -> 128x4 tiles [R/128, C/4, 32, 4, 4] (R % 128 == C % 4 == 0)."""
    r, c = scale_bytes.shape
    return scale_bytes.view(r // 128, 4, 32, c // 4, 4).permute(0, 3, 2, 1, 4).contiguous()


def torch_blockwise(x, block_rows):
    """FP8 blockwise, [block_rows, 128] blocks: E4M3 data and f32 power-of-two scales (`ceil`)."""
    import torch
    r, k = x.shape
    blocks = x.float().view(r // block_rows, block_rows, k // 128, 128)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=(1, 3)))
    data = (blocks * pow2(b, -1)[:, None, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return data.view(r, k), pow2(b, 1).contiguous()


def _div_f32(a, b):
    """The correctly rounded f32 quotient of f32 tensors: divided in f64 and rounded once to f32 (exact
    for division), since Triton's f32 division, which Inductor emits, is not correctly rounded."""
    import torch
    return (a.double() / b.double()).to(torch.float32)


def torch_per_tensor(x):
    """Current scaling, `exact`: scale = amax / 448 (f32 division), data = sat(x / scale)."""
    import torch
    amax = x.float().abs().amax()
    scale = _div_f32(amax, torch.full_like(amax, 448.0))
    scale = torch.where(scale == 0, torch.full_like(scale, 2.0 ** -127), scale)
    data = _div_f32(x.float(), scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return data, scale.reshape(1, 1)


def torch_delayed(x, scales, history, index):
    """The delayed-scaling cast: sat(x * scales[index]), 1 / scales[index], amax into history[0, index]."""
    import torch
    s = scales[index]
    data = (x.float() * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    new_history = history.clone()
    new_history[0, index] = x.float().abs().amax()
    return data, _div_f32(torch.ones_like(s), s).reshape(1, 1), new_history


def torch_update_history(history, scales, fmax=448.0):
    """`max` over the history ignoring NaN (from 0), scale = fmax / amax where finite and > 0 (an
    infinite one clamped to the largest f32), then the rotation with row 0 zeroed."""
    import torch
    a = torch.where(history.isnan(), torch.zeros_like(history), history).amax(dim=0).clamp(min=0.0)
    fresh = _div_f32(torch.full_like(a, fmax), a)
    fresh = torch.where(fresh.isinf(), torch.full_like(a, torch.finfo(torch.float32).max), fresh)
    new_scales = torch.where(torch.isfinite(a) & (a > 0), fresh, scales)
    new_history = torch.roll(history, -1, 0)
    new_history[0] = 0.0
    return new_history, new_scales


def torch_dequantize(data, scale_bytes):
    """bf16(f32(E4M3) * 2^(b-127)); data and scales as uint8."""
    import torch
    r, k = data.shape
    b = scale_bytes.to(torch.int32)
    scale = torch.where(b == 255, torch.full_like(b, 0x7FC00000), torch.where(b == 0, 0x400000, b << 23))
    values = data.view(torch.float8_e4m3fn).float().view(r, k // 32, 32) * scale.view(torch.float32)[..., None]
    return values.view(r, k).to(torch.bfloat16)


# ---------------------------------------------------------------------------------------------------
# torchao


class TorchAO:
    """torchao 0.18's prototype mx_formats modules, imported once. Its MXFP8 Triton quantize kernels
    are defined only when `is_sm_at_least_100()` holds at import; the gate is bypassed for that one
    check (the CUDA-extension gate after it, and every other caller, see the real answer), and the
    kernels are pointed at their portable scale computation (IS_ROCM): the default one is the
    `cvt.rp.satfinite.ue8m0x2.f32` instruction, which needs sm_100a."""
    KERNELS = "torchao.prototype.mx_formats.kernels"

    def __init__(self, max_row_tile=TORCHAO_MAX_ROW_TILE):
        self.error, self.version, self.gate, self.tuning = None, None, "not tried", ""
        try:
            import torchao
            import torchao.utils as utils
            self.version = getattr(torchao, "__version__", "unknown")
        except Exception as exc:  # noqa: BLE001
            self.error = f"torchao not importable: {type(exc).__name__}: {exc}"
            return
        if self.KERNELS in sys.modules:
            self.gate = "not bypassed (kernels module imported before)"
        original = utils.is_sm_at_least_100
        kernels_name = self.KERNELS

        def gate():
            caller = sys._getframe(1).f_globals
            if caller.get("__name__") == kernels_name and "_triton_kernels_available" not in caller:
                return True
            return original()
        utils.is_sm_at_least_100 = gate
        try:
            from torchao.prototype.mx_formats import config, kernels, mx_tensor, nvfp4_tensor
            from torchao.prototype.mx_formats import utils as mx_utils
        except Exception as exc:  # noqa: BLE001
            self.error = f"torchao.prototype.mx_formats not importable: {type(exc).__name__}: {exc}"
            return
        finally:
            utils.is_sm_at_least_100 = original
            for module in list(sys.modules.values()):
                if getattr(module, "is_sm_at_least_100", None) is gate:
                    module.is_sm_at_least_100 = original
        self.modules = {"config": config, "kernels": kernels, "mx_tensor": mx_tensor,
                        "nvfp4_tensor": nvfp4_tensor, "utils": mx_utils}
        if getattr(kernels, "_triton_kernels_available", False) and hasattr(kernels, "IS_ROCM"):
            import triton.language as tl
            kernels.IS_ROCM = tl.constexpr(True)
            if self.gate == "not tried":
                self.gate = "bypassed (portable scale path)"
        elif self.gate == "not tried":
            self.gate = "still closed (no Triton, or CUDA < 12.8)"
        self.tuning = "all of torchao's autotuning configurations"
        if max_row_tile:
            kept = []
            for name in ("to_mxfp8_dim0_kernel", "to_mxfp8_dim1_kernel", "_dequant_mxfp8_kernel"):
                tuner = getattr(kernels, name, None)
                configs = getattr(tuner, "configs", None)
                if configs:
                    small = [c for c in configs if c.kwargs.get("ROW_TILE_SIZE", 0) <= max_row_tile]
                    if small and len(small) < len(configs):
                        tuner.configs = small
                        kept.append(f"{name} {len(small)} of {len(configs)}")
            if kept:
                self.tuning = (f"autotuning over the configurations with ROW_TILE_SIZE <= {max_row_tile} "
                               f"({', '.join(kept)}; the larger tiles take minutes each to compile; "
                               "--torchao-all-configs tunes over all)")

    def _module(self, name):
        if self.error:
            raise NotAvailable(self.error)
        return self.modules[name]

    def triton_kernels(self, gated=True):
        kernels = self._module("kernels")
        if gated and not getattr(kernels, "_triton_kernels_available", False):
            raise NotAvailable(f"torchao's MXFP8 Triton kernels are gated to SM100; gate {self.gate}")
        return kernels

    def config(self):
        return self._module("config")

    def mx_tensor(self):
        return self._module("mx_tensor")

    def nvfp4_tensor(self):
        return self._module("nvfp4_tensor")

    def utils(self):
        return self._module("utils")


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
        return [_bytes(a) for a in reference.quantize(host_full["x"], case.shape, "f8E4M3FN", "f32", "exact")]
    if isinstance(case, Delayed):
        return [_bytes(a) for a in reference.quantize_delayed(host_full["x"], host_full["scales"],
                                                              host_full["history"], DELAYED_INDEX)]
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
             Blockwise((768, 256), 1, ("transposed",)), PerTensor((512, 256)), Delayed((512, 128)),
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
