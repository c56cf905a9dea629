"""ctypes binding to libmx_runtime: device buffers, cuBLASLt scaled matmul, TMA maps, MLIR calls.

The library is found as mx.toolchain says ($MX_RUNTIME_LIB, else the build
tree's lib/ or lib/Runtime), and is loaded with
RTLD_GLOBAL so that compiled MLIR libraries loaded afterwards (load_compiled)
resolve their mgpu* calls against it. Every mxrt* status is checked: a failure
raises MXRuntimeError (a RuntimeError) carrying mxrtGetLastError()'s text,
which names the CUDA/cuBLAS call, its status and the device. Memory helpers
are synchronous and ordered with the legacy default stream, which is also the
stream scaled_matmul uses unless given another one. Element, scale-mode and
swizzle enums mirror include/mx/Runtime/MXRuntime.h.

Programs partitioned over several GPUs (one process per GPU) call NCCL
through the runtime: set_device() picks the process's GPU and
init_process_group() makes its communicator, once per process, from a
unique id that one process creates and the others read from a file (under
torchrun, one named after its rendezvous); the runtime loads NCCL itself,
from $MX_NCCL_LIBRARY, else the nvidia-nccl wheel that torch uses when it is
installed, else libnccl.so.2 on the loader's path. all_gather, all_gather_placed (a chunk of every
rank's part at its place, on the communicator's side stream), join_collectives and collective_group
call the runtime's collectives on raw device pointers (torch's data_ptr()), as compiled code does.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import importlib.util
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from mx import dlpack, formats, toolchain

__all__ = [
    "ElemType", "ScaleMode", "Swizzle", "Status", "MXRuntimeError", "GPUUnavailableError", "DeviceBuffer", "MemRef",
    "load_library", "load_compiled", "last_error", "device_available", "compute_capability",
    "synchronize", "scale_nbytes", "scaled_matmul", "tensor_map", "call_mlir_function",
    "set_device", "unique_id", "init_process_group", "destroy_process_group", "process_group",
    "all_gather", "all_gather_placed", "join_collectives", "collective_group",
]


# mxrtElemType, from the rows of mx.formats that have a runtime code: E8M0 is scale bytes (only tensor_map
# takes it); U32 the order keys of a float max (mxrtAllReduce); F4E2M1, F6E3M2 and F6E2M3 are
# packed (mx.formats says how).
ElemType = enum.IntEnum("ElemType", {f.runtime[0]: f.runtime[1] for f in formats.FORMATS if f.runtime})


class ScaleMode(enum.IntEnum):
    TENSOR_F32 = 0
    VEC32_UE8M0 = 1
    VEC128_F32 = 2
    BLK128X128_F32 = 3
    VEC16_UE4M3 = 4
    VEC128_F32_KB_ROWS = 5


class Layout(enum.IntEnum):
    """How a GEMM operand is stored: [rows, K] or [K, rows] (mxrtOperandLayout)."""
    K_CONTIGUOUS = 0
    K_OUTER = 1


class Swizzle(enum.IntEnum):
    """TMA swizzle modes: bytes of the box's inner dimension that one pattern spans."""
    NONE = 0
    B32 = 32
    B64 = 64
    B128 = 128


class Status(enum.IntEnum):
    SUCCESS = 0
    INVALID_ARGUMENT = 1
    CUDA = 2
    CUBLAS = 3
    NOT_SUPPORTED = 4
    NCCL = 5


ARGUMENT_ALIGNMENT = 16  # MXRT_ARGUMENT_ALIGNMENT: what compiled GPU functions take as device arguments
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGNMENT = 128, 64  # A CUtensorMap (mxrtEncodeTensorMap).

NUMPY_DTYPES = {ElemType[f.runtime[0]]: f.dtype for f in formats.FORMATS if f.runtime}
_FORMATS = {ElemType[f.runtime[0]]: f for f in formats.FORMATS if f.runtime}


