"""mx.tools: run `mx-opt` and the CPU pipeline from Python.

Finds the project's tools (`mx-opt` from the build tree or $MX_OPT, `mlir-runner` from LLVM 22 or
$MLIR_RUNNER), runs pass pipelines on MLIR text, and executes mx ops on numpy arrays through the CPU
reference pipeline (`--mx-lower-to-cpu` then `mlir-runner`). Inputs are embedded as hex dense constants
and outputs are printed as integer bit patterns, so every value, NaN payloads and signed zeros
included, survives the round trip exactly; the `cpu_*` functions mirror the `mx.reference` API.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import formats, reference
from .ptx import extract_ptx  # noqa: F401  (re-exported: part of the tools API)
from .toolchain import LLVM_LIB, find_tool, runtime_library_dir


# numpy dtype <-> MLIR element type (mx.formats).
MLIR_TYPES = {f.dtype: f.name for f in formats.FORMATS}
NUMPY_DTYPES = {f.name: f.dtype for f in formats.FORMATS}  # MLIR element type -> numpy


def _bit_width(dtype) -> int:
    """Bits of one element in MLIR (numpy holds an FP4 or FP6 element in a byte)."""
    return formats.BY_DTYPE[np.dtype(dtype)].bits


class ToolError(RuntimeError):
    """A tool exited non-zero; the message holds its command line and stderr."""


def _run(command: Sequence[str | Path], stdin: str) -> str:
    result = subprocess.run([str(c) for c in command], input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolError(f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def run_mx_opt(source: str, *args: str) -> str:
    """Runs `mx-opt ARGS` on MLIR text and returns the printed result."""
    return _run([find_tool("mx-opt"), *args], source)


def run_cpu(source: str, entry: str = "main") -> str:
    """Lowers MLIR text with `--mx-lower-to-cpu` and runs `entry` (no arguments, no results) with
    mlir-runner; returns what the program printed."""
    lowered = run_mx_opt(source, "--mx-lower-to-cpu")
    libs = ",".join(str(LLVM_LIB / lib) for lib in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))
    return _run([find_tool("mlir-runner"), "-e", entry, "-entry-point-result=void",
                 f"-shared-libs={libs}"], lowered)


def _link_library(lowered: str, output: Path, link_args: Sequence[str | Path]) -> Path:
    """LLVM-dialect MLIR text -> `mlir-translate` -> `llc -O2` -> a shared library at `output`."""
    llvm_ir = _run([find_tool("mlir-translate"), "--mlir-to-llvmir"], lowered)
    obj = output.with_suffix(".o")
    try:
        _run([find_tool("llc"), "-O2", "-filetype=obj", "-relocation-model=pic", "-o", obj], llvm_ir)
        _run([shutil.which("c++") or "c++", "-shared", "-o", output, obj, *link_args], "")
    finally:
        obj.unlink(missing_ok=True)
    return output


def compile_cpu_library(source: str, output: str | os.PathLike) -> Path:
    """`mx-opt --mx-lower-to-cpu` compiled to a host shared library (no CUDA needed). Every public
    function is callable as `_mlir_ciface_<name>` with memref descriptors of host memory; the
    library links LLVM's C runner utils (memref copies)."""
    lowered = run_mx_opt(source, "--mx-lower-to-cpu")
    return _link_library(lowered, Path(output), [f"-L{LLVM_LIB}", "-lmlir_c_runner_utils",
                                                 f"-Wl,-rpath,{LLVM_LIB}"])


def compile_gpu_library(source: str, output: str | os.PathLike, chip: str | None = None,
                        runtime_dir: str | os.PathLike | None = None, gemm: str = "auto",
                        options: str = "") -> Path:
    """Ahead-of-time GPU flow: `mx-opt --mx-lower-to-nvvm` -> `mlir-translate --mlir-to-llvmir` ->
    `llc` -> a shared library linked against libmx_runtime (found at run time next to it or through
    the loader path). Every public function is callable as `_mlir_ciface_<name>` (mx.runtime).
    `chip` (mx-opt's default when None) and `gemm` (`auto`, `kernel` or `cublas`) are the pipeline's
    options of those names; `options` is appended to them."""
    runtime_dir = runtime_dir or runtime_library_dir()
    if runtime_dir is None:
        raise FileNotFoundError("cannot find libmx_runtime.so to link against; build the project or "
                                "set $MX_RUNTIME_LIB or $MX_BUILD_DIR")
    pipeline = f"format=bin gemm={gemm}" + (f" chip={chip}" if chip else "") + f" {options}"
    lowered = run_mx_opt(source, f"--mx-lower-to-nvvm={pipeline.rstrip()}")
    return _link_library(lowered, Path(output), [f"-L{runtime_dir}", "-lmx_runtime",
                                                 "-Wl,-rpath,$ORIGIN"])


