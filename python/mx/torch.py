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
with mx-opt (mx.compiler's cache) and run where there is only a GPU. The recipes are mx.linear's
RECIPES; delayed scaling updates its amax history once per forward, as Transformer Engine does.
"""

from __future__ import annotations

import math

import torch

from . import ops
from .linear import DELAYED_SLOTS, RECIPES, LinearPlan

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
            dtypes = [ops.element_type(t) if t.dtype.is_floating_point else None for t in (x2d, self.weight)]
            if any(d not in ops.WIDE_TYPES for d in dtypes):
                raise TypeError(f"mx.torch.Linear computes on float32, bfloat16 or float16; got input "
                                f"{x2d.dtype} and weight {self.weight.dtype}")
            target = ops._target_of([x2d], None)
            if target == "cpu":
                raise ValueError("mx.torch.Linear runs on a CUDA device; the input is on the CPU")
            self._plans[key] = LinearPlan(x2d.shape[0], self.in_features, self.out_features, self.recipe,
                                          *dtypes, target, self.history_length)
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
            slots = len(DELAYED_SLOTS)
            self._state = [torch.ones(slots, dtype=torch.float32, device=device),
                           torch.zeros(plan.history_length, slots, dtype=torch.float32, device=device)]
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
