"""Programs partitioned over 2 GPUs (mx-partition) against the unpartitioned ones on one GPU.

Skipped without 2 GPUs and torch (whose torch.multiprocessing launches one process per GPU). Each
process takes rank r of an NCCL communicator (mx.runtime.init_process_group), runs every check on its
shard of the same inputs (one seed for both) and compares with the whole program run on its own GPU:

* every recipe's sharded quantize is bit-identical to the quantize of the whole tensor: MX rowwise and
  columnwise, FP8 blockwise 1x128 and 128x128, per-tensor current scaling (amax all-reduced, a NaN
  in one shard reaching both), delayed scaling with its history (all-reduced at the update), MXFP4,
  NVFP4 with a computed tensor scale; also in call-stream mode, where the collectives are asynchronous;
* a quantized all-gather followed by the swizzle gives the bytes of quantize + swizzle of the whole
  (its data and scales gathered as one NCCL group; a rank's scales that fill whole 128x4 tiles
  swizzled before the gather, a partial tile after it), also in call-stream mode; the group API's misuses
  are reported;
* the placed all-gather (mxrtAllGatherPlaced on the side stream, mxrtCollectivesJoin) of a rank's part
  in chunks gives mxrtAllGather's bytes, by broadcast and by send/recv, in place or not, grouped, in
  the default and call-stream modes;
* the gathers pipelined by mx-pipeline-gathers (chunk quantizes overlapped with placed gathers on the
  side stream, the join before the swizzle) give the bytes of quantize + swizzle of the whole tensor:
  MXFP8, FP8 blockwise, per-tensor current scaling, MXFP4, NVFP4 (also in call-stream mode), and
  MXFP8 whose chunks' scales are swizzled before their gathers (mx-swizzle-before-gather first);
* K-split scaled_matmuls (all-reduce, reduce-scatter) are within the spec's tolerance of the exact
  product;
* what must fail does, with a message and without hanging: a rank that never joins a collective
  (timeout), a communicator that never forms, a program partitioned for another number of devices,
  NCCL missing;
* gathered buffers come from the runtime's NCCL-registered memory: held results keep theirs, freed
  ones are reused, in both modes;
* a failure inside a collective group runs none of its collectives and leaves the GPUs usable: a
  NULL buffer given to a member (the C API), and a grouped gather whose result buffers do not fit on
  GPUs filled by torch (in call-stream mode and in the default mode), after which the same call, the
  memory freed, gathers the right bytes and torch still computes.

The programs are compiled ahead of time like the other GPU tests: here when MLIR is on the machine,
else loaded from $MX_GPU_ARTIFACTS, built elsewhere with `python python/tests/test_gpu_distributed.py
DIR [chip]`. NCCL_NVLS_ENABLE=0 is set for every process (no NVLink multicast).
"""

import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, build_gpu_programs, exact_matmul, random_input

from mx import reference, runtime, tools

BF16, F32 = ml_dtypes.bfloat16, np.float32
DEVICES = 2
TIMEOUT_S = 20  # of the communicator in the timeout check

# Quantize programs, split along rows over the 2 devices: input shape and dtype, block (None: one block
# over the whole tensor), element type, scale type, rounding (None for NVFP4).
QUANTIZE = {
    "mx_rowwise": ((512, 1024), BF16, (1, 32), "f8E4M3FN", "f8E8M0FNU", "ceil"),
    "mx_columnwise": ((512, 256), BF16, (32, 1), "f8E5M2", "f8E8M0FNU", "floor"),
    "blockwise_1x128": ((512, 1024), BF16, (1, 128), "f8E4M3FN", "f32", "ceil"),
    "blockwise_128x128": ((512, 1024), F32, (128, 128), "f8E4M3FN", "f32", "exact"),
    "per_tensor": ((512, 1024), BF16, None, "f8E4M3FN", "f32", "ceil"),
    "per_tensor_exact": ((256, 512), F32, None, "f8E5M2", "f32", "exact"),
    "mxfp4": ((512, 1024), BF16, (1, 32), "f4E2M1FN", "f8E8M0FNU", "ceil"),
    "nvfp4": ((512, 1024), BF16, (1, 16), "f4E2M1FN", "f8E4M3FN", None),
}
# K-split products: M, N, K, lhs block, rhs block, scale type, and whether the product is reduce-scattered
# along M (else all-reduced).
MATMUL = {
    "matmul_mx_allreduce": (256, 256, 1024, (1, 32), (1, 32), "f8E8M0FNU", False),
    "matmul_mx_reduce_scatter": (256, 256, 1024, (1, 32), (1, 32), "f8E8M0FNU", True),
    "matmul_blockwise_allreduce": (256, 256, 1024, (1, 128), (128, 128), "f32", False),
}
DELAYED_SHAPES = ((512, 1024), (1024, 512))  # x split along rows, y along columns
# Shape, block, scale type. 256 rows a rank fill whole 128x4 tiles, so mx-lower-to-nvvm swizzles each
# rank's scales before the gather (mx-swizzle-before-gather); 192 end in a partial tile, swizzled after.
GATHER = {"gather_swizzle": ((512, 1024), (1, 32), "f8E8M0FNU"),
          "gather_swizzle_partial_tile": ((384, 1056), (1, 32), "f8E8M0FNU"),
          "gather_swizzle_blockwise": ((256, 1024), (1, 128), "f32")}
