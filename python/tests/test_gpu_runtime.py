"""GPU tests of libmx_runtime through python/mx/runtime.py.

They need a CUDA GPU and a built libmx_runtime.so (MX_RUNTIME_LIB or build/);
anywhere else the whole module is skipped. The scaled-matmul tests quantize
fresh random operands whose magnitudes vary per 128-block (so a scale applied
at the wrong place shows) with mx.reference, run cuBLASLt through
mxrtScaledMatmul, and compare with mx.reference.scaled_matmul (a float64
product of the dequantized operands) by relative Frobenius error. The seed of
each test's inputs is in its failure message. The TMA tensor-map tests check
mxrtEncodeTensorMap's encoding and argument checks.
"""

import concurrent.futures
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


def run_matmul(m, n, k, a, a_scales, a_mode, b, b_scales, b_mode, out_type, **layouts):
    out_dtype = rt.NUMPY_DTYPES[out_type]
    with rt.DeviceBuffer.from_numpy(a) as da, rt.DeviceBuffer.from_numpy(a_scales) as dsa, \
            rt.DeviceBuffer.from_numpy(b) as db, rt.DeviceBuffer.from_numpy(b_scales) as dsb, \
            rt.DeviceBuffer.zeros((m, n), out_dtype) as dout:
        rt.scaled_matmul(m, n, k, da, rt.ElemType.F8E4M3, dsa, a_mode,
                         db, rt.ElemType.F8E4M3, dsb, b_mode, dout, out_type, **layouts)
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


def test_gemm_ready_vec128_scales_pass_through():
    """Blockwise GEMM-ready scales [KB, rows] (mx.swizzle layout blockwise) give the product of the
    compact [rows, KB] ones, which the runtime re-lays out itself."""
    m, n, k = 200, 136, 384
    seed = np.random.SeedSequence().entropy
    rng = np.random.default_rng(seed)
    a, sa, _ = quantize(random_operand(rng, m, k), VEC128)
    b, sb, _ = quantize(random_operand(rng, n, k), BLK128)
    ready = ref.blockwise_gemm_ready(sa, 0)
    assert ready.shape == (k // 128, m // 4, 4)
    from_ready = run_matmul(m, n, k, a, ready, rt.ScaleMode.VEC128_F32_KB_ROWS, b, sb, BLK128,
                            rt.ElemType.F32)
    from_compact = run_matmul(m, n, k, a, sa, VEC128, b, sb, BLK128, rt.ElemType.F32)
    error = ref.matmul_error(from_ready, from_compact)
    assert error < 1e-6, f"relative difference {error:.3g} (seed {seed})"


def test_k_outer_operands_need_compute_capability_10():
    """Hopper's FP8 GEMMs take K-contiguous operands only: a K-outer one is refused, not misread."""
    if CC[0] >= 10:
        pytest.skip("K-outer FP8 operands run from compute capability 10.0")
    m = n = k = 256
    data, one = np.zeros((k, m), E4M3), np.ones(1, np.float32)
    with pytest.raises(RuntimeError) as info:
        run_matmul(m, n, k, data, one, rt.ScaleMode.TENSOR_F32, data, one, rt.ScaleMode.TENSOR_F32,
                   rt.ElemType.F32, a_layout=rt.Layout.K_OUTER)
    assert info.value.status == rt.Status.NOT_SUPPORTED


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
    assert "use the generated GEMM kernel (mx-lower-to-nvvm gemm=kernel: wgmma on sm_90a)" in str(info.value)


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


_vp = ctypes.c_void_p
# Types of the runtime entry points that compiled code calls and these tests drive by hand.
ENTRY_POINTS = {
    "mgpuModuleLoad": (_vp, [_vp, ctypes.c_size_t]),
    "mgpuModuleGetFunction": (_vp, [_vp, ctypes.c_char_p]),
    "mgpuLaunchKernel": (None, [_vp] + [ctypes.c_ssize_t] * 6 + [ctypes.c_int32, _vp, _vp, _vp, ctypes.c_size_t]),
    "mgpuLaunchClusterKernel": (None, [_vp] + [ctypes.c_ssize_t] * 9 + [ctypes.c_int32, _vp, _vp, _vp,
                                                                       ctypes.c_size_t]),
    "mgpuStreamCreate": (_vp, []), "mgpuEventCreate": (_vp, []), "mgpuEventRecord": (None, [_vp, _vp]),
    "mgpuStreamWaitEvent": (None, [_vp, _vp]), "mgpuStreamSynchronize": (None, [_vp]),
    "mgpuStreamDestroy": (None, [_vp]), "mgpuEventDestroy": (None, [_vp]), "mgpuModuleUnload": (None, [_vp]),
    "mgpuMemset32": (None, [_vp, ctypes.c_uint, ctypes.c_size_t, _vp]),
    "mxrtCallBegin": (None, [ctypes.c_char_p]), "mxrtCallEnd": (ctypes.c_int32, []),
    "mxrtCheckArgument": (None, [ctypes.c_int32, _vp, ctypes.c_int64]),
}


def typed_runtime():
    """libmx_runtime with ENTRY_POINTS typed."""
    lib = rt.load_library()
    for name, (restype, argtypes) in ENTRY_POINTS.items():
        getattr(lib, name).restype, getattr(lib, name).argtypes = restype, argtypes
    return lib


def build_cubin(directory, source_text, stem):
    """A cubin of CUDA source for this GPU, built with nvcc (skips where there is none)."""
    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("no nvcc to build a cubin")
    source, cubin = directory / f"{stem}.cu", directory / f"{stem}.cubin"
    source.write_text(source_text)
    subprocess.run([nvcc, "-cubin", f"-arch=sm_{CC[0]}{CC[1]}", "-o", cubin, source], check=True)
    return cubin


def test_mgpu_module_launch_and_streams(tmp_path):
    """The entry points gpu-to-llvm code calls, driven by hand on an nvcc-built cubin."""
    cubin = build_cubin(tmp_path, KERNEL, "scale")
    lib, vp = typed_runtime(), ctypes.c_void_p
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


POKE_KERNEL = r"""
extern "C" __global__ void poke(int *p) { *p = 1; }
"""


@pytest.fixture(scope="module")
def poke(tmp_path_factory):
    """(runtime library with the guard's and launch entry points typed, the `poke` kernel): a kernel
    that stores to its pointer, so that a launch on a bad pointer would fault."""
    cubin = build_cubin(tmp_path_factory.mktemp("poke"), POKE_KERNEL, "poke")
    lib = typed_runtime()
    blob = cubin.read_bytes()
    module = lib.mgpuModuleLoad(ctypes.create_string_buffer(blob, len(blob)), len(blob))
    function = lib.mgpuModuleGetFunction(module, b"poke")
    assert module and function, rt.last_error()
    return lib, function


def launch_poke(lib, function, pointer):
    target = ctypes.c_void_p(pointer)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(target), ctypes.c_void_p))
    lib.mgpuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None, 1)


