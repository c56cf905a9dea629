"""`mx.scaled_matmul` compiled for the GPU (`--mx-lower-to-nvvm`), on a real GPU.

Every recipe and layout the generated GEMM kernels take, at shapes that are not multiples of the 128x128 /
128x256 tiles, at K of one block, at K = 8192 and at a mid shape, with bf16, f16 and f32 outputs:
  * MX exact: E4M3 (one case E4M3 x E5M2) data, E8M0 scales per [1, 32] on both operands, swizzled
    (5-D) and linear (2-D). Checked against the float64 product of the dequantized operands
    (conftest.exact_matmul): relative Frobenius error < 1e-5 for f32 output, < 4e-3 for bf16 and
    < 1e-3 for f16 (one ulp-level rounding of the output type; exact rounding gives 1.7e-3 / 2e-4).
  * FP8 blockwise, A [1, 128] x B [128, 128] and A [1, 128] x B [1, 128], f32 power-of-two scales,
    compact or (three cases) GEMM-ready [K/128, R'/4, 4] where the blocks are [1, 128] (and
    exact f32 scales, amax / 448, for A [1, 128] x B [1, 128]: recipe "bw1dx"), and
    per-tensor FP8 (one f32 scale per operand, amax / 448): FP8 wgmma accumulates with less than f32
    precision, so these must be within 1.5x the error of cuBLASLt (mxrtScaledMatmul) on the same data,
    measured in the same test (floor 1e-5).

Inputs are fresh random values (the seed is printed and kept in the test report) whose magnitude varies
by 2^[-20, 20] per row of A, per row of B (per 128-row block for B's [128, 128] scales) and per K-block
(opposite exponents on A and B, so that every K-block contributes comparably to the product), plus
+-2 per (row, K-block). For f16 output the per-row range is +-2 so that C fits in f16, and the
per-tensor recipe (one scale for the whole operand) uses +-3. MX operands also carry special blocks,
planted in the quantized data: a scale byte 0xFF (a NaN block: the reference has NaN in exactly that row of C
or column of C), an all-zero row of A and an all-zero block of B (scale byte 0), blocks of subnormal
FP8 codes (with their scale raised so they matter), and blocks of +-max-finite codes.

Errors are measured over the finite part of C two ways: the plain relative Frobenius error
(as reference.matmul_error) and the same error after dividing C[i, j] by |A_i| |B_j| (the norms of the
dequantized rows), so every row and column counts equally; with per-row magnitudes 2^+-20 apart the
plain error sees only the few largest rows, and a wrong scale in a small row would hide in it. Both
must meet the tolerance (for the FP8 recipes the scaled error must be within 1.5x cuBLASLt's, the plain one, which
rests on a few dozen dominant elements and so is noisy, within 2x). On top: the NaN positions must
match the reference exactly, and no element may be further from the reference than a bound of
output rounding plus 1e-4 (MX) or 3e-3 (FP8 recipes) times |A_i| |B_j| (a zero row or column of the
product must come out exactly zero). The output block is filled with 0xFF bytes (NaN in bf16, f16
and f32) just before the call, so an element the kernel does not write shows up as a NaN where the
reference is finite; whether the result landed on the poisoned block is printed with the errors.

Programs are compiled ahead of time, one per case (shapes are static), by
    python python/tests/test_gpu_gemm.py DIR [auto|kernel|cublas] [sm_90a|sm_100a]
and run on the GPU machine with MX_GPU_ARTIFACTS=DIR; the options are those of
`--mx-lower-to-nvvm=format=bin gemm=... chip=...` (defaults: $MX_GEMM or auto, $MX_GEMM_CHIP or
sm_90a). A program that did not build leaves DIR/<name>.error, and its test fails with that message.
The GPU tests are skipped without a GPU, and on a GPU whose chip is not the one the programs were
built for (sm_90a: compute capability 9.0, the H100 and H200 these tests run on; sm_100a: 10.0, where
the MX cases run the tcgen05 kernel and the FP8 ones cuBLASLt, which no GPU here has run).
`test_programs_assemble` builds every case for sm_100a in CI, where no GPU is needed: ptxas must
assemble each generated kernel.
"""

import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import exact_matmul, linear_scales

from mx import reference, runtime, tools