# Gathers pipelined by mx-pipeline-gathers (quantize + all-gather + swizzle, as bench/collectives.py):
# shape, block (None: per-tensor), element type, scale type, swizzle layout of the gathered scales (None:
# the scale is not gathered), chunks (None: mx-partition alone, and mx-lower-to-nvvm exchanges the
# results by the placed gather because they hold at least its placed-gather-bytes, 64 MiB: 66 MiB for
# MXFP8 here, 68 MiB for MXFP4, whose scales a swizzle kernel lays out before the gathers).
PIPELINED = {
    "placed_by_default_mxfp8": ((8192, 8192), (1, 32), "f8E4M3FN", "f8E8M0FNU", "tiles", None),
    "placed_by_default_mxfp4": ((16384, 8192), (1, 32), "f4E2M1FN", "f8E8M0FNU", "tiles", None),
    "pipelined_mxfp8": ((512, 1024), (1, 32), "f8E4M3FN", "f8E8M0FNU", "tiles", 4),
    "pipelined_blockwise": ((512, 1024), (1, 128), "f8E4M3FN", "f32", "blockwise", 8),
    "pipelined_per_tensor": ((512, 1024), None, "f8E4M3FN", "f32", None, 4),
    "pipelined_mxfp4": ((512, 1024), (1, 32), "f4E2M1FN", "f8E8M0FNU", "tiles", 1),
    "pipelined_nvfp4": ((512, 1024), (1, 16), "f4E2M1FN", "f8E4M3FN", "tiles", 2),
    "pipelined_mxfp8_tiles": ((1024, 1024), (1, 32), "f8E4M3FN", "f8E8M0FNU", "tiles", 2),
}
# Pipelined after mx-swizzle-before-gather: each chunk's scales swizzled into whole 128-row tiles (256
# rows a chunk here) before their placed gather.
SWIZZLED_BEFORE_GATHER = {"pipelined_mxfp8_tiles"}
MATMUL_TOLERANCE = 4e-3  # bf16 output (spec section 5)
# The grouped gather of the out-of-memory check: the shard shapes of its FP8 data and E8M0 scales
# (128 MiB and 4 MiB a rank, so 256 MiB and 8 MiB of results), and the free memory that the check
# leaves on each GPU (64 to 96 MiB: too little for the data's result).
OOM_GATHER = ((16384, 8192), (16384, 256))
OOM_TYPES = (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu)
OOM_FREE = 64 << 20


def _type(shape, dtype):
    return tools.mlir_type(shape, dtype)


@dataclasses.dataclass
class Program:
    """A function of mx ops: its arguments (name, type), body and results (value, type). The sharded
    version splits the arguments named in `splits` (split_axes text); its body reads `%<arg>s`, the
    annotated argument, and `consumers` annotates what the consumers need, its results replacing
    `results` (`sharded_results`)."""
    args: list
    body: list
    results: list
    splits: dict
    consumers: list = dataclasses.field(default_factory=list)
    sharded_results: list | None = None

    def sharded(self, name):
        lines = []
        for arg, decl in self.args:
            lines += [f"  %{arg}_sharding = shard.sharding @grid split_axes = "
                      f"{self.splits.get(arg, '[[]]')} : !shard.sharding",
                      f"  %{arg}s = shard.shard %{arg} to %{arg}_sharding : {decl}"]
        return (f"shard.grid @grid(shape = {DEVICES})\n" + tools.function_source(
            name, self._params(), lines + self.body + self.consumers, self.sharded_results or self.results))

    def whole(self, name):
        lines = [f"  %{arg}s = tensor.cast %{arg} : {decl} to {decl}" for arg, decl in self.args]
        return tools.function_source(name, self._params(), lines + self.body, self.results)

    def _params(self):
        return [f"%{arg}: {decl}" for arg, decl in self.args]


def _block(shape, block):
    return tuple(shape) if block is None else block


def quantize_program(name):
    shape, dtype, block, elem, scale_type, rounding = QUANTIZE[name]
    block = _block(shape, block)
    x, data = _type(shape, dtype), _type(shape, tools.NUMPY_DTYPES[elem])
    scales = _type(reference.scales_shape(shape, block), tools.NUMPY_DTYPES[scale_type])
    nvfp4 = rounding is None
    results = [("%r#0", data), ("%r#1", scales)] + ([("%r#2", "tensor<f32>")] if nvfp4 else [])
    body = [f"  %r:{len(results)} = mx.quantize %xs block [{', '.join(map(str, block))}]"
            f"{'' if nvfp4 else ' rounding ' + rounding} : {x} -> {', '.join(t for _, t in results)}"]
    return Program([("x", x)], body, results, {"x": "[[0]]"})


def delayed_program(name):
    (xm, xk), (ym, yk) = DELAYED_SHAPES
    x, y = _type((xm, xk), BF16), _type((ym, yk), BF16)
    s, h = _type((2,), F32), _type((16, 2), F32)
    e4m3 = ml_dtypes.float8_e4m3fn
    xd, yd, inv = _type((xm, xk), e4m3), _type((ym, yk), e4m3), _type((1, 1), F32)
    body = [f"  %xd, %xi, %h1 = mx.quantize_delayed %xs, %ss, %hs index 0 : {x}, {s}, {h} -> {xd}, {inv}, {h}",
            f"  %yd, %yi, %h2 = mx.quantize_delayed %ys, %ss, %h1 index 1 : {y}, {s}, {h} -> {yd}, {inv}, {h}",
            f"  %h3, %s3 = mx.update_amax_history %h2, %ss element f8E4M3FN : {h}, {s} -> {h}, {s}"]
    results = [("%xd", xd), ("%yd", yd), ("%xi", inv), ("%h3", h), ("%s3", s)]
    return Program([("x", x), ("y", y), ("s", s), ("h", h)], body, results, {"x": "[[0]]", "y": "[[], [0]]"})


