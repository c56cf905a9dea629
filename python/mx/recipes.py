"""mx.recipes: the training recipes as objects, the one home of what each recipe quantizes how.

A recipe says, for each tensor role of a linear layer ("input" X, "weight" W, "grad" dY), the element
type, the block and the scale type of its GEMM operands, and the recipe's knobs. The objects are plain
frozen dataclasses without torch, so that mx.linear can compile a recipe's kernels on a machine
without torch or a GPU; mx.torch re-exports them as `mx.torch.recipes`.

    MXFP8(fp8_format)          E8M0 scales, blocks of 32 along K
    Blockwise(fp8_format)      f32 power-of-two scales: 1x128 inputs and gradients, 128x128 weights
    PerTensor(fp8_format)      current scaling: one exact f32 scale per tensor (amax / maxfinite)
    Delayed(history_len, algorithm, margin, reduce_amax, fp8_format)
                               one f32 scale per tensor from an amax history (Transformer Engine's
                               DelayedScaling; spec section 8)
    MXFP4(), NVFP4()           E2M1 data: E8M0 scales per 32, or E4M3 scales per 16 and an f32
                               tensor scale (spec section 10)

`fp8_format` is "e4m3" (every tensor E4M3) or "hybrid" (E4M3 forward, E5M2 gradients). Strings name
the default of each recipe: "mxfp8", "blockwise", "per_tensor", "delayed", "mxfp4", "nvfp4"; `get`
turns either form into a recipe. A knob out of range is a ValueError that names it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import ClassVar, NamedTuple

ROLES = ("input", "weight", "grad")
FP8_FORMATS = ("e4m3", "hybrid")
AMAX_ALGORITHMS = ("max", "most_recent")


def _require(condition: bool, recipe: str, knob: str, value, expected: str) -> None:
    if not condition:
        raise ValueError(f"{recipe}: {knob}={value!r} is not valid; expected {expected}")


class Numbers(NamedTuple):
    """A recipe's fixed numbers."""
    name: str
    scale_type: str  # MLIR type of the scales
    # What M, K and N must be multiples of: each is the K of one GEMM, which takes whole scale
    # blocks along K, and at least 16 FP8 bytes a row (the generated kernels' TMA rows).
    required_multiple: int
    activations: tuple[int, int] | None  # block of inputs and gradients ([rows, K]); None: whole
    weights: tuple[int, int] | None      # block of weights


@dataclass(frozen=True)
class Recipe:
    """What every recipe answers; subclasses fix the numbers and add knobs."""

    numbers: ClassVar[Numbers]
    # A second-level f32 scale per tensor, from the tensor's finite amax, over the block scales
    # (NVFP4, spec section 10): one more compact part, which ranks must agree on as on an amax.
    tensor_scaled: ClassVar[bool] = False
    fp8_format: str = "e4m3"

    name = property(lambda self: self.numbers.name)
    scale_type = property(lambda self: self.numbers.scale_type)
    required_multiple = property(lambda self: self.numbers.required_multiple)

    def __post_init__(self):
        _require(self.fp8_format in FP8_FORMATS, type(self).__name__, "fp8_format", self.fp8_format,
                 " or ".join(repr(f) for f in FP8_FORMATS))

    def element(self, role: str) -> str:
        """The MLIR element type of `role`'s GEMM operands."""
        return "f8E5M2" if role == "grad" and self.fp8_format == "hybrid" else "f8E4M3FN"

    def block(self, role: str, rows: int, k: int) -> tuple[int, int]:
        """The block of a [rows, K] GEMM operand of `role` (either orientation)."""
        block = self.numbers.weights if role == "weight" else self.numbers.activations
        return (rows, k) if block is None else block

    @property
    def per_tensor(self) -> bool:
        """One scale per tensor: the scale (or amax) is what ranks must agree on."""
        return self.numbers.activations is None

    @functools.cached_property
    def key(self) -> str:
        """A string naming the recipe and every knob (plan keys, custom-op arguments, reprs); made
        once (FSDP2's hooks ask at every gather)."""
        knobs = ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))
        return f"{self.name}({knobs})"


class MXFP8(Recipe):
    """OCP MX: E8M0 scales, blocks of 32 along K (spec sections 2-4)."""
    numbers = Numbers("mxfp8", "f8E8M0FNU", 32, (1, 32), (1, 32))


class Blockwise(Recipe):
    """FP8 blockwise: f32 power-of-two scales, 1x128 activations, 128x128 weights (section 9)."""
    numbers = Numbers("blockwise", "f32", 128, (1, 128), (128, 128))


class PerTensor(Recipe):
    """Current scaling: one exact f32 scale per tensor, amax / maxfinite (section 8)."""
    numbers = Numbers("per_tensor", "f32", 16, None, None)


@dataclass(frozen=True)
class Delayed(PerTensor):
    """Delayed scaling: the cast of step t uses scales from the amaxes of earlier steps.
    `history_len` steps of amaxes per tensor; `algorithm` "max" (of the history) or "most_recent";
    scale = (maxfinite / amax) / 2^margin; `reduce_amax`: all-reduce (max) the amaxes over the
    layer's amax group before each update, so that every rank keeps the same scales."""

    numbers = Numbers("delayed", "f32", 16, None, None)
    history_len: int = 16
    algorithm: str = "max"
    margin: int = 0
    reduce_amax: bool = True

    def __post_init__(self):
        super().__post_init__()
        name = type(self).__name__
        _require(isinstance(self.history_len, int) and not isinstance(self.history_len, bool)
                 and self.history_len >= 1, name, "history_len", self.history_len, "an integer >= 1")
        _require(self.algorithm in AMAX_ALGORITHMS, name, "algorithm", self.algorithm,
                 " or ".join(repr(a) for a in AMAX_ALGORITHMS))
        _require(isinstance(self.margin, int) and not isinstance(self.margin, bool)
                 and -149 <= self.margin <= 127, name, "margin", self.margin,
                 "an integer in [-149, 127] (2^margin an f32)")
        _require(isinstance(self.reduce_amax, bool), name, "reduce_amax", self.reduce_amax, "a bool")


@dataclass(frozen=True)
class _FP4(Recipe):
    """FP4 recipes have no FP8 format: every role is E2M1."""

    def __post_init__(self):
        _require(self.fp8_format == "e4m3", type(self).__name__, "fp8_format", self.fp8_format,
                 "'e4m3' (FP4 recipes quantize every tensor to E2M1)")

    def element(self, role: str) -> str:
        return "f4E2M1FN"


class MXFP4(_FP4):
    """E2M1 data, E8M0 scales per 32 (section 10)."""
    numbers = Numbers("mxfp4", "f8E8M0FNU", 32, (1, 32), (1, 32))


class NVFP4(_FP4):
    """E2M1 data, E4M3 scales per 16 and an f32 tensor scale (section 10)."""
    numbers = Numbers("nvfp4", "f8E4M3FN", 32, (1, 16), (1, 16))
    tensor_scaled = True


SHORTHANDS = {cls.numbers.name: cls for cls in (MXFP8, Blockwise, PerTensor, Delayed, MXFP4, NVFP4)}
FP8_RECIPES = ("mxfp8", "blockwise", "per_tensor", "delayed")


def get(recipe: str | Recipe) -> Recipe:
    """A recipe object from a recipe or its shorthand string (the recipe with default knobs)."""
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe in SHORTHANDS:
        return SHORTHANDS[recipe]()
    raise ValueError(f"unknown recipe {recipe!r}; expected a mx.recipes.Recipe or one of "
                     f"{', '.join(SHORTHANDS)}")
