"""The mx ops as Python functions: mx.quantize, mx.dequantize, mx.swizzle, mx.scaled_matmul.

Each call compiles its one-op program once per shape (mx.compile, cached on disk) and runs it where
its inputs live: numpy arrays on the CPU, torch CUDA tensors on the GPU. Here an MXFP8 GEMM
C = X . W^T is computed from numpy arrays and checked against the numpy reference model
(mx.reference): quantize, dequantize and swizzle bit for bit, the product to its tolerance (the
compiled code sums in f32, the reference in f64). With torch and a CUDA GPU, the same calls on torch
CUDA tensors are checked the same way.

Run from the repository root:
    .venv/bin/python examples/ops.py
"""

import numpy as np

import mx
from mx import reference

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 512)).astype(np.float32)   # activations [M, K]
w = rng.standard_normal((384, 512)).astype(np.float32)   # weights [N, K]


def same_bits(got, want):
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def check(name, got, want, exact=True):
    if exact:
        assert same_bits(got, want), f"{name} differs from mx.reference"
        print(f"  {name:<16} {str(got.shape):<20} {str(got.dtype):<14} equals mx.reference bit for bit")
    else:
        error = reference.matmul_error(got, want)
        assert error < 1e-5, f"{name}: relative error {error:.3g} against mx.reference"
        print(f"  {name:<16} {str(got.shape):<20} {str(got.dtype):<14} relative error {error:.1e} "
              "against mx.reference")


def expected():
    """What mx.reference says the steps below give."""
    xd, xs = reference.quantize(x, (1, 32))
    wd, ws = reference.quantize(w, (1, 32))
    xt, wt = reference.swizzle(xs), reference.swizzle(ws)
    return {"quantize data": xd, "quantize scales": xs, "dequantize": reference.dequantize(xd, xs, (1, 32)),
            "swizzle": xt, "scaled_matmul": reference.scaled_matmul(xd, xt, wd, wt, (1, 32), (1, 32))}


def run(x, w):
    """The mx ops on x and w (numpy arrays or torch tensors)."""
    xd, xs = mx.quantize(x, block=(1, 32))                 # E4M3 data, E8M0 scale per 1x32 block
    wd, ws = mx.quantize(w, block=(1, 32))
    xt, wt = mx.swizzle(xs), mx.swizzle(ws)                # the 128x4 tiles the GEMM reads
    return {"quantize data": xd, "quantize scales": xs, "dequantize": mx.dequantize(xd, xs, block=(1, 32)),
            "swizzle": xt, "scaled_matmul": mx.scaled_matmul(xd, xt, wd, wt, (1, 32), (1, 32))}


want = expected()
print("numpy on the CPU:")
got = run(x, w)
for name in want:
    check(name, got[name], want[name], exact=name != "scaled_matmul")
error = reference.matmul_error(got["scaled_matmul"], x.astype(np.float64) @ w.T.astype(np.float64))
print(f"  MXFP8 X . W^T against the f64 product of the unquantized inputs: relative error {error:.1e}")

try:
    import torch
    cuda = torch.cuda.is_available()
except ImportError:
    cuda = False
if not cuda:
    print("torch with CUDA is not available here: skipped the same ops on torch CUDA tensors")
else:
    print(f"torch CUDA tensors on {torch.cuda.get_device_name()}:")
    got = run(torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda())
    for name in want:
        tensor = got[name].cpu()   # FP8 results come as torch float8 tensors: compare their bytes
        host = tensor.view(torch.uint8).numpy() if tensor.element_size() == 1 else tensor.numpy()
        check(name, host.view(want[name].dtype), want[name], exact=name != "scaled_matmul")