def assert_context_alive():
    with rt.DeviceBuffer.zeros((4,), np.int32) as buf:
        rt.synchronize()
        np.testing.assert_array_equal(buf.to_numpy(), np.zeros(4, np.int32))


def test_call_guard_skips_device_work_after_a_failure(poke):
    """Inside a guarded call (what mx-lower-to-nvvm makes of each public function), a refused
    argument or a failed tensor-map encode stops every later launch and memset of the call: the
    launches here would store to a misaligned or NULL pointer and kill the context."""
    lib, function = poke
    rt.last_error()
    with rt.DeviceBuffer.zeros((16,), np.int32) as buf:
        lib.mxrtCallBegin(b"misaligned")
        lib.mxrtCheckArgument(0, buf.ptr + 2, rt.ARGUMENT_ALIGNMENT)
        launch_poke(lib, function, buf.ptr + 2)
        lib.mgpuMemset32(buf.ptr + 2, 7, 4, None)
        assert lib.mxrtCallEnd() == rt.Status.INVALID_ARGUMENT
        message = rt.last_error()
        assert "@misaligned argument 0: device pointer" in message and "2 bytes past a 16-byte boundary" in message
        assert_context_alive()

        lib.mxrtCallBegin(b"tensor_map")
        storage, map_address = rt.tensor_map_storage()
        assert lib.mxrtEncodeTensorMap(map_address, buf.ptr + 8, int(rt.ElemType.F32), 2,
                                       (ctypes.c_int64 * 2)(4, 4), (ctypes.c_int32 * 2)(4, 4),
                                       int(rt.Swizzle.NONE)) == map_address
        assert not any(ctypes.string_at(map_address, rt.TENSOR_MAP_BYTES))
        launch_poke(lib, function, 0)
        assert lib.mxrtCallEnd() == rt.Status.INVALID_ARGUMENT
        assert "not 16-byte aligned" in rt.last_error()
        assert_context_alive()

        # The guard ends with the call: the next one runs.
        lib.mxrtCallBegin(b"valid")
        lib.mxrtCheckArgument(0, buf.ptr, rt.ARGUMENT_ALIGNMENT)
        launch_poke(lib, function, buf.ptr)
        assert lib.mxrtCallEnd() == rt.Status.SUCCESS
        assert rt.last_error() == ""
        assert buf.to_numpy()[0] == 1 and not buf.to_numpy()[1:].any()


