"""mx.builder: write an mx program in Python instead of MLIR text.

A `Function` collects typed arguments and mx ops and prints itself as one `func.func`; each op
method computes its result types with the same shape rules as the dialect (mx.reference's
scales_shape and swizzled_shape), so a program is a few lines:

    f = Function("quantize")
    x = f.arg((1024, 1024), "f32")
    data, scales = f.quantize(x, block=(1, 32))
    f.returns(data, scales)
    kernel = mx.compile(f)            # mx.compiler.compile accepts a Function as the program

The MLIR text (`to_mlir()`) is what is compiled and cached, so nothing here is hidden from mx-opt:
its verifier checks every op as for hand-written IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import reference


@dataclass(frozen=True)
class Value:
    """An SSA value of the function being built: its name and tensor type."""
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def type(self) -> str:
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.dtype + ">"


def _list(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _types(values: Sequence[Value]) -> str:
    return ", ".join(v.type for v in values)


class Function:
    """One public `func.func` under construction."""

    def __init__(self, name: str):
        self.name = name
        self._args: list[Value] = []
        self._updated: set[str] = set()  # names of the arguments updated in place
        self._lines: list[str] = []
        self._results: list[Value] | None = None
        self._count = 0

    def _value(self, shape: Sequence[int], dtype: str, prefix: str = "v") -> Value:
        self._count += 1
        return Value(f"%{prefix}{self._count}", tuple(int(d) for d in shape), dtype)

    def _op(self, results: Sequence[Value], text: str) -> None:
        self._lines.append(f"  {', '.join(r.name for r in results)} = {text}")

    def arg(self, shape: Sequence[int], dtype: str, updated: bool = False) -> Value:
        """A new tensor argument. `updated`: the caller's buffer may take the argument's new value
        (marked `mx.updated`): where the function returns that value and
        bufferization writes it in place, the compiled function updates the argument and does not
        return it (mx-drop-in-place-results; its signature lists the argument as "updated")."""
        value = self._value(shape, dtype, "arg")
        self._args.append(value)
        if updated:
            self._updated.add(value.name)
        return value

    def quantize(self, x: Value, block: Sequence[int], elem: str = "f8E4M3FN",
                 scale_type: str = "f8E8M0FNU", rounding: str | None = None,
                 tensor_scale: Value | None = None, transposed: bool = False,
                 amax: Value | None = None) -> tuple[Value, ...]:
        """`mx.quantize`: (data, scales), plus the computed tensor scale for NVFP4 without one.
        `transposed` quantizes x with its last two dimensions swapped (`block` is the data's);
        `amax` is the amax of the whole tensor that x is a shard of."""
        shape = reference.transposed_shape(x.shape) if transposed else x.shape
        data = self._value(shape, elem)
        scales = self._value(reference.scales_shape(shape, block), scale_type)
        results = [data, scales]
        if scale_type == "f8E4M3FN" and elem == "f4E2M1FN" and tensor_scale is None:
            results.append(self._value((), "f32"))
        clauses = f" rounding {rounding}" if rounding else ""
        if tensor_scale is not None:
            clauses += f" tensor_scale({tensor_scale.name} : {tensor_scale.type})"
        if amax is not None:
            clauses += f" amax({amax.name} : {amax.type})"
        self._op(results, f"mx.quantize {x.name}{' transposed' * transposed} block {_list(block)}{clauses} : {x.type} -> "
                          f"{_types(results)}")
        return tuple(results)

    def dequantize(self, data: Value, scales: Value, block: Sequence[int], dtype: str = "f32",
                   tensor_scale: Value | None = None) -> Value:
        """`mx.dequantize` to `dtype`."""
        result = self._value(data.shape, dtype)
        clause = f" tensor_scale({tensor_scale.name} : {tensor_scale.type})" if tensor_scale else ""
        self._op([result], f"mx.dequantize {data.name}, {scales.name} block {_list(block)}{clause} : "
                           f"{data.type}, {scales.type} -> {result.type}")
        return result

    def swizzle(self, scales: Value, unscaled_dim: int | None = None, layout: str = "tiles") -> Value:
        """`mx.swizzle` of compact scales (`unscaled_dim` defaults to the rank's row dimension)."""
        unscaled_dim = len(scales.shape) - 2 if unscaled_dim is None else unscaled_dim
        result = self._value(reference.swizzled_shape(scales.shape, unscaled_dim, layout), scales.dtype)
        self._op([result], f"mx.swizzle {scales.name} unscaled_dim {unscaled_dim} layout {layout} : "
                           f"{scales.type} -> {result.type}")
        return result

    def unswizzle(self, tiles: Value, shape: Sequence[int], unscaled_dim: int | None = None,
                  layout: str = "tiles") -> Value:
        """`mx.unswizzle` back to compact scales of `shape`."""
        unscaled_dim = len(shape) - 2 if unscaled_dim is None else unscaled_dim
        result = self._value(shape, tiles.dtype)
        self._op([result], f"mx.unswizzle {tiles.name} unscaled_dim {unscaled_dim} layout {layout} : "
                           f"{tiles.type} -> {result.type}")
        return result

    def scaled_matmul(self, a: Value, a_scales: Value, b: Value, b_scales: Value,
                      a_block: Sequence[int], b_block: Sequence[int], dtype: str = "f32",
                      a_layout: str = "k_contiguous", b_layout: str = "k_contiguous",
                      tensor_scales: tuple[Value, Value] | None = None, bias: Value | None = None,
                      accumulator: Value | None = None) -> Value:
        """`mx.scaled_matmul`: C[..., m, n] = sum_k deq(A)[..., m, k] deq(B)[..., n, k], plus the
        epilogue operands: `bias` [N] and `accumulator` (an output D of the result's type)."""
        def rows(v: Value, layout: str) -> int:
            return v.shape[-2] if layout == "k_contiguous" else v.shape[-1]
        result = self._value((*a.shape[:-2], rows(a, a_layout), rows(b, b_layout)), dtype)
        clause = ""
        if tensor_scales:
            clause = (f" tensor_scales({tensor_scales[0].name}, {tensor_scales[1].name} : "
                      f"{_types(tensor_scales)})")
        for keyword, operand in (("bias", bias), ("accumulate", accumulator)):
            if operand is not None:
                clause += f" {keyword}({operand.name} : {operand.type})"
        self._op([result], f"mx.scaled_matmul {a.name}, {a_scales.name}, {b.name}, {b_scales.name} "
                           f"lhs_block {_list(a_block)} lhs_layout {a_layout} rhs_block {_list(b_block)} "
                           f"rhs_layout {b_layout}{clause} : {_types([a, a_scales, b, b_scales])} -> "
                           f"{result.type}")
        return result

    def amax(self, x: Value, finite: bool = False) -> Value:
        """`mx.amax`: the largest magnitude, a 0-D f32 tensor (`finite`: of the finite elements,
        what NVFP4's tensor scale derives from)."""
        result = self._value((), "f32")
        self._op([result], f"mx.amax {x.name}{' finite' * finite} : {x.type} -> {result.type}")
        return result

    def column_sum(self, x: Value) -> Value:
        """`mx.column_sum`: the f32 sum of every column of a matrix [M, N], shape [N]."""
        result = self._value(x.shape[-1:], "f32")
        self._op([result], f"mx.column_sum {x.name} : {x.type} -> {result.type}")
        return result

    def quantize_delayed(self, x: Value, scales: Value, history: Value, index: int,
                         elem: str = "f8E4M3FN", transposed: bool = False) -> tuple[Value, Value, Value]:
        """`mx.quantize_delayed`: (data, scale_inv [1, .., 1], new_history); `transposed` casts x
        with its last two dimensions swapped."""
        shape = reference.transposed_shape(x.shape) if transposed else x.shape
        results = [self._value(shape, elem), self._value((1,) * len(x.shape), "f32"),
                   self._value(history.shape, "f32")]
        self._op(results, f"mx.quantize_delayed {x.name}, {scales.name}, {history.name} index {index}"
                          f"{' transposed' * transposed} : "
                          f"{_types([x, scales, history])} -> {_types(results)}")
        return tuple(results)

    def update_amax_history(self, history: Value, scales: Value, elem: str = "f8E4M3FN",
                            algorithm: str = "max", margin: int = 0) -> tuple[Value, Value]:
        """`mx.update_amax_history`: (rotated history, next scales)."""
        results = [self._value(history.shape, "f32"), self._value(scales.shape, "f32")]
        self._op(results, f"mx.update_amax_history {history.name}, {scales.name} element {elem} "
                          f"algorithm {algorithm} margin {margin} : {_types([history, scales])} -> "
                          f"{_types(results)}")
        return tuple(results)

    def returns(self, *values: Value) -> None:
        self._results = list(values)

    def to_mlir(self) -> str:
        if self._results is None:
            raise ValueError(f"function @{self.name} has no returns(...) yet")
        args = ", ".join(f"{a.name}: {a.type}" + " {mx.updated}" * (a.name in self._updated)
                         for a in self._args)
        results = _types(self._results)
        return "\n".join([f"func.func @{self.name}({args}) -> ({results}) {{", *self._lines,
                          f"  return {', '.join(r.name for r in self._results)} : {results}", "}", ""])
