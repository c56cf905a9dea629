"""mx: the Python side of the mx MLIR project.

Modules (import the one you need; none is loaded eagerly, so that `mx.ptx` works without numpy):
  mx.reference  numpy + ml_dtypes oracle of the numerics (docs/numerics.md)
  mx.tools      run mx-opt / the CPU pipeline, compile GPU libraries ahead of time
  mx.runtime    ctypes binding of libmx_runtime (device memory, cuBLASLt, compiled functions)
  mx.ptx        PTX extraction from a lowered module
"""