def test_call_guard_refuses_null_arguments(poke):
    lib, function = poke
    rt.last_error()
    lib.mxrtCallBegin(b"null")
    lib.mxrtCheckArgument(3, None, rt.ARGUMENT_ALIGNMENT)
    launch_poke(lib, function, 0)
    assert lib.mxrtCallEnd() == rt.Status.INVALID_ARGUMENT
    assert "@null argument 3 is a NULL pointer" in rt.last_error()
    assert_context_alive()


# mxrtEncodeTensorMap. A TMA copy needs a kernel, so the maps are checked
# against the driver's own encoding of the parameters the contract names (the
# GEMM kernel tests exercise them in cp.async.bulk.tensor).
CU_TENSOR_MAP_TYPES = {  # CUtensorMapDataType of each element type that has a tensor map
    rt.ElemType.F8E4M3: 0, rt.ElemType.F8E5M2: 0, rt.ElemType.E8M0: 0, rt.ElemType.I8: 0,  # UINT8
    rt.ElemType.U32: 2, rt.ElemType.F16: 6, rt.ElemType.F32: 7, rt.ElemType.BF16: 9}
CU_SWIZZLES = {rt.Swizzle.NONE: 0, rt.Swizzle.B32: 1, rt.Swizzle.B64: 2, rt.Swizzle.B128: 3}
CU_L2_PROMOTION_256B, CU_INTERLEAVE_NONE, CU_OOB_FILL_ZERO = 3, 0, 0


@pytest.fixture(scope="module")
def tensor():
    """A device buffer to describe: maps are encoded without reading it."""
    with rt.DeviceBuffer(1 << 20) as buf:
        yield buf.ptr


def driver_encoding(base, elem_type, dims, box, swizzle, cu_type=None, strides=None):
    """The 128 bytes cuTensorMapEncodeTiled gives for mxrtEncodeTensorMap's contract.

    The driver encodes only with a context current: device 0's primary context
    (the runtime's default device), pushed for the call.
    """
    cuda = ctypes.CDLL("libcuda.so.1")
    u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    encode = cuda.cuTensorMapEncodeTiled
    encode.argtypes = [vp, ctypes.c_int, u32, vp] + [ctypes.POINTER(u64)] * 2 + \
        [ctypes.POINTER(u32)] * 2 + [ctypes.c_int] * 4
    rank = len(dims)
    if strides is None:
        size = rt.NUMPY_DTYPES[elem_type].itemsize
        strides = [size * int(np.prod(dims[:i])) for i in range(1, rank)]
    storage, address = rt.tensor_map_storage()
    context = vp()
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
    assert cuda.cuCtxPushCurrent_v2(context) == 0
    try:
        status = encode(address, CU_TENSOR_MAP_TYPES[elem_type] if cu_type is None else cu_type, rank, base,
                        (u64 * rank)(*dims), (u64 * (rank - 1))(*strides), (u32 * rank)(*box),
                        (u32 * rank)(*[1] * rank), CU_INTERLEAVE_NONE, CU_SWIZZLES[swizzle],
                        CU_L2_PROMOTION_256B, CU_OOB_FILL_ZERO)
    finally:
        cuda.cuCtxPopCurrent_v2(ctypes.byref(context))
        cuda.cuDevicePrimaryCtxRelease_v2(0)
    assert status == 0, f"cuTensorMapEncodeTiled returned {status}"
    return ctypes.string_at(address, rt.TENSOR_MAP_BYTES)


@pytest.mark.parametrize("elem_type,swizzle",
                         [(t, rt.Swizzle.B64) for t in CU_TENSOR_MAP_TYPES] +
                         [(rt.ElemType.BF16, s) for s in rt.Swizzle if s != rt.Swizzle.B64],
                         ids=lambda value: value.name)
def test_tensor_map_encoding(tensor, elem_type, swizzle):
    size = rt.NUMPY_DTYPES[elem_type].itemsize
    inner_box = (swizzle or 128) // size  # The widest box the swizzle span allows.
    dims, box = [3 * inner_box, 40, 2], [inner_box, 32, 1]
    encoded = rt.tensor_map(tensor, elem_type, dims, box, swizzle)
    assert encoded == driver_encoding(tensor, elem_type, dims, box, swizzle)