OUT_DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16), "f32": np.dtype(np.float32)}
OUT_ELEM_TYPES = {"bf16": runtime.ElemType.BF16, "f16": runtime.ElemType.F16, "f32": runtime.ElemType.F32}
# Output rounding allowed per element in the elementwise bound (2x the half-ulp of RNE).
OUT_ROUNDING = {"bf16": 2.0**-8, "f16": 2.0**-10, "f32": 2.0**-23}
MX_TOLERANCE = {"bf16": 4e-3, "f16": 1e-3, "f32": 1e-5}  # f16: ulp-level of f16 (exact rounding: 2e-4)
CUBLAS_FACTOR, CUBLAS_FACTOR_PLAIN, CUBLAS_FLOOR = 1.5, 2.0, 1e-5
ELEMENTWISE = {"mx": 1e-4, "bw2d": 3e-3, "bw1d": 3e-3, "bw1dx": 3e-3, "pt": 3e-3}
RECIPES = {  # blocks (None: the whole operand), scale type, rounding, scale modes of cuBLASLt
    "mx": ((1, 32), (1, 32), "f8E8M0FNU", "ceil", None),
    "bw2d": ((1, 128), (128, 128), "f32", "ceil",
             (runtime.ScaleMode.VEC128_F32, runtime.ScaleMode.BLK128X128_F32)),
    "bw1d": ((1, 128), (1, 128), "f32", "ceil",
             (runtime.ScaleMode.VEC128_F32, runtime.ScaleMode.VEC128_F32)),
    # The same with `exact` scales (amax / 448, not powers of two): the kernel's scale products split
    # each f32 scale into two tf32 parts, which only such scales exercise.
    "bw1dx": ((1, 128), (1, 128), "f32", "exact",
              (runtime.ScaleMode.VEC128_F32, runtime.ScaleMode.VEC128_F32)),
    "pt": (None, None, "f32", "exact", (runtime.ScaleMode.TENSOR_F32, runtime.ScaleMode.TENSOR_F32)),
}
POISON = 0xFF  # NaN in every output type


@dataclass(frozen=True)
class Case:
    recipe: str
    m: int
    n: int
    k: int
    out: str
    swizzled: bool = False  # MX scales in the 128x4 tiled 5-D layout; 1x128 ones GEMM-ready (3-D)
    b_elem: str = "f8E4M3FN"
    config: str = ""  # the pipeline's gemm-config (sm_90a kernels only)

    @property
    def name(self):
        layout = ("swz" if self.swizzled else "lin") if self.recipe == "mx" else "ready" if self.swizzled else None
        config = "".join(ch if ch.isalnum() else "_" for ch in self.config)
        parts = ["gemm", self.recipe, layout, "e5m2" if self.b_elem == "f8E5M2" else None,
                 f"{self.m}x{self.n}x{self.k}", self.out, config]
        return "_".join(p for p in parts if p)

    @property
    def a_block(self):
        return RECIPES[self.recipe][0] or (self.m, self.k)

    @property
    def b_block(self):
        return RECIPES[self.recipe][1] or (self.n, self.k)

    @property
    def scale_type(self):
        return RECIPES[self.recipe][2]

    @property
    def rounding(self):
        return RECIPES[self.recipe][3]

    def scales_shape(self, rows, block):
        shape = reference.scales_shape((rows, self.k), block)
        if self.swizzled and self.recipe == "mx":
            return reference.swizzled_shape(shape, 0)
        if self.swizzled and block == (1, 128):
            return reference.swizzled_shape(shape, 0, layout="blockwise")
        return shape


