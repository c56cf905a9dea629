"""mx.torch: `Linear`, a drop-in `torch.nn.Linear` whose forward and backward run on mx kernels.

The call path is Transformer Engine's: forward quantizes the input (rowwise, plus the orientation
wgrad reads when the weight needs a gradient) and the weight (cached until the weight changes), and
runs the fprop GEMM; backward quantizes the output gradient and runs dgrad and wgrad:

    fprop  Y [M, N]  = X [M, K]    . W [N, K]^T
    dgrad  dX [M, K] = dY [M, N]   . (W^T) [K, N]^T
    wgrad  dW [N, K] = (dY^T) [N, M] . (X^T) [K, M]^T

Each GEMM is one `mx.scaled_matmul` with K-contiguous operands: Hopper's FP8 tensor cores read
K-major operands only (sm_90a rejects `k_outer`), so the transposed operands are the columnwise
quantization transposed as bytes (MXFP8, per-tensor), or the rowwise quantization of the transposed
high-precision tensor (FP8 blockwise's 1x128 activations and gradients; bit-identical to a [128, 1]
columnwise quantize, which has no GPU kernel). `LinearPlan` holds every kernel of one shape and
recipe and is all Python without torch, so the kernels can be compiled ahead of time on a machine
with mx-opt (mx.compiler's cache) and run where there is only a GPU.

Recipes (`RECIPES`): "mxfp8" (E4M3 data, E8M0 scales of 32 along K), "blockwise" (f32 power-of-two
scales: 1x128 for inputs and gradients, 128x128 for weights), "per_tensor" (current scaling: one
exact f32 scale per tensor) and "delayed" (per-tensor delayed scaling: scales from an amax history
of `history_length` steps, updated once per forward as Transformer Engine does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import ops

RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed")
_TORCH_TO_MLIR = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
# Slots of the delayed-scaling state: one amax history column and scale per tensor role.
_INPUT, _WEIGHT, _GRAD = 0, 1, 2


def _transpose_bytes(t: torch.Tensor) -> torch.Tensor:
    """t^T, contiguous, copied as bytes (FP8 data and E8M0 scales)."""
    return t.view(torch.uint8).t().contiguous().view(t.dtype)


@dataclass
class Operand:
    """A quantized GEMM operand [rows, K]: data, scales, block."""
    data: torch.Tensor
    scales: torch.Tensor
    block: tuple[int, int]


def _required_multiple(recipe: str) -> int:
    return {"mxfp8": 32, "blockwise": 128}.get(recipe, 16)


class LinearPlan:
    """The kernels of a Linear with M tokens, K = in_features, N = out_features for one recipe,
    input and weight dtype and target; compiled (or taken from the cache) on construction."""

    def __init__(self, m: int, k: int, n: int, recipe: str, dtype: str, weight_dtype: str,
                 target: str, history_length: int = 16):
        if recipe not in RECIPES:
            raise ValueError(f"unknown recipe {recipe!r}; expected one of {', '.join(RECIPES)}")
        multiple = _required_multiple(recipe)
        bad = {name: v for name, v in (("tokens", m), ("in_features", k), ("out_features", n))
               if v % multiple}
        if bad:
            raise ValueError(f"mx.torch.Linear(recipe={recipe!r}) needs the token count, in_features and "
                             f"out_features to be multiples of {multiple} (each is the K of one GEMM); "
                             f"got {', '.join(f'{k_}={v}' for k_, v in bad.items())}")
        self.m, self.k, self.n, self.recipe, self.target = m, k, n, recipe, target
        self.dtype, self.weight_dtype, self.history_length = dtype, weight_dtype, history_length
        self.kernels = {}
        for role, (rows, cols, wide) in {"input": (m, k, dtype), "weight": (n, k, weight_dtype),
                                         "grad": (m, n, dtype)}.items():
            self.kernels[role] = self._quantize_kernels(role, rows, cols, wide)
        self.kernels["update"] = None
        if recipe == "delayed":
            self.kernels["update"] = ops.update_amax_history_kernel(3, history_length, target=target)
        # (lhs rows, rhs rows, K, out dtype) of the three GEMMs; their kernels depend on scale shapes
        # only through these, so they are built on first use from the operands.
        self.gemms = {"fprop": (m, n, k, dtype), "dgrad": (m, k, n, dtype), "wgrad": (n, k, m, weight_dtype)}

    def _quantize_kernels(self, role: str, rows: int, cols: int, wide: str) -> dict:
        """Kernels producing the rowwise and the transposed operand of a [rows, cols] tensor."""
        target, recipe = self.target, self.recipe
        if recipe == "mxfp8":
            return {"both": ops.quantize_kernel((rows, cols), wide, (1, 32), columnwise=True, target=target)}
        if recipe == "blockwise" and role == "weight":
            return {"both": ops.quantize_kernel((rows, cols), wide, (128, 128), scale_type="f32",
                                                target=target)}
        if recipe == "blockwise":
            return {"row": ops.quantize_kernel((rows, cols), wide, (1, 128), scale_type="f32", target=target),
                    "col": ops.quantize_kernel((cols, rows), wide, (1, 128), scale_type="f32", target=target)}
        if recipe == "per_tensor":
            return {"both": ops.quantize_kernel((rows, cols), wide, (rows, cols), scale_type="f32",
                                                rounding="exact", target=target)}
        slot = {"input": _INPUT, "weight": _WEIGHT, "grad": _GRAD}[role]
        return {"both": ops.quantize_delayed_kernel((rows, cols), wide, 3, self.history_length, slot,
                                                    target=target)}

    def gemm_kernel(self, name: str, lhs: Operand, rhs: Operand):
        rows, cols, k, out = self.gemms[name]
        return ops.scaled_matmul_kernel(
            (rows, k), "f8E4M3FN", tuple(lhs.scales.shape), "f8E8M0FNU" if self.recipe == "mxfp8" else "f32",
            (cols, k), "f8E4M3FN", tuple(rhs.scales.shape), "f8E8M0FNU" if self.recipe == "mxfp8" else "f32",
            lhs.block, rhs.block, out, target=self.target)

    def quantize(self, role: str, t: torch.Tensor, transposed: bool, state=None):
        """(rowwise Operand, transposed Operand or None) of a 2-D tensor in this plan's recipe; for
        "delayed", `state` is the Linear's (scales, history) and gets the new history."""
        kernels = self.kernels[role]
        rows, cols = t.shape
        if self.recipe == "mxfp8":
            data, scales, col_data, col_scales = kernels["both"](t)
            col = Operand(_transpose_bytes(col_data), _transpose_bytes(col_scales), (1, 32))
            return Operand(data, scales, (1, 32)), col if transposed else None
        if "row" in kernels:  # blockwise 1x128: the transposed tensor quantized rowwise.
            row = Operand(*kernels["row"](t), (1, 128))
            col = Operand(*kernels["col"](t.t().contiguous()), (1, 128)) if transposed else None
            return row, col
        if self.recipe == "delayed":
            scales, history = state
            data, scale_inv, state[1] = kernels["both"](t, scales, history)
            scales_out = scale_inv
        else:
            data, scales_out = kernels["both"](t)[:2]
        block = (128, 128) if self.recipe == "blockwise" else (rows, cols)
        row = Operand(data, scales_out, block)
        col = None
        if transposed:
            t_scales = scales_out.t().contiguous() if self.recipe == "blockwise" else scales_out
            col = Operand(_transpose_bytes(data), t_scales, block[::-1])
        return row, col

    def gemm(self, name: str, lhs: Operand, rhs: Operand) -> torch.Tensor:
        return self.gemm_kernel(name, lhs, rhs)(lhs.data, lhs.scales, rhs.data, rhs.scales)


