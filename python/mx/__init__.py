"""mx: Python side of the MXFP8 quantization project (numerical reference in mx.reference)."""

from . import reference

__all__ = ["reference"]