def mlir_type(shape: Sequence[int], dtype) -> str:
    """The MLIR tensor type of an array: `tensor<4x32xbf16>`."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + MLIR_TYPES[np.dtype(dtype)] + ">"


@dataclass(frozen=True)
class DelayedCast:
    """An `mx.quantize_delayed` of a 2-D value into `element` (FP8) with column `index` of `slots`
    scales and a history of `history` rows, as source text: its function arguments `%scales` and
    `%history`, and the cast of a value."""
    element: str
    slots: int = 1
    history: int = 16
    index: int = 0

    def arguments(self) -> list[str]:
        return [f"%scales: tensor<{self.slots}xf32>", f"%history: tensor<{self.history}x{self.slots}xf32>"]

    def apply(self, value: str, value_type: str) -> tuple[str, list[tuple[str, str]]]:
        """(the cast's line, its results as (value, type)) for `value` of the tensor type `value_type`."""
        shape = value_type[len("tensor<"):].rsplit("x", 1)[0]
        data, history = f"tensor<{shape}x{self.element}>", f"tensor<{self.history}x{self.slots}xf32>"
        line = (f"  %y, %sinv, %h = mx.quantize_delayed {value}, %scales, %history index {self.index} : "
                f"{value_type}, tensor<{self.slots}xf32>, {history} -> {data}, tensor<1x1xf32>, {history}")
        return line, [("%y", data), ("%sinv", "tensor<1x1xf32>"), ("%h", history)]


def scaled_matmul_source(name: str, operand_types: Sequence[str], lhs_block: Sequence[int],
                         rhs_block: Sequence[int], result_type: str, tensor_scales: bool = False,
                         bias_type: str | None = None, cast: DelayedCast | None = None) -> str:
    """`func.func @name(%a, %as, %b, %bs) -> C` computing one `mx.scaled_matmul`; `operand_types` are
    the MLIR types of A, its scales, B and its scales. With `tensor_scales` (NVFP4) the function also
    takes the f32 tensor scales `%ta` and `%tb` of A and B; with `bias_type` a bias `%bias` added to
    every row; with `cast`, the scales and history of a delayed cast of C, which it returns instead
    of C (data, scale inverse, new history: the GPU lowering fuses the cast into the GEMM)."""
    args = [f"%{v}: {t}" for v, t in zip(("a", "as", "b", "bs"), operand_types)]
    blocks = f"lhs_block [{', '.join(map(str, lhs_block))}] rhs_block [{', '.join(map(str, rhs_block))}]"
    if tensor_scales:
        args += ["%ta: tensor<f32>", "%tb: tensor<f32>"]
        blocks += " tensor_scales(%ta, %tb : tensor<f32>, tensor<f32>)"
    if bias_type:
        args.append(f"%bias: {bias_type}")
        blocks += f" bias(%bias : {bias_type})"
    body = [f"  %c = mx.scaled_matmul %a, %as, %b, %bs {blocks} : {', '.join(operand_types)} -> {result_type}"]
    results = [("%c", result_type)]
    if cast:
        args += cast.arguments()
        line, results = cast.apply("%c", result_type)
        body.append(line)
    return function_source(name, args, body, results)


def delayed_cast_source(name: str, input_type: str, cast: DelayedCast) -> str:
    """`func.func @name(%x, %scales, %history)` returning `cast` of `%x` (of the tensor type
    `input_type`)."""
    line, results = cast.apply("%x", input_type)
    return function_source(name, [f"%x: {input_type}", *cast.arguments()], [line], results)


def function_source(name: str, args: Sequence[str], body: Sequence[str],
                    results: Sequence[tuple[str, str]]) -> str:
    """`func.func @name(args) -> (result types)` with `body` lines, returning the `(value, type)`
    pairs of `results`."""
    types = ", ".join(t for _, t in results)
    return "\n".join([f"func.func @{name}({', '.join(args)}) -> ({types}) {{", *body,
                      f"  return {', '.join(v for v, _ in results)} : {types}", "}"])


def dense_literal(array: np.ndarray) -> str:
    """An exact `dense<"0x...">` constant of `array` (little-endian raw bytes, any element type)."""
    raw = np.ascontiguousarray(array).tobytes()
    return f'dense<"0x{raw.hex().upper()}"> : {mlir_type(array.shape, array.dtype)}'


@dataclass
class Output:
    """One value the program prints: an SSA name, its shape and its numpy element type."""
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


_MEMREF_RE = re.compile(r"sizes = \[([0-9, ]*)\][^\n]*data = \n(.*?)(?=\nUnranked Memref|\Z)", re.S)


def run_program(inputs: dict[str, np.ndarray], body: str, outputs: Sequence[Output]) -> list[np.ndarray]:
    """Runs `body` (MLIR ops using `%name` for every input) on the CPU and returns each output exactly.

    Each output is bitcast to an integer type, widened to i32 and printed with printMemrefI32, then
    reassembled into an array of its own dtype from those bit patterns.
    """
    lines = ["func.func private @printMemrefI32(memref<*xi32>) attributes {llvm.emit_c_interface}",
             "func.func @main() {"]
    lines += [f"  %{name} = arith.constant {dense_literal(value)}" for name, value in inputs.items()]
    lines.append(body)
    for index, out in enumerate(outputs):
        width = _bit_width(out.dtype)
        src = mlir_type(out.shape, out.dtype)
        ints = src.replace(MLIR_TYPES[np.dtype(out.dtype)], f"i{width}")
        wide = mlir_type(out.shape, np.int32)
        lines.append(f"  %bits{index} = arith.bitcast %{out.name} : {src} to {ints}")
        value = f"%bits{index}"
        if width < 32:
            lines.append(f"  %wide{index} = arith.extui %bits{index} : {ints} to {wide}")
            value = f"%wide{index}"
        lines.append(f"  %unranked{index} = tensor.cast {value} : {wide} to tensor<*xi32>")
        lines.append(f"  %buffer{index} = bufferization.to_buffer %unranked{index} : "
                     f"tensor<*xi32> to memref<*xi32>")
        lines.append(f"  call @printMemrefI32(%buffer{index}) : (memref<*xi32>) -> ()")
    lines += ["  return", "}"]
    printed = run_cpu("\n".join(lines))

    results = []
    matches = _MEMREF_RE.findall(printed)
    if len(matches) != len(outputs):
        raise ToolError(f"expected {len(outputs)} printed memrefs, got {len(matches)}:\n{printed[:2000]}")
    for out, (sizes, data) in zip(outputs, matches):
        values = np.array([int(v) for v in re.findall(r"-?\d+", data)], dtype=np.int64)
        width = np.dtype(out.dtype).itemsize * 8
        bits = (values & ((1 << _bit_width(out.dtype)) - 1)).astype(np.dtype(f"uint{width}"))
        results.append(bits.view(out.dtype).reshape(out.shape))
    return results


def _block_text(block: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(b)) for b in block) + "]"


