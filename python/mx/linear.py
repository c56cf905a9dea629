"""mx.linear: the kernels of one linear layer's training step for a recipe, as a plan.

`LinearPlan` decides, once per shape and recipe (an mx.recipes object), how the three GEMMs of a
linear layer get their operands (mx.torch explains the call path), and compiles every kernel on
construction. It needs no torch to be built (the kernels of a GPU run are compiled ahead of time on a
machine with mx-opt, into mx.compiler's cache); mx.torch runs them on torch tensors.

Quantizing a tensor of a role ("input" X [M, K], "weight" W [N, K], "grad" dY [M, N]) gives its
*compact* parts, what crosses the wire when the tensor is sharded (spec section 12): the rowwise
"data" and "scales", and, where the transposed operand is not derived from them, "col_data" and
"col_scales": MXFP8's columnwise quantization written transposed ([cols, rows] data, [cols, rows / 32]
scales, GEMM-ready) and FP8 blockwise's 1x128 blocks along the rows of activations and gradients
written transposed ([cols, rows] data, [cols, rows / 128] scales: the rowwise quantization of the
transposed tensor, quantized from the tensor in place), both by the program "both" with the rowwise
parts; the rowwise quantization of the transposed tensor of the FP4 recipes (packed FP4 cannot be
written transposed); and the transposed data ([cols, rows], GEMM-ready) that per-tensor and delayed
scaling write in the same kernel as the rowwise data (Transformer Engine's cast+transpose:
mx.quantize / mx.quantize_delayed `transposed`), of a whole tensor or of a row shard (its transposed
shard is a column block of the whole tensor's transposed data, with the same scale). 128x128
blockwise derives the transposed operand from the (gathered) rowwise bytes, and so does a sharded
per-tensor tensor read both ways at once, which gathers one usage rather than two
(`TensorPlan.col_parts`). `PartSpec.gather_dim` says along which dimension the parts of row shards
concatenate. Turning compact parts into GEMM operands (byte transposes where derived; the scale
swizzle is part of each GEMM program) comes after any gather. NVFP4's f32 tensor scale is the
last part ("tensor_scale"); the transposed tensor has the same amax, so one serves both orientations.

A role may be sharded along its rows (`shards`): its kernels then quantize one shard of
rows / shards rows. Per-tensor current scaling of a shard uses the amax shared by all shards (the
"amax" and "cast" kernels: mx.amax, then, after the caller's all-reduce, the cast x * scale of
mx.quantize_delayed with scale = maxfinite / amax: Transformer Engine's current-scaling cast,
docs/torch.md; "cast_both" also writes the transposed shard). So does NVFP4's tensor scale: mx.amax of the finite elements, then mx.quantize with
the all-reduced amax (its `amax` operand), which derives the tensor scale from it as a quantize of
the whole tensor does ("cast", and "col_cast" for the transposed shard).

With a bias (`LinearPlan(..., bias=True)`), the gradient's plan also computes the bias gradient, the
column sum of dY (mx.column_sum, [N] f32): in the program that writes the transposed data where the
recipe has one ("both", "cast_both", "delayed_both" return it last; on the GPU the cast+transpose
kernel of per-tensor and delayed scaling and the strip kernel of 1x128 blockwise sum the columns of
the tiles they hold, so dY is read once; MXFP8's program sums them in a kernel of its own), and by a
program of its own, "dbias", where the quantize computes it not (128x128 and FP4 recipes, and a
gradient quantized without its transposed data). Plans without a bias have neither.

Delayed scaling keeps two states, each a [slots] f32 scale and a [history_len, slots] amax history:
"forward" for the input (slot 0) and the weight (slot 1), updated with E4M3's maxfinite, and
"backward" for the gradient (slot 0), updated with the gradient element's (E5M2 under "hybrid").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from . import builder, compiler, formats, ops, recipes, reference

# Delayed scaling: the state and slot of each role, and the slots of each state.
DELAYED_SLOTS = {"input": ("forward", 0), "weight": ("forward", 1), "grad": ("backward", 0)}
DELAYED_STATES = {"forward": 2, "backward": 1}
# Each GEMM: (lhs role, lhs orientation, rhs role, rhs orientation); an operand is [rows, K].
GEMMS = {"fprop": ("input", "row", "weight", "row"),
         "dgrad": ("grad", "row", "weight", "col"),
         "wgrad": ("grad", "col", "input", "col")}


@dataclass(frozen=True)
class PartSpec:
    """One compact part of a quantized tensor: its shape, MLIR element type, and the dimension
    along which the parts of row shards concatenate (None: the part is the same on every shard,
    a per-tensor scale, and stays where it is)."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    gather_dim: int | None