def gather_program(name):
    shape, block, scale_type = GATHER[name]
    x, data = _type(shape, BF16), _type(shape, ml_dtypes.float8_e4m3fn)
    scales_shape = reference.scales_shape(shape, block)
    scales = _type(scales_shape, tools.NUMPY_DTYPES[scale_type])
    blockwise = scale_type == "f32"
    swizzled_shape = reference.swizzled_shape(scales_shape, 0, "blockwise" if blockwise else "tiles")
    tiles = _type(swizzled_shape, tools.NUMPY_DTYPES[scale_type])
    body = [f"  %d, %s = mx.quantize %xs block [{', '.join(map(str, block))}] : {x} -> {data}, {scales}",
            f"  %t = mx.swizzle %s{' layout blockwise' if blockwise else ''} : {scales} -> {tiles}"]
    # The consumers need both whole: the data before its use, the swizzled scales as they are made.
    consumers = ["  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding",
                 f"  %dw = shard.shard %d to %whole annotate_for_users : {data}",
                 f"  %tw = shard.shard %t to %whole : {tiles}"]
    return Program([("x", x)], body, [("%d", data), ("%t", tiles)], {"x": "[[0]]"}, consumers,
                   [("%dw", data), ("%tw", tiles)])


def pipelined_program(name):
    """Quantize + all-gather of the compact data and scales + swizzle of the scales, which mx-partition
    and mx-pipeline-gathers turn into chunk quantizes overlapped with their placed gathers."""
    shape, block, elem, scale_type, layout, _ = PIPELINED[name]
    block = _block(shape, block)
    x, data = _type(shape, BF16), _type(shape, tools.NUMPY_DTYPES[elem])
    scales_shape = reference.scales_shape(shape, block)
    scales = _type(scales_shape, tools.NUMPY_DTYPES[scale_type])
    nvfp4 = scale_type == "f8E4M3FN"
    outs = [data, scales] + (["tensor<f32>"] if nvfp4 else [])
    body = [f"  %q:{len(outs)} = mx.quantize %xs block [{', '.join(map(str, block))}] : {x} -> {', '.join(outs)}"]
    consumers = ["  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding",
                 f"  %dw = shard.shard %q#0 to %whole annotate_for_users : {data}"]
    if layout is None:  # one scale, the same on every device
        return Program([("x", x)], body, [("%q#0", data), ("%q#1", scales)], {"x": "[[0]]"}, consumers,
                       [("%dw", data), ("%q#1", scales)])
    tiles = _type(reference.swizzled_shape(scales_shape, 0, layout), tools.NUMPY_DTYPES[scale_type])
    body.append(f"  %t = mx.swizzle %q#1{' layout blockwise' if layout == 'blockwise' else ''} : {scales} -> {tiles}")
    consumers.append(f"  %tw = shard.shard %t to %whole : {tiles}")
    return Program([("x", x)], body, [("%q#0", data), ("%t", tiles)], {"x": "[[0]]"}, consumers,
                   [("%dw", data), ("%tw", tiles)])


def matmul_program(name):
    m, n, k, a_block, b_block, scale_type, scatter = MATMUL[name]
    a, b = _type((m, k), ml_dtypes.float8_e4m3fn), _type((n, k), ml_dtypes.float8_e4m3fn)
    scale = tools.NUMPY_DTYPES[scale_type]
    a_scales = _type(reference.scales_shape((m, k), a_block), scale)
    b_scales = _type(reference.scales_shape((n, k), b_block), scale)
    out = _type((m, n), BF16)
    body = [f"  %c = mx.scaled_matmul %as, %a_ss, %bs, %b_ss lhs_block [{', '.join(map(str, a_block))}] "
            f"rhs_block [{', '.join(map(str, b_block))}] : {a}, {a_scales}, {b}, {b_scales} -> {out}"]
    args = [("a", a), ("a_s", a_scales), ("b", b), ("b_s", b_scales)]
    program = Program(args, body, [("%c", out)], {arg: "[[], [0]]" for arg, _ in args})
    if scatter:  # the sum made whole, then wanted split along M: a reduce-scatter
        program.consumers = ["  %whole = shard.sharding @grid split_axes = [[]] : !shard.sharding",
                             "  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding",
                             f"  %cw = shard.shard %c to %whole : {out}",
                             f"  %cr = shard.shard %cw to %rows annotate_for_users : {out}"]
        program.sharded_results = [("%cr", out)]
    return program


PROGRAMS = {**{n: quantize_program(n) for n in QUANTIZE}, "delayed": delayed_program("delayed"),
            **{n: gather_program(n) for n in GATHER}, **{n: matmul_program(n) for n in MATMUL},
            **{n: pipelined_program(n) for n in PIPELINED}}


def oom_gather_source():
    """`gather_pair`, already partitioned: the all-gathers of data and scales, one NCCL group."""
    grid = f"shard.grid @grid(shape = {DEVICES})\n"
    args, lines, results = [], [], []
    for index, (shape, dtype) in enumerate(zip(OOM_GATHER, OOM_TYPES)):
        part, whole = _type(shape, dtype), _type((shape[0] * DEVICES, shape[1]), dtype)
        args.append(f"%x{index}: {part}")
        lines.append(f"  %g{index} = shard.all_gather %x{index} on @grid grid_axes = [0] gather_axis = 0 "
                     f": {part} -> {whole}")
        results.append((f"%g{index}", whole))
    return grid + tools.function_source("gather_pair", args, lines, results)


