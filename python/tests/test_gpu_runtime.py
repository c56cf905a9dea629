"""GPU tests of libmx_runtime through python/mx/runtime.py.

They need a CUDA GPU and a built libmx_runtime.so (MX_RUNTIME_LIB or build/);
anywhere else the whole module is skipped. The scaled-matmul tests quantize
fresh random operands whose magnitudes vary per 128-block (so a scale applied
at the wrong place shows) with mx.reference, run cuBLASLt through
mxrtScaledMatmul, and compare with mx.reference.scaled_matmul (a float64
product of the dequantized operands) by relative Frobenius error. The seed of
each test's inputs is in its failure message.
"""

import ctypes
import shutil
import subprocess

import pytest

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
from mx import reference as ref  # noqa: E402
from mx import runtime as rt  # noqa: E402

if not rt.device_available():
    pytest.skip("no usable CUDA device or libmx_runtime.so (build it or set MX_RUNTIME_LIB)",
                allow_module_level=True)

E4M3 = ml_dtypes.float8_e4m3fn
CC = rt.compute_capability()
SHAPES = [(256, 256, 256), (128, 384, 512), (200, 136, 384)]
ODD_M = (201, 136, 384)  # n stays a multiple of 8: output rows must be 16-byte aligned.
# F32 output is limited by compute capability 9.x FP8 tensor cores, which sum
# products with less than f32 precision: cuBLASLt (and torch._scaled_mm on the
# same data) measured 1.1e-4..1.4e-4 on H100 for every scale mode, where an
# f32 GEMM of the dequantized operands gives 1.5e-7.
OUT_TOLERANCES = [(rt.ElemType.F32, 3e-4), (rt.ElemType.BF16, 4e-3)]
VEC128, BLK128 = rt.ScaleMode.VEC128_F32, rt.ScaleMode.BLK128X128_F32
BLOCKS = {rt.ScaleMode.TENSOR_F32: None, VEC128: (1, 128), BLK128: (128, 128)}