ODD_1, ODD_2, LONG_K, MID = (200, 72), (130, 264), (136, 200, 8192), (512, 384, 1024)
CASES = [
    Case("mx", *ODD_1, 32, "bf16", swizzled=True),
    Case("mx", *ODD_2, 32, "f32"),
    Case("mx", *LONG_K, "f32", swizzled=True),
    Case("mx", *LONG_K, "bf16"),
    Case("mx", *MID, "f16", swizzled=True),
    Case("mx", *MID, "f32"),
    Case("mx", 200, 264, 1024, "f32", swizzled=True, b_elem="f8E5M2"),
    Case("bw2d", *ODD_1, 128, "bf16"),
    Case("bw2d", *ODD_2, 128, "f32"),
    Case("bw2d", *LONG_K, "f32"),
    Case("bw2d", *MID, "bf16"),
    Case("bw2d", *MID, "f16"),
    Case("bw1d", *ODD_2, 128, "bf16"),
    Case("bw1d", *ODD_1, 128, "f16"),
    Case("bw1d", *LONG_K, "f32"),
    Case("bw1d", *MID, "f32"),
    Case("pt", *ODD_1, 128, "f32"),
    Case("pt", *ODD_2, 128, "bf16"),
    Case("pt", *LONG_K, "f32"),
    Case("pt", *MID, "f16"),
    # More tiles than CTAs (the ring and the epilogue carried across tiles), and the generator's
    # other choices: the TMA-store epilogue, clusters sharing A (1x2) or B (2x1), three consumers;
    # MX exact with more tiles than CTAs.
    Case("pt", 4096, 2048, 256, "bf16"),
    Case("bw2d", 4096, 2048, 384, "bf16", config="epilogue=tma"),
    Case("pt", *MID, "bf16", config="epilogue=tma"),
    Case("bw2d", *ODD_1, 128, "f16", config="epilogue=tma"),
    Case("bw2d", *LONG_K, "bf16", config="epilogue=tma,cluster=1x2"),
    Case("pt", *MID, "f32", config="consumers=3,waves=1,cluster=1x1"),
    Case("bw2d", *MID, "f32", config="consumers=2,waves=1,cluster=2x1"),
    Case("bw1d", *MID, "bf16", config="cluster=2x1,epilogue=tma"),
    # The wgrad form's scale products (a tf32 wgmma; the default) on exact f32 scales, and its FMUL
    # form (products=off: the 192x128 tile of three consumers, with a cluster sharing A).
    Case("bw1dx", *ODD_1, 128, "f32"),
    Case("bw1dx", *LONG_K, "f32"),
    Case("bw1dx", 4096, 2048, 384, "bf16", config="epilogue=tma,cluster=1x2"),
    Case("bw1d", *MID, "f32", config="products=off"),
    Case("bw1dx", *LONG_K, "f32", config="products=off"),
    # 1x128 scales GEMM-ready (the scale products' kernel reads them with K-block stride R'; the
    # compact cases above read [R, KB] with row stride KB), and A's beside B's compact 128x128.
    Case("bw1d", *MID, "f32", swizzled=True),
    Case("bw1dx", *ODD_1, 128, "bf16", swizzled=True),
    Case("bw2d", *ODD_2, 128, "bf16", swizzled=True),
    Case("mx", *MID, "f32", swizzled=True, config="cluster=2x1"),
    Case("mx", 1024, 512, 384, "bf16", swizzled=True),
    # Two K-blocks per main-loop iteration, the first one's promotion overlapping the second one's
    # chain: K of one block (no whole pair), an odd number of blocks (a pair, then one), long K, two
    # waves; B scaled per column (bw1d), per block (bw2d) and per tensor (pt).
    Case("bw1d", *ODD_1, 128, "bf16", config="consumers=2,tile_n=128,overlap=on"),
    Case("bw1d", *LONG_K, "f32", config="consumers=2,tile_n=128,overlap=on"),
    Case("bw1d", 4096, 2048, 384, "bf16", config="consumers=2,tile_n=128,overlap=on,epilogue=tma"),
    Case("bw2d", *MID, "f32", config="consumers=2,waves=2,tile_n=64,overlap=on"),
    Case("pt", *ODD_2, 384, "f32", config="consumers=2,tile_n=128,overlap=on"),
    # MX's staged form on sm_90a (bf16 copies, then a bf16 GEMM), which the generator takes where M
    # and N are large (the first case) and gemm-config mx=staged forces: partial tiles of both
    # operands, K of one block, K not a multiple of a stage, long K, every output type, E5M2.
    Case("mx", 2304, 2304, 256, "bf16"),
    Case("mx", *ODD_1, 96, "bf16", config="mx=staged"),
    Case("mx", *ODD_2, 32, "f32", config="mx=staged"),
    Case("mx", *LONG_K, "bf16", swizzled=True, config="mx=staged"),
    Case("mx", *MID, "f16", config="mx=staged"),
    Case("mx", 200, 264, 1024, "f32", swizzled=True, b_elem="f8E5M2", config="mx=staged"),
]


def _type(shape, dtype):
    return tools.mlir_type(shape, dtype)


