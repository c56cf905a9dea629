"""One mx.torch.Linear step against float64, for test_torch.py (the CPU pipeline) and
test_gpu_torch.py (a GPU): forward, dgrad and wgrad of a layer against float64 products of operands
quantized by mx.reference the way the recipe quantizes them (the spec's GEMM tolerance, section 5),
and the forward against torch.nn.Linear in float64 (the quantization error).
"""

from __future__ import annotations

import numpy as np

from mx import recipes, reference

LINEAR = {"m": 256, "k": 512, "n": 384}  # tokens, in_features, out_features
FP4 = ("mxfp4", "nvfp4")


def dequantized(x, role, name):
    """float64 of x quantized along its last dimension the way recipe `name` quantizes `role`."""
    x32 = x.float().cpu().numpy()
    recipe = recipes.get(name)
    if name == "delayed":  # the first step has scale 1: one f32 product
        data, _, _ = reference.quantize_delayed(x32, np.ones(3, np.float32), np.zeros((16, 3), np.float32), 0)
        return data.astype(np.float64)
    if name == "nvfp4":
        data, scales, t = reference.quantize_nvfp4(x32)
        return reference.dequantize_nvfp4(data, scales, t).astype(np.float64)
    block = recipe.block(role, *x32.shape)
    rounding = "exact" if name == "per_tensor" else "ceil"
    data, scales = reference.quantize(x32, block, recipe.element(role), recipe.scale_type, rounding)
    return reference.dequantize(data, scales, block).astype(np.float64)


def check_linear_against_float64(name, device):
    """Runs one step of a Linear of LINEAR's shape in recipe `name` on `device` and checks it."""
    import torch
    from mx.torch import Linear
    m, k, n = LINEAR["m"], LINEAR["k"], LINEAR["n"]
    torch.manual_seed(0)
    layer = Linear(k, n, recipe=name, device=device)
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(m, n, device=device, dtype=torch.bfloat16)
    y = layer(x)
    y.backward(dy)
    w, xd = layer.weight.detach(), x.detach()
    bias = layer.bias.detach().double().cpu().numpy()
    checks = {
        "fprop": (y, dequantized(xd, "input", name) @ dequantized(w, "weight", name).T + bias),
        "dgrad": (x.grad, dequantized(dy, "grad", name) @ dequantized(w.T.contiguous(), "weight", name).T),
        "wgrad": (layer.weight.grad, dequantized(dy.T.contiguous(), "grad", name)
                  @ dequantized(xd.T.contiguous(), "input", name).T),
    }
    exact_dequantize = name in ("mxfp8", *FP4)
    for gemm, (got, expected) in checks.items():
        error = reference.matmul_error(got.detach().double().cpu().numpy(), expected)
        # The spec's bf16 tolerance; for f32 results 1e-5 where the operands dequantize exactly
        # (MX, FP4: bf16 tensor cores or FP4 MMA accumulating in f32), else Hopper's FP8
        # accumulation (docs/numerics.md).
        limit = 4e-3 if got.dtype == torch.bfloat16 else 1e-5 if exact_dequantize else 5e-4
        assert error < limit, f"{name} {gemm}: relative error {error:.2e} >= {limit}"
    exact = torch.nn.functional.linear(xd.double(), w.double(), layer.bias.detach().double())
    # E2M1 keeps 2 significant bits: about 0.15 relative error against the unquantized product.
    limit = 0.2 if name in FP4 else 0.1
    assert reference.matmul_error(y.detach().double().cpu().numpy(), exact.cpu().numpy()) < limit
