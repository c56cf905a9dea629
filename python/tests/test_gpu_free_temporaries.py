"""Compiled GPU programs free their intermediate device buffers (mx-free-device-temporaries).

Each program below has intermediates that only its own later kernels read: the scales an inserted
swizzle kernel lays out for the GEMM (`gemm_compact`), two MXFP8 operands quantized for a GEMM kernel
(`quantize_gemm`), two FP8-blockwise operands quantized for a GEMM kernel on sm_90a and cuBLASLt on
sm_100a (`quantize_blockwise_gemm`). Called CALLS times on the same inputs, with its result freed after
each call, a program must leave the device memory in use where it was after a few warm-up calls: in
default mode (cuMemAlloc and cuMemFree) by cuMemGetInfo, in call-stream mode (stream-ordered
allocations from the device's default pool) by the pool's USED_MEM_CURRENT. Before the pass each call
leaked its intermediates, CALLS times TEMPORARY_BYTES[name] at least. Every call's result must equal
the first one's bits (a buffer freed before a kernel read it would show), and the first one the
float64 product of the reference's quantized operands within the bf16 GEMM tolerance.

Where mx-opt is, the lowered host code of each program must free every allocation but the result's.
The calls are skipped without a GPU, the lowering check without mx-opt (on the GPU machine). Built
and loaded like test_gpu_kernels.py: `python python/tests/test_gpu_free_temporaries.py DIR [CHIP]`
compiles the programs where mx-opt is, and $MX_GPU_ARTIFACTS=DIR runs them on a GPU machine without
MLIR.
"""

import ctypes
import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import build_gpu_programs, exact_matmul, load_gpu_programs, random_input

from mx import reference, runtime, toolchain, tools

CALLS = 200
WARM_UP = 3
M, N, K = 1024, 1024, 2048
ROW, ROW128, TILE128 = (1, 32), (1, 128), (128, 128)
BF16, FP8, E8M0 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu
# cuMemGetInfo moves in whole pages of the driver's suballocator: growth below this is not a leak.
DEFAULT_MODE_SLACK = 4 << 20
BF16_GEMM_TOLERANCE = 4e-3  # relative Frobenius error of a bf16 result (test_gpu_gemm.py's MX_TOLERANCE)