def operand_types(case):
    """The MLIR types of a case's A, A scales, B and B scales."""
    scale_dtype = reference.SCALE_TYPES[case.scale_type]
    return [_type((case.m, case.k), reference.ELEMENT_TYPES["f8E4M3FN"]),
            _type(case.scales_shape(case.m, case.a_block), scale_dtype),
            _type((case.n, case.k), reference.ELEMENT_TYPES[case.b_elem]),
            _type(case.scales_shape(case.n, case.b_block), scale_dtype)]


def source(case):
    """func.func @<name>(A, A scales, B, B scales) -> C, one mx.scaled_matmul."""
    return tools.scaled_matmul_source(case.name, operand_types(case), case.a_block, case.b_block,
                                      _type((case.m, case.n), OUT_DTYPES[case.out]))


CHIPS = {(9, 0): "sm_90a", (10, 0): "sm_100a"}  # compute capability -> the chip its programs target


def _pipeline(gemm, chip):
    return f"--mx-lower-to-nvvm=chip={chip} format=bin gemm={gemm}"


def build(directory, gemm="auto", chip="sm_90a"):
    """Compiles every case into DIR/<name>.so; a failure leaves DIR/<name>.error. Returns the failures."""
    # gemm-config choices are those of the sm_90a kernels.
    cases = [case for case in CASES if chip == "sm_90a" or not case.config]
    return build_cases(directory, cases, source, gemm, chip)