@dataclass(frozen=True)
class DequantizedGemm:
    """A GEMM the chip has no instruction for (FP4 on sm_90a): both operands dequantized to the
    result type by mx.dequantize, then an ordinary matmul (their values are exact in it). NVFP4's
    operands are dequantized with tensor scale 1 (E2M1 times E4M3 is exact in bf16, times an f32
    would not be) and the tensor scales' product multiplies the result, as cuBLASLt's alpha does
    on sm_100a."""
    lhs: compiler.Kernel
    rhs: compiler.Kernel
    out: str


def _amax_kernel(shape: tuple[int, ...], dtype: str, target: str, finite: bool = False) -> compiler.Kernel:
    f = builder.Function("amax")
    f.returns(f.amax(f.arg(shape, dtype), finite))
    return compiler.compile(f, target)


def _shard_quantize_kernel(shape: tuple[int, ...], dtype: str, block: tuple[int, int], elem: str,
                           scale_type: str, target: str) -> compiler.Kernel:
    """mx.quantize of a shard with the amax of the whole tensor given (NVFP4: data, scales and the
    tensor scale derived from that amax)."""
    f = builder.Function("quantize")
    f.returns(*f.quantize(f.arg(shape, dtype), block, elem, scale_type, amax=f.arg((), "f32")))
    return compiler.compile(f, target)


def _swizzled_gemm_kernel(operands, out: str, tensor_scales: bool, target: str) -> compiler.Kernel:
    """mx.scaled_matmul of two operands ((shape, element, scales shape, scale type, block) each)
    with compact scales, swizzled into 128x4 tiles in the program first: what cuBLASLt's
    block-scaled FP4 GEMM reads (docs/gpu.md). The swizzle thus comes after any gather."""
    f = builder.Function("scaled_matmul")
    values = []
    for shape, elem, scales_shape, scale_type, _ in operands:
        values += [f.arg(shape, elem), f.swizzle(f.arg(scales_shape, scale_type))]
    scalars = (f.arg((), "f32"), f.arg((), "f32")) if tensor_scales else None
    f.returns(f.scaled_matmul(*values, operands[0][4], operands[1][4], out, tensor_scales=scalars))
    return compiler.compile(f, target)


def _update_kernel(recipe: recipes.Delayed, target: str) -> compiler.Kernel:
    """Delayed scaling's update of every state at once (one call a step): (history, scales) of each
    state of DELAYED_STATES in turn, in and out, each updated with the element of its roles."""
    f = builder.Function("update_amax_histories")
    results = []
    for state, slots in DELAYED_STATES.items():
        history, scales = f.arg((recipe.history_len, slots), "f32"), f.arg((slots,), "f32")
        elem = recipe.element("grad" if state == "backward" else "input")
        results += f.update_amax_history(history, scales, elem, recipe.algorithm, recipe.margin)
    f.returns(*results)
    return compiler.compile(f, target)