def sources():
    """Every program annotated for 2 devices (partitioned by build()) and unpartitioned (`_whole`),
    and the partitioned `gather_pair`."""
    result = {"gather_pair": oom_gather_source()}
    for name, program in PROGRAMS.items():
        result[name] = program.sharded(name)
        result[name + "_whole"] = program.whole(name + "_whole")
    return result


def _partition(name, source):
    """The program of `name` partitioned for 2 devices (and pipelined where PIPELINED says)."""
    if name not in PROGRAMS:
        return source
    if name in PIPELINED and PIPELINED[name][-1] is not None:
        hoist = ("--mx-swizzle-before-gather",) if name in SWIZZLED_BEFORE_GATHER else ()
        return tools.run_mx_opt(source, "--mx-partition", *hoist,
                                f"--mx-pipeline-gathers=chunks={PIPELINED[name][-1]}")
    return tools.run_mx_opt(source, "--mx-partition")


def build(directory, chip=None):
    """Partitions the annotated programs for 2 devices (the pipelined ones in their chunks) and
    compiles every program for `chip`."""
    programs = {name: _partition(name, source) for name, source in sources().items()}
    build_gpu_programs(directory, programs, chip)


#===--------------------------------------------------------------------------------------------===#
# What each process runs
#===--------------------------------------------------------------------------------------------===#

def _call(libraries, name, inputs, dtypes):
    """Runs compiled `name` on host arrays; its results as host arrays of `dtypes`."""
    buffers = [runtime.DeviceBuffer.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    try:
        results = runtime.call_mlir_function(libraries[name], name, buffers, result_ranks=[
            len(shape) for shape in _result_shapes(libraries[name], name)])
        try:
            return [r.to_numpy(d) for r, d in zip(results, dtypes)]
        finally:
            for r in results:
                r.free()
    finally:
        for b in buffers:
            b.close()


def _result_shapes(library, name):
    import ctypes
    text = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(library, "_mx_signatures"))).decode()
    function = next(f for f in json.loads(text)["functions"] if f["name"] == name)
    return [r["shape"] for r in function["results"]]


def _rows(array, rank, axis=0):
    """This rank's shard of `array` along `axis`."""
    return np.split(array, DEVICES, axis=axis)[rank]


def _quantize_input(rng, name):
    shape, dtype, *_ = QUANTIZE[name]
    x = random_input(rng, shape, F32)
    if name.startswith("per_tensor"):
        # Specials stay in the second shard only: its NaN must reach the first shard's scale too, in
        # half of the runs (the other half checks finite per-tensor scaling).
        x = np.where(np.isfinite(x), x, np.float32(2.5))
        if rng.integers(2):
            x[-1, -1] = np.nan
    return x.astype(dtype)


def check_quantize(libraries, rank, rng, name):
    shape, dtype, block, elem, scale_type, rounding = QUANTIZE[name]
    x = _quantize_input(rng, name)
    dtypes = [tools.NUMPY_DTYPES[elem], tools.NUMPY_DTYPES[scale_type]] + ([F32] if rounding is None
                                                                                   else [])
    whole = _call(libraries, name + "_whole", [x], dtypes)
    got = _call(libraries, name, [_rows(x, rank)], dtypes)
    assert_bits_equal(got[0], _rows(whole[0], rank), f"{name} data")
    per_tensor = block is None
    assert_bits_equal(got[1], whole[1] if per_tensor else _rows(whole[1], rank), f"{name} scales")
    if rounding is None:
        assert_bits_equal(got[2], whole[2], f"{name} tensor scale")


def check_delayed(libraries, rank, rng, name="delayed"):
    (xm, xk), (ym, yk) = DELAYED_SHAPES
    x = random_input(rng, (xm, xk), F32, specials=False).astype(BF16)
    y = random_input(rng, (ym, yk), F32, specials=False).astype(BF16)
    s = np.exp2(rng.integers(-4, 4, size=2)).astype(F32)
    h = np.abs(rng.standard_normal((16, 2))).astype(F32) * 100
    e4m3 = ml_dtypes.float8_e4m3fn
    dtypes = [e4m3, e4m3, F32, F32, F32]
    whole = _call(libraries, name + "_whole", [x, y, s, h], dtypes)
    got = _call(libraries, name, [_rows(x, rank), _rows(y, rank, axis=1), s, h], dtypes)
    assert_bits_equal(got[0], _rows(whole[0], rank), "delayed x data")
    assert_bits_equal(got[1], _rows(whole[1], rank, axis=1), "delayed y data")
    for index, what in ((2, "scale_inv"), (3, "history"), (4, "scales")):
        assert_bits_equal(got[index], whole[index], f"delayed {what}")


def check_gather(libraries, rank, rng, name):
    shape, block, scale_type = GATHER[name]
    x = random_input(rng, shape, F32).astype(BF16)
    dtypes = [ml_dtypes.float8_e4m3fn, tools.NUMPY_DTYPES[scale_type]]
    whole = _call(libraries, name + "_whole", [x], dtypes)
    got = _call(libraries, name, [_rows(x, rank)], dtypes)
    assert_bits_equal(got[0], whole[0], f"{name} gathered data")
    assert_bits_equal(got[1], whole[1], f"{name} swizzled scales")


