"""One mx.torch.Linear step against float64, for test_torch.py (the CPU pipeline) and
test_gpu_torch.py (a GPU): forward, dgrad and wgrad of a layer against float64 products of operands
quantized by mx.reference the way the recipe quantizes them (the spec's GEMM tolerance, section 5),
the bias gradient against the float64 column sum of dY (the column sum's bound, docs/numerics.md),
and the forward against torch.nn.Linear in float64 (the quantization error). And the fused wgrad
accumulation into `weight.main_grad` over micro-batches against the plain wgrads summed.
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


def gemm_limit(name, dtype):
    """The relative error a GEMM of recipe `name` with a result of torch `dtype` may have: the spec's
    bf16 tolerance; for f32 results 1e-5 where the operands dequantize exactly (MX, FP4: bf16 tensor
    cores or FP4 MMA accumulating in f32), else Hopper's FP8 accumulation (docs/numerics.md)."""
    import torch
    return 4e-3 if dtype == torch.bfloat16 else 1e-5 if name in ("mxfp8", *FP4) else 5e-4


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
    for gemm, (got, expected) in checks.items():
        error = reference.matmul_error(got.detach().double().cpu().numpy(), expected)
        limit = gemm_limit(name, got.dtype)
        assert error < limit, f"{name} {gemm}: relative error {error:.2e} >= {limit}"
    # The bias gradient: mx's column sum of dY (f32, the layer's dtype), within its bound.
    dy64 = dy.float().cpu().numpy()
    error = np.abs(layer.bias.grad.double().cpu().numpy() - dy64.astype(np.float64).sum(axis=0))
    assert np.all(error <= reference.column_sum_bound(dy64)), f"{name} dbias: error {error.max():.2e}"
    exact = torch.nn.functional.linear(xd.double(), w.double(), layer.bias.detach().double())
    # E2M1 keeps 2 significant bits: about 0.15 relative error against the unquantized product.
    limit = 0.2 if name in FP4 else 0.1
    assert reference.matmul_error(y.detach().double().cpu().numpy(), exact.cpu().numpy()) < limit


def check_fused_wgrad_accumulation(name, device, dtype=None, micro_batches=3):
    """`micro_batches` steps of a Linear of LINEAR's shape (weight of torch `dtype`, default f32;
    bf16 activations) with fuse_wgrad_accumulation: the f32 `weight.main_grad`, from a random
    nonzero start, ends as that start plus the wgrads of the same steps of a plain layer (twice
    the tolerance of the plain wgrad's result type: the two GEMMs may be different kernels, each
    within it of the exact product, e.g. cuBLASLt's and mx's on sm_90a for blockwise); it stays the same tensor object, the weight gets
    no gradient, and Megatron-LM's `grad_added_to_main_grad` is set. Returns (fused main_grad,
    the plain sum) for callers checking more."""
    import torch
    from mx.torch import Linear
    m, k, n = LINEAR["m"], LINEAR["k"], LINEAR["n"]
    torch.manual_seed(0)
    plain = Linear(k, n, recipe=name, device=device, dtype=dtype)
    fused = Linear(k, n, recipe=name, device=device, dtype=dtype, fuse_wgrad_accumulation=True)
    fused.load_state_dict(plain.state_dict())
    # About the size of one wgrad (entries ~ sqrt(m)), so that a wrong sum shows.
    start = 16 * torch.randn(n, k, device=device)
    main_grad = fused.weight.main_grad = start.clone()
    fused.weight.grad_added_to_main_grad = False
    expected = start.clone()
    for _ in range(micro_batches):
        x = torch.randn(m, k, device=device, dtype=torch.bfloat16, requires_grad=True)
        dy = torch.randn(m, n, device=device, dtype=torch.bfloat16)
        plain.weight.grad = None
        plain(x).backward(dy)
        expected += plain.weight.grad.float()
        fused(x.detach().requires_grad_()).backward(dy)
    assert fused.weight.main_grad is main_grad and fused.weight.grad is None
    assert fused.weight.grad_added_to_main_grad
    got = main_grad.double().cpu().numpy()
    error = reference.matmul_error(got, expected.double().cpu().numpy())
    limit = 2 * gemm_limit(name, plain.weight.dtype)
    assert error < limit, f"{name}: main_grad's relative error {error:.2e} >= {limit}"
    assert reference.matmul_error(got, start.double().cpu().numpy()) > 0.1, "nothing was accumulated"
    return main_grad, expected
