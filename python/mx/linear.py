"""mx.linear: the kernels of one linear layer's training step for each recipe, as a plan.

`LinearPlan` decides, once per shape and recipe, how the three GEMMs of a linear layer get their
operands (mx.torch explains the call path) and compiles every kernel on construction. It needs no
torch to be built (the kernels of a GPU run are compiled ahead of time on a machine with mx-opt,
into mx.compiler's cache); only `quantize` and `gemm` run on torch tensors.

Recipes (`RECIPES`): "mxfp8" (E4M3 data, E8M0 scales of 32 along K), "blockwise" (f32 power-of-two
scales: 1x128 for inputs and gradients, 128x128 for weights), "per_tensor" (current scaling: one
exact f32 scale per tensor) and "delayed" (per-tensor delayed scaling: scales from an amax history
of `history_length` steps; slots 0, 1, 2 of its state are the input, the weight and the gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ops, reference

RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed")
# The delayed-scaling state's slot (amax history column and scale) of each tensor role.
DELAYED_SLOTS = {"input": 0, "weight": 1, "grad": 2}


def _transpose_bytes(t):
    """t^T (a 2-D torch tensor), contiguous, copied as bytes (FP8 data and E8M0 scales)."""
    import torch
    return t.view(torch.uint8).t().contiguous().view(t.dtype)


@dataclass
class Operand:
    """A quantized GEMM operand [rows, K]: its data and scales (blocks: LinearPlan.block)."""
    data: object  # torch.Tensor
    scales: object


def _required_multiple(recipe: str) -> int:
    """What M, K and N must be multiples of: each is the K of one GEMM, which takes whole scale blocks
    along K (32, 128), and at least 16 FP8 bytes per row (the generated kernels' TMA rows)."""
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
        self.recipe, self.target, self.history_length = recipe, target, history_length
        self.kernels = {}
        for role, (rows, cols, wide) in {"input": (m, k, dtype), "weight": (n, k, weight_dtype),
                                         "grad": (m, n, dtype)}.items():
            self.kernels[role] = self._quantize_kernels(role, rows, cols, wide)
        self.kernels["update"] = None
        if recipe == "delayed":
            self.kernels["update"] = ops.update_amax_history_kernel(len(DELAYED_SLOTS), history_length, target=target)
        # Each GEMM: (lhs role, rhs role, lhs rows, rhs rows, K, result dtype).
        self.gemms = {name: self._gemm_kernel(*spec) for name, spec in {
            "fprop": ("input", "weight", m, n, k, dtype),
            "dgrad": ("grad", "weight", m, k, n, dtype),
            "wgrad": ("grad", "input", n, k, m, weight_dtype)}.items()}

    def block(self, role: str, rows: int, k: int) -> tuple[int, int]:
        """The block of a [rows, K] GEMM operand (either orientation) of `role` in this recipe."""
        if self.recipe == "mxfp8":
            return (1, 32)
        if self.recipe == "blockwise":
            return (128, 128) if role == "weight" else (1, 128)
        return (rows, k)

    def _gemm_kernel(self, lhs_role: str, rhs_role: str, rows: int, cols: int, k: int, out: str):
        scale_type = "f8E8M0FNU" if self.recipe == "mxfp8" else "f32"
        lhs_block, rhs_block = self.block(lhs_role, rows, k), self.block(rhs_role, cols, k)
        return ops.scaled_matmul_kernel(
            (rows, k), "f8E4M3FN", reference.scales_shape((rows, k), lhs_block), scale_type,
            (cols, k), "f8E4M3FN", reference.scales_shape((cols, k), rhs_block), scale_type,
            lhs_block, rhs_block, out, target=self.target)

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
        return {"both": ops.quantize_delayed_kernel((rows, cols), wide, len(DELAYED_SLOTS),
                                                    self.history_length, DELAYED_SLOTS[role],
                                                    target=target)}

    def quantize(self, role: str, t, transposed: bool, state=None):
        """(rowwise Operand, transposed Operand or None) of a 2-D tensor in this plan's recipe; for
        "delayed", `state` is the Linear's [scales, history] and gets the new history."""
        kernels = self.kernels[role]
        if self.recipe == "mxfp8":
            data, scales, col_data, col_scales = kernels["both"](t)
            col = Operand(_transpose_bytes(col_data), _transpose_bytes(col_scales)) if transposed else None
            return Operand(data, scales), col
        if "row" in kernels:  # blockwise 1x128: the transposed tensor is quantized rowwise.
            col = Operand(*kernels["col"](t.t().contiguous())) if transposed else None
            return Operand(*kernels["row"](t)), col
        if self.recipe == "delayed":
            data, scales, state[1] = kernels["both"](t, *state)
        else:  # blockwise 128x128 (its scales transpose with the data) or per-tensor (one scale).
            data, scales = kernels["both"](t)
        col = None
        if transposed:
            col = Operand(_transpose_bytes(data), scales.t().contiguous() if scales.dim() == 2 else scales)
        return Operand(data, scales), col

    def gemm(self, name: str, lhs: Operand, rhs: Operand):
        return self.gemms[name](lhs.data, lhs.scales, rhs.data, rhs.scales)