def check_pipelined(libraries, rank, rng, name):
    """The pipelined quantize + all-gather + swizzle on each rank's shard gives the bytes of quantize +
    swizzle of the whole tensor on one GPU."""
    shape, block, elem, scale_type, layout, _ = PIPELINED[name]
    x = random_input(rng, shape, F32)
    if block is None:  # finite: a NaN would make every byte NaN
        x = np.where(np.isfinite(x), x, np.float32(-3.0))
    x = x.astype(BF16)
    dtypes = [tools.NUMPY_DTYPES[elem], tools.NUMPY_DTYPES[scale_type]]
    whole = _call(libraries, name + "_whole", [x], dtypes)
    got = _call(libraries, name, [_rows(x, rank)], dtypes)
    assert_bits_equal(got[0], whole[0], f"{name} gathered data")
    assert_bits_equal(got[1], whole[1], f"{name} {'swizzled scales' if layout else 'scale'}")


def check_matmul(libraries, rank, rng, name):
    m, n, k, a_block, b_block, scale_type, scatter = MATMUL[name]

    def operand(rows, block):
        return reference.quantize(random_input(rng, (rows, k), F32, specials=False), block, "f8E4M3FN",
                                  scale_type)
    (a, a_scales), (b, b_scales) = operand(m, a_block), operand(n, b_block)
    exact = exact_matmul(a, a_scales, b, b_scales, a_block, b_block)
    shards = [_rows(array, rank, axis=1) for array in (a, a_scales, b, b_scales)]
    got = _call(libraries, name, shards, [BF16])[0].astype(np.float64)
    whole = _call(libraries, name + "_whole", [a, a_scales, b, b_scales], [BF16])[0].astype(np.float64)
    want = _rows(exact, rank) if scatter else exact
    for product, what in ((got, "K-split product"), (_rows(whole, rank) if scatter else whole, "whole product")):
        error = np.linalg.norm(product - want) / np.linalg.norm(want)
        assert error < MATMUL_TOLERANCE, f"{name}: {what} relative error {error:.2e}"


def check_call_stream(libraries, rank, rng, name="per_tensor"):
    """A check in call-stream mode (the legacy stream): the per-tensor quantize with its amax
    all-reduce, or a quantized gather whose data and scales are one NCCL group. The collectives are
    enqueued and followed by the watchdog, the host does not wait for them."""
    lib = runtime.load_library()
    assert lib.mxrtSetCallStream(None, 1) == 0
    try:
        check = check_pipelined if name in PIPELINED else check_gather if name in GATHER else check_quantize
        check(libraries, rank, rng, name)
    finally:
        lib.mxrtSetCallStream(None, 0)
        runtime.synchronize()


def check_group_api(libraries, rank, rng, name=None):
    """mxrtGroupStart/End from the C API: an empty group, nesting, and the misuses, each with its
    message (an end without a start; the communicator's setup calls inside a group)."""
    lib = runtime.load_library()
    runtime.last_error()
    assert lib.mxrtGroupStart() == 0 and lib.mxrtGroupStart() == 0
    assert lib.mxrtGroupEnd() == 0 and lib.mxrtGroupEnd() == 0
    assert lib.mxrtGroupEnd() == runtime.Status.INVALID_ARGUMENT
    assert "no collective group is open" in runtime.last_error()
    assert lib.mxrtGroupStart() == 0
    try:
        assert lib.mxrtCommDestroy() == runtime.Status.INVALID_ARGUMENT
        assert "a collective group is open on this thread" in runtime.last_error()
    finally:
        assert lib.mxrtGroupEnd() == 0
    assert runtime.process_group() == (DEVICES, rank)
    # A member given a NULL buffer fails the group: no member runs (the valid one included), the
    # communicator stays usable.
    with runtime.DeviceBuffer.from_numpy(np.full(8, rank + 1, np.uint8)) as send, \
            runtime.DeviceBuffer.zeros((8 * DEVICES,), np.uint8) as recv:
        invalid = runtime.Status.INVALID_ARGUMENT
        assert lib.mxrtGroupStart() == 0
        assert lib.mxrtAllGather(send.ptr, None, 8, DEVICES, None) == invalid
        assert lib.mxrtAllGather(send.ptr, recv.ptr, 8, DEVICES, None) == invalid
        assert lib.mxrtGroupEnd() == invalid
        message = runtime.last_error()
        assert "the receive buffer of the all-gather of 8 bytes is NULL" in message, message
        assert not recv.to_numpy().any(), "a member of the failed group ran"
        assert lib.mxrtGroupStart() == 0
        assert lib.mxrtAllGather(send.ptr, recv.ptr, 8, DEVICES, None) == 0
        assert lib.mxrtGroupEnd() == 0, runtime.last_error()
        np.testing.assert_array_equal(recv.to_numpy(), np.repeat(np.arange(1, DEVICES + 1), 8))


PLACED_CHUNKS = ((4008,), (1002,) * 4, (1000, 8, 3000))  # a rank's 4008 bytes in 1, 4 and 3 chunks


def _placed(parts, rank, chunks, in_place, buffer):
    """Gathers the rank parts held in `buffer` (device) chunk by chunk with the placed gather: into a
    new buffer; from this rank's rows of it where `in_place`. Returns the gathered bytes."""
    part = parts[rank].size
    start = np.full(part * DEVICES, 0xA5, np.uint8)
    if in_place:
        start[rank * part:(rank + 1) * part] = parts[rank]
    with runtime.DeviceBuffer.from_numpy(start) as recv:
        offset = 0
        for chunk in chunks:
            send = recv.ptr + rank * part + offset if in_place else buffer.ptr + offset
            runtime.all_gather_placed(send, recv.ptr, chunk, part, offset)
            offset += chunk
        runtime.join_collectives()
        return recv.to_numpy()


