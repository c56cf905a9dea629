"""Compile once, call many: mx.compile on MLIR text and on an mx.builder.Function, for the CPU.

mx.compile lowers the program with mx-opt into a shared library (cached on disk under
$MX_CACHE_DIR, default ~/.cache/mx) and returns a Kernel: a Python callable on numpy arrays. The
first call loads the library; later calls only run it. Both kernels are checked against the numpy
reference model (mx.reference), bit for bit.

Run from the repository root:
    .venv/bin/python examples/compile_kernel.py
"""

import time
from pathlib import Path

import ml_dtypes
import numpy as np

import mx
from mx import builder, reference

# 1. MLIR text: examples/kernels/quantize.mlir, MXFP8 quantize of a bf16 [256, 512] tensor (E4M3
# data, one E8M0 scale per 1x32 block) with the scales swizzled into the 128x4 tiles a GEMM reads.
SOURCE = (Path(__file__).parent / "kernels" / "quantize.mlir").read_text()

# 2. A program built in Python: FP8 blockwise quantize of an f32 [256, 512] tensor (f32 scales per
# 1x128 block) and the dequantized values.
f = builder.Function("quantize_blockwise")
x_arg = f.arg((256, 512), "f32")
data, scales = f.quantize(x_arg, block=(1, 128), scale_type="f32")
f.returns(data, scales, f.dequantize(data, scales, block=(1, 128)))


def mxfp8_reference(x):
    data, scales = reference.quantize(x, (1, 32))
    return data, reference.swizzle(scales)


def blockwise_reference(x):
    data, scales = reference.quantize(x, (1, 128), "f8E4M3FN", "f32")
    return data, scales, reference.dequantize(data, scales, (1, 128))


def timed(what, call):
    start = time.perf_counter()
    value = call()
    print(f"  {what:<12} {1e3 * (time.perf_counter() - start):9.2f} ms")
    return value


rng = np.random.default_rng(0)
for name, program, dtype, expected in (("MLIR text", SOURCE, ml_dtypes.bfloat16, mxfp8_reference),
                                       ("mx.builder.Function", f, np.float32, blockwise_reference)):
    print(name)
    kernel = timed("mx.compile", lambda: mx.compile(program, "cpu"))  # mx-opt + llc, or the disk cache
    for call in ("first call", "second call"):  # the first one also loads the library
        x = (rng.standard_normal((256, 512)) * np.exp2(rng.integers(-20, 20, (256, 1)))).astype(dtype)
        results = timed(call, lambda: kernel(x))
        for got, want in zip(results, expected(x), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
            assert got.tobytes() == want.tobytes(), f"{kernel.signature}: differs from mx.reference"
    print(f"  {kernel.signature}: both calls equal mx.reference bit for bit")