def random_operand(rng, rows, k):
    """Normal f32 values scaled per 1x128 block by factors spanning 2^-8..2^8."""
    magnitude = np.exp2(rng.uniform(-8, 8, size=(rows, -(-k // 128))))
    x = rng.standard_normal((rows, k)) * np.repeat(magnitude, 128, axis=1)[:, :k]
    return x.astype(np.float32)


def quantize(x, mode):
    """E4M3 data and f32 scales amax / 448 per block of `mode`, and that block."""
    block = BLOCKS[mode] or x.shape
    data, scales = ref.quantize(x, block, "f8E4M3FN", "f32", "exact")
    return data, scales, block


def run_matmul(m, n, k, a, a_scales, a_mode, b, b_scales, b_mode, out_type):
    out_dtype = rt.NUMPY_DTYPES[out_type]
    with rt.DeviceBuffer.from_numpy(a) as da, rt.DeviceBuffer.from_numpy(a_scales) as dsa, \
            rt.DeviceBuffer.from_numpy(b) as db, rt.DeviceBuffer.from_numpy(b_scales) as dsb, \
            rt.DeviceBuffer.zeros((m, n), out_dtype) as dout:
        rt.scaled_matmul(m, n, k, da, rt.ElemType.F8E4M3, dsa, a_mode,
                         db, rt.ElemType.F8E4M3, dsb, b_mode, dout, out_type)
        return dout.to_numpy().astype(np.float64)


def test_device_buffer_round_trip():
    rng = np.random.default_rng()
    for array in (rng.standard_normal((37, 5)).astype(np.float32),
                  rng.standard_normal(1000).astype(ml_dtypes.bfloat16),
                  rng.standard_normal((3, 64)).astype(E4M3),
                  np.zeros((0, 4), np.float32)):
        with rt.DeviceBuffer.from_numpy(array) as buf, buf.clone() as copy:
            np.testing.assert_array_equal(buf.to_numpy(), array)
            assert copy.to_numpy().tobytes() == array.tobytes()
            assert buf.to_numpy(np.uint8).tobytes() == array.tobytes()
    with rt.DeviceBuffer.zeros((4, 9), np.int32) as zeros:
        np.testing.assert_array_equal(zeros.to_numpy(), np.zeros((4, 9), np.int32))


def test_compute_capability():
    major, minor = CC
    assert major >= 5 and minor >= 0


def check_scaled_matmul(m, n, k, a_mode, b_mode, out_type, tolerance):
    seed = np.random.SeedSequence().entropy
    rng = np.random.default_rng(seed)
    a, sa, a_block = quantize(random_operand(rng, m, k), a_mode)
    b, sb, b_block = quantize(random_operand(rng, n, k), b_mode)
    out = run_matmul(m, n, k, a, sa, a_mode, b, sb, b_mode, out_type)
    error = ref.matmul_error(out, ref.scaled_matmul(a, sa, b, sb, a_block, b_block))
    assert error < tolerance, f"relative error {error:.3g} (seed {seed})"


@pytest.mark.parametrize("out_type,tolerance", OUT_TOLERANCES, ids=["f32", "bf16"])
@pytest.mark.parametrize("m,n,k", SHAPES + [ODD_M])
def test_scaled_matmul_per_tensor(m, n, k, out_type, tolerance):
    check_scaled_matmul(m, n, k, rt.ScaleMode.TENSOR_F32, rt.ScaleMode.TENSOR_F32,
                        out_type, tolerance)


@pytest.mark.parametrize("out_type,tolerance", OUT_TOLERANCES, ids=["f32", "bf16"])
@pytest.mark.parametrize("m,n,k,a_mode,b_mode",
                         [shape + (VEC128, BLK128) for shape in SHAPES] + [ODD_M + (BLK128, VEC128)],
                         ids=lambda value: getattr(value, "name", None))
def test_scaled_matmul_blockwise(m, n, k, a_mode, b_mode, out_type, tolerance):
    """1x128 scales [rows, k/128] on one operand, 128x128 [ceil(rows/128), k/128] on the other."""
    check_scaled_matmul(m, n, k, a_mode, b_mode, out_type, tolerance)


def test_vec128_scales_need_rows_multiple_of_4():
    m, n, k = ODD_M
    a, b = np.zeros((m, k), E4M3), np.zeros((n, k), E4M3)
    with pytest.raises(RuntimeError, match="multiple of 4") as info:
        run_matmul(m, n, k, a, np.ones((m, k // 128), np.float32), VEC128,
                   b, np.ones((2, k // 128), np.float32), BLK128, rt.ElemType.F32)
    assert info.value.status == rt.Status.NOT_SUPPORTED


def test_mx_scales_rejected_before_compute_capability_10():
    if CC[0] >= 10:
        pytest.skip("MX scales run natively from compute capability 10.0")
    m = n = k = 256
    e8m0_one = np.full(rt.scale_nbytes(rt.ScaleMode.VEC32_UE8M0, m, k), 127, np.uint8)
    zeros = np.zeros((m, k), E4M3)
    with pytest.raises(RuntimeError, match="not supported") as info:
        run_matmul(m, n, k, zeros, e8m0_one, rt.ScaleMode.VEC32_UE8M0,
                   zeros, e8m0_one, rt.ScaleMode.VEC32_UE8M0, rt.ElemType.BF16)
    assert info.value.status == rt.Status.NOT_SUPPORTED
    assert f"compute capability {CC[0]}.{CC[1]}" in str(info.value)
    assert "use the NVVM lowering (sm_100a tcgen05) or dequantize + BF16 GEMM" in str(info.value)


def test_mx_scaled_matmul():
    if CC[0] < 10:
        pytest.skip("MX scales need compute capability 10.0 or newer")
    m, n, k = 256, 136, 512
    seed = np.random.SeedSequence().entropy
    rng = np.random.default_rng(seed)
    (a, sa), (b, sb) = (ref.quantize(random_operand(rng, rows, k), (1, 32)) for rows in (m, n))
    sa, sb = ref.swizzle(sa), ref.swizzle(sb)
    out = run_matmul(m, n, k, a, sa, rt.ScaleMode.VEC32_UE8M0,
                     b, sb, rt.ScaleMode.VEC32_UE8M0, rt.ElemType.F32)
    error = ref.matmul_error(out, ref.scaled_matmul(a, sa, b, sb, (1, 32), (1, 32)))
    assert error < 3e-4, f"relative error {error:.3g} (seed {seed})"


def test_invalid_arguments_are_reported():
    m, n, k = 128, 128, 200
    a = np.zeros((m, k), E4M3)
    scales = np.ones(m * 2, np.float32)
    with pytest.raises(RuntimeError, match="multiple of 128") as info:
        run_matmul(m, n, k, a, scales, rt.ScaleMode.VEC128_F32,
                   a, scales, rt.ScaleMode.VEC128_F32, rt.ElemType.F32)
    assert info.value.status == rt.Status.INVALID_ARGUMENT


FAKE_MLIR_LIBRARY = r"""
#include <stddef.h>
#include <stdint.h>
typedef struct { void *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } MemRef2D;
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
void mgpuStreamSynchronize(void *stream);
/* What llvm.emit_c_interface emits for
   func.func @fill(memref<?x?xi32>, i64) -> memref<?x?xi32>: the result comes
   back through the first pointer; memref arguments arrive by pointer. */
void _mlir_ciface_fill(MemRef2D *result, MemRef2D *in, int64_t value) {
  char *data = (char *)in->aligned + in->offset * 4;
  mgpuMemset32(value < 0 ? NULL : data, (unsigned)value, in->sizes[0] * in->sizes[1], NULL);
  mgpuStreamSynchronize(NULL);
  *result = *in;
  result->sizes[0] = 1;
}
"""


def test_call_mlir_function(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in for a compiled MLIR library")
    source, library = tmp_path / "fill.c", tmp_path / "libfill.so"
    source.write_text(FAKE_MLIR_LIBRARY)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", library, source], check=True)
    lib = rt.load_compiled(library)
    with rt.DeviceBuffer.zeros((3, 8), np.int32) as buf:
        (result,) = rt.call_mlir_function(lib, "fill", [buf, ctypes.c_int64(7)], result_ranks=[2])
        np.testing.assert_array_equal(buf.to_numpy(), np.full((3, 8), 7, np.int32))
        assert (result.aligned, result.shape, result.strides) == (buf.ptr, (1, 8), (8, 1))
        np.testing.assert_array_equal(result.to_numpy(np.int32), np.full((1, 8), 7, np.int32))
        with pytest.raises(RuntimeError, match="cuMemsetD32Async"):
            rt.call_mlir_function(lib, "fill", [buf, ctypes.c_int64(-1)], result_ranks=[2])


KERNEL = r"""
extern "C" __global__ void scale(float *x, float factor, int n) {
  extern __shared__ float scratch[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  scratch[threadIdx.x] = factor;
  if (i < n) x[i] *= scratch[threadIdx.x];
}
"""


def test_mgpu_module_launch_and_streams(tmp_path):
    """The entry points gpu-to-llvm code calls, driven by hand on an nvcc-built cubin."""
    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("no nvcc to build a cubin")
    source, cubin = tmp_path / "scale.cu", tmp_path / "scale.cubin"
    source.write_text(KERNEL)
    subprocess.run([nvcc, "-cubin", f"-arch=sm_{CC[0]}{CC[1]}", "-o", cubin, source], check=True)
    lib, vp = rt.load_library(), ctypes.c_void_p
    for name, restype, argtypes in [
            ("mgpuModuleLoad", vp, [vp, ctypes.c_size_t]),
            ("mgpuModuleGetFunction", vp, [vp, ctypes.c_char_p]),
            ("mgpuLaunchKernel", None, [vp] + [ctypes.c_ssize_t] * 6 + [ctypes.c_int32, vp, vp, vp,
                                                                      ctypes.c_size_t]),
            ("mgpuLaunchClusterKernel", None, [vp] + [ctypes.c_ssize_t] * 9 + [
                ctypes.c_int32, vp, vp, vp, ctypes.c_size_t]),
            ("mgpuStreamCreate", vp, []), ("mgpuEventCreate", vp, []),
            ("mgpuEventRecord", None, [vp, vp]), ("mgpuStreamWaitEvent", None, [vp, vp]),
            ("mgpuStreamSynchronize", None, [vp]), ("mgpuStreamDestroy", None, [vp]),
            ("mgpuEventDestroy", None, [vp]), ("mgpuModuleUnload", None, [vp])]:
        getattr(lib, name).restype, getattr(lib, name).argtypes = restype, argtypes
    blob = cubin.read_bytes()
    module = lib.mgpuModuleLoad(ctypes.create_string_buffer(blob, len(blob)), len(blob))
    function = lib.mgpuModuleGetFunction(module, b"scale")
    assert module and function, rt.last_error()
    assert lib.mgpuModuleGetFunction(module, b"missing") is None
    assert "cuModuleGetFunction('missing')" in rt.last_error()

    n = 1000
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    first, second, event = lib.mgpuStreamCreate(), lib.mgpuStreamCreate(), lib.mgpuEventCreate()
    with rt.DeviceBuffer.from_numpy(x) as buf:
        values = (vp(buf.ptr), ctypes.c_float(2.0), ctypes.c_int(n))
        params = (vp * 3)(*[ctypes.cast(ctypes.pointer(v), vp) for v in values])
        # 64 KiB of dynamic shared memory needs the per-kernel opt-in.
        lib.mgpuLaunchKernel(function, 8, 1, 1, 128, 1, 1, 64 * 1024, first, params, None, 3)
        lib.mgpuEventRecord(event, first)
        lib.mgpuStreamWaitEvent(second, event)
        lib.mgpuLaunchClusterKernel(function, 2, 1, 1, 8, 1, 1, 128, 1, 1, 512, second, params,
                                    None, 3)
        lib.mgpuStreamSynchronize(second)
        assert rt.last_error() == ""
        np.testing.assert_array_equal(buf.to_numpy(), x * 4)
    lib.mgpuEventDestroy(event)
    lib.mgpuStreamDestroy(first)
    lib.mgpuStreamDestroy(second)
    lib.mgpuModuleUnload(module)
    assert rt.last_error() == ""