def build_cases(directory, cases, source_of, gemm, chip):
    """Compiles each case's program (`source_of(case)`, its `config` as gemm-config) into
    DIR/<name>.so, a failure leaving DIR/<name>.error, and the pipeline with the failures into
    DIR/gemm_BUILD.txt. Returns the failures as (name, reason)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)

    def one(case):
        library, error = directory / f"{case.name}.so", directory / f"{case.name}.error"
        library.unlink(missing_ok=True)
        error.unlink(missing_ok=True)
        try:
            options = f"gemm-config={case.config}" if case.config else ""
            tools.compile_gpu_library(source_of(case), library, chip, gemm=gemm, options=options)
            return None
        except Exception as exc:  # noqa: BLE001 (recorded for the test to report)
            library.with_suffix(".o").unlink(missing_ok=True)
            error.write_text(f"pipeline gemm={gemm}: {type(exc).__name__}: {exc}")
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            return case.name, next((line for line in lines if "error" in line), lines[-1]).strip()

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [f for f in pool.map(one, cases) if f]
    (directory / "gemm_BUILD.txt").write_text(
        _pipeline(gemm, chip) + "\n" + "".join(f"FAILED {name}: {why}\n" for name, why in failures))
    return failures


# ---------------------------------------------------------------------------------------------------
# Operands


def _values(rng, rows, k, group, row_exp, k_exp, cell_spread):
    """float32 [rows, k]: standard normal times 2^(row_exp[r] + k_exp[k // group] + U{+-cell_spread})."""
    blocks = -(-k // group)
    exponent = row_exp[:, None] + k_exp[None, :] + rng.integers(-cell_spread, cell_spread + 1, (rows, blocks))
    scale = np.repeat(np.exp2(exponent.astype(np.float64)), group, axis=1)[:, :k]
    return (rng.standard_normal((rows, k)) * scale).astype(np.float32)


def _mx_specials(rng, data, scales, elem, avoid):
    """Plants special blocks in MX operand (data, linear E8M0 scales); returns (data, scales, nan_row)."""
    data, scales = data.copy(), scales.copy()
    raw, bytes_ = data.view(np.uint8), scales.view(np.uint8)
    rows, blocks = bytes_.shape
    k = raw.shape[1]
    # Largest subnormal code, max-finite code, exponent shift that brings the subnormals up to size.
    subnormal_max, max_code, shift = (7, 0x7E, 15) if elem == "f8E4M3FN" else (3, 0x7B, 30)
    picks = rng.choice([r for r in range(rows) if r not in avoid], size=5, replace=False)
    nan_row, sub_rows, max_rows = picks[0], picks[1:3], picks[3:5]
    bytes_[nan_row, rng.integers(blocks)] = 0xFF
    for row in sub_rows:
        kb = rng.integers(blocks)
        cols = slice(32 * kb, min(k, 32 * kb + 32))
        width = cols.stop - cols.start
        raw[row, cols] = rng.integers(1, subnormal_max + 1, width) | (rng.integers(0, 2, width) << 7)
        bytes_[row, kb] = min(int(bytes_[row, kb]) + shift, 254)
    for row in max_rows:
        kb = rng.integers(blocks)
        cols = slice(32 * kb, min(k, 32 * kb + 32))
        width = cols.stop - cols.start
        raw[row, cols] = max_code | (rng.integers(0, 2, width) << 7)
    return data, scales, int(nan_row)


def make_operands(rng, case):
    """Quantized (A, A scales, B, B scales) for a case (scales swizzled if the case says so), and a
    description of the planted specials."""
    m, n, k = case.m, case.n, case.k
    row_spread = 2 if case.out == "f16" else 20
    k_spread, cell = (20, 2 if case.out != "f16" else 1)
    if case.recipe == "pt":
        row_spread, k_spread, cell = min(row_spread, 3), 3, 1
    group = 32 if case.recipe == "mx" else 128
    k_exp = rng.integers(-k_spread, k_spread + 1, -(-k // group))
    a_rows = rng.integers(-row_spread, row_spread + 1, m)
    if case.recipe == "bw2d":  # B's magnitude varies mostly per 128-row block (its scale granularity)
        b_rows = np.repeat(rng.integers(-row_spread, row_spread + 1, -(-n // 128)), 128)[:n]
        b_rows = b_rows + rng.integers(-1, 2, n)
    else:
        b_rows = rng.integers(-row_spread, row_spread + 1, n)
    xa = _values(rng, m, k, group, a_rows, k_exp, cell)
    xb = _values(rng, n, k, group, b_rows, -k_exp, cell)
    notes = {}
    zero_row = int(rng.integers(m))
    xa[zero_row] = 0.0  # a zero row of A: row of C exactly zero
    notes["zero A row"] = zero_row
    if case.recipe == "mx":
        zb_row, zb_block = int(rng.integers(n)), int(rng.integers(-(-k // 32)))
        xb[zb_row, 32 * zb_block: 32 * zb_block + 32] = 0.0
        notes["zero B block"] = (zb_row, zb_block)
    a, sa = reference.quantize(xa, case.a_block, "f8E4M3FN", case.scale_type, case.rounding)
    b, sb = reference.quantize(xb, case.b_block, case.b_elem, case.scale_type, case.rounding)
    if case.recipe == "mx":
        a, sa, notes["NaN A row"] = _mx_specials(rng, a, sa, "f8E4M3FN", {zero_row})
        b, sb, notes["NaN B row"] = _mx_specials(rng, b, sb, case.b_elem, {notes["zero B block"][0]})
        if case.swizzled:
            sa, sb = reference.swizzle(sa), reference.swizzle(sb)
    elif case.swizzled:  # 1x128 scales GEMM-ready, as a quantize fused with mx.swizzle writes them
        sa = reference.blockwise_gemm_ready(sa, 0) if case.a_block == (1, 128) else sa
        sb = reference.blockwise_gemm_ready(sb, 0) if case.b_block == (1, 128) else sb
    return (a, sa, b, sb), notes


def _dequantized(data, scales, block):
    return reference.dequantize(data, linear_scales(data, scales, block), block).astype(np.float64)


# ---------------------------------------------------------------------------------------------------
# Running


def _memset(ptr, value, nbytes):
    status = runtime.load_library().mxrtMemset8(ptr, value, nbytes)
    if status != runtime.Status.SUCCESS:
        raise runtime.MXRuntimeError(status, runtime.last_error())


def run_compiled(lib, case, operands):
    """Calls the compiled program on host operands; returns (C, whether C landed on the poison)."""
    out_dtype = OUT_DTYPES[case.out]
    buffers = [runtime.DeviceBuffer.from_numpy(np.ascontiguousarray(x)) for x in operands]
    try:
        # Poison a block of C's size after the inputs are allocated: the allocator hands it back next.
        nbytes = case.m * case.n * out_dtype.itemsize
        poison = runtime.DeviceBuffer(nbytes)
        _memset(poison.ptr, POISON, nbytes)
        poisoned_at = poison.ptr
        poison.close()
        result, = runtime.call_mlir_function(lib, case.name, buffers, result_ranks=[2])
        try:
            assert result.shape == (case.m, case.n), f"result shape {result.shape}"
            return result.to_numpy(out_dtype), result.aligned == poisoned_at
        finally:
            result.free()
    finally:
        for buffer in buffers:
            buffer.close()


def _round_up(value, multiple):
    return -(-value // multiple) * multiple


def _pad_rows(array, rows, fill):
    if array.shape[0] == rows:
        return np.ascontiguousarray(array)
    pad = np.full((rows - array.shape[0],) + array.shape[1:], fill, array.dtype)
    return np.ascontiguousarray(np.concatenate([array, pad]))


def cublas_matmul(case, a, sa, b, sb):
    """The same product on cuBLASLt (mxrtScaledMatmul), and a note on how it was run.

    cuBLASLt needs rows that are multiples of 4 for 1x128 scales and 16-byte output rows: the problem
    is padded with zero rows (scales 1) and C cut back. Where it refuses the output type, it computes
    f32 and C is rounded (RNE) to the output type here."""
    a_mode, b_mode = RECIPES[case.recipe][4]
    sa, sb = linear_scales(a, sa, case.a_block), linear_scales(b, sb, case.b_block)
    vec = runtime.ScaleMode.VEC128_F32
    m_pad = _round_up(case.m, 4) if a_mode == vec else case.m

    def operand(data, scales, mode, rows):
        if mode == vec:
            scales = _pad_rows(scales, rows, np.float32(1))
        elif mode == runtime.ScaleMode.BLK128X128_F32:
            scales = _pad_rows(scales, -(-rows // 128), np.float32(1))
        return _pad_rows(data, rows, data.dtype.type(0)), np.ascontiguousarray(scales)

    elem = {np.dtype(ml_dtypes.float8_e4m3fn): runtime.ElemType.F8E4M3,
            np.dtype(ml_dtypes.float8_e5m2): runtime.ElemType.F8E5M2}
    note = []
    for out in dict.fromkeys([case.out, "f32"]):
        itemsize = OUT_DTYPES[out].itemsize
        n_pad = _round_up(_round_up(case.n, 4) if b_mode == vec else case.n, 16 // itemsize)
        pa, psa = operand(a, sa, a_mode, m_pad)
        pb, psb = operand(b, sb, b_mode, n_pad)
        if (m_pad, n_pad) != (case.m, case.n):
            note.append(f"padded to {m_pad}x{n_pad}")
        bufs = [runtime.DeviceBuffer.from_numpy(x) for x in (pa, psa, pb, psb)]
        out_buf = runtime.DeviceBuffer(m_pad * n_pad * itemsize)
        try:
            _memset(out_buf.ptr, POISON, out_buf.nbytes)
            runtime.scaled_matmul(m_pad, n_pad, case.k, bufs[0], elem[a.dtype], bufs[1],
                                  a_mode, bufs[2], elem[b.dtype], bufs[3], b_mode, out_buf,
                                  OUT_ELEM_TYPES[out])
            c = out_buf.to_numpy(OUT_DTYPES[out], (m_pad, n_pad))[: case.m, : case.n]
        except runtime.MXRuntimeError as exc:
            if out == "f32" or exc.status not in (runtime.Status.NOT_SUPPORTED,
                                                  runtime.Status.INVALID_ARGUMENT, runtime.Status.CUBLAS):
                raise
            note.append(f"{case.out} output refused ({str(exc).splitlines()[0][:80]}); f32 rounded here")
            continue
        finally:
            out_buf.close()
            for buf in bufs:
                buf.close()
        return c.astype(OUT_DTYPES[case.out]), "; ".join(dict.fromkeys(note)) or "as is"
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------------
# Checking


@dataclass
class Errors:
    plain: float
    scaled: float

    def __str__(self):
        return f"relative Frobenius {self.plain:.3g}, row/column-scaled {self.scaled:.3g}"


def _relative(diff, ref):
    num, den = np.linalg.norm(diff), np.linalg.norm(ref)
    return float(num / den) if den else (0.0 if num == 0 else np.inf)


def measure(got, exact, row_norms, what, case, strict):
    """Errors of `got` over the finite part of `exact`; with strict, also asserts the NaN pattern,
    finiteness and the elementwise bound."""
    got64 = got.astype(np.float64)
    finite = np.isfinite(exact)
    if strict:
        nan_got, nan_want = np.isnan(got64), np.isnan(exact)
        wrong = np.argwhere(nan_got != nan_want)
        assert wrong.size == 0, (
            f"{what}: NaN pattern differs from the reference at {len(wrong)} of {got.size} elements, "
            f"first {tuple(wrong[0])}: got {got64[tuple(wrong[0])]}, expected {exact[tuple(wrong[0])]} "
            f"(a NaN where the reference is finite is an element left unwritten (poison) or a NaN made "
            f"by the kernel); NaN rows expected {sorted(set(np.argwhere(nan_want.all(1)).ravel()))}, "
            f"NaN columns {sorted(set(np.argwhere(nan_want.all(0)).ravel()))}")
        bad = np.argwhere(finite & ~np.isfinite(got64))
        assert bad.size == 0, f"{what}: {len(bad)} non-finite elements, first {tuple(bad[0])}"
    weight = np.outer(*row_norms)  # NaN on NaN rows / columns
    valid = finite & np.isfinite(got64)
    # The tensor cores' f32 products and sums round to f32's subnormal grid (2^-149 apart), which
    # the float64 reference does not: at most one such step per product, which only shows where
    # the operands' scales put the products near 2^-149 (seen on an H100 with FP4 x FP4, K = 32:
    # 1.54e-44 for 1.63e-44). Differences within it are not errors of the kernel.
    diff = np.where(valid, got64 - exact, 0.0)
    diff = np.where(np.abs(diff) > case.k * 2.0**-149, diff, 0.0)
    ref = np.where(valid, exact, 0.0)
    plain = _relative(diff, ref)
    scaled = valid & (weight > 0)
    scaled = _relative(diff[scaled] / weight[scaled], ref[scaled] / weight[scaled])
    if strict:
        bound = OUT_ROUNDING[case.out] * np.abs(ref) + ELEMENTWISE[case.recipe] * np.where(finite, weight, 0)
        over = np.argwhere(valid & (np.abs(diff) > bound))
        assert over.size == 0, (
            f"{what}: {len(over)} elements off by more than {OUT_ROUNDING[case.out]:.3g} |C| + "
            f"{ELEMENTWISE[case.recipe]} |A_i||B_j|; first {tuple(over[0])}: got {got64[tuple(over[0])]!r}, "
            f"expected {exact[tuple(over[0])]!r}, |A_i||B_j| = {weight[tuple(over[0])]:.3g}; rows with errors "
            f"{sorted(set(over[:, 0].tolist()))[:20]}, columns {sorted(set(over[:, 1].tolist()))[:20]}")
    return Errors(plain, scaled)


# ---------------------------------------------------------------------------------------------------
# Tests

needs_gpu = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


class Artifacts:
    """The compiled programs of a directory, loaded on first use."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.libraries = {}
        summary = self.directory / "gemm_BUILD.txt"
        self.pipeline = summary.read_text().splitlines()[0] if summary.is_file() else "(unknown options)"
        self.chip = next((word[len("--mx-lower-to-nvvm=chip="):] for word in self.pipeline.split()
                          if word.startswith("--mx-lower-to-nvvm=chip=")), None)

    def load(self, name):
        if name not in self.libraries:
            library = self.directory / f"{name}.so"
            if not library.is_file():
                error = self.directory / f"{name}.error"
                why = error.read_text() if error.is_file() else "no such file (not built)"
                pytest.fail(f"{library} is missing: {why}", pytrace=False)
            self.libraries[name] = runtime.load_compiled(library)
        return self.libraries[name]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    capability = runtime.compute_capability()
    chip = CHIPS.get(capability)
    if chip is None:
        pytest.skip(f"no mx chip has compute capability {capability}")
    directory = os.environ.get("MX_GPU_ARTIFACTS")
    if not directory:
        directory = tmp_path_factory.mktemp("gemm")
        build(directory, os.environ.get("MX_GEMM", "auto"), chip)
    built = Artifacts(directory)
    if built.chip != chip:
        pytest.skip(f"the programs are {built.chip} code; this GPU is compute capability {capability} ({chip})")
    return built


def _can_compile():
    """mx-opt, LLVM's llc and mlir-translate, and ptxas (which mx-opt finds on PATH or where the CUDA
    toolkit installs): the build machine has them, the GPU machine has no MLIR."""
    try:
        for tool in ("mx-opt", "mlir-translate", "llc"):
            tools.find_tool(tool)
    except FileNotFoundError:
        return False
    return bool(shutil.which("ptxas")) or Path("/usr/local/cuda/bin/ptxas").is_file()


def cublas_refuses(case):
    """Whether cuBLASLt refuses the case's shapes (1x128 scales on an operand whose rows are not a
    multiple of 4): where cuBLASLt would lower it, compiling rejects it (checkCublasGemm, Target.h)."""
    return any(block == (1, 128) and rows % 4 for rows, block in ((case.m, case.a_block), (case.n, case.b_block)))


@pytest.mark.skipif(not _can_compile(), reason="no mx-opt, LLVM tools or ptxas on this machine")
def test_programs_assemble(tmp_path):
    """Every case compiles for sm_100a (ptxas assembles each tcgen05 kernel) with no GPU, but for the
    FP8 ones that cuBLASLt (which gemm=auto takes for them there) would refuse at run time: those are
    rejected with its reason."""
    failures = dict(build(tmp_path, "auto", "sm_100a"))
    assert set(failures) == {case.name for case in CASES if cublas_refuses(case)}, \
        f"{_pipeline('auto', 'sm_100a')}: {failures}"
    assert all("which cuBLASLt needs for its 1x128 (VEC128_32F) scales" in why for why in failures.values())


def run_and_measure(artifacts, case, operands, notes, record_property):
    """Runs the case's program on (A, A scales, B, B scales) and measures it strictly against their
    float64 product; returns (errors, the dequantized rows' norms, the product)."""
    lib = artifacts.load(case.name)
    a, sa, b, sb = operands
    exact = exact_matmul(a, sa, b, sb, case.a_block, case.b_block)
    row_norms = (np.linalg.norm(_dequantized(a, sa, case.a_block), axis=1),
                 np.linalg.norm(_dequantized(b, sb, case.b_block), axis=1))
    got, poisoned = run_compiled(lib, case, operands)
    print(f"{case.name} ({artifacts.pipeline}); specials {notes}; output on the poisoned block: {poisoned}")
    ours = measure(got, exact, row_norms, "mx", case, strict=True)
    print(f"  mx: {ours}")
    record_property("mx_error", (ours.plain, ours.scaled))
    return ours, row_norms, exact


@needs_gpu
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_scaled_matmul(rng, artifacts, case, record_property):
    if case.config and artifacts.chip != "sm_90a":
        pytest.skip(f"gemm-config {case.config} chooses for the sm_90a kernels")
    if cublas_refuses(case) and not (artifacts.directory / f"{case.name}.so").is_file():
        pytest.skip("cuBLASLt refuses these shapes and lowers this case here: rejected when compiling")
    operands, notes = make_operands(rng, case)
    ours, row_norms, exact = run_and_measure(artifacts, case, operands, notes, record_property)
    a, sa, b, sb = operands
    if case.recipe == "mx":
        tolerance = MX_TOLERANCE[case.out]
        assert ours.plain < tolerance and ours.scaled < tolerance, \
            f"mx: {ours}; tolerance {tolerance} for {case.out} output"
        return
    peer, how = cublas_matmul(case, a, sa, b, sb)
    theirs = measure(peer, exact, row_norms, "cuBLASLt", case, strict=False)
    print(f"  cuBLASLt ({how}): {theirs}")
    record_property("cublas_error", (theirs.plain, theirs.scaled))
    limit_scaled = max(CUBLAS_FACTOR * theirs.scaled, CUBLAS_FLOOR)
    limit_plain = max(CUBLAS_FACTOR_PLAIN * theirs.plain, CUBLAS_FLOOR)
    assert ours.scaled <= limit_scaled and ours.plain <= limit_plain, (
        f"mx: {ours}; cuBLASLt on the same data ({how}): {theirs}; limits {limit_scaled:.3g} "
        f"({CUBLAS_FACTOR}x, row/column-scaled) and {limit_plain:.3g} ({CUBLAS_FACTOR_PLAIN}x, plain)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python python/tests/test_gpu_gemm.py DIR [auto|kernel|cublas] [sm_90a|sm_100a]")
    gemm = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("MX_GEMM", "auto")
    chip = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("MX_GEMM_CHIP", "sm_90a")
    failed = build(sys.argv[1], gemm, chip)
    print(f"built the programs of {len(CASES)} cases, {len(failed)} failed, into {sys.argv[1]} ({_pipeline(gemm, chip)})")
    for name, why in failed:
        print(f"FAILED {name}: {why}")
    sys.exit(1 if failed else 0)