class TensorPlan:
    """The kernels quantizing one role's tensor [rows, cols] of dtype `wide`, or one of its `shards`
    row shards, in a recipe, for a target; compiled (or taken from the cache) on construction. Its
    facts about the recipe (shares_amax, writes_transposed, ...) are worked out once, on construction,
    and kept (`cached_property`): mx.torch's layers ask for them at every step."""

    def __init__(self, role: str, rows: int, cols: int, wide: str, recipe, target: str, shards: int = 1,
                 column_sum: bool = False):
        self.recipe = recipe = recipes.get(recipe)
        self.role, self.wide, self.target, self.shards = role, wide, target, shards
        self.column_sum = column_sum  # the bias gradient of a gradient: the column sum of the shard
        multiple = recipe.required_multiple
        if shards > 1 and rows % (shards * multiple):
            # A split must fall on block boundaries (spec section 12), and each shard is a GEMM's K.
            raise ValueError(f"mx.torch ({recipe.name}): the {role} [{rows}, {cols}] does not split into "
                             f"{shards} row shards of a multiple of {multiple} rows")
        self.shape = (rows // shards, cols)
        self.key = f"{role}:{rows}x{cols}:{wide}:{recipe.key}:{target}:{shards}" + ":sum" * column_sum
        self._parts: dict[bool, tuple[PartSpec, ...]] = {}
        self.kernels = self._kernels()
        # The facts worked out here, not on first use: that may come while torch.compile traces, and
        # Python 3.11's cached_property takes a lock that Dynamo cannot trace.
        for fact in ("shares_amax", "writes_transposed", "fuses_column_sum", "col_derivable", "derives_col"):
            getattr(self, fact)

    def block(self) -> tuple[int, int]:
        return self.recipe.block(self.role, *self.shape)

    @cached_property
    def shares_amax(self) -> bool:
        """Whether a shard is cast with the amax of the whole tensor (current scaling, and NVFP4's
        tensor scale)."""
        current = self.recipe.per_tensor and not isinstance(self.recipe, recipes.Delayed)
        return self.shards > 1 and (current or self.recipe.tensor_scaled)

    @cached_property
    def writes_transposed(self) -> bool:
        """Whether the quantize asked for the col parts writes the transposed data itself, beside
        the rowwise data and with its scale (cast+transpose: per-tensor and delayed scaling, of a
        whole tensor or of a row shard: [rows, cols] -> [cols, rows], gathered along dim 1)."""
        return self.recipe.per_tensor

    @cached_property
    def fuses_column_sum(self) -> bool:
        """Whether the program that writes the col parts also returns the column sum (last): the
        cast+transpose kernel of per-tensor and delayed scaling and the strip kernel of 1x128
        blockwise sum the columns of the tiles they hold on the GPU; MXFP8's "both" program sums
        them in a kernel of its own, one call fewer from Python than "dbias" after it."""
        return self.column_sum and (self.writes_transposed or self._writes_both)

    @cached_property
    def _writes_both(self) -> bool:
        """Whether one program quantizes the tensor and its transpose ("both": MXFP8's columnwise
        and 1x128 blockwise's transposed quantization, written transposed)."""
        return not self.recipe.per_tensor and not self.derives_col and \
            not formats.get(self.recipe.element(self.role)).packed

    @cached_property
    def col_derivable(self) -> bool:
        """Whether the transposed operand can be the rowwise bytes transposed (one scale, or
        128x128 blocks): what a tensor gathered without its col parts falls back to."""
        return self.recipe.per_tensor or self.recipe.block(self.role, 1, 1) == (128, 128)

    @cached_property
    def derives_col(self) -> bool:
        """Whether the transposed operand is always the rowwise bytes transposed (no col parts:
        128x128 blocks)."""
        return self.col_derivable and not self.writes_transposed

    def col_parts(self, sides) -> bool:
        """Whether the col operand, for GEMMs reading `sides` ("row", "col") of this tensor, comes
        from the col parts (quantized, and gathered if sharded) rather than from the rowwise bytes
        transposed. A sharded tensor read both ways at once (FSDP2's weight kept unsharded after
        forward, the sequence-parallel output gradient) gathers the rowwise parts only where the
        col operand derives from them: one usage's bytes on the wire, then a byte transpose."""
        both = "row" in sides and self.shards > 1
        return "col" in sides and not self.derives_col and not (both and self.col_derivable)

    def wire_parts(self, sides) -> tuple[int, ...]:
        """The indices in parts(True) of the parts that GEMM operands of `sides` ("row", "col")
        read."""
        col = self.col_parts(sides)
        row = "row" in sides or ("col" in sides and not col)
        return (0, 1) * row + (2, 3) * col + (len(self.parts(True)) - 1,) * self.recipe.tensor_scaled

    def has_col(self, parts) -> bool:
        """Whether `parts` (as quantized) are all of parts(True), the col parts included."""
        return len(parts) == len(self.parts(True))

    def full(self, parts) -> list:
        """`parts` laid out as parts(True), None where the col parts were not quantized."""
        return list(parts) if self.has_col(parts) else [*parts[:2], None, None, *parts[2:]]

    def parts(self, col: bool = True) -> tuple[PartSpec, ...]:
        """The compact parts of a quantized shard (with the col parts if `col` and the recipe has
        them). Made once per plan and `col`: FSDP2's hooks and the layers ask at every gather and
        step."""
        made = self._parts.get(col)
        if made is None:
            made = self._parts[col] = tuple(self._part_specs(col))
        return made

    def _part_specs(self, col: bool) -> list[PartSpec]:
        rows, cols = self.shape
        elem, scale = self.recipe.element(self.role), self.recipe.scale_type
        block = self.block()
        specs = [PartSpec("data", (rows, cols), elem, 0),
                 PartSpec("scales", reference.scales_shape((rows, cols), block), scale,
                          None if self.recipe.per_tensor else 0)]
        if col and self.writes_transposed:  # one scale, the same for both
            specs += [PartSpec("col_data", (cols, rows), elem, 1), PartSpec("col_scales", (1, 1), scale, None)]
        elif col and not self.derives_col:
            # MXFP8's columnwise or 1x128 blockwise's transposed quantization written transposed
            # (GEMM-ready), or the transposed shard quantized rowwise (FP4): the same shapes.
            specs += [PartSpec("col_data", (cols, rows), elem, 1),
                      PartSpec("col_scales", reference.scales_shape((cols, rows), block), scale, 1)]
        if self.recipe.tensor_scaled:
            specs.append(PartSpec("tensor_scale", (), "f32", None))
        return specs

    def _kernels(self) -> dict:
        kernels = self._quantize_kernels()
        if self.column_sum:
            kernels["dbias"] = ops.column_sum_kernel(self.shape, self.wide, target=self.target)
        return kernels

    def _quantize_kernels(self) -> dict:
        recipe, target, wide, shape = self.recipe, self.target, self.wide, self.shape
        fused = self.fuses_column_sum  # the col parts' program returns the column sum too
        elem, scale_type = recipe.element(self.role), recipe.scale_type
        if isinstance(recipe, recipes.Delayed):
            state, index = DELAYED_SLOTS[self.role]
            # The casts record their amax in the layer's history itself (in place).
            delayed = [ops.quantize_delayed_kernel(shape, wide, DELAYED_STATES[state], recipe.history_len,
                                                   index, elem, transposed, transposed and fused, True,
                                                   target=target)
                       for transposed in (False, True)[:1 + self.writes_transposed]]
            return dict(zip(("delayed", "delayed_both"), delayed))
        if self.shares_amax and recipe.tensor_scaled:
            block = self.block()
            return {"amax": _amax_kernel(shape, wide, target, finite=True),
                    "cast": _shard_quantize_kernel(shape, wide, block, elem, scale_type, target),
                    "col_cast": _shard_quantize_kernel(shape[::-1], wide, block, elem, scale_type, target)}
        if self.shares_amax:  # the cast with a given scale: mx.quantize_delayed of one slot
            casts = [ops.quantize_delayed_kernel(shape, wide, 1, 1, 0, elem, transposed, transposed and fused,
                                                 target=target)
                     for transposed in (False, True)[:1 + self.writes_transposed]]
            return {"amax": _amax_kernel(shape, wide, target), **dict(zip(("cast", "cast_both"), casts))}
        if isinstance(recipe, recipes.PerTensor):
            per_tensor = [ops.quantize_kernel(shape, wide, shape, elem, "f32", "exact", transposed=transposed,
                                              column_sum=transposed and fused, target=target)
                          for transposed in (False, True)[:1 + self.writes_transposed]]
            return dict(zip(("row", "both"), per_tensor))
        block = self.block()
        kernels = {"row": ops.quantize_kernel(shape, wide, block, elem, scale_type, target=target)}
        if self.derives_col:
            return kernels
        if self._writes_both:
            # MXFP8's columnwise and 1x128 blockwise's transposed quantization written transposed from
            # the tensor itself (GEMM-ready), with the rowwise one: one strip kernel reads it once.
            kernels["both"] = ops.quantize_kernel(shape, wide, block, elem, scale_type, columnwise=True,
                                                  transposed=True, column_sum=fused, target=target)
        else:  # packed FP4 cannot be written transposed: the transposed shard quantized rowwise
            kernels["col"] = ops.quantize_kernel(shape[::-1], wide, block, elem, scale_type, target=target)
        return kernels


class LinearPlan:
    """The kernels of a Linear with M tokens, K = in_features, N = out_features for one recipe,
    input and weight dtype and target: a TensorPlan per role (`shards` maps a role to its number of
    row shards: sequence-parallel inputs and gradients), the three GEMMs, and delayed scaling's
    update of all its states (`update`, one program). "fprop_bias" is fprop with a bias of the
    weight's dtype added in its epilogue (where fprop is one scaled_matmul). With
    `wgrad_accumulation`, "wgrad_acc" is wgrad adding an f32 D [N, K] in its epilogue, an f32
    result whatever the weight's dtype (Transformer Engine's fuse_wgrad_accumulation into a main
    gradient), where the chip's GEMM takes it; mx.torch adds the plain wgrad to D where it does not.
    With `bias`, the gradient's TensorPlan also computes the bias gradient (the module's header)."""

    def __init__(self, m: int, k: int, n: int, recipe, dtype: str, weight_dtype: str, target: str,
                 shards: dict[str, int] | tuple[tuple[str, int], ...] = (), wgrad_accumulation: bool = False,
                 bias: bool = False):
        self.recipe = recipe = recipes.get(recipe)
        self.target, self.dtype, self.weight_dtype = target, dtype, weight_dtype
        shards = {role: 1 for role in recipes.ROLES} | dict(shards)
        self.shapes = {"input": (m, k, dtype), "weight": (n, k, weight_dtype), "grad": (m, n, dtype)}
        self._check_shapes(shards)
        self.tensors = {role: TensorPlan(role, rows, cols, wide, recipe, target, shards[role],
                                         column_sum=bias and role == "grad")
                        for role, (rows, cols, wide) in self.shapes.items()}
        self.key = f"{m}x{k}x{n}:{recipe.key}:{dtype}:{weight_dtype}:{target}:" + \
            ",".join(f"{role}/{count}" for role, count in shards.items()) + ":acc" * wgrad_accumulation + \
            ":bias" * bias
        self.update = _update_kernel(recipe, target) if isinstance(recipe, recipes.Delayed) else None
        self.gemms = {name: self._gemm_kernel(name) for name in GEMMS}
        epilogues = [("fprop_bias", "fprop", "bias"), ("wgrad_acc", "wgrad", "accumulate")]
        for fused, name, epilogue in epilogues[:1 + wgrad_accumulation]:
            kernel = self._epilogue_kernel(name, epilogue)
            if kernel is not None:
                self.gemms[fused] = kernel

    def _epilogue_kernel(self, name: str, epilogue: str):
        """GEMM `name` with an epilogue operand ("bias" or "accumulate"), or None where the chip's
        GEMM for it takes none: only the generated kernels do (cuBLASLt's lowering has no epilogue
        operand, and sm_90a's FP4 GEMM is a torch matmul), and which GEMMs the chip generates is
        mx-opt's choice (gemm=auto), asked here by compiling."""
        try:
            return self._gemm_kernel(name, epilogue)
        except compiler.CompileError as error:
            if "nor a cuBLASLt lowering" in str(error):
                return None
            raise

    def _check_shapes(self, shards: dict[str, int]) -> None:
        multiple, name = self.recipe.required_multiple, self.recipe.name
        m, k, _ = self.shapes["input"]
        n = self.shapes["weight"][0]
        bad = [f"{what}={v}" for what, v in (("tokens", m), ("in_features", k), ("out_features", n))
               if v % multiple]
        if bad:
            raise ValueError(f"mx.torch.Linear(recipe={name!r}) needs the token count, in_features, "
                             f"and out_features to be multiples of {multiple} (each is "
                             f"the K of one GEMM); got {', '.join(bad)}")

    def _gemm_kernel(self, name: str, epilogue: str | None = None) -> compiler.Kernel | DequantizedGemm | None:
        lhs_role, lhs_side, rhs_role, rhs_side = GEMMS[name]
        operands = []
        for role, side in ((lhs_role, lhs_side), (rhs_role, rhs_side)):
            rows, cols, _ = self.shapes[role]
            rows, k = (rows, cols) if side == "row" else (cols, rows)
            block = self.recipe.block(role, rows, k)
            operands.append(((rows, k), self.recipe.element(role),
                             reference.scales_shape((rows, k), block), self.recipe.scale_type, block))
        (a, a_elem, a_scales, scale, a_block), (b, b_elem, b_scales, _, b_block) = operands
        # An accumulating wgrad adds into an f32 main gradient whatever the weight's dtype.
        out = self.dtype if name != "wgrad" else "f32" if epilogue == "accumulate" else self.weight_dtype
        if a_elem == "f4E2M1FN" and self.target != "cpu" and epilogue:
            return None  # a dequantized torch GEMM or cuBLASLt's: no epilogue of mx's
        if a_elem == "f4E2M1FN" and self.target == "sm_90a":  # Hopper has no FP4 MMA (docs/gpu.md)
            return DequantizedGemm(*(ops.dequantize_kernel(shape, elem, scales, scale, block, out,
                                                           self.recipe.tensor_scaled, target=self.target)
                                     for shape, elem, scales, block in ((a, a_elem, a_scales, a_block),
                                                                        (b, b_elem, b_scales, b_block))), out)
        if a_elem == "f4E2M1FN" and self.target != "cpu":  # cuBLASLt (sm_100a) reads swizzled scales
            return _swizzled_gemm_kernel(operands, out, self.recipe.tensor_scaled, self.target)
        bias_dtype = self.weight_dtype if epilogue == "bias" else None
        return ops.scaled_matmul_kernel(a, a_elem, a_scales, scale, b, b_elem, b_scales, scale, a_block,
                                        b_block, out, bias_dtype=bias_dtype, tensor_scales=self.recipe.tensor_scaled,
                                        accumulate=epilogue == "accumulate", target=self.target)