def _tensor_scale_clause(name: str, tensor_scale) -> tuple[str, dict[str, np.ndarray]]:
    """The `tensor_scale(%name : tensor<f32>)` clause and its input, or nothing."""
    if tensor_scale is None:
        return "", {}
    value = np.asarray(tensor_scale, np.float32).reshape(1)
    return f" tensor_scale(%{name}0 : tensor<f32>)", {name: value}


def _scalar_inputs(inputs: dict[str, np.ndarray]) -> str:
    """Collapses each `[1]` f32 input `%name` into the 0-D `%name0` the op takes."""
    return "".join(f"  %{name}0 = tensor.collapse_shape %{name} [] : tensor<1xf32> into tensor<f32>\n"
                   for name in inputs)


def cpu_quantize(x: np.ndarray, block: Sequence[int], elem: str = "f8E4M3FN",
                 scale_type: str = "f8E8M0FNU", rounding: str = "ceil",
                 tensor_scale=None) -> tuple[np.ndarray, ...]:
    """`mx.quantize` through the CPU pipeline; same contract as `reference.quantize`. NVFP4
    (`f8E4M3FN` scales) follows `reference.quantize_nvfp4`: with `tensor_scale` None the op computes
    it and it is returned third."""
    data_dtype, scale_dtype = NUMPY_DTYPES[elem], NUMPY_DTYPES[scale_type]
    scales_shape = reference.scales_shape(x.shape, block)
    computed = scale_type == "f8E4M3FN" and tensor_scale is None
    clause, scalars = _tensor_scale_clause("t", tensor_scale)
    rounding_text = "" if scale_type == "f8E4M3FN" else f" rounding {rounding}"
    results = "%d, %s, %t1" if computed else "%d, %s"
    body = (_scalar_inputs(scalars) +
            f"  {results} = mx.quantize %x block {_block_text(block)}{rounding_text}{clause} : "
            f"{mlir_type(x.shape, x.dtype)} -> {mlir_type(x.shape, data_dtype)}, "
            f"{mlir_type(scales_shape, scale_dtype)}" + (", tensor<f32>" if computed else ""))
    outputs = [Output("d", x.shape, data_dtype), Output("s", scales_shape, scale_dtype)]
    if computed:
        body += "\n  %t = tensor.expand_shape %t1 [] output_shape [1] : tensor<f32> into tensor<1xf32>"
        outputs.append(Output("t", (1,), np.dtype(np.float32)))
    values = run_program({"x": x, **scalars}, body, outputs)
    if computed:
        values[2] = values[2][0]
    return tuple(values)


