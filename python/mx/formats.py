"""mx.formats: the one table of the element types that cross an mx boundary, one row per type.

Each row says how a type is held on every side: the MLIR name, the numpy / ml_dtypes dtype that holds one
element per array entry, the bits of one element, the torch dtypes that carry it, the DLPack type of the
array that carries it across the GPU boundary, its runtime code (`mxrtElemType`, MXRuntime.h) and its
storage packing. Every other table of the package (the reference's element and scale types, the
compiler's numpy and torch dtypes, the DLPack types, the runtime's `ElemType`, the ops' argument checks)
is derived from this one, so a new format is one row here (plus its numerics in mx.reference).

Packed types (FP4, FP6) hold `packed_elements` elements in `packed_bytes` bytes of device memory, element
0 of a group in the lowest bits of the little-endian group: FP4 two to a byte (element 2i in the low
nibble, PyTorch's `float4_e2m1fn_x2`), FP6 four to three bytes (element 4i + j in bits 6j..6j+5 of bytes
3i..3i+2). numpy holds them one element per byte; `pack` and `unpack` convert.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 0, 1, 2, 4


@dataclass(frozen=True)
class Format:
    """One type: `role` is "element" (quantized data), "scale" (block scales), "wide" (what quantize reads
    and dequantize and scaled_matmul write) or "other" (what else a compiled function may pass)."""
    name: str
    dtype: np.dtype
    role: str
    bits: int
    torch: tuple[str, ...]
    dlpack: tuple[int, int]
    runtime: tuple[str, int] | None = None
    packed_elements: int = 1
    packed_bytes: int = 1
    int_fraction_bits: int | None = None      # MXINT8: code c means c * 2**-int_fraction_bits

    @property
    def packed(self) -> bool:
        return self.packed_elements > 1

    def stored_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the memory holding a tensor of `shape` (-1 for a dynamic innermost extent)."""
        if not self.packed or not shape:
            return tuple(shape)
        last = shape[-1] // self.packed_elements * self.packed_bytes if shape[-1] >= 0 else -1
        return (*shape[:-1], last)

    def logical_shape(self, stored: tuple[int, ...]) -> tuple[int, ...]:
        """The tensor shape whose memory has shape `stored` (the inverse of stored_shape)."""
        if not self.packed or not stored:
            return tuple(stored)
        return (*stored[:-1], stored[-1] // self.packed_bytes * self.packed_elements)

    def pack(self, array: np.ndarray) -> np.ndarray:
        """An array of this type, one element per entry [..., n] -> its memory, uint8 [..., stored n]."""
        a = np.asarray(array)
        if a.dtype != self.dtype:
            raise TypeError(f"packing {self.name} needs a {self.dtype} array, got {a.dtype}")
        if a.ndim < 1 or a.shape[-1] % self.packed_elements:
            raise ValueError(f"packed {self.name} needs rank >= 1 and a last dim that is a multiple of "
                             f"{self.packed_elements}, got shape {a.shape}")
        if not self.packed:
            return a.view(np.uint8)
        codes = (a.view(np.uint8) & ((1 << self.bits) - 1)).astype(np.uint32)
        groups = codes.reshape(*a.shape[:-1], -1, self.packed_elements)
        word = np.zeros(groups.shape[:-1], np.uint32)
        for i in range(self.packed_elements):
            word |= groups[..., i] << (self.bits * i)
        parts = [(word >> (8 * j)) & 0xFF for j in range(self.packed_bytes)]
        return np.stack(parts, axis=-1).astype(np.uint8).reshape(self.stored_shape(a.shape))

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """Memory of this type, uint8 [..., stored n] -> the array of its elements (inverse of pack)."""
        p = np.asarray(packed)
        if p.dtype != np.dtype(np.uint8) or p.ndim < 1 or p.shape[-1] % self.packed_bytes:
            raise TypeError(f"unpacking {self.name} needs a uint8 array of rank >= 1 whose last dim is a "
                            f"multiple of {self.packed_bytes}, got {p.dtype} of shape {p.shape}")
        if not self.packed:
            return p.view(self.dtype)
        groups = p.reshape(*p.shape[:-1], -1, self.packed_bytes).astype(np.uint32)
        word = np.zeros(groups.shape[:-1], np.uint32)
        for j in range(self.packed_bytes):
            word |= groups[..., j] << (8 * j)
        codes = [(word >> (self.bits * i)) & ((1 << self.bits) - 1) for i in range(self.packed_elements)]
        out = np.stack(codes, axis=-1).astype(np.uint8).reshape(self.logical_shape(p.shape))
        return out.view(self.dtype)


def _np(dtype) -> np.dtype:
    return np.dtype(dtype)


_U8 = (KDL_UINT, 8)

FORMATS: tuple[Format, ...] = (
    Format("f8E4M3FN", _np(ml_dtypes.float8_e4m3fn), "element", 8, ("float8_e4m3fn", "uint8"), _U8,
           ("F8E4M3", 0)),
    Format("f8E5M2", _np(ml_dtypes.float8_e5m2), "element", 8, ("float8_e5m2", "uint8"), _U8, ("F8E5M2", 1)),
    Format("f6E3M2FN", _np(ml_dtypes.float6_e3m2fn), "element", 6, ("uint8",), _U8, ("F6E3M2", 8), 4, 3),
    Format("f6E2M3FN", _np(ml_dtypes.float6_e2m3fn), "element", 6, ("uint8",), _U8, ("F6E2M3", 9), 4, 3),
    Format("f4E2M1FN", _np(ml_dtypes.float4_e2m1fn), "element", 4, ("float4_e2m1fn_x2", "uint8"), _U8,
           ("F4E2M1", 6), 2, 1),
    Format("i8", _np(np.int8), "element", 8, ("int8",), (KDL_INT, 8), ("I8", 10), int_fraction_bits=6),
    Format("f8E8M0FNU", _np(ml_dtypes.float8_e8m0fnu), "scale", 8, ("float8_e8m0fnu", "uint8"), _U8,
           ("E8M0", 5)),
    Format("f32", _np(np.float32), "wide", 32, ("float32",), (KDL_FLOAT, 32), ("F32", 4)),
    Format("bf16", _np(ml_dtypes.bfloat16), "wide", 16, ("bfloat16",), (KDL_BFLOAT, 16), ("BF16", 2)),
    Format("f16", _np(np.float16), "wide", 16, ("float16",), (KDL_FLOAT, 16), ("F16", 3)),
    Format("f64", _np(np.float64), "other", 64, ("float64",), (KDL_FLOAT, 64)),
    Format("i16", _np(np.int16), "other", 16, ("int16",), (KDL_INT, 16)),
    Format("i32", _np(np.int32), "other", 32, ("int32",), (KDL_INT, 32)),
    Format("i64", _np(np.int64), "other", 64, ("int64",), (KDL_INT, 64)),
    # The order keys of a float max that mxrtAllReduce reduces (convert-shard-to-mxrt).
    Format("u32", _np(np.uint32), "other", 32, ("uint32",), (KDL_UINT, 32), ("U32", 7)),
)

BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
BY_DTYPE: dict[np.dtype, Format] = {f.dtype: f for f in FORMATS}

ELEMENT_TYPES: tuple[str, ...] = tuple(f.name for f in FORMATS if f.role == "element")
# f32 scales (FP8 blockwise, per-tensor) and E8M0 (MX); NVFP4's f8E4M3FN scales are an element type too.
SCALE_TYPES: tuple[str, ...] = ("f8E8M0FNU", "f32")
WIDE_TYPES: tuple[str, ...] = tuple(f.name for f in FORMATS if f.role == "wide")
# torch dtype name -> the MLIR type it is: uint8 carries several types (FP8 bytes, packed FP4 and FP6)
# and names none of them.
TORCH_NAMES: dict[str, str] = {f.torch[0]: f.name for f in FORMATS if f.torch[0] != "uint8"}


def get(name: str) -> Format:
    """The row of MLIR type `name`; ValueError for a type outside the table."""
    if name not in BY_NAME:
        raise ValueError(f"unknown element type {name!r}; expected one of {list(BY_NAME)}")
    return BY_NAME[name]