class _LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2d, weight, bias, module):
        plan = module._plan(x2d)
        need_wgrad = weight.requires_grad
        x_row, x_col = plan.quantize("input", x2d, need_wgrad, module._delayed_state())
        w_row, w_col = module._quantized_weight(plan)
        y = plan.gemm("fprop", x_row, w_row)
        if bias is not None:
            y = y + bias.to(y.dtype)
        ctx.plan, ctx.module, ctx.x_col, ctx.w_col = plan, module, x_col, w_col
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        plan, module = ctx.plan, ctx.module
        need_dgrad, need_wgrad = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        g_row, g_col = plan.quantize("grad", dy.contiguous(), need_wgrad, module._delayed_state())
        dx = plan.gemm("dgrad", g_row, ctx.w_col) if need_dgrad else None
        dw = plan.gemm("wgrad", g_col, ctx.x_col) if need_wgrad else None
        db = dy.sum(0).to(module.bias.dtype) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dw, db, None


class Linear(torch.nn.Linear):
    """`torch.nn.Linear` (same constructor, parameters and state dict) computing in FP8 with an mx
    recipe on the GPU. Inputs of any rank >= 2 are flattened to [tokens, in_features]."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 *, recipe: str = "mxfp8", history_length: int = 16):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        if recipe not in RECIPES:
            raise ValueError(f"unknown recipe {recipe!r}; expected one of {', '.join(RECIPES)}")
        self.recipe, self.history_length = recipe, history_length
        self._plans: dict = {}
        self._weight_cache = None
        self._state = None

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recipe={self.recipe}"

    def _plan(self, x2d: torch.Tensor) -> LinearPlan:
        key = (x2d.shape[0], x2d.dtype, self.weight.dtype, x2d.device)
        if key not in self._plans:
            if x2d.dtype not in _TORCH_TO_MLIR or self.weight.dtype not in _TORCH_TO_MLIR:
                raise TypeError(f"mx.torch.Linear computes on float32, bfloat16 or float16; got input "
                                f"{x2d.dtype} and weight {self.weight.dtype}")
            target = ops._target_of([x2d], None)
            if target == "cpu":
                raise ValueError("mx.torch.Linear runs on a CUDA device; the input is on the CPU")
            self._plans[key] = LinearPlan(x2d.shape[0], self.in_features, self.out_features, self.recipe,
                                          _TORCH_TO_MLIR[x2d.dtype], _TORCH_TO_MLIR[self.weight.dtype],
                                          target, self.history_length)
        return self._plans[key]

    def _delayed_state(self):
        return self._state if self.recipe == "delayed" else None

    def _quantized_weight(self, plan: LinearPlan):
        """Quantized once per weight value: the cache holds while the parameter's version (bumped
        by every in-place update, e.g. the optimizer's step) and storage stay the same."""
        weight = self.weight
        key = (weight._version, weight.data_ptr(), id(plan))
        if self._weight_cache is None or self._weight_cache[0] != key:
            operands = plan.quantize("weight", weight.detach(), True, self._delayed_state())
            self._weight_cache = (key, operands)
        return self._weight_cache[1]

    def _start_step(self, plan: LinearPlan, device) -> None:
        """Delayed scaling: the scales of this step from the history of the previous ones."""
        if self._state is None:
            self._state = [torch.ones(3, dtype=torch.float32, device=device),
                           torch.zeros(plan.history_length, 3, dtype=torch.float32, device=device)]
        else:
            self._state[1], self._state[0] = plan.kernels["update"](self._state[1], self._state[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"mx.torch.Linear expects [..., {self.in_features}] inputs, got {tuple(x.shape)}")
        x2d = x.reshape(math.prod(x.shape[:-1]), self.in_features).contiguous()
        if self.recipe == "delayed":
            self._start_step(self._plan(x2d), x.device)
            self._weight_cache = None  # Delayed scaling records the weight's amax every step.
        y = _LinearFunction.apply(x2d, self.weight, self.bias, self)
        return y.reshape(*x.shape[:-1], self.out_features)