def check_placed_gather(libraries, rank, rng, name=None):
    """mxrtAllGatherPlaced, chunk by chunk on the side stream, then mxrtCollectivesJoin, gives the bytes
    of mxrtAllGather of the whole parts: by broadcast and by send/recv, from a send buffer and in place,
    with chunks of one size and of several, in the default mode (the join waits) and in call-stream mode
    (the join orders the stream); two placed gathers as one NCCL group."""
    lib = runtime.load_library()
    runtime.join_collectives()  # nothing on the side stream yet: a no-op
    parts = [rng.integers(0, 256, 4008, dtype=np.uint8) for _ in range(DEVICES)]  # the same on both ranks
    want = np.concatenate(parts)
    with runtime.DeviceBuffer.from_numpy(parts[rank]) as send, \
            runtime.DeviceBuffer.zeros((want.size,), np.uint8) as whole:
        runtime.all_gather(send.ptr, whole.ptr, parts[rank].size)
        np.testing.assert_array_equal(whole.to_numpy(), want, "mxrtAllGather")
        try:
            for method in ("broadcast", "sendrecv"):
                os.environ["MX_NCCL_PLACED_GATHER"] = method
                for call_stream in (0, 1):
                    assert lib.mxrtSetCallStream(None, call_stream) == 0
                    for chunks in PLACED_CHUNKS:
                        for in_place in (False, True):
                            got = _placed(parts, rank, chunks, in_place, send)
                            np.testing.assert_array_equal(
                                got, want, f"{method}, call stream {call_stream}, chunks {chunks}, "
                                f"in place {in_place}")
                    lib.mxrtSetCallStream(None, 0)
                    runtime.synchronize()
                # Two parts (data and scales) of each chunk as one group.
                with runtime.DeviceBuffer.zeros((want.size,), np.uint8) as data, \
                        runtime.DeviceBuffer.zeros((want.size,), np.uint8) as scales:
                    part = parts[rank].size
                    for c in range(2):
                        with runtime.collective_group():
                            for recv in (data, scales):
                                runtime.all_gather_placed(send.ptr + c * part // 2, recv.ptr, part // 2, part,
                                                          c * part // 2)
                    runtime.join_collectives()
                    for recv in (data, scales):
                        np.testing.assert_array_equal(recv.to_numpy(), want, f"{method}, grouped")
        finally:
            os.environ.pop("MX_NCCL_PLACED_GATHER", None)
            lib.mxrtSetCallStream(None, 0)


def check_registered_buffers(libraries, rank, rng, name=None):
    """Gathered buffers from the runtime's NCCL-registered memory (mxrtCollectiveAlloc; gather_pair's
    256 + 8 MiB): two calls whose results are both held get buffers of their own, and a third call,
    after the first's results are freed, reuses theirs (once their work is done) without touching the
    second's. In the default and call-stream modes."""
    lib = runtime.load_library()
    for mode in (0, 1):
        assert lib.mxrtSetCallStream(None, mode) == 0
        try:
            calls = []
            for _ in range(3):
                shards = _pair_shards(rng)
                buffers = _pair_inputs(shards, rank)
                results = runtime.call_mlir_function(libraries["gather_pair"], "gather_pair", buffers,
                                                     result_ranks=[2, 2])
                for b in buffers:
                    b.close()
                calls.append((shards, results))
                if len(calls) == 2:  # the first call's buffers go back to the runtime
                    for r in calls[0][1]:
                        r.free()
            runtime.synchronize()
            pointers = [[r.allocated for r in results] for _, results in calls]
            assert not set(pointers[1]) & set(pointers[2]), f"held buffers handed out again: {pointers}"
            assert pointers[2] == pointers[0], f"freed buffers not reused: {pointers}"
            for shards, results in calls[1:]:
                for index, (result, dtype) in enumerate(zip(results, OOM_TYPES)):
                    assert np.array_equal(result.to_numpy(dtype).view(np.uint8),
                                          _pair_gathered(shards, index)), \
                        f"mode {mode}: gathered result {index} is wrong"
                    result.free()
        finally:
            lib.mxrtSetCallStream(None, 0)
            runtime.synchronize()


CHECKS = {**{f"quantize_{n}": (check_quantize, n) for n in QUANTIZE},
          "delayed": (check_delayed, "delayed"),
          **{n: (check_gather, n) for n in GATHER},
          **{n: (check_matmul, n) for n in MATMUL},
          "call_stream": (check_call_stream, "per_tensor"),
          "call_stream_gather": (check_call_stream, "gather_swizzle"),
          **{n: (check_pipelined, n) for n in PIPELINED},
          "call_stream_pipelined": (check_call_stream, "pipelined_mxfp8"),
          "group_api": (check_group_api, None),
          "placed_gather": (check_placed_gather, None),
          "registered_buffers": (check_registered_buffers, None)}


def _setup(rank, directory):
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    runtime.set_device(rank)
    return {name: runtime.load_compiled(Path(directory) / f"{name}.so") for name in sources()}


def _report(out, rank, results):
    (Path(out) / f"rank{rank}.json").write_text(json.dumps(results))


def run_checks(rank, directory, out, seed):
    """One process of the 2-GPU run: every check, its failure (or None) reported in out/rank<r>.json."""
    results = {}
    try:
        libraries = _setup(rank, directory)
        runtime.init_process_group(rank, DEVICES, id_file=Path(out) / "nccl.id", timeout=120)
        for index, (check, (function, name)) in enumerate(CHECKS.items()):
            rng = np.random.default_rng([seed, index])  # the same inputs on both ranks
            try:
                function(libraries, rank, rng, name)
                results[check] = None
            except Exception:  # reported per check; the next one still runs
                results[check] = traceback.format_exc()
        runtime.destroy_process_group()
    except Exception:
        results["setup"] = traceback.format_exc()
    _report(out, rank, results)


def run_timeout(rank, directory, out, seed):
    """Rank 1 never joins the gather that rank 0 calls: rank 0 must fail after the communicator's
    timeout, with a message, and every later collective at once."""
    results = {}
    flag = Path(out) / "rank0.done"
    try:
        libraries = _setup(rank, directory)
        runtime.init_process_group(rank, DEVICES, id_file=Path(out) / "nccl.id", timeout=TIMEOUT_S)
        if rank == 0:
            x = np.zeros((256, 1024), BF16)
            start = time.monotonic()
            for attempt in ("first", "later"):
                try:
                    _call(libraries, "gather_swizzle", [x], [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu])
                    results[attempt] = "the gather returned without its peer"
                except runtime.MXRuntimeError as error:
                    expected = "did not complete within" if attempt == "first" else "aborted"
                    results[attempt] = None if expected in str(error) else f"unexpected message: {error}"
            elapsed = time.monotonic() - start
            results["elapsed"] = None if elapsed < TIMEOUT_S + 30 else f"took {elapsed:.0f} s"
            flag.touch()
        else:
            deadline = time.monotonic() + TIMEOUT_S + 60
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
    except Exception:
        results["setup"] = traceback.format_exc()
    _report(out, rank, results)
    os._exit(0)  # the communicator of rank 1 still waits for its aborted peer: do not tear it down


def _pair_shards(rng):
    """Random shards of gather_pair's data and scales for every rank, [rank][part] (the same on both
    ranks from the same generator)."""
    return [[rng.integers(0, 256, shape, dtype=np.uint8) for shape in OOM_GATHER] for _ in range(DEVICES)]


def _pair_inputs(shards, rank):
    """This rank's shards as gather_pair's device buffers."""
    return [runtime.DeviceBuffer.from_numpy(shard.view(dtype))
            for shard, dtype in zip(shards[rank], OOM_TYPES)]


def _pair_gathered(shards, index):
    """The bytes gather_pair's result `index` must hold: every rank's part, in rank order."""
    return np.concatenate([rank_shards[index] for rank_shards in shards])


def _gather_pair(libraries, buffers):
    """`gather_pair` on device buffers: its gathered data and scales as host bytes."""
    results = runtime.call_mlir_function(libraries["gather_pair"], "gather_pair", buffers,
                                         result_ranks=[2, 2])
    try:
        return [r.to_numpy(dtype).view(np.uint8) for r, dtype in zip(results, OOM_TYPES)]
    finally:
        for r in results:
            r.free()


def _fill_gpu(torch, device):
    """torch tensors taking the free memory of `device` down to OOM_FREE .. OOM_FREE + 32 MiB."""
    filler = []
    for chunk in (1 << 30, 32 << 20):
        while torch.cuda.mem_get_info(device)[0] > OOM_FREE + chunk:
            filler.append(torch.empty(chunk, dtype=torch.uint8, device=device))
    return filler


def _out_of_memory_then_recover(libraries, rank, shards):
    """gather_pair on a GPU without room for its results, then with it; None, or what went wrong."""
    import torch
    device = torch.device("cuda", rank)
    buffers = _pair_inputs(shards, rank)
    try:
        filler = _fill_gpu(torch, device)
        try:
            _gather_pair(libraries, buffers)
            return "the gather returned on a full GPU"
        except runtime.MXRuntimeError as error:
            message = str(error)
        finally:
            filler.clear()
            torch.cuda.empty_cache()
        # The gathered buffers are the runtime's NCCL-registered memory (ncclMemAlloc).
        result_bytes = OOM_GATHER[0][0] * OOM_GATHER[0][1] * DEVICES
        if (f"ncclMemAlloc({result_bytes} bytes) failed" not in message
                or "ILLEGAL" in message or "aborted" in message):
            return f"unexpected message: {message}"
        got = _gather_pair(libraries, buffers)
        for index, gathered in enumerate(got):
            if not np.array_equal(gathered, _pair_gathered(shards, index)):
                return f"result {index} of the call after the failure is wrong"
        count = 1 << 20
        total = torch.arange(count, device=device, dtype=torch.float64).sum().item()
        torch.cuda.synchronize(device)
        return None if total == count * (count - 1) / 2 else f"torch computed {total}"
    finally:
        for b in buffers:
            b.close()


def run_out_of_memory(rank, directory, out, seed):
    """Both ranks call gather_pair with their GPU all but full (torch holds the rest): the results'
    allocation fails, the call raises that failure, and no collective of its group runs (one would
    fault on the missing buffer and lose the CUDA context); with the memory back, the same call
    gathers the right bytes and torch computes. First in call-stream mode, whose stream-ordered
    pool holds nothing yet, then in the default mode."""
    results = {}
    try:
        libraries = _setup(rank, directory)
        runtime.init_process_group(rank, DEVICES, id_file=Path(out) / "nccl.id", timeout=120)
        rng = np.random.default_rng(seed)  # the same shards on both ranks
        shards = _pair_shards(rng)
        lib = runtime.load_library()
        for mode in ("call_stream", "default"):
            assert lib.mxrtSetCallStream(None, int(mode == "call_stream")) == 0
            try:
                results[mode] = _out_of_memory_then_recover(libraries, rank, shards)
            except Exception:
                results[mode] = traceback.format_exc()
            finally:
                lib.mxrtSetCallStream(None, 0)
                # The pool keeps what the recovering call freed, which would let the next mode's
                # allocation succeed on a GPU that torch fills.
                runtime.empty_cache()
        runtime.destroy_process_group()
    except Exception:
        results["setup"] = traceback.format_exc()
    _report(out, rank, results)


def run_single(rank, directory, out, check):
    """One process on GPU 0 for the failures that need no peer."""
    results = {}
    try:
        if check == "nccl_missing":
            os.environ["MX_NCCL_LIBRARY"] = str(Path(out) / "no-such-libnccl.so.2")
        libraries = _setup(0, directory)
        start = time.monotonic()
        try:
            if check == "nccl_missing":
                runtime.init_process_group(0, 1, id_file=Path(out) / "nccl.id")
            elif check == "init_timeout":
                runtime.init_process_group(0, 2, uid=runtime.unique_id(), timeout=5)
            else:
                runtime.init_process_group(0, 1, uid=runtime.unique_id())
                _call(libraries, "gather_swizzle", [np.zeros((256, 1024), BF16)],
                      [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu])
            results[check] = "no error"
        except (runtime.MXRuntimeError, OSError) as error:
            expected = {"nccl_missing": "NCCL is not available",
                        "init_timeout": "did not complete within 5 s",
                        "group_size": "partitioned for 2 devices, the communicator has 1 ranks"}[check]
            results[check] = None if expected in str(error) else f"unexpected message: {error}"
        if time.monotonic() - start > 60:
            results[check] = f"took {time.monotonic() - start:.0f} s"
    except Exception:
        results["setup"] = traceback.format_exc()
    _report(out, 0, results)
    os._exit(0)  # the communicator of init_timeout's helper thread still waits


#===--------------------------------------------------------------------------------------------===#
# The tests
#===--------------------------------------------------------------------------------------------===#

def _gpu_count():
    try:
        import torch
        return torch.cuda.device_count()
    except ImportError:
        return 0


def _require_gpus(count):
    """Skips unless torch sees `count` GPUs; asked in the test process only (the spawned workers import
    this module too, and must not touch a GPU before set_device)."""
    if _gpu_count() < count or not runtime.device_available():
        pytest.skip(f"needs torch and {count} CUDA GPU{'s' if count > 1 else ''}")


def _programs(tmp_path_factory):
    """The compiled programs: $MX_GPU_ARTIFACTS, or built here once."""
    directory = os.environ.get("MX_GPU_ARTIFACTS")
    if not directory:
        directory = tmp_path_factory.getbasetemp() / "distributed"
        if not directory.is_dir():
            build(directory)
    return directory


def _spawn(tmp_path_factory, target, nprocs, *args):
    """Runs target(rank, programs, out, *args) in `nprocs` processes; their reports by rank."""
    import torch.multiprocessing as mp
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    out = tmp_path_factory.mktemp(target.__name__)
    mp.start_processes(target, args=(*args[:1], str(out), *args[1:]), nprocs=nprocs, join=True,
                       start_method="spawn")
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(nprocs)]


