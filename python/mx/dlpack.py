"""mx.dlpack: DLPack in both directions, with ctypes only.

Importing reads a producer's `DLManagedTensor` (torch, cupy, jax, ...) without a copy; exporting hands
device memory that compiled code allocated to a consumer (torch) as a capsule whose deleter, in
libmx_runtime, frees it, so the consumer's tensor owns the memory. Element types DLPack has no code for in the consumers we
meet (FP8, E8M0, packed FP4 and FP6) travel as uint8 and are viewed as their own dtype on the other side.
"""

from __future__ import annotations

import ctypes

from .formats import FORMATS

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13

# MLIR element type -> (DLPack code, bits) of the array that carries it (mx.formats).
DL_TYPES = {f.name: f.dlpack for f in FORMATS}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_CAPSULE_NAME = b"dltensor"
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                                  ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


KDL_CUDA_LEGACY_STREAM = 1  # DLPack's code for CUDA's legacy default stream (0 is not allowed).


def stream_argument(tensor, stream: int | None):
    """What to pass `tensor.__dlpack__(stream=)` for use on CUstream `stream` (None or 0: the legacy
    default stream): the producer then orders that stream after its pending work on the tensor.
    Only CUDA tensors take a stream."""
    device_type, _ = tensor.__dlpack_device__()
    if device_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        return None
    return stream or KDL_CUDA_LEGACY_STREAM


class Imported:
    """A borrowed view of a producer's tensor: data address, shape, strides (None: row-major),
    device type and id, DLPack dtype. Keeps the producer's tensor and capsule alive. A CUDA tensor is
    asked for with the stream it will be used on (`stream`, a CUstream; None: the legacy default
    stream), so that its producer's pending writes come first."""

    def __init__(self, tensor, stream: int | None = None):
        self.capsule = tensor.__dlpack__(stream=stream_argument(tensor, stream))
        managed = DLManagedTensor.from_address(_capsule_pointer(self.capsule, _CAPSULE_NAME))
        dl = managed.dl_tensor
        self.owner = tensor
        self.data = (dl.data or 0) + dl.byte_offset
        self.shape = tuple(dl.shape[i] for i in range(dl.ndim))
        self.strides = tuple(dl.strides[i] for i in range(dl.ndim)) if dl.strides else None
        self.device_type, self.device_id = dl.device.device_type, dl.device.device_id
        self.dtype = (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)


def capsule(managed: int) -> object:
    """A "dltensor" capsule holding the DLManagedTensor at address `managed` (libmx_runtime's
    mxrtExportDLPack builds it for device memory that compiled code allocated; its deleter frees
    that memory stream-ordered when the consumer frees the tensor)."""
    return _capsule_new(managed, _CAPSULE_NAME, None)