@pytest.mark.parametrize("elem_type,cu_type", [(rt.ElemType.F4E2M1, 14), (rt.ElemType.F6E3M2, 15),
                                               (rt.ElemType.F6E2M3, 15)], ids=lambda v: str(v))
def test_tensor_map_packed_encoding(tensor, elem_type, cu_type):
    """FP4 and FP6 maps are the 16U4 / 16U6_ALIGN16B types (SM100's unpacking loads), dims in elements
    and byte strides of the packed rows. Where the driver has no such type for this GPU,
    mxrtEncodeTensorMap reports the driver's refusal."""
    bits = 4 if elem_type == rt.ElemType.F4E2M1 else 6
    dims, box = [256, 40, 2], [128, 32, 1]
    strides = [256 * bits // 8, 256 * 40 * bits // 8]
    try:
        encoded = rt.tensor_map(tensor, elem_type, dims, box, rt.Swizzle.B128)
    except rt.MXRuntimeError as exc:
        assert str(exc).startswith(f"cuTensorMapEncodeTiled({elem_type.name}"), exc
        pytest.skip(f"the driver refuses the packed type on this GPU: {str(exc).splitlines()[0]}")
    assert encoded == driver_encoding(tensor, elem_type, dims, box, rt.Swizzle.B128, cu_type, strides)


def test_tensor_map_distinguishes_requests(tensor):
    """Each parameter of the contract reaches the encoding; equal encodings only where the contract
    says so (FP8 and scale bytes are both UINT8)."""
    request = (tensor, rt.ElemType.F8E4M3, [256, 64], [128, 64], rt.Swizzle.B128)
    encoded = rt.tensor_map(*request)
    assert rt.tensor_map(*request) == encoded
    assert rt.tensor_map(tensor, rt.ElemType.E8M0, *request[2:]) == encoded
    variants = [
        (tensor + 16, rt.ElemType.F8E4M3, [256, 64], [128, 64], rt.Swizzle.B128),
        (tensor, rt.ElemType.BF16, [256, 64], [64, 64], rt.Swizzle.B128),
        (tensor, rt.ElemType.F8E4M3, [256, 65], [128, 64], rt.Swizzle.B128),
        (tensor, rt.ElemType.F8E4M3, [256, 64], [128, 32], rt.Swizzle.B128),
        (tensor, rt.ElemType.F8E4M3, [256, 64], [128, 64], rt.Swizzle.NONE),
        (tensor, rt.ElemType.F8E4M3, [256, 64, 1], [128, 64, 1], rt.Swizzle.B128),
        (tensor, rt.ElemType.F8E4M3, [32, 2, 2, 2, 2], [32, 1, 1, 1, 1], rt.Swizzle.B32),
    ]
    encodings = [rt.tensor_map(*variant) for variant in variants]
    assert len(set(encodings + [encoded])) == len(variants) + 1


def test_tensor_map_threads(tensor):
    """Concurrent callers get the driver's encoding of each request (the runtime keeps no state
    between calls but the device scope)."""
    requests = [(tensor, rt.ElemType.F32, [64, rows], [32, 8], rt.Swizzle.B128)
                for rows in range(1000, 1200)]

    def encodings(order):
        return {order[i]: rt.tensor_map(*requests[order[i]]) for i in range(len(order))}

    orders = [np.random.default_rng(seed).permutation(len(requests)).tolist() for seed in range(4)]
    with concurrent.futures.ThreadPoolExecutor(len(orders)) as pool:
        results = list(pool.map(encodings, orders))
    assert all(result == results[0] for result in results)
    assert len(set(results[0].values())) == len(requests)
    assert results[0][7] == driver_encoding(*requests[7])


@pytest.mark.parametrize("offset,elem_type,dims,box,swizzle,message", [
    (8, rt.ElemType.BF16, [64, 64], [64, 64], rt.Swizzle.B128, r"base 0x[0-9a-f]+ is not 16-byte"),
    (0, rt.ElemType.F8E4M3, [100, 4], [16, 4], rt.Swizzle.NONE,
     r"the stride of dims\[1\], 100\.000 bytes .* is not a multiple of 16"),
    (0, rt.ElemType.F4E2M1, [200, 4], [128, 4], rt.Swizzle.B128,
     r"dims\[0\]=200 F4E2M1 elements is not a multiple of 128"),
    (16, rt.ElemType.F6E3M2, [256, 4], [128, 4], rt.Swizzle.B128, r"base 0x[0-9a-f]+ of F6E3M2 is not 32-byte"),
    (0, rt.ElemType.F6E2M3, [128, 4], [64, 4], rt.Swizzle.B128, r"F6E2M3 boxes are 128 elements wide"),
    (0, rt.ElemType.F4E2M1, [128, 4], [128, 4], rt.Swizzle.B64, r"swizzle 128B or none \(swizzle 64\)"),
    (0, rt.ElemType.F8E4M3, [1024, 4], [512, 4], rt.Swizzle.NONE, r"box\[0\]=512 is out of range 1\.\.256"),
    (0, rt.ElemType.F8E4M3, [1024, 512], [64, 300], rt.Swizzle.NONE,
     r"box\[1\]=300 is out of range 1\.\.256"),
    (0, rt.ElemType.BF16, [256, 64], [64, 64], rt.Swizzle.B64,
     "box\\[0\\]=64 BF16 elements is 128 bytes, more than the 64-byte swizzle span"),
    (0, rt.ElemType.F32, [256, 64], [2, 64], rt.Swizzle.NONE,
     r"box\[0\]=2 F32 elements is 8 bytes, not a multiple of 16"),
    (0, rt.ElemType.F8E4M3, [256], [64], rt.Swizzle.NONE, "rank 1 is out of range 2..5"),
    (0, rt.ElemType.F8E4M3, [16] * 6, [16] * 6, rt.Swizzle.NONE, "rank 6 is out of range 2..5"),
    (0, rt.ElemType.F8E4M3, [256, 0], [64, 1], rt.Swizzle.NONE, r"dims\[1\]=0 is out of range"),
    (0, 99, [256, 64], [64, 64], rt.Swizzle.NONE, "unknown element type 99"),
    (0, rt.ElemType.F8E4M3, [256, 64], [16, 64], 16, "swizzle 16 is not 0, 32, 64 or 128"),
])
def test_tensor_map_invalid_arguments(tensor, offset, elem_type, dims, box, swizzle, message):
    with pytest.raises(rt.MXRuntimeError, match=message) as info:
        rt.tensor_map(tensor + offset, elem_type, dims, box, swizzle)
    assert str(info.value).startswith("mxrtEncodeTensorMap: ")
    assert info.value.status is None


def test_tensor_map_driver_rejection(tensor):
    """What only the driver rejects is reported with the whole request.

    A 16 MiB box passes the documented checks; the driver refuses it (seen on
    H200 with driver 580).
    """
    with pytest.raises(rt.MXRuntimeError) as info:
        rt.tensor_map(tensor, rt.ElemType.F8E4M3, [256] * 3, [256] * 3, rt.Swizzle.NONE)
    assert str(info.value).startswith(
        "cuTensorMapEncodeTiled(F8E4M3, base 0x%x, dims [256, 256, 256], byte strides "
        "[256, 65536], box [256, 256, 256], swizzle 0B) failed with CUDA_ERROR_INVALID_VALUE"
        % tensor)


def test_tensor_map_c_contract():
    """The C contract itself: the map pointer back (NULL for a NULL map), 128 zero bytes where the
    encoding failed, and the reason as the sticky error."""
    lib, box = rt.load_library(), (ctypes.c_int32 * 2)(64, 64)
    dims = (ctypes.c_int64 * 2)(64, 64)
    storage, address = rt.tensor_map_storage(extra=rt.TENSOR_MAP_ALIGNMENT, fill=0xFF)
    assert lib.mxrtEncodeTensorMap(None, 256, rt.ElemType.F8E4M3, 2, dims, box, 0) is None
    assert rt.last_error().startswith("mxrtEncodeTensorMap: map is NULL")
    assert lib.mxrtEncodeTensorMap(address + 32, 256, rt.ElemType.F8E4M3, 2, dims, box, 0) == address + 32
    assert rt.last_error().startswith("mxrtEncodeTensorMap: map 0x%x is not 64-byte aligned" % (address + 32))
    assert lib.mxrtEncodeTensorMap(address, None, rt.ElemType.F8E4M3, 2, dims, box, 0) == address
    assert rt.last_error().startswith("mxrtEncodeTensorMap: base is NULL")
    assert not any(ctypes.string_at(address, rt.TENSOR_MAP_BYTES))
    assert lib.mxrtEncodeTensorMap(address, 256, rt.ElemType.F8E4M3, 2, None, box, 0) == address
    assert rt.last_error().startswith("mxrtEncodeTensorMap: dims is NULL")