def cpu_dequantize(data: np.ndarray, scales: np.ndarray, block: Sequence[int],
                   out_dtype=np.float32, tensor_scale=None) -> np.ndarray:
    """`mx.dequantize` through the CPU pipeline; same contract as `reference.dequantize` (and
    `reference.dequantize_nvfp4` with `tensor_scale`)."""
    clause, scalars = _tensor_scale_clause("t", tensor_scale)
    body = (_scalar_inputs(scalars) +
            f"  %y = mx.dequantize %d, %s block {_block_text(block)}{clause} : "
            f"{mlir_type(data.shape, data.dtype)}, "
            f"{mlir_type(scales.shape, scales.dtype)} -> {mlir_type(data.shape, out_dtype)}")
    return run_program({"d": data, "s": scales, **scalars}, body,
                       [Output("y", data.shape, np.dtype(out_dtype))])[0]


def _swizzle_op(op: str, source: np.ndarray, result_shape: Sequence[int], unscaled_dim: int,
                layout: str) -> np.ndarray:
    body = (f"  %t = mx.{op} %s unscaled_dim {unscaled_dim} layout {layout} : "
            f"{mlir_type(source.shape, source.dtype)} -> {mlir_type(result_shape, source.dtype)}")
    return run_program({"s": source}, body, [Output("t", tuple(result_shape), source.dtype)])[0]


def cpu_swizzle(scales: np.ndarray, unscaled_dim: int = 0, layout: str = "tiles") -> np.ndarray:
    """`mx.swizzle` through the CPU pipeline; same contract as `reference.swizzle` (`tiles`) and
    `reference.blockwise_gemm_ready` (`blockwise`)."""
    return _swizzle_op("swizzle", scales, reference.swizzled_shape(scales.shape, unscaled_dim, layout),
                       unscaled_dim, layout)


def cpu_unswizzle(swizzled: np.ndarray, shape: Sequence[int], unscaled_dim: int = 0,
                  layout: str = "tiles") -> np.ndarray:
    """`mx.unswizzle` through the CPU pipeline; same contract as `reference.unswizzle` (`tiles`) and
    `reference.blockwise_compact` (`blockwise`)."""
    return _swizzle_op("unswizzle", swizzled, shape, unscaled_dim, layout)


def _rows(data: np.ndarray, layout: str) -> int:
    return data.shape[-2] if layout == "k_contiguous" else data.shape[-1]