class ResultLayout(ctypes.Structure):
    """mxrtResultLayout: how mxrtInvoke exports one result to DLPack."""
    _fields_ = [("rank", ctypes.c_int32), ("storedRank", ctypes.c_int32),
                ("storedShape", ctypes.POINTER(ctypes.c_int64)), ("code", ctypes.c_uint8),
                ("bits", ctypes.c_uint8), ("itemBytes", ctypes.c_int32)]


class MXRuntimeError(RuntimeError):
    """An mxrt* call failed; `status` is the Status it returned (None for tensor_map)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = Status(status) if status in Status._value2member_map_ else status


class GPUUnavailableError(OSError):
    """This machine cannot run GPU code: there is no NVIDIA driver (libcuda.so.1) for libmx_runtime."""


_lib: ctypes.CDLL | None = None

_i32, _i64, _u64, _ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p
_SIGNATURES = {
    "mxrtGetLastError": (ctypes.c_char_p, []),
    "mxrtMalloc": (_i32, [ctypes.POINTER(_ptr), _u64]),
    "mxrtFree": (_i32, [_ptr]),
    "mxrtFreeAsync": (_i32, [_ptr, _ptr]),
    "mxrtSetCallStream": (_i32, [_ptr, _i32]),
    "mxrtMemcpyHtoD": (_i32, [_ptr, _ptr, _u64]),
    "mxrtMemcpyDtoH": (_i32, [_ptr, _ptr, _u64]),
    "mxrtMemcpyDtoD": (_i32, [_ptr, _ptr, _u64]),
    "mxrtMemset8": (_i32, [_ptr, ctypes.c_uint8, _u64]),
    "mxrtSynchronize": (_i32, []),
    "mxrtEmptyCache": (_i32, []),
    "mxrtInvoke": (_i32, [_ptr, _ptr, _i32, ctypes.POINTER(_ptr), _ptr, _i32, ctypes.c_void_p,
                          ctypes.POINTER(_ptr), ctypes.POINTER(_i32)]),
    "mxrtTakeLastCallStatus": (_i32, []),
    "mxrtDeviceComputeCapability": (_i32, [ctypes.POINTER(ctypes.c_int)] * 2),
    "mxrtScaledMatmul": (_i32, [_i64, _i64, _i64] + [_ptr, _i32, _i32, _ptr, _i32] * 2
                         + [_ptr, _ptr, _i32, _ptr]),
    "mxrtEncodeTensorMap": (_ptr, [_ptr, _ptr, _i32, _i32, ctypes.POINTER(_i64), ctypes.POINTER(_i32),
                                   _i32]),
    "mgpuSetDefaultDevice": (None, [_i32]),
    "mxrtCommUniqueId": (_i32, [_ptr]),
    "mxrtCommInit": (_i32, [_ptr, _i32, _i32, _i32]),
    "mxrtCommDestroy": (_i32, []),
    "mxrtCommRank": (_i32, [ctypes.POINTER(_i32)] * 2),
    "mxrtGroupStart": (_i32, []),
    "mxrtGroupEnd": (_i32, []),
    "mxrtAllGather": (_i32, [_ptr, _ptr, _u64, _i32, _ptr]),
    "mxrtAllGatherPlaced": (_i32, [_ptr, _ptr, _u64, _u64, _u64, _i32, _ptr]),
    "mxrtCollectivesJoin": (_i32, [_ptr]),
}

UNIQUE_ID_BYTES = 128  # MXRT_UNIQUE_ID_BYTES, NCCL's ncclUniqueId.
_communicator_size = 0  # the size of the communicator init_process_group made (0: none)


def load_library() -> ctypes.CDLL:
    """Loads libmx_runtime once; raises OSError if it is missing, GPUUnavailableError (an OSError)
    where there is no NVIDIA driver."""
    global _lib
    if _lib is None:
        candidates = toolchain.runtime_library_candidates()
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise OSError("libmx_runtime.so not found (set MX_RUNTIME_LIB or build it); "
                          f"looked at {', '.join(map(str, candidates))}")
        try:
            lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            if "libcuda" not in str(error):
                raise
            raise GPUUnavailableError(
                "this machine has no NVIDIA driver (libcuda.so.1 does not load), so code compiled for a GPU "
                "target (sm_90a, sm_100a) cannot run here; compiling it works anywhere (mx.compile loads "
                f"nothing until the first call). Loading {path}: {error}") from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
    return _lib


def load_compiled(path: str | os.PathLike) -> ctypes.CDLL:
    """Loads a compiled MLIR shared library after the runtime it calls into.

    Its global constructors load the embedded GPU binaries through
    mgpuModuleLoad, so the runtime must already be loaded globally.
    """
    load_library()
    return ctypes.CDLL(os.fspath(path))


def last_error() -> str:
    return load_library().mxrtGetLastError().decode(errors="replace")


def _check(status: int, call: str) -> None:
    if status != Status.SUCCESS:
        raise MXRuntimeError(status, last_error() or f"{call} failed with status {status}")


def device_available() -> bool:
    """True when libmx_runtime, the CUDA driver and a GPU are all usable; never raises."""
    try:
        compute_capability()
    except (OSError, MXRuntimeError):
        return False
    return True


def compute_capability() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(load_library().mxrtDeviceComputeCapability(ctypes.byref(major), ctypes.byref(minor)),
           "mxrtDeviceComputeCapability")
    return major.value, minor.value


def synchronize() -> None:
    _check(load_library().mxrtSynchronize(), "mxrtSynchronize")


def empty_cache() -> None:
    """Gives the memory that the runtime keeps cached back to the driver (after synchronizing the
    device): its stream-ordered pool's, and the idle NCCL-registered buffers of gathers
    (mxrtCollectiveAlloc), as torch.cuda.empty_cache() does for torch's allocator."""
    _check(load_library().mxrtEmptyCache(), "mxrtEmptyCache")


