"""`mx.scaled_matmul` on every MX element type (FP8, FP6, FP4, MXINT8, mixed A/B types), on a real GPU.

The sm_90a kernel for these is the exact dequantize-to-bf16 main loop (Sm90DequantizedMainLoop.cpp): each
code times its E8M0 scale is a bf16 value, so C differs from the float64 product of the dequantized
operands (conftest.exact_matmul) by the f32 accumulation and the output rounding only. Checked like the
MX cases of test_gpu_gemm.py (whose checking and running this file reuses): relative Frobenius error,
plain and row/column-scaled, < 1e-5 for f32 output, < 4e-3 for bf16, < 1e-3 for f16; the NaN pattern
exactly; every element within output rounding plus 1e-4 |A_i| |B_j|; unwritten output shows as NaN.

Operands are codes, not quantized values: uniform random codes of the format (FP8 without NaN and Inf
codes), one row of A that holds every code of its format (NaN and Inf included, so that row of C is
NaN) and one row of B that holds every finite code; scale exponents spread by 2^[-20, 20] per row and
per K-block (opposite on A and B) and +-2 per block (f16 output: +-1 each, so that C fits), normalized
by the format's emax, plus a NaN block
(scale byte 0xFF) in each operand, a block of A at scale byte 0 (2^-127), a zero row of A and a zero
block of B. Packed operands (FP6 four elements to three bytes, FP4 two to a byte) cross the device
boundary packed (runtime.DeviceBuffer.from_numpy).

Programs are compiled ahead of time by
    python python/tests/test_gpu_gemm_formats.py DIR [auto|kernel] [sm_90a]
and run on the GPU machine with MX_GPU_ARTIFACTS=DIR (a directory of their own: the gemm_BUILD.txt there
is this file's). The tests skip without a GPU and on a chip the programs were not built for.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from test_gpu_gemm import (CHIPS, MX_TOLERANCE, OUT_DTYPES, Artifacts, _can_compile, _pipeline,
                           build_cases, needs_gpu, run_and_measure)

from mx import formats, reference, runtime, tools

SHORT = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2", "f6E3M2FN": "e3m2", "f6E2M3FN": "e2m3", "f4E2M1FN": "e2m1",
         "i8": "int8"}


@dataclass(frozen=True)
class Case:
    a_elem: str
    b_elem: str
    m: int
    n: int
    k: int
    out: str
    swizzled: bool = False  # scales in the 128x4 tiled 5-D layout
    config: str = ""
    recipe = "mx"
    a_block = b_block = (1, 32)

    @property
    def name(self):
        config = "".join(ch if ch.isalnum() else "_" for ch in self.config)
        parts = ["gemmfmt", SHORT[self.a_elem], SHORT[self.b_elem], "swz" if self.swizzled else "lin",
                 f"{self.m}x{self.n}x{self.k}", self.out, config]
        return "_".join(p for p in parts if p)

    def scales_shape(self, rows):
        shape = reference.scales_shape((rows, self.k), self.a_block)
        return reference.swizzled_shape(shape, 0) if self.swizzled else shape


# K: whole 16-byte rows of each format (FP6: multiples of 64, FP4: 32, FP8 and INT8: 16).
CASES = [
    Case("f6E3M2FN", "f6E3M2FN", 200, 72, 64, "bf16", swizzled=True),
    Case("f6E2M3FN", "f6E2M3FN", 130, 264, 320, "f32"),
    Case("f6E2M3FN", "f6E3M2FN", 136, 200, 2048, "f32", swizzled=True),
    Case("f4E2M1FN", "f4E2M1FN", 200, 72, 32, "f32"),
    Case("f4E2M1FN", "f4E2M1FN", 512, 384, 1024, "bf16", swizzled=True),
    Case("f4E2M1FN", "f4E2M1FN", 130, 264, 4096, "f32"),
    Case("i8", "i8", 130, 264, 96, "f32", swizzled=True),
    Case("i8", "i8", 512, 384, 1024, "f16"),
    Case("f8E4M3FN", "f4E2M1FN", 200, 264, 512, "bf16"),
    Case("f4E2M1FN", "f8E5M2", 136, 200, 1024, "f32", swizzled=True),
    Case("f6E3M2FN", "i8", 200, 72, 256, "f32"),
    Case("i8", "f6E2M3FN", 130, 264, 512, "bf16", swizzled=True),
    Case("f8E5M2", "f6E3M2FN", 512, 384, 640, "f32"),
    # More tiles than CTAs, and a cluster of two CTAs sharing B (each loads half of the packed tile).
    Case("f4E2M1FN", "f6E2M3FN", 2048, 1024, 384, "bf16", swizzled=True),
    Case("f6E3M2FN", "f4E2M1FN", 512, 384, 1024, "f32", swizzled=True, config="cluster=2x1"),
    # The staged form (each operand converted once to a bf16 copy by the staging kernel, then a bf16
    # GEMM): the generator's choice at the first shape, forced by gemm-config on the others.
    Case("f6E2M3FN", "f4E2M1FN", 2304, 2304, 320, "bf16", swizzled=True),
    Case("f6E3M2FN", "f6E2M3FN", 130, 264, 320, "f32", config="mx=staged"),
    Case("f4E2M1FN", "f4E2M1FN", 200, 72, 32, "f32", config="mx=staged"),
    Case("i8", "i8", 130, 264, 96, "f16", swizzled=True, config="mx=staged"),
    Case("f8E4M3FN", "i8", 512, 384, 1024, "bf16", config="mx=staged"),
    Case("f4E2M1FN", "f8E5M2", 136, 200, 1024, "f32", swizzled=True, config="mx=staged"),
]


def source(case):
    nvfp4 = case.recipe == "nvfp4"
    scale = reference.ELEMENT_TYPES["f8E4M3FN"] if nvfp4 else reference.SCALE_TYPES["f8E8M0FNU"]
    types = [tools.mlir_type((case.m, case.k), reference.ELEMENT_TYPES[case.a_elem]),
             tools.mlir_type(case.scales_shape(case.m), scale),
             tools.mlir_type((case.n, case.k), reference.ELEMENT_TYPES[case.b_elem]),
             tools.mlir_type(case.scales_shape(case.n), scale)]
    return tools.scaled_matmul_source(case.name, types, case.a_block, case.b_block,
                                      tools.mlir_type((case.m, case.n), OUT_DTYPES[case.out]),
                                      tensor_scales=nvfp4)


@dataclass(frozen=True)
class NVFP4Case(Case):
    """An NVFP4 GEMM (E2M1 with E4M3 scales of [1, 16] blocks and f32 tensor scales): built for sm_100a
    only (tcgen05 kind::mxf4nvf4; sm_90a has no kernel for it, and no run of it exists)."""
    recipe = "nvfp4"
    a_block = b_block = (1, reference.NVFP4_BLOCK)

    @property
    def name(self):
        return super().name.replace("gemmfmt", "gemmfmt_nvfp4", 1)


# K: multiples of 128 (two 128x4 scale chunks of 64 K per stage); odd M and N; more tiles than CTAs.
NVFP4_CASES = [
    NVFP4Case("f4E2M1FN", "f4E2M1FN", 200, 136, 1024, "bf16", swizzled=True),
    NVFP4Case("f4E2M1FN", "f4E2M1FN", 130, 264, 384, "f32"),
    NVFP4Case("f4E2M1FN", "f4E2M1FN", 2048, 1024, 512, "f16", swizzled=True),
]


def build(directory, gemm="auto", chip="sm_90a"):
    """Compiles every case into DIR/<name>.so; a failure leaves DIR/<name>.error. Returns the failures."""
    return build_cases(directory, CASES, source, gemm, chip)


# ---------------------------------------------------------------------------------------------------
# Operands


def _finite(elem, codes):
    """FP8 codes with NaN and Inf codes replaced by the max-finite code of the same sign."""
    if elem == "f8E4M3FN":
        return np.where(codes & 0x7F == 0x7F, codes & 0x80 | 0x7E, codes)
    if elem == "f8E5M2":
        return np.where(codes & 0x7C == 0x7C, codes & 0x80 | 0x7B, codes)
    return codes


def _codes(rng, elem, rows, k, all_codes_row, finite_only):
    """[rows, k] random codes of `elem` (NaN / Inf free), row `all_codes_row` cycling through every code
    (every finite one if `finite_only`)."""
    count = 1 << formats.get(elem).bits
    codes = _finite(elem, rng.integers(0, count, (rows, k)).astype(np.uint8))
    every = np.resize(np.arange(count, dtype=np.uint8), k)
    codes[all_codes_row] = _finite(elem, every) if finite_only else every
    return codes.view(reference.ELEMENT_TYPES[elem])


def _scales(rng, elem, rows, k, row_exp, k_exp, cell):
    """Linear E8M0 bytes [rows, blocks] giving the codes magnitudes 2^(row_exp + k_exp + U{+-cell})."""
    blocks = -(-k // 32)
    exponent = row_exp[:, None] + k_exp[None, :] + rng.integers(-cell, cell + 1, (rows, blocks))
    return np.clip(127 + exponent - reference.emax(elem), 1, 254).astype(np.uint8)


def make_operands(rng, case):
    """(A, A scales, B, B scales) of a case, and a description of the planted specials."""
    m, n, k = case.m, case.n, case.k
    blocks = -(-k // 32)
    # f16 output: products within 2^+-4 of the codes', so that C (sums of up to K of them) fits in f16.
    spread, cell = (1, 1) if case.out == "f16" else (20, 2)
    k_exp = rng.integers(-spread, spread + 1, blocks)
    rows = rng.choice(m, 4, replace=False)
    codes_a, zero_a, nan_a, tiny_a = (int(r) for r in rows)
    codes_b, zero_b, nan_b = (int(r) for r in rng.choice(n, 3, replace=False))
    a = _codes(rng, case.a_elem, m, k, codes_a, finite_only=False)
    b = _codes(rng, case.b_elem, n, k, codes_b, finite_only=True)
    sa = _scales(rng, case.a_elem, m, k, rng.integers(-spread, spread + 1, m), k_exp, cell)
    sb = _scales(rng, case.b_elem, n, k, rng.integers(-spread, spread + 1, n), -k_exp, cell)
    a[zero_a] = 0
    zero_block = int(rng.integers(blocks))
    b[zero_b, 32 * zero_block: 32 * zero_block + 32] = 0
    sa[nan_a, rng.integers(blocks)] = 0xFF
    sb[nan_b, rng.integers(blocks)] = 0xFF
    sa[tiny_a, rng.integers(blocks)] = 0
    notes = {"all-codes rows": (codes_a, codes_b), "zero A row": zero_a, "zero B block": (zero_b, zero_block),
             "NaN rows": (nan_a, nan_b), "2^-127 A row": tiny_a}
    e8m0 = reference.SCALE_TYPES["f8E8M0FNU"]
    sa, sb = sa.view(e8m0), sb.view(e8m0)
    if case.swizzled:
        sa, sb = reference.swizzle(sa), reference.swizzle(sb)
    return (a, sa, b, sb), notes


# ---------------------------------------------------------------------------------------------------
# Tests


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    capability = runtime.compute_capability()
    if CHIPS.get(capability) != "sm_90a":
        pytest.skip(f"the exact kernel for every MX type is sm_90a's; this GPU is {capability}")
    directory = os.environ.get("MX_GPU_ARTIFACTS")
    if not directory:
        directory = tmp_path_factory.mktemp("gemm_formats")
        build(directory, os.environ.get("MX_GEMM", "auto"))
    built = Artifacts(directory)
    if built.chip != "sm_90a":
        pytest.skip(f"the programs are {built.chip} code")
    return built


def test_operands_cover_every_code(rng):
    """The operand generator plants every code of each format (the GPU test's coverage claim)."""
    for elem in SHORT:
        case = Case(elem, elem, 8, 8, 256, "f32")
        (a, _, b, _), notes = make_operands(rng, case)
        count = 1 << formats.get(elem).bits
        row_a, row_b = notes["all-codes rows"]
        assert len(np.unique(a[row_a].view(np.uint8) & (count - 1))) == count, elem
        finite = np.isfinite(b[row_b].astype(np.float32)).all()
        assert finite, elem


@pytest.mark.skipif(not _can_compile(), reason="no mx-opt, LLVM tools or ptxas on this machine")
def test_programs_build(tmp_path):
    """gemm=auto takes the generated kernel for every case on sm_90a (cuBLASLt has no MX there) and
    ptxas assembles each."""
    failures = build(tmp_path, "auto", "sm_90a")
    assert not failures, failures


def sm100_refuses(case):
    """Whether the sm_100a kernel refuses a case: MXINT8, or on kind::mxf8f6f4 packed rows whose K is not
    whole 128-element boxes (kind::mxf4, FP4 x FP4, reads packed rows of any K); neither has a cuBLASLt
    lowering there either."""
    elems = (case.a_elem, case.b_elem)
    packed = any(formats.get(e).packed_elements > 1 for e in elems)
    mxf4 = all(e == "f4E2M1FN" for e in elems)
    return "i8" in elems or (packed and not mxf4 and case.k % 128 != 0)


@pytest.mark.skipif(not _can_compile(), reason="no mx-opt, LLVM tools or ptxas on this machine")
def test_programs_assemble_sm100(tmp_path):
    """The cases without a gemm-config build for sm_100a (ptxas assembles the tcgen05 kernel on FP8, FP6
    and FP4 operands, kind::mxf4 on FP4 x FP4; nothing of it has run), but for those it refuses, with the
    reason."""
    cases = [case for case in CASES if not case.config]
    failures = dict(build_cases(tmp_path, cases, source, "auto", "sm_100a"))
    assert set(failures) == {case.name for case in cases if sm100_refuses(case)}, failures
    assert all("not MXINT8" in why or "boxes of 128" in why for why in failures.values()), failures


@pytest.mark.skipif(not _can_compile(), reason="no mx-opt, LLVM tools or ptxas on this machine")
def test_nvfp4_programs_assemble_sm100(tmp_path):
    """gemm=auto takes the generated kernel (tcgen05 kind::mxf4nvf4) for NVFP4 on sm_100a, and ptxas
    assembles it (nothing of it has run)."""
    failures = build_cases(tmp_path, NVFP4_CASES, source, "auto", "sm_100a")
    assert not failures, failures
    for case in NVFP4_CASES:
        isa = tools.run_mx_opt(source(case), "--mx-lower-to-nvvm=chip=sm_100a format=isa")
        assert "kind::mxf4nvf4.block_scale.block16" in isa, case.name


@needs_gpu
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_scaled_matmul_formats(rng, artifacts, case, record_property):
    operands, notes = make_operands(rng, case)
    ours, _, _ = run_and_measure(artifacts, case, operands, notes, record_property)
    tolerance = MX_TOLERANCE[case.out]
    assert ours.plain < tolerance and ours.scaled < tolerance, \
        f"mx: {ours}; tolerance {tolerance} for {case.out} output"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python python/tests/test_gpu_gemm_formats.py DIR [auto|kernel] [sm_90a]")
    gemm = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("MX_GEMM", "auto")
    chip = sys.argv[3] if len(sys.argv) > 3 else "sm_90a"
    failed = build(sys.argv[1], gemm, chip)
    print(f"built the programs of {len(CASES)} cases, {len(failed)} failed, into {sys.argv[1]} ({_pipeline(gemm, chip)})")
    for name, why in failed:
        print(f"FAILED {name}: {why}")
    sys.exit(1 if failed else 0)
