"""mx: the Python side of the mx MLIR project.

The functions most users want are attributes of the package, loaded on first use:
  mx.compile(program, target)   compile an mx program once (MLIR text or an mx.builder.Function) and
                                get a callable Kernel on numpy arrays / torch tensors (mx.compiler)
  mx.quantize, mx.dequantize, mx.swizzle, mx.unswizzle, mx.scaled_matmul, mx.column_sum
                                the ops on tensors, compiled per shape (mx.ops); types as MLIR
                                names, numpy / ml_dtypes or torch dtypes; block=32 is (1, 32)
Modules (none is loaded eagerly, so that `mx.ptx` works without numpy):
  mx.reference  numpy + ml_dtypes oracle of the numerics (docs/numerics.md)
  mx.formats    the one table of element types (dtypes, packing, runtime and DLPack codes)
  mx.builder    write an mx program in Python
  mx.compiler   compile-once Kernels and their disk cache
  mx.ops        the high-level functions above, and their *_kernel specializations
  mx.torch      mx.torch.Linear, a drop-in torch.nn.Linear on mx kernels
  mx.tools      run mx-opt / the CPU pipeline, compile libraries ahead of time
  mx.runtime    ctypes binding of libmx_runtime (device memory, cuBLASLt, compiled functions)
  mx.toolchain  where mx-opt, the LLVM tools and libmx_runtime are
  mx.ptx        PTX extraction from a lowered module
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {"compile": "compiler", "Kernel": "compiler", "CompileError": "compiler",
            "quantize": "ops", "dequantize": "ops", "swizzle": "ops", "unswizzle": "ops",
            "scaled_matmul": "ops", "column_sum": "ops"}
_MODULES = ("builder", "compiler", "dlpack", "ops", "ptx", "reference", "runtime", "toolchain", "tools",
            "torch")
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    """The lazy attributes too, so that dir(mx), completion and help(mx) show the API."""
    return sorted({*globals(), *_EXPORTS, *_MODULES})