def _scales_bytes(rows, block, itemsize):
    return rows * (K // block) * itemsize


# The bytes of the intermediates of one call (the least a leaking call loses).
TEMPORARY_BYTES = {
    "gemm_compact": 2 * _scales_bytes(M, 32, 1),  # the two operands' swizzled scales
    "quantize_gemm": M * K + N * K + _scales_bytes(M, 32, 1) + _scales_bytes(N, 32, 1),
    "quantize_blockwise_gemm": M * K + N * K + _scales_bytes(M, 128, 4) + (N // 128) * (K // 128) * 4,
}


def _gemm(a, a_scales, b, b_scales, a_block, b_block):
    blocks = f"lhs_block [{', '.join(map(str, a_block))}] rhs_block [{', '.join(map(str, b_block))}]"
    types = ", ".join((a, a_scales, b, b_scales))
    return f"mx.scaled_matmul %ad, %as, %bd, %bs {blocks} : {types} -> {tools.mlir_type((M, N), BF16)}"


def _quantize(value, data, scales, shape, block, scale_type):
    source = tools.mlir_type(shape, BF16)
    return (f"  {data}, {scales} = mx.quantize {value} block [{', '.join(map(str, block))}] : {source} -> "
            f"{tools.mlir_type(shape, FP8)}, {tools.mlir_type(reference.scales_shape(shape, block), scale_type)}")


def sources():
    out = tools.mlir_type((M, N), BF16)
    a, b = tools.mlir_type((M, K), FP8), tools.mlir_type((N, K), FP8)
    a_scales, b_scales = (tools.mlir_type(reference.scales_shape(s, ROW), E8M0) for s in ((M, K), (N, K)))
    x, w = tools.mlir_type((M, K), BF16), tools.mlir_type((N, K), BF16)
    return {
        "gemm_compact": tools.function_source(
            "gemm_compact", [f"%ad: {a}", f"%as: {a_scales}", f"%bd: {b}", f"%bs: {b_scales}"],
            [f"  %c = {_gemm(a, a_scales, b, b_scales, ROW, ROW)}"], [("%c", out)]),
        "quantize_gemm": tools.function_source(
            "quantize_gemm", [f"%x: {x}", f"%w: {w}"],
            [_quantize("%x", "%ad", "%as", (M, K), ROW, E8M0), _quantize("%w", "%bd", "%bs", (N, K), ROW, E8M0),
             f"  %c = {_gemm(a, a_scales, b, b_scales, ROW, ROW)}"], [("%c", out)]),
        "quantize_blockwise_gemm": tools.function_source(
            "quantize_blockwise_gemm", [f"%x: {x}", f"%w: {w}"],
            [_quantize("%x", "%ad", "%as", (M, K), ROW128, np.float32),
             _quantize("%w", "%bd", "%bs", (N, K), TILE128, np.float32),
             "  %c = " + _gemm(a, tools.mlir_type(reference.scales_shape((M, K), ROW128), np.float32), b,
                               tools.mlir_type(reference.scales_shape((N, K), TILE128), np.float32), ROW128, TILE128)],
            [("%c", out)]),
    }


def build(directory, chip=None):
    build_gpu_programs(directory, sources(), chip)


if __name__ == "__main__":
    build(sys.argv[1], *sys.argv[2:])


@pytest.mark.skipif(toolchain.locate_tool("mx-opt") is None, reason="needs a built mx-opt")
@pytest.mark.parametrize("chip", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", list(TEMPORARY_BYTES))
def test_programs_free_all_but_their_result(name, chip):
    """Where mx-opt is (no GPU needed): the host code frees every device allocation but the result's."""
    lowered = tools.run_mx_opt(sources()[name], f"--mx-lower-to-nvvm=chip={chip} format=isa")
    allocations, frees = lowered.count("llvm.call @mgpuMemAlloc("), lowered.count("llvm.call @mgpuMemFree(")
    assert allocations >= 3 and frees == allocations - 1, f"{name} on {chip}: {allocations} allocations, {frees} frees"


requires_gpu = pytest.mark.skipif(not runtime.device_available(), reason="no CUDA GPU on this machine")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    return load_gpu_programs(tmp_path_factory, build, sources())


class Driver:
    """What the CUDA driver says about device memory, on the runtime's device (0)."""

    def __init__(self):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.device = ctypes.c_int()
        self._check(self.cuda.cuInit(0), "cuInit")
        self._check(self.cuda.cuDeviceGet(ctypes.byref(self.device), 0), "cuDeviceGet")

    @staticmethod
    def _check(result, call):
        assert result == 0, f"{call} failed with CUresult {result}"

    def used_bytes(self):
        """Device memory in use (total - free), with the primary context current."""
        context = ctypes.c_void_p()
        self._check(self.cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), self.device),
                    "cuDevicePrimaryCtxRetain")
        self._check(self.cuda.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        try:
            self._check(self.cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        finally:
            self.cuda.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
            self.cuda.cuDevicePrimaryCtxRelease_v2(self.device)
        return total.value - free.value

    def pool_used_bytes(self):
        """Bytes of the device's default memory pool held by allocations not yet freed."""
        CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7
        pool, used = ctypes.c_void_p(), ctypes.c_uint64()
        self._check(self.cuda.cuDeviceGetDefaultMemPool(ctypes.byref(pool), self.device),
                    "cuDeviceGetDefaultMemPool")
        self._check(self.cuda.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, ctypes.byref(used)),
                    "cuMemPoolGetAttribute(USED_MEM_CURRENT)")
        return used.value


def _operands(name, rng):
    """Host inputs of program `name` and the float64 product of its quantized operands."""
    x = random_input(rng, (M, K), np.float32, specials=False).astype(BF16)
    w = random_input(rng, (N, K), np.float32, specials=False).astype(BF16)
    a_block, b_block, scale_type = (ROW128, TILE128, "f32") if name == "quantize_blockwise_gemm" else \
        (ROW, ROW, "f8E8M0FNU")
    a, a_scales = reference.quantize(x, a_block, scale_type=scale_type)
    b, b_scales = reference.quantize(w, b_block, scale_type=scale_type)
    expected = exact_matmul(a, a_scales, b, b_scales, a_block, b_block)
    return ([a, a_scales, b, b_scales] if name == "gemm_compact" else [x, w]), expected


def _relative_error(result, expected):
    result = result.astype(np.float64)
    return np.linalg.norm(result - expected) / np.linalg.norm(expected)


class Calls:
    """Calls compiled program `name` on device copies of `inputs`, freeing each result."""

    def __init__(self, library, name, inputs, call_stream):
        self.library, self.name, self.call_stream = library, name, call_stream
        self.buffers = [runtime.DeviceBuffer.from_numpy(np.require(a, requirements="C")) for a in inputs]

    def __call__(self):
        """One call; its result's bits."""
        (result,) = runtime.call_mlir_function(self.library, self.name, self.buffers, result_ranks=[2])
        try:
            runtime.synchronize()
            return result.to_numpy(BF16)
        finally:
            if self.call_stream:  # stream-ordered, from the pool: freed on the stream it came from
                assert runtime.load_library().mxrtFreeAsync(result.allocated, None) == 0, runtime.last_error()
            else:
                result.free()

    def close(self):
        for buffer in self.buffers:
            buffer.close()


@requires_gpu
@pytest.mark.parametrize("call_stream", [False, True], ids=["default_mode", "call_stream_mode"])
@pytest.mark.parametrize("name", list(TEMPORARY_BYTES))
def test_calls_leave_no_device_memory_behind(rng, libraries, name, call_stream):
    driver, library = Driver(), runtime.load_library()
    inputs, expected = _operands(name, rng)
    calls = Calls(libraries[name], name, inputs, call_stream)
    used = driver.pool_used_bytes if call_stream else driver.used_bytes
    # Call-stream mode on the legacy default stream: allocations and frees ordered on it.
    assert library.mxrtSetCallStream(None, int(call_stream)) == 0
    try:
        first = calls()
        error = _relative_error(first, expected)
        assert error < BF16_GEMM_TOLERANCE, f"{name}: relative error {error:.3g} of the first call"
        for _ in range(WARM_UP):
            calls()
        runtime.synchronize()
        before = used()
        for index in range(CALLS):
            result = calls()
            assert np.array_equal(result.view(np.uint16), first.view(np.uint16)), \
                f"{name}: call {index} returned other bits than the first call on the same inputs"
        runtime.synchronize()
        grown = used() - before
    finally:
        library.mxrtSetCallStream(None, 0)
        calls.close()
    leak = CALLS * TEMPORARY_BYTES[name]
    # A leak of every call's intermediates is leak bytes; nothing of it may be left, but the default
    # mode's measure counts whole suballocator pages.
    allowed = DEFAULT_MODE_SLACK if not call_stream else 0
    assert allowed < leak // 4, "the programs' intermediates are too small to show a leak"
    assert grown <= allowed, (f"{name}: device memory in use grew by {grown} bytes over {CALLS} calls "
                              f"(leaking every call's intermediates would be {leak} bytes)")