def cpu_scaled_matmul(a: np.ndarray, a_scales: np.ndarray, b: np.ndarray, b_scales: np.ndarray,
                      a_block: Sequence[int], b_block: Sequence[int], out_dtype=np.float32,
                      a_layout: str = "k_contiguous", b_layout: str = "k_contiguous", *,
                      a_tensor_scale=None, b_tensor_scale=None) -> np.ndarray:
    """`mx.scaled_matmul` through the CPU pipeline; same contract as `reference.scaled_matmul` (the
    tensor scales of NVFP4 operands, 1.0 standing in for the other operand's)."""
    shape = (*a.shape[:-2], _rows(a, a_layout), _rows(b, b_layout))
    types = ", ".join(mlir_type(v.shape, v.dtype) for v in (a, a_scales, b, b_scales))
    scalars, clause = {}, ""
    if a_tensor_scale is not None or b_tensor_scale is not None:
        scalars = {name: np.asarray(1.0 if value is None else value, np.float32).reshape(1)
                   for name, value in (("ta", a_tensor_scale), ("tb", b_tensor_scale))}
        clause = " tensor_scales(%ta0, %tb0 : tensor<f32>, tensor<f32>)"
    body = (_scalar_inputs(scalars) +
            f"  %c = mx.scaled_matmul %a, %as, %b, %bs lhs_block {_block_text(a_block)} "
            f"lhs_layout {a_layout} rhs_block {_block_text(b_block)} rhs_layout {b_layout}{clause} : "
            f"{types} -> {mlir_type(shape, out_dtype)}")
    inputs = {"a": a, "as": a_scales, "b": b, "bs": b_scales, **scalars}
    return run_program(inputs, body, [Output("c", shape, np.dtype(out_dtype))])[0]


def cpu_amax(x: np.ndarray) -> np.float32:
    """`mx.amax` through the CPU pipeline; same contract as `reference.amax`."""
    body = (f"  %a0 = mx.amax %x : {mlir_type(x.shape, x.dtype)} -> tensor<f32>\n"
            f"  %a = tensor.expand_shape %a0 [] output_shape [1] : tensor<f32> into tensor<1xf32>")
    return run_program({"x": x}, body, [Output("a", (1,), np.dtype(np.float32))])[0][0]


def cpu_quantize_delayed(x: np.ndarray, scales: np.ndarray, history: np.ndarray, index: int,
                         elem: str = "f8E4M3FN") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`mx.quantize_delayed` through the CPU pipeline; same contract as `reference.quantize_delayed`."""
    data_dtype, ones = NUMPY_DTYPES[elem], (1,) * x.ndim
    f32 = np.dtype(np.float32)
    body = (f"  %d, %i, %h1 = mx.quantize_delayed %x, %s, %h index {index} : "
            f"{mlir_type(x.shape, x.dtype)}, {mlir_type(scales.shape, f32)}, {mlir_type(history.shape, f32)} -> "
            f"{mlir_type(x.shape, data_dtype)}, {mlir_type(ones, f32)}, {mlir_type(history.shape, f32)}")
    data, scale_inv, new_history = run_program(
        {"x": x, "s": scales, "h": history}, body,
        [Output("d", x.shape, data_dtype), Output("i", ones, f32), Output("h1", history.shape, f32)])
    return data, scale_inv, new_history


def cpu_update_amax_history(history: np.ndarray, scales: np.ndarray, algorithm: str = "max",
                            margin: int = 0, elem: str = "f8E4M3FN") -> tuple[np.ndarray, np.ndarray]:
    """`mx.update_amax_history` through the CPU pipeline; same contract as
    `reference.update_amax_history`."""
    f32 = np.dtype(np.float32)
    types = f"{mlir_type(history.shape, f32)}, {mlir_type(scales.shape, f32)}"
    body = (f"  %h1, %s1 = mx.update_amax_history %h, %s element {elem} algorithm {algorithm} "
            f"margin {margin} : {types} -> {types}")
    new_history, new_scales = run_program(
        {"h": history, "s": scales}, body,
        [Output("h1", history.shape, f32), Output("s1", scales.shape, f32)])
    return new_history, new_scales
