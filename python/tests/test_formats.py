"""mx.formats, the one table of element types: the runtime's enums equal MXRuntime.h's, every derived
table agrees with it, and the packed types pack and unpack in the documented bit order."""

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mx import compiler, dlpack, formats, ops, reference, runtime, tools

HEADER = Path(__file__).resolve().parents[2] / "include" / "mx" / "Runtime" / "MXRuntime.h"


def header_enum(prefix: str) -> dict[str, int]:
    """NAME -> value of every `MXRT_<prefix>_NAME = value` enumerator of MXRuntime.h."""
    text = HEADER.read_text()
    return {name: int(value) for name, value in re.findall(rf"\bMXRT_{prefix}_(\w+) = (\d+)", text)}


@pytest.mark.parametrize("enum, prefix", [(runtime.ElemType, "TYPE"), (runtime.ScaleMode, "SCALE"),
                                          (runtime.Layout, "LAYOUT"), (runtime.Swizzle, "SWIZZLE"),
                                          (runtime.Status, "ERROR")])
def test_runtime_enums_match_the_header(enum, prefix):
    expected = header_enum(prefix)
    assert expected, f"no MXRT_{prefix}_* enumerators found in {HEADER}"
    got = {member.name: member.value for member in enum}
    if prefix == "SWIZZLE":   # Swizzle.B32 is MXRT_SWIZZLE_32B
        got = {name if name == "NONE" else name[1:] + "B": value for name, value in got.items()}
    if prefix == "ERROR":     # Status.CUDA is MXRT_ERROR_CUDA; SUCCESS is MXRT_SUCCESS
        assert got.pop("SUCCESS") == 0 and "MXRT_SUCCESS = 0" in HEADER.read_text()
    assert got == expected


def test_every_runtime_type_has_one_row():
    codes = [f.runtime for f in formats.FORMATS if f.runtime]
    assert len({name for name, _ in codes}) == len({code for _, code in codes}) == len(codes)
    assert {name: code for name, code in codes} == header_enum("TYPE")


def test_derived_tables_follow_the_table():
    names = [f.name for f in formats.FORMATS]
    assert len(set(names)) == len(names) and len(formats.BY_DTYPE) == len(names)
    assert tuple(reference.ELEMENT_TYPES) == formats.ELEMENT_TYPES
    assert set(formats.ELEMENT_TYPES) == {"f8E4M3FN", "f8E5M2", "f6E3M2FN", "f6E2M3FN", "f4E2M1FN", "i8"}
    assert tools.NUMPY_DTYPES == compiler.NUMPY_DTYPES == {f.name: f.dtype for f in formats.FORMATS}
    assert compiler.TORCH_DTYPES == {f.name: f.torch for f in formats.FORMATS}
    assert dlpack.DL_TYPES == {f.name: f.dlpack for f in formats.FORMATS}
    assert runtime.NUMPY_DTYPES[runtime.ElemType.F6E3M2] == np.dtype(ml_dtypes.float6_e3m2fn)
    # uint8 carries several types and names none; int8 is MXINT8 data.
    assert "uint8" not in formats.TORCH_NAMES and formats.TORCH_NAMES["int8"] == "i8"
    for f in formats.FORMATS:
        if f.role == "element" and f.int_fraction_bits is None:
            assert f.bits == 8 * f.packed_bytes // f.packed_elements
            assert ml_dtypes.finfo(f.dtype).bits == f.bits


def test_element_limits():
    expected = {"f8E4M3FN": (448.0, 8, 0x7F), "f8E5M2": (57344.0, 15, 0x7F), "f6E3M2FN": (28.0, 4, 0),
                "f6E2M3FN": (7.5, 2, 0), "f4E2M1FN": (6.0, 2, 0), "i8": (127 / 64, 0, 0)}
    for elem, (maxfinite, e, nan_code) in expected.items():
        assert (reference.max_finite(elem), reference.emax(elem), reference.nan_block_code(elem)) == \
            (maxfinite, e, nan_code), elem


def test_fp6_bit_order():
    """Element 4i + j in bits 6j..6j+5 of the little-endian 24-bit word of bytes 3i..3i+2."""
    codes = np.array([[0x01, 0x02, 0x03, 0x3F, 0x20, 0x00, 0x15, 0x2A]], np.uint8)
    packed = formats.get("f6E3M2FN").pack(codes.view(ml_dtypes.float6_e3m2fn))
    words = [0x01 | 0x02 << 6 | 0x03 << 12 | 0x3F << 18, 0x20 | 0x00 << 6 | 0x15 << 12 | 0x2A << 18]
    expected = [(w >> (8 * j)) & 0xFF for w in words for j in range(3)]
    assert packed.tolist() == [expected]


@pytest.mark.parametrize("elem", ["f6E3M2FN", "f6E2M3FN", "f4E2M1FN"])
def test_pack_round_trip(elem, rng):
    fmt = formats.get(elem)
    codes = rng.integers(0, 1 << fmt.bits, (3, 5, 24), dtype=np.uint8)
    data = codes.view(fmt.dtype)
    packed = reference.pack(data)
    assert packed.dtype == np.uint8 and packed.shape == (3, 5, 24 * fmt.bits // 8)
    assert fmt.stored_shape(data.shape) == packed.shape and fmt.logical_shape(packed.shape) == data.shape
    np.testing.assert_array_equal(reference.unpack(packed, elem).view(np.uint8), codes)


def test_pack_rejects_partial_groups():
    with pytest.raises(ValueError, match="multiple of 4"):
        reference.pack(np.zeros((2, 6), ml_dtypes.float6_e2m3fn))
    with pytest.raises(TypeError, match="multiple of 3"):
        reference.unpack(np.zeros((2, 4), np.uint8), "f6E3M2FN")
    with pytest.raises(ValueError, match="unknown element type"):
        formats.get("f6E3M3")


def test_ops_element_types():
    x6 = np.zeros((2, 8), ml_dtypes.float6_e3m2fn)
    assert ops.element_type(x6) == "f6E3M2FN" and ops.logical_shape(x6, "f6E3M2FN") == (2, 8)
    assert ops.element_type(np.zeros(3, np.int8)) == "i8"
    with pytest.raises(TypeError, match="does not carry f6E2M3FN"):
        ops.element_type(x6, "f6E2M3FN")