@pytest.fixture(scope="module")
def two_gpu_results(tmp_path_factory):
    _require_gpus(DEVICES)
    programs = _programs(tmp_path_factory)
    seed = np.random.SeedSequence().entropy
    print(f"seed = {seed}")
    return _spawn(tmp_path_factory, run_checks, DEVICES, programs, seed)


@pytest.mark.parametrize("check", list(CHECKS))
def test_two_gpus(two_gpu_results, check):
    for rank, results in enumerate(two_gpu_results):
        assert "setup" not in results, f"rank {rank}: {results['setup']}"
        assert results[check] is None, f"rank {rank}: {results[check]}"


def test_a_rank_that_never_joins_times_out(tmp_path_factory):
    _require_gpus(DEVICES)
    programs = _programs(tmp_path_factory)
    for rank, results in enumerate(_spawn(tmp_path_factory, run_timeout, DEVICES, programs, 0)):
        assert "setup" not in results, f"rank {rank}: {results['setup']}"
        assert all(value is None for value in results.values()), f"rank {rank}: {results}"


def test_out_of_memory_in_a_group_leaves_the_gpus_usable(tmp_path_factory):
    _require_gpus(DEVICES)
    programs = _programs(tmp_path_factory)
    seed = np.random.SeedSequence().entropy
    print(f"seed = {seed}")
    for rank, results in enumerate(_spawn(tmp_path_factory, run_out_of_memory, DEVICES, programs, seed)):
        assert "setup" not in results, f"rank {rank}: {results['setup']}"
        for mode in ("call_stream", "default"):
            assert results.get(mode, "did not run") is None, f"rank {rank}, {mode}: {results.get(mode)}"


@pytest.mark.parametrize("check", ["nccl_missing", "init_timeout", "group_size"])
def test_failures_are_reported(tmp_path_factory, check):
    _require_gpus(1)
    results = _spawn(tmp_path_factory, run_single, 1, _programs(tmp_path_factory), check)[0]
    assert "setup" not in results, results["setup"]
    assert results[check] is None, results[check]


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])
