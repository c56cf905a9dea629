"""A generated GEMM whose product is cast by delayed scaling (`mx.quantize_delayed`), on a real GPU.

`mx-lower-to-nvvm` fuses the cast into the GEMM's epilogue where it is the product's only use
(docs/gpu.md, "FP8 output"): the kernel writes the FP8 codes instead of the product, and each CTA the
amax of what it wrote, which a delayed cast of those partials records in the history with the scale's
inverse. The fused program must give the results of the unfused pair bit for bit: each case runs the
same GEMM alone (its product in the output type) and the cast alone on that product, then the fused
program, on the same operands, and compares the codes byte for byte, the scale's inverse, and the new
history (NaN where the product has one).

Operands are test_gpu_gemm.py's (fresh random values spread by 2^[-20, 20] per row and K-block; the MX
cases plant NaN blocks, zero rows, subnormal and max-finite codes). The cast's scale is chosen from the
product so that about a tenth of the elements saturate to +-max-finite and the smallest rows flush to
subnormal codes and zero; the history holds earlier amaxes, so that recording one entry must leave the
others. Every recipe of the sm_90a kernels (per-tensor, both blockwise forms, MX exact and staged), both
FP8 output types, f32 and bf16 products, a bias, shapes that are not tile multiples, and both ways the
codes are stored (through the TMA store's panels where the rows are 16-byte multiples, else from
registers; `epilogue=registers` forces the latter).

Programs are compiled ahead of time by
    python python/tests/test_gpu_gemm_cast.py DIR [sm_90a]
and run on the GPU machine with MX_GPU_ARTIFACTS=DIR (a directory of their own). The tests skip without
a GPU and on a chip the programs were not built for.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from test_gpu_gemm import (CHIPS, OUT_DTYPES, Artifacts, Case, _pipeline, _type, build_cases,
                           make_operands, needs_gpu, operand_types)

from mx import runtime, tools

HISTORY = (4, 2)  # [L, N]: the cast records column INDEX
INDEX = 1
FP8 = {"e4m3": "f8E4M3FN", "e5m2": "f8E5M2"}


@dataclass(frozen=True)
class CastCase:
    gemm: Case
    elem: str  # the cast's FP8 type (FP8 key)
    bias: bool = False

    @property
    def name(self):
        return f"cast_{self.elem}_{'bias_' if self.bias else ''}{self.gemm.name}"


CASES = [
    CastCase(Case("pt", 200, 72, 128, "f32"), "e4m3"),
    CastCase(Case("pt", 512, 384, 1024, "bf16"), "e4m3", bias=True),
    CastCase(Case("bw2d", 130, 264, 128, "bf16"), "e5m2"),
    CastCase(Case("bw1d", 136, 200, 8192, "f32"), "e4m3"),
    CastCase(Case("bw2d", 4096, 2048, 384, "bf16"), "e4m3", bias=True),
    CastCase(Case("mx", 130, 264, 32, "f32"), "e4m3"),
    CastCase(Case("mx", 512, 384, 1024, "bf16", swizzled=True), "e5m2", bias=True),
    CastCase(Case("mx", 200, 264, 1024, "bf16", config="mx=staged"), "e4m3"),
    # The codes through the TMA store's panels (the default where rows are 16-byte multiples): partial
    # tiles (the bias of columns past N must stay out of the amax), staged MX; and from registers.
    CastCase(Case("pt", 200, 272, 256, "f32"), "e5m2", bias=True),
    CastCase(Case("mx", 256, 384, 512, "bf16", config="mx=staged"), "e4m3", bias=True),
    CastCase(Case("pt", 512, 384, 1024, "bf16", config="epilogue=registers"), "e4m3", bias=True),
]


def source(case, part):
    """The fused program ("fused": the GEMM then the cast), the GEMM alone ("product") or the cast alone
    ("cast")."""
    gemm = case.gemm
    product_type = _type((gemm.m, gemm.n), OUT_DTYPES[gemm.out])
    cast = tools.DelayedCast(FP8[case.elem], slots=HISTORY[1], history=HISTORY[0], index=INDEX)
    name = f"{case.name}_{part}"
    if part == "cast":
        return tools.delayed_cast_source(name, product_type, cast)
    bias_type = _type((gemm.n,), OUT_DTYPES["bf16"]) if case.bias else None
    return tools.scaled_matmul_source(name, operand_types(gemm), gemm.a_block, gemm.b_block, product_type,
                                      bias_type=bias_type, cast=cast if part == "fused" else None)


@dataclass(frozen=True)
class _Program:
    """One program of a case, as build_cases takes it (a name and the case's gemm-config)."""
    case: CastCase
    part: str

    @property
    def name(self):
        return f"{self.case.name}_{self.part}"

    @property
    def config(self):
        return self.case.gemm.config


def build(directory, chip="sm_90a"):
    """Compiles the three programs of every case into DIR; returns the failures."""
    programs = [_Program(case, part) for case in CASES for part in ("fused", "product", "cast")]
    return build_cases(directory, programs, lambda p: source(p.case, p.part), "kernel", chip)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    capability = runtime.compute_capability()
    chip = CHIPS.get(capability)
    if chip != "sm_90a":
        pytest.skip(f"the fused output cast is tested on sm_90a; this GPU is compute capability {capability}")
    directory = os.environ.get("MX_GPU_ARTIFACTS")
    if not directory:
        directory = tmp_path_factory.mktemp("gemm_cast")
        build(directory, chip)
    return Artifacts(directory)


def _call(lib, name, arrays, ranks):
    buffers = [runtime.DeviceBuffer.from_numpy(np.ascontiguousarray(x)) for x in arrays]
    try:
        return runtime.call_mlir_function(lib, name, buffers, result_ranks=ranks)
    finally:
        for buffer in buffers:
            buffer.close()


def _fetch(results, dtypes):
    try:
        return [r.to_numpy(d) for r, d in zip(results, dtypes)]
    finally:
        for r in results:
            r.free()


def _cast_state(rng, product):
    """Scales and history: the scale saturates the largest tenth of |product|'s finite values (a power
    of two, so that the smallest rows reach FP8's subnormals), the history holds earlier amaxes."""
    finite = np.abs(product[np.isfinite(product)]).astype(np.float64)
    top = np.quantile(finite, 0.9) if finite.size else 1.0
    scale = np.float32(2.0 ** np.floor(np.log2(448.0 / top))) if top > 0 else np.float32(1.0)
    scales = np.array([0.5, scale], np.float32)
    history = rng.uniform(0.5, 4.0, HISTORY).astype(np.float32)
    return scales, history


@needs_gpu
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_fused_cast_matches_unfused(rng, artifacts, case):
    gemm = case.gemm
    operands, notes = make_operands(rng, gemm)
    if case.bias:
        bias = rng.standard_normal(gemm.n).astype(OUT_DTYPES["bf16"])
        operands = (*operands, bias)
    product_dtype = OUT_DTYPES[gemm.out]
    (product,) = _fetch(_call(artifacts.load(f"{case.name}_product"), f"{case.name}_product", operands, [2]),
                        [product_dtype])
    scales, history = _cast_state(rng, product.astype(np.float32))
    dtypes = [np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float32)]
    unfused = _fetch(_call(artifacts.load(f"{case.name}_cast"), f"{case.name}_cast",
                           [product, scales, history], [2, 2, 2]), dtypes)
    fused = _fetch(_call(artifacts.load(f"{case.name}_fused"), f"{case.name}_fused",
                         [*operands, scales, history], [2, 2, 2]), dtypes)
    codes = unfused[0]
    saturated = np.isin(codes & 0x7F, [0x7E, 0x7B]).mean()
    print(f"{case.name} ({artifacts.pipeline}); specials {notes}; scale {scales[INDEX]}; "
          f"saturated {saturated:.3f}, zero codes {(codes & 0x7F == 0).mean():.3f}; "
          f"amax unfused {unfused[2][0, INDEX]} fused {fused[2][0, INDEX]}")
    mismatched = np.flatnonzero(fused[0] != codes)
    assert mismatched.size == 0, (
        f"{mismatched.size} codes differ from the unfused cast, first at {np.unravel_index(mismatched[0], codes.shape)}: "
        f"{fused[0].flat[mismatched[0]]:#x} against {codes.flat[mismatched[0]]:#x}")
    assert np.array_equal(fused[1], unfused[1]), f"scale_inv {fused[1]} against {unfused[1]}"
    assert np.array_equal(fused[2], unfused[2], equal_nan=True), f"history\n{fused[2]}\nagainst\n{unfused[2]}"
    expected = history.copy()
    expected[0, INDEX] = unfused[2][0, INDEX]
    assert np.array_equal(unfused[2], expected, equal_nan=True), "the cast changed another history entry"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python python/tests/test_gpu_gemm_cast.py DIR [sm_90a]")
    chip = sys.argv[2] if len(sys.argv) > 2 else "sm_90a"
    failed = build(sys.argv[1], chip)
    print(f"built the programs of {len(CASES)} cases, {len(failed)} failed, into {sys.argv[1]} "
          f"({_pipeline('kernel', chip)})")
    for name, why in failed:
        print(f"FAILED {name}: {why}")
    sys.exit(1 if failed else 0)