def _copy_to_host(ptr: int, available: int | None, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Copies a dense array from device address `ptr`; packed types (FP4, FP6) are read packed, as
    device memory holds them, and unpacked. `available` bytes, when known, bound the read."""
    fmt = formats.BY_DTYPE.get(np.dtype(dtype))
    packed = fmt is not None and fmt.packed
    if packed and (not shape or shape[-1] % fmt.packed_elements):
        raise ValueError(f"packed {fmt.name} needs an innermost extent that is a multiple of "
                         f"{fmt.packed_elements}, got shape {tuple(shape)}")
    out = np.empty(fmt.stored_shape(tuple(shape)) if packed else shape, np.uint8 if packed else dtype)
    if available is not None and out.nbytes > available:
        raise ValueError(f"{out.nbytes} bytes requested from a {available}-byte buffer")
    _check(load_library().mxrtMemcpyDtoH(out.ctypes.data, ptr, out.nbytes), "mxrtMemcpyDtoH")
    return fmt.unpack(out) if packed else out


def _stored(array: np.ndarray) -> np.ndarray:
    """The bytes device memory holds for `array`: packed types packed, others as they are."""
    fmt = formats.BY_DTYPE.get(array.dtype)
    return fmt.pack(array) if fmt is not None and fmt.packed else array


class DeviceBuffer:
    """An owned device allocation, freed by close(), `with` or garbage collection.

    `dtype` and `shape` are optional metadata used as defaults by to_numpy()
    and MemRef.of(); the allocation itself is untyped bytes.
    """

    def __init__(self, nbytes: int, dtype=None, shape: Sequence[int] | None = None):
        self.nbytes = int(nbytes)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.shape = None if shape is None else tuple(int(d) for d in shape)
        self._ptr = 0
        ptr = _ptr()
        _check(load_library().mxrtMalloc(ctypes.byref(ptr), self.nbytes), "mxrtMalloc")
        self._ptr = ptr.value or 0

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> DeviceBuffer:
        """A buffer holding `array`; packed types (FP4, FP6) are uploaded packed, as device memory holds
        them."""
        array = np.ascontiguousarray(array)
        stored = _stored(array)
        buf = cls(stored.nbytes, array.dtype, array.shape)
        buf.copy_from(stored)
        return buf

    @classmethod
    def zeros(cls, shape: Sequence[int], dtype) -> DeviceBuffer:
        dtype = np.dtype(dtype)
        buf = cls(math.prod(shape) * dtype.itemsize, dtype, shape)
        _check(load_library().mxrtMemset8(buf.ptr, 0, buf.nbytes), "mxrtMemset8")
        return buf

    @property
    def ptr(self) -> int:
        if not self._ptr and self.nbytes:
            raise ValueError("DeviceBuffer is closed")
        return self._ptr

    def copy_from(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        if array.nbytes != self.nbytes:
            raise ValueError(f"array has {array.nbytes} bytes, buffer {self.nbytes}")
        _check(load_library().mxrtMemcpyHtoD(self.ptr, array.ctypes.data, self.nbytes),
               "mxrtMemcpyHtoD")

    def clone(self) -> DeviceBuffer:
        """A new buffer with a device-to-device copy of this one's bytes."""
        copy = DeviceBuffer(self.nbytes, self.dtype, self.shape)
        _check(load_library().mxrtMemcpyDtoD(copy.ptr, self.ptr, self.nbytes), "mxrtMemcpyDtoD")
        return copy

    def to_numpy(self, dtype=None, shape: Sequence[int] | None = None) -> np.ndarray:
        if dtype is None:
            dtype = self.dtype if self.dtype is not None else np.uint8
        dtype = np.dtype(dtype)
        if shape is None:
            same_type = self.shape is not None and dtype == self.dtype
            fmt = formats.BY_DTYPE.get(dtype)
            shape = self.shape if same_type else (
                fmt.logical_shape((self.nbytes,)) if fmt is not None and fmt.packed
                else (self.nbytes // dtype.itemsize,))
        return _copy_to_host(self.ptr, self.nbytes, shape, dtype)

    def close(self) -> None:
        ptr, self._ptr = self._ptr, 0
        if ptr:
            _check(load_library().mxrtFree(ptr), "mxrtFree")

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # Interpreter shutdown or a dead context: nothing to report to.
            pass


def scale_nbytes(mode: ScaleMode, rows: int, k: int) -> int:
    """Bytes of the scales of one [rows, k] operand in `mode` (MXRuntime.h layouts)."""
    kb = -(-k // 128)
    if mode == ScaleMode.TENSOR_F32:
        return 4
    if mode == ScaleMode.VEC32_UE8M0:  # 128x4 tiles: rows to 128, k/32 to 4 (= kb * 4).
        return -(-rows // 128) * 128 * kb * 4
    if mode == ScaleMode.VEC16_UE4M3:  # the same tiles over k/16
        return -(-rows // 128) * 128 * -(-k // 64) * 4
    if mode in (ScaleMode.VEC128_F32, ScaleMode.VEC128_F32_KB_ROWS):
        return rows * kb * 4
    if mode == ScaleMode.BLK128X128_F32:
        return -(-rows // 128) * kb * 4
    raise ValueError(f"unknown scale mode {mode}")


def scaled_matmul(m: int, n: int, k: int,
                  a: DeviceBuffer, a_type: ElemType, a_scales: DeviceBuffer, a_scale_mode: ScaleMode,
                  b: DeviceBuffer, b_type: ElemType, b_scales: DeviceBuffer, b_scale_mode: ScaleMode,
                  out: DeviceBuffer, out_type: ElemType, stream: int | None = None, *,
                  a_layout: Layout = Layout.K_CONTIGUOUS, b_layout: Layout = Layout.K_CONTIGUOUS,
                  alpha: DeviceBuffer | None = None) -> None:
    """out[m, n] = alpha * deq(a)[m, k] @ deq(b)[n, k].T on cuBLASLt (see mxrtScaledMatmul); `alpha`
    is a device f32 (NVFP4's tensor-scale product) or None for 1.

    Buffer sizes are checked here, since the GPU would read past a short one.
    """
    def data_bytes(elem_type, rows):
        return _FORMATS[ElemType(elem_type)].stored_shape((rows * k,))[0]
    needed = {
        "a": (a, data_bytes(a_type, m)), "b": (b, data_bytes(b_type, n)),
        "out": (out, m * n * NUMPY_DTYPES[ElemType(out_type)].itemsize),
        "a_scales": (a_scales, scale_nbytes(ScaleMode(a_scale_mode), m, k)),
        "b_scales": (b_scales, scale_nbytes(ScaleMode(b_scale_mode), n, k)),
    }
    for name, (buf, nbytes) in needed.items():
        if buf.nbytes < nbytes:
            raise ValueError(f"{name} has {buf.nbytes} bytes, needs {nbytes}")
    if alpha is not None and alpha.nbytes < 4:
        raise ValueError(f"alpha has {alpha.nbytes} bytes, needs 4")
    _check(load_library().mxrtScaledMatmul(
        m, n, k, a.ptr, int(a_type), int(a_layout), a_scales.ptr, int(a_scale_mode),
        b.ptr, int(b_type), int(b_layout), b_scales.ptr, int(b_scale_mode),
        None if alpha is None else alpha.ptr, out.ptr, int(out_type), stream), "mxrtScaledMatmul")


def tensor_map_storage(extra: int = 0, fill: int = 0) -> tuple[ctypes.Array, int]:
    """Host memory for a CUtensorMap: a buffer of TENSOR_MAP_BYTES + `extra` bytes of `fill` from a
    TENSOR_MAP_ALIGNMENT-aligned address, as (the buffer, which must stay alive, that address)."""
    storage = ctypes.create_string_buffer(bytes([fill]) * (TENSOR_MAP_BYTES + extra + TENSOR_MAP_ALIGNMENT))
    return storage, ctypes.addressof(storage) + -ctypes.addressof(storage) % TENSOR_MAP_ALIGNMENT


def tensor_map(ptr: int, elem_type: ElemType, dims: Sequence[int], box: Sequence[int],
               swizzle: Swizzle) -> bytes:
    """The 128 bytes of the CUtensorMap of a dense row-major tensor (see mxrtEncodeTensorMap),
    encoded for the current device, what a kernel takes as a __grid_constant__ parameter.

    dims and box are in elements and list the dimensions INNERMOST FIRST, as in the C ABI (the
    reverse of a numpy shape). mxrtEncodeTensorMap returns no status (a failed map is all zero), so
    a failure raises MXRuntimeError with `status` None and the runtime's message.
    """
    rank = len(dims)
    if len(box) != rank:  # The runtime reads `rank` entries of each.
        raise ValueError(f"box {tuple(box)} and dims {tuple(dims)} differ in rank")
    storage, address = tensor_map_storage()
    load_library().mxrtEncodeTensorMap(address, ptr, int(elem_type), rank, (_i64 * rank)(*dims),
                                       (_i32 * len(box))(*box), int(swizzle))
    encoded = ctypes.string_at(address, TENSOR_MAP_BYTES)
    if not any(encoded):
        raise MXRuntimeError(None, last_error() or "mxrtEncodeTensorMap failed")
    return encoded


_DESCRIPTORS: dict[int, type[ctypes.Structure]] = {}


def _descriptor_type(rank: int) -> type[ctypes.Structure]:
    """ctypes layout of MLIR's ranked memref descriptor of the given rank."""
    if rank not in _DESCRIPTORS:
        _DESCRIPTORS[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": [
            ("allocated", _ptr), ("aligned", _ptr), ("offset", _i64),
            ("sizes", _i64 * rank), ("strides", _i64 * rank)]})
    return _DESCRIPTORS[rank]


class MemRef:
    """A ranked memref: data pointer, shape, strides (elements; row-major by default)."""

    def __init__(self, ptr: int, shape: Sequence[int], strides: Sequence[int] | None = None,
                 offset: int = 0, allocated: int | None = None):
        self.aligned, self.shape, self.offset = int(ptr), tuple(int(d) for d in shape), int(offset)
        self.allocated = self.aligned if allocated is None else int(allocated)
        if strides is None:
            strides = [math.prod(self.shape[i + 1:]) for i in range(len(self.shape))]
        self.strides = tuple(int(s) for s in strides)

    @classmethod
    def from_dlpack(cls, tensor, stream: int | None = None) -> MemRef:
        """A view of any CUDA tensor that speaks DLPack (torch, cupy, jax, ...), without a copy.

        `stream` is the CUDA stream (a CUstream handle) the memref will be used on, which the
        producer orders after its pending work on the tensor, as DLPack's `__dlpack__(stream=)`
        promises; None is the legacy default stream, which a compiled function called in default mode
        (call_mlir_function) orders itself after. The returned MemRef keeps the producer's tensor
        alive; strides are taken as given.
        """
        view = dlpack.Imported(tensor, stream)
        if view.device_type not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
            raise ValueError(f"DLPack tensor is on device type {view.device_type}, not CUDA")
        memref = cls(view.data, view.shape, view.strides)
        memref.owner = view
        return memref

    @classmethod
    def of(cls, buf: DeviceBuffer, shape: Sequence[int] | None = None) -> MemRef:
        shape = shape if shape is not None else buf.shape
        if shape is None:
            raise ValueError("DeviceBuffer has no shape; pass one")
        return cls(buf.ptr, shape)

    def descriptor(self) -> ctypes.Structure:
        desc = _descriptor_type(len(self.shape))()
        desc.allocated, desc.aligned, desc.offset = self.allocated, self.aligned, self.offset
        desc.sizes[:], desc.strides[:] = self.shape, self.strides
        return desc

    @classmethod
    def from_descriptor(cls, desc: ctypes.Structure) -> MemRef:
        return cls(desc.aligned or 0, list(desc.sizes), list(desc.strides), desc.offset,
                   desc.allocated or 0)

    def to_numpy(self, dtype) -> np.ndarray:
        """Copies a row-major contiguous device memref to the host."""
        dtype = np.dtype(dtype)
        if self.strides != MemRef(0, self.shape).strides:
            raise ValueError(f"memref strides {self.strides} are not row-major contiguous")
        fmt = formats.BY_DTYPE.get(dtype)
        if fmt is not None and fmt.packed and self.offset:
            raise ValueError(f"a packed {fmt.name} memref must start at its aligned pointer")
        return _copy_to_host(self.aligned + self.offset * dtype.itemsize, None, self.shape, dtype)

    def free(self) -> None:
        """Frees a result allocated by gpu.alloc (mgpuMemAlloc); not host memory."""
        _check(load_library().mxrtFree(self.allocated), "mxrtFree")


def call_mlir_function(lib: ctypes.CDLL, name: str, args: Sequence,
                       result_ranks: Sequence[int] = ()) -> list[MemRef]:
    """Calls `_mlir_ciface_<name>` of a function compiled with llvm.emit_c_interface.

    args, in order: a DeviceBuffer (passed as a row-major memref of its shape),
    a MemRef (its descriptor is passed by pointer), or a ctypes scalar such as
    ctypes.c_int64(n) or ctypes.c_float(x) passed by value (plain Python
    numbers are rejected: their C type would be a guess). result_ranks lists
    the ranks of the function's results, which must all be ranked memrefs:
    MLIR then returns them through a pointer passed as the first argument
    (one descriptor, or a struct of descriptors for several). Unranked
    memrefs and scalar results are not supported. Results are returned as
    MemRefs and not freed (use MemRef.free for gpu.alloc memory). Errors
    recorded by the runtime during the call (it cannot return a status to
    compiled code) are raised as MXRuntimeError with the call's status, after
    the results the call allocated are freed: a device argument that is not
    16-byte aligned, for one, is refused before anything of the call is
    launched (INVALID_ARGUMENT).
    """
    fn = getattr(lib, "_mlir_ciface_" + name)
    fn.restype, fn.argtypes = None, None
    call_args, keep_alive = [], []
    if len(result_ranks) == 1:
        result = _descriptor_type(result_ranks[0])()
    elif result_ranks:
        result = type("Results", (ctypes.Structure,), {"_fields_": [
            (f"r{i}", _descriptor_type(r)) for i, r in enumerate(result_ranks)]})()
    if result_ranks:
        call_args.append(ctypes.byref(result))
    for arg in args:
        if isinstance(arg, DeviceBuffer):
            arg = MemRef.of(arg)
        if isinstance(arg, MemRef):
            desc = arg.descriptor()
            keep_alive.append(desc)
            call_args.append(ctypes.byref(desc))
        elif isinstance(arg, ctypes._SimpleCData):
            call_args.append(arg)
        else:
            raise TypeError(f"unsupported argument {arg!r}: pass a DeviceBuffer, MemRef "
                            "or ctypes scalar")
    library = load_library()
    last_error()  # Drop errors from before the call.
    library.mxrtTakeLastCallStatus()
    fn(*call_args)
    message, status = last_error(), library.mxrtTakeLastCallStatus()
    if len(result_ranks) == 1:
        results = [MemRef.from_descriptor(result)]
    else:
        results = [MemRef.from_descriptor(getattr(result, f"r{i}")) for i in range(len(result_ranks))]
    if message:
        # The results of a failed call are garbage: free what it allocated (default mode waited for
        # its work), not what it was given.
        given = {desc.allocated for desc in keep_alive}
        for allocated in {r.allocated for r in results} - given - {0}:
            library.mxrtFree(allocated)
        last_error()
        raise MXRuntimeError(status or Status.CUDA, message)
    return results


def set_device(ordinal: int) -> None:
    """Makes GPU `ordinal` the default device of the calling thread (mgpuSetDefaultDevice): the one
    compiled functions, device buffers and the communicator use. One GPU per process: call it first."""
    load_library().mgpuSetDefaultDevice(int(ordinal))


def _point_at_nccl() -> None:
    """Sets $MX_NCCL_LIBRARY to the nvidia-nccl wheel's library (torch's NCCL: nvidia/nccl/lib, where
    the cu12 and cu13 wheels both put it) when it is installed and the variable is unset; the runtime
    reads it when it first loads NCCL."""
    if os.environ.get("MX_NCCL_LIBRARY"):
        return
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except ModuleNotFoundError:
        return
    for location in (spec.submodule_search_locations or []) if spec else []:
        library = Path(location) / "lib" / "libnccl.so.2"
        if library.is_file():
            os.environ["MX_NCCL_LIBRARY"] = str(library)
            return


def unique_id() -> bytes:
    """A new NCCL unique id, which one process makes and hands to the others (init_process_group)."""
    _point_at_nccl()
    buf = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
    _check(load_library().mxrtCommUniqueId(buf), "mxrtCommUniqueId")
    return buf.raw


def _torchrun_id_file() -> Path | None:
    """Where the processes of one torchrun job share the unique id: a file named after the job's
    rendezvous (its master address and port), or None outside torchrun."""
    address, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not (address and port):
        return None
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return Path(tempfile.gettempdir()) / f"mx-nccl-{run}-{address}-{port}.id"


def _exchange_unique_id(path: Path, rank: int, timeout: float) -> bytes:
    """Rank 0 writes a new unique id to `path` (atomically); the others wait for it, for at most
    `timeout` seconds. A path must serve one job only: a stale file would hand out an old id."""
    if rank == 0:
        uid = unique_id()
        partial = path.with_name(path.name + f".{os.getpid()}.tmp")
        partial.write_bytes(uid)
        os.replace(partial, path)
        return uid
    deadline = time.monotonic() + timeout
    while not path.is_file() or path.stat().st_size != UNIQUE_ID_BYTES:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: no NCCL unique id appeared in {path} within {timeout} s "
                               "(rank 0 writes it in init_process_group)")
        time.sleep(0.01)
    return path.read_bytes()


def init_process_group(rank: int | None = None, size: int | None = None, *, device: int | None = None,
                       uid: bytes | None = None, id_file: str | os.PathLike | None = None,
                       timeout: float = 300.0) -> None:
    """Makes this process rank `rank` of `size` in the job's NCCL communicator (mxrtCommInit), on GPU
    `device`, once per process. Under torchrun every argument has a default: RANK, WORLD_SIZE,
    LOCAL_RANK, and an id file named after the job's rendezvous. Otherwise pass the unique id (`uid`,
    from unique_id() in one process) or an `id_file` that rank 0 writes and the others read. Every
    collective of the communicator, this setup included, fails rather than waits beyond `timeout`
    seconds."""
    rank = int(os.environ["RANK"]) if rank is None else rank
    size = int(os.environ["WORLD_SIZE"]) if size is None else size
    if device is None:
        device = int(os.environ.get("LOCAL_RANK", rank))
    set_device(device)
    _point_at_nccl()
    if uid is None:
        path = Path(id_file) if id_file is not None else _torchrun_id_file()
        if path is None:
            raise ValueError("init_process_group needs `uid` or `id_file` outside torchrun")
        uid = _exchange_unique_id(path, rank, timeout)
    if len(uid) != UNIQUE_ID_BYTES:
        raise ValueError(f"a unique id has {UNIQUE_ID_BYTES} bytes, got {len(uid)}")
    _check(load_library().mxrtCommInit(ctypes.create_string_buffer(uid, UNIQUE_ID_BYTES), size, rank,
                                       max(1, math.ceil(timeout))), "mxrtCommInit")
    global _communicator_size
    _communicator_size = size


def destroy_process_group() -> None:
    """Destroys this process's communicator (after its pending collectives)."""
    global _communicator_size
    _communicator_size = 0
    _check(load_library().mxrtCommDestroy(), "mxrtCommDestroy")


def process_group() -> tuple[int, int]:
    """(size, rank) of this process's communicator."""
    size, rank = ctypes.c_int32(), ctypes.c_int32()
    _check(load_library().mxrtCommRank(ctypes.byref(size), ctypes.byref(rank)), "mxrtCommRank")
    return size.value, rank.value


def _group_size() -> int:
    """The size of the communicator that init_process_group made, or 0 without one: the collective then
    fails with the runtime's reason (NCCL missing, no communicator). Kept here because mxrtCommRank
    fails inside an open collective group."""
    return _communicator_size


def all_gather(send: int, recv: int, nbytes: int, stream: int | None = None) -> None:
    """mxrtAllGather: `recv` (device pointer) = the `nbytes` at `send` of every rank, in rank order, on
    `stream` (a CUstream as an int; None: the call stream in call-stream mode, else the legacy default
    stream, waited for)."""
    _check(load_library().mxrtAllGather(send, recv, nbytes, _group_size(), stream), "mxrtAllGather")


def all_gather_placed(send: int, recv: int, chunk_bytes: int, rank_stride: int, offset: int,
                      stream: int | None = None) -> None:
    """mxrtAllGatherPlaced: bytes [r * rank_stride + offset, + chunk_bytes) of `recv` = rank r's
    `chunk_bytes` at `send` (in place where `send` is this rank's own place in `recv`), on the
    communicator's side stream after the work on `stream` so far. Nothing may read `recv`, or free
    `send` or `recv`, before join_collectives()."""
    _check(load_library().mxrtAllGatherPlaced(send, recv, chunk_bytes, rank_stride, offset,
                                              _group_size(), stream), "mxrtAllGatherPlaced")


def join_collectives(stream: int | None = None) -> None:
    """mxrtCollectivesJoin: orders `stream` after the side stream's collectives so far (None outside
    call-stream mode: waits for them)."""
    _check(load_library().mxrtCollectivesJoin(stream), "mxrtCollectivesJoin")


@contextlib.contextmanager
def collective_group():
    """The collectives called inside as one NCCL group (mxrtGroupStart/End), run at the end."""
    library = load_library()
    _check(library.mxrtGroupStart(), "mxrtGroupStart")
    try:
        yield
    finally:
        _check(library.mxrtGroupEnd(), "mxrtGroupEnd")
