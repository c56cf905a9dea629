"""mx.ops: the mx ops as functions on numpy arrays and torch tensors, compiled once per shape.

`quantize`, `dequantize`, `swizzle`, `unswizzle`, `scaled_matmul` and `column_sum` have the contracts
of their mx.reference namesakes. Each call checks its arguments (array types, dtypes, ranks, block shapes, K
against the blocks) before anything is compiled and raises TypeError or ValueError saying what was
expected; a combination that only the op's verifier rejects (say, E4M3 scales with FP8 data) is a
ValueError carrying the verifier's message. Then it builds the one-op program for its shapes with
mx.builder, compiles it through mx.compiler (memoized here, cached on disk there) and runs it where the
inputs live: numpy arrays and CPU torch tensors on the CPU pipeline (numpy results), CUDA torch tensors
on the GPU's chip (torch results, on the current stream). `target=` overrides that choice (numpy
inputs are then uploaded). The `*_kernel` functions return the compiled Kernel for given shapes without
running it, which is how programs are compiled ahead of time for a machine without mx-opt.

Element types are MLIR names ("f8E4M3FN", "bf16"), numpy / ml_dtypes dtypes (ml_dtypes.float8_e5m2,
np.float32) or torch dtypes (torch.float8_e4m3fn). A block is one entry per dimension, or an int n:
n elements along the last dimension (along K for a GEMM operand) and 1 elsewhere, so the default
`block=32` is MXFP8's [1, 32] for a matrix and [1, 1, 32] for a 3-D tensor.
"""

from __future__ import annotations

import functools
import numbers
import re
from typing import Sequence, Union

import numpy as np

from . import builder, compiler, formats, reference

WIDE_TYPES = formats.WIDE_TYPES  # what quantize reads and dequantize / matmul write
_ELEMENTS = formats.ELEMENT_TYPES
_SCALES = (*formats.SCALE_TYPES, "f8E4M3FN")  # E8M0, f32 and NVFP4's E4M3
_ROUNDINGS = reference.ROUNDING_MODES
_LAYOUTS = reference.LAYOUTS
Block = Union[int, Sequence[int]]


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _check_tensor(op: str, name: str, x) -> None:
    if not (_is_torch(x) or isinstance(x, np.ndarray)):
        raise TypeError(f"mx.{op}: {name} must be a numpy array or a torch tensor, got "
                        f"{type(x).__name__}")


def element_type(x, declared: str | None = None) -> str:
    """The MLIR element type of a numpy array or torch tensor. A torch tensor whose dtype names no mx
    type (uint8 carrying FP8 bytes or packed FP6) needs `declared`, which must be a type that the
    tensor's dtype carries (mx.formats); FP8 data may instead be viewed as its torch float8 dtype."""
    dtype = x.dtype if _is_torch(x) else np.asarray(x).dtype
    dtype_name = str(dtype).removeprefix("torch.")
    kind = "torch" if _is_torch(x) else "numpy"
    if declared is not None:
        fmt = formats.get(compiler.element_type_name(declared) or str(declared))
        if dtype_name not in (fmt.torch if _is_torch(x) else (str(fmt.dtype),)):
            raise TypeError(f"a {kind} {dtype_name} tensor does not carry {fmt.name}")
        return fmt.name
    name = compiler.element_type_name(dtype)
    if name is None:
        hint = " (name the element type it carries)" if dtype_name == "uint8" else ""
        raise TypeError(f"{kind} dtype {dtype_name} is not an mx element type{hint}")
    return name


def _type_name(op: str, what: str, dtype, allowed: Sequence[str]) -> str:
    """`dtype` (an MLIR name, numpy / ml_dtypes or torch dtype) as one of the MLIR names `allowed`."""
    name = compiler.element_type_name(dtype)
    _check(name in allowed, op, f"{what} {getattr(dtype, '__name__', dtype)!s} is not one of "
                                f"{', '.join(allowed)} (or their numpy / ml_dtypes / torch dtypes)")
    return name


def logical_shape(x, elem: str) -> tuple[int, ...]:
    """The shape in elements of `x` holding `elem`: a torch tensor of a packed type (FP4, FP6) is its
    memory, fewer bytes than elements in the innermost dimension; numpy holds an element per entry."""
    shape = tuple(x.shape)
    return formats.get(elem).logical_shape(shape) if _is_torch(x) else shape


def _describe(x, declared: str | None = None) -> tuple[tuple[int, ...], str]:
    """(logical shape, element type) of an argument, as the *_kernel functions take them."""
    elem = element_type(x, declared)
    return logical_shape(x, elem), elem


@functools.cache
def _chip(device: str) -> str:
    """The mx target of a CUDA device, from its compute capability (asked once per device)."""
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    chips = {9: "sm_90a", 10: "sm_100a"}
    if major not in chips:
        raise ValueError(f"no mx GPU target for compute capability {major}.{minor} (sm_90a, sm_100a)")
    return chips[major]


def _target_of(values: Sequence, target: str | None) -> str:
    if target is not None:
        return target
    devices = {str(v.device) for v in values if _is_torch(v) and v.is_cuda}
    if not devices:
        return "cpu"
    if len(devices) > 1:
        raise ValueError(f"inputs are on several devices: {', '.join(sorted(devices))}")
    return _chip(next(iter(devices)))


def _host(x, elem: str):
    """A CPU torch tensor holding `elem` as the numpy array the CPU pipeline takes (bf16 and FP8 through
    their bits, packed types unpacked to an element an entry); numpy passes through."""
    if not _is_torch(x):
        return np.asarray(x)
    import torch
    fmt = formats.get(elem)
    if fmt.packed:
        return fmt.unpack(x.detach().contiguous().view(torch.uint8).numpy())
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[fmt.dtype.itemsize]
    return x.detach().contiguous().view(carrier).numpy().view(fmt.dtype)


_VERIFIER_ERROR = re.compile(r"error: (.*'mx\.\w+'.*)")


def _run(op: str, kernel_of, target, values, elems, *args):
    """Compiles (or finds) the op's kernel for these arguments and runs it where the inputs live
    (`values`, holding `elems`). The op's verifier rejecting the program means the arguments were
    wrong: that is a ValueError."""
    try:
        kernel = kernel_of(*args, target=target)
    except compiler.CompileError as error:
        found = _VERIFIER_ERROR.search(str(error))
        if found is None:
            raise
        raise ValueError(f"mx.{op}: {found.group(1)}") from None
    inputs = values if target != "cpu" else [_host(v, e) for v, e in zip(values, elems)]
    return kernel(*inputs)


def _check(condition: bool, op: str, message: str) -> None:
    if not condition:
        raise ValueError(f"mx.{op}: {message}")


def _check_block(op: str, shape: Sequence[int], block: Block, along: int | None = None) -> tuple[int, ...]:
    """`block` as one positive int per dimension of `shape`; an int n is n along dimension `along`
    (default the last) and 1 elsewhere."""
    rank = len(shape)
    _check(rank >= 2, op, f"input has rank {rank}; mx ops take rank >= 2")
    if isinstance(block, numbers.Integral) and not isinstance(block, bool):
        along = rank - 1 if along is None else along
        block = tuple(int(block) if d == along else 1 for d in range(rank))
    if isinstance(block, (str, bytes)) or not isinstance(block, Sequence):
        raise TypeError(f"mx.{op}: block must be an int or a sequence of ints, got {block!r}")
    bad = [b for b in block if not isinstance(b, numbers.Integral) or isinstance(b, bool)]
    _check(not bad, op, f"block {tuple(block)} has the non-integer entry {bad[0]!r}" if bad else "")
    block = tuple(int(b) for b in block)
    _check(len(block) == rank, op, f"block {block} has {len(block)} entries but the input "
                                   f"{tuple(shape)} has rank {rank}")
    _check(all(b >= 1 for b in block), op, f"block {block} has an entry below 1")
    return block


def _transposed(block: Sequence[int]) -> tuple[int, ...]:
    return (*block[:-2], block[-1], block[-2])


def _unscaled_dim(op: str, block: Sequence[int]) -> int:
    """The scale dimension a swizzle keeps whole: the one of the last two whose block extent is 1."""
    rank = len(block)
    _check(1 in block[-2:] and block[-2:] != (1, 1), op,
           f"swizzled scales need a block of one row or one column, got {tuple(block)}")
    return rank - 2 if block[-2] == 1 else rank - 1


@functools.cache
def quantize_kernel(shape: tuple[int, ...], dtype: str, block: tuple[int, ...], elem: str = "f8E4M3FN",
                    scale_type: str = "f8E8M0FNU", rounding: str | None = "ceil", swizzle: bool = False,
                    columnwise: bool = False, transposed: bool = False, column_sum: bool = False, *,
                    target: str = "cpu") -> compiler.Kernel:
    """The compiled quantize of `quantize` for one input shape and dtype (MLIR element type); with
    `column_sum` the program also returns mx.column_sum of the (2-D) input, last: a linear layer's
    bias gradient, which the GPU computes in the cast+transpose kernel of a per-tensor `transposed`
    quantize and in the strip kernel of a 1x128 blockwise `columnwise` `transposed` one, and in a
    kernel of its own otherwise (docs/gpu.md)."""
    dtype = _type_name("quantize", "input dtype", dtype, WIDE_TYPES)
    elem = _type_name("quantize", "element type", elem, _ELEMENTS)
    scale_type = _type_name("quantize", "scale type", scale_type, _SCALES)
    _check(rounding is None or rounding in _ROUNDINGS, "quantize",
           f"rounding {rounding} is not one of {', '.join(_ROUNDINGS)}")
    block = _check_block("quantize", shape, block)
    f = builder.Function("quantize")
    x = f.arg(shape, dtype)
    _check(not (transposed and swizzle), "quantize", "transposed outputs take no swizzle")
    results = []
    # The second pair's blocks of x: its columns (columnwise) or the rowwise ones again; written
    # transposed, its block is given in the data's (transposed) dimensions.
    second = _transposed(block) if columnwise else block
    pairs = [(block, False)] + [(_transposed(second), True)] * transposed + \
        [(second, False)] * (columnwise and not transposed)
    for blk, written_transposed in pairs:
        data, scales, *tensor_scale = f.quantize(x, blk, elem, scale_type,
                                                 None if scale_type == "f8E4M3FN" else rounding,
                                                 transposed=written_transposed)
        if swizzle:
            layout = "blockwise" if scale_type == "f32" else "tiles"
            scales = f.swizzle(scales, _unscaled_dim("quantize", blk), layout)
        results += [data, scales, *tensor_scale]
    if column_sum:
        results.append(f.column_sum(x))
    f.returns(*results)
    return compiler.compile(f, target)


def quantize(x, block: Block = 32, elem="f8E4M3FN", scale_type="f8E8M0FNU", rounding: str = "ceil", *,
             swizzle: bool = False, columnwise: bool = False, transposed: bool = False,
             target: str | None = None):
    """`mx.quantize` of x (float32, bfloat16 or float16; numpy or torch): (data, scales) as
    reference.quantize returns them, plus the tensor scale (a 0-D f32) that NVFP4 computes
    (f4E2M1FN data with f8E4M3FN scales, block 16; `rounding` does not apply to E4M3 scales).
    `swizzle` lays the scales out for the GEMM (128x4 tiles; GEMM-ready blockwise for f32 scales).
    `columnwise` also quantizes with the block transposed in the last two dimensions, in the same
    program (one fused kernel on the GPU), and appends that pair: (data, scales, col_data,
    col_scales). `transposed` appends a pair written transposed, GEMM-ready for a GEMM that reads
    x K-outer (Transformer Engine's cast+transpose, one kernel on the GPU): the columnwise pair as
    reference.quantize(x^T, block) gives it when `columnwise` is set, else the same blocks as the
    rowwise pair (one block per matrix: the rowwise bytes transposed)."""
    _check_tensor("quantize", "x", x)
    target = _target_of([x], target)
    shape, dtype = _describe(x)
    return _run("quantize", quantize_kernel, target, [x], [dtype], shape, dtype,
                _check_block("quantize", shape, block), _type_name("quantize", "element type", elem, _ELEMENTS),
                _type_name("quantize", "scale type", scale_type, _SCALES), rounding, swizzle, columnwise,
                transposed)


@functools.cache
def dequantize_kernel(shape: tuple[int, ...], dtype: str, scales_shape: tuple[int, ...], scale_type: str,
                      block: tuple[int, ...], out_dtype: str = "f32", tensor_scale: bool = False, *,
                      target: str = "cpu") -> compiler.Kernel:
    """The compiled dequantize of `dequantize` for one data shape (`tensor_scale`: with NVFP4's tensor
    scale as a third argument)."""
    dtype = _type_name("dequantize", "data dtype", dtype, _ELEMENTS)
    out_dtype = _type_name("dequantize", "result dtype", out_dtype, WIDE_TYPES)
    block = _check_block("dequantize", shape, block)
    expected = reference.scales_shape(shape, block)
    _check(tuple(scales_shape) == expected, "dequantize",
           f"scales have shape {tuple(scales_shape)}; data {tuple(shape)} in blocks {block} needs {expected}")
    f = builder.Function("dequantize")
    data, scales = f.arg(shape, dtype), f.arg(scales_shape, scale_type)
    t = f.arg((), "f32") if tensor_scale else None
    f.returns(f.dequantize(data, scales, block, out_dtype, t))
    return compiler.compile(f, target)


def _check_tensor_scale(op: str, name: str, t) -> None:
    _check_tensor(op, name, t)
    _check(tuple(t.shape) == () and element_type(t) == "f32", op,
           f"{name} must be a 0-D float32 tensor (what quantize returns for NVFP4), got shape "
           f"{tuple(t.shape)} and dtype {element_type(t)}")


def dequantize(data, scales, block: Block = 32, out_dtype="f32", *, tensor_scale=None,
               elem: str | None = None, target: str | None = None):
    """`mx.dequantize`: float(data) * scale per block, as `out_dtype` (f32, bf16 or f16), times NVFP4's
    `tensor_scale` (the 0-D f32 that quantize returned) where given. `elem` names the element type of
    data whose dtype does not (a torch uint8 tensor of packed FP6)."""
    _check_tensor("dequantize", "data", data)
    _check_tensor("dequantize", "scales", scales)
    values = [data, scales]
    if tensor_scale is not None:
        _check_tensor_scale("dequantize", "tensor_scale", tensor_scale)
        values.append(tensor_scale)
    target = _target_of(values, target)
    (shape, dtype), (scales_shape, scale_type) = _describe(data, elem), _describe(scales)
    return _run("dequantize", dequantize_kernel, target, values, [dtype, scale_type, "f32"], shape, dtype,
                scales_shape, scale_type, _check_block("dequantize", shape, block),
                _type_name("dequantize", "result dtype", out_dtype, WIDE_TYPES), tensor_scale is not None)


def _check_unscaled_dim(op: str, shape: Sequence[int], unscaled_dim: int | None) -> None:
    rank = len(shape)
    _check(rank >= 2, op, f"scales have rank {rank}; expected >= 2")
    _check(unscaled_dim is None or (isinstance(unscaled_dim, numbers.Integral)
                                    and unscaled_dim in (rank - 2, rank - 1)), op,
           f"unscaled_dim {unscaled_dim!r} is not one of the last two dimensions ({rank - 2} or {rank - 1}) "
           f"of the scales {tuple(shape)}")


@functools.cache
def swizzle_kernel(shape: tuple[int, ...], scale_type: str, unscaled_dim: int | None = None,
                   layout: str = "tiles", inverse_of: tuple[int, ...] | None = None, *,
                   target: str = "cpu") -> compiler.Kernel:
    """The compiled swizzle (or, with `inverse_of` = the compact shape, unswizzle)."""
    op = "swizzle" if inverse_of is None else "unswizzle"
    scale_type = _type_name(op, "scale type", scale_type, _SCALES)
    _check(layout in ("tiles", "blockwise"), op, f"layout {layout} is not tiles or blockwise")
    _check_unscaled_dim(op, shape if inverse_of is None else inverse_of, unscaled_dim)
    f = builder.Function(op)
    scales = f.arg(shape, scale_type)
    if inverse_of is None:
        f.returns(f.swizzle(scales, unscaled_dim, layout))
    else:
        f.returns(f.unswizzle(scales, inverse_of, unscaled_dim, layout))
    return compiler.compile(f, target)


def swizzle(scales, unscaled_dim: int | None = None, layout: str = "tiles", *, target: str | None = None):
    """`mx.swizzle` of compact scales (`unscaled_dim`: absolute, default the rank's row dimension)."""
    _check_tensor("swizzle", "scales", scales)
    target = _target_of([scales], target)
    shape, scale_type = _describe(scales)
    return _run("swizzle", swizzle_kernel, target, [scales], [scale_type], shape, scale_type, unscaled_dim,
                layout, None)


def unswizzle(tiles, shape: Sequence[int], unscaled_dim: int | None = None, layout: str = "tiles", *,
              target: str | None = None):
    """`mx.unswizzle` back to the compact scales of `shape`."""
    _check_tensor("unswizzle", "tiles", tiles)
    target = _target_of([tiles], target)
    tiles_shape, scale_type = _describe(tiles)
    return _run("unswizzle", swizzle_kernel, target, [tiles], [scale_type], tiles_shape, scale_type,
                unscaled_dim, layout, tuple(int(d) for d in shape))


def _gemm_rows_and_k(op: str, shape: Sequence[int], layout: str, name: str) -> tuple[int, int]:
    _check(layout in _LAYOUTS, op, f"{name} layout {layout} is not one of {', '.join(_LAYOUTS)}")
    _check(len(shape) >= 2, op, f"{name} has rank {len(shape)}; expected >= 2")
    return (shape[-2], shape[-1]) if layout == "k_contiguous" else (shape[-1], shape[-2])


def _gemm_block(op: str, shape: Sequence[int], block: Block, layout: str, name: str) -> tuple[int, ...]:
    """An operand's block; an int is that many elements along K (the last dimension of a K-contiguous
    operand, the second to last of a K-outer one)."""
    _gemm_rows_and_k(op, shape, layout, name)
    return _check_block(op, shape, block, len(shape) - (1 if layout == "k_contiguous" else 2))


@functools.cache
def scaled_matmul_kernel(a_shape: tuple[int, ...], a_type: str, a_scales_shape: tuple[int, ...],
                         a_scale_type: str, b_shape: tuple[int, ...], b_type: str,
                         b_scales_shape: tuple[int, ...], b_scale_type: str, a_block: tuple[int, ...],
                         b_block: tuple[int, ...], out_dtype: str = "f32",
                         a_layout: str = "k_contiguous", b_layout: str = "k_contiguous",
                         tensor_scales: bool = False, bias_dtype: str | None = None, accumulate: bool = False,
                         *, target: str = "cpu") -> compiler.Kernel:
    """The compiled product of `scaled_matmul` for one set of operand shapes (`tensor_scales`: with both
    operands' NVFP4 tensor scales as two more arguments; `bias_dtype`: with a bias [N] of that type
    added, `accumulate`: with an output D [..., M, N] of `out_dtype` added, as the last arguments:
    C = round((A B^T + bias) + D), in one kernel on the GPU)."""
    op = "scaled_matmul"
    a_type, b_type = (_type_name(op, f"{name} dtype", t, _ELEMENTS) for name, t in (("lhs", a_type), ("rhs", b_type)))
    out_dtype = _type_name(op, "result dtype", out_dtype, WIDE_TYPES)
    _check(a_shape[:-2] == b_shape[:-2], op, f"batch dimensions differ: {a_shape} and {b_shape}")
    _, k = _gemm_rows_and_k(op, a_shape, a_layout, "lhs")
    _, k_rhs = _gemm_rows_and_k(op, b_shape, b_layout, "rhs")
    _check(k == k_rhs, op, f"lhs {a_shape} ({a_layout}) has K = {k} but rhs {b_shape} ({b_layout}) has "
                           f"K = {k_rhs}")
    for name, block, layout, shape in (("lhs", a_block, a_layout, a_shape), ("rhs", b_block, b_layout, b_shape)):
        block = _gemm_block(op, shape, block, layout, name)
        k_block = block[-1] if layout == "k_contiguous" else block[-2]
        _check(k % k_block == 0, op, f"K = {k} is not a multiple of the {name} block's K extent {k_block}")
    f = builder.Function("scaled_matmul")
    a, a_scales = f.arg(a_shape, a_type), f.arg(a_scales_shape, a_scale_type)
    b, b_scales = f.arg(b_shape, b_type), f.arg(b_scales_shape, b_scale_type)
    scalars = (f.arg((), "f32"), f.arg((), "f32")) if tensor_scales else None
    rows = [_gemm_rows_and_k(op, shape, layout, name)[0]
            for shape, layout, name in ((a_shape, a_layout, "lhs"), (b_shape, b_layout, "rhs"))]
    bias = None
    if bias_dtype is not None:
        bias = f.arg((rows[1],), _type_name(op, "bias dtype", bias_dtype, WIDE_TYPES))
    accumulator = f.arg((*a_shape[:-2], *rows), out_dtype) if accumulate else None
    f.returns(f.scaled_matmul(a, a_scales, b, b_scales, a_block, b_block, out_dtype, a_layout, b_layout,
                              scalars, bias, accumulator))
    return compiler.compile(f, target)


def scaled_matmul(a, a_scales, b, b_scales, a_block: Block = 32, b_block: Block = 32, out_dtype="f32",
                  a_layout: str = "k_contiguous", b_layout: str = "k_contiguous", *, tensor_scales=None,
                  a_elem: str | None = None, b_elem: str | None = None, target: str | None = None):
    """`mx.scaled_matmul`: C[..., m, n] = sum_k deq(A)[..., m, k] deq(B)[..., n, k] (B as [..., N, K]
    for k_contiguous, [..., K, N] for k_outer); scales compact, tiled or GEMM-ready. `tensor_scales`
    = (t_a, t_b): both operands' NVFP4 tensor scales (the 0-D f32s quantize returned). `a_elem` and
    `b_elem` name the element types of operands whose dtype does not (torch uint8 tensors of packed
    FP6)."""
    op = "scaled_matmul"
    values = [a, a_scales, b, b_scales]
    for name, value in zip(("a", "a_scales", "b", "b_scales"), values):
        _check_tensor(op, name, value)
    if tensor_scales is not None:
        _check(isinstance(tensor_scales, (tuple, list)) and len(tensor_scales) == 2, op,
               "tensor_scales must be a pair (t_a, t_b)")
        for name, t in zip(("tensor_scales[0]", "tensor_scales[1]"), tensor_scales):
            _check_tensor_scale(op, name, t)
        values += list(tensor_scales)
    target = _target_of(values, target)
    (a_shape, a_type), (a_scales_shape, a_scale_type), (b_shape, b_type), (b_scales_shape, b_scale_type) = (
        _describe(a, a_elem), _describe(a_scales), _describe(b, b_elem), _describe(b_scales))
    elems = [a_type, a_scale_type, b_type, b_scale_type, "f32", "f32"]
    return _run(op, scaled_matmul_kernel, target, values, elems, a_shape, a_type, a_scales_shape, a_scale_type,
                b_shape, b_type, b_scales_shape, b_scale_type, _gemm_block(op, a_shape, a_block, a_layout, "lhs"),
                _gemm_block(op, b_shape, b_block, b_layout, "rhs"), _type_name(op, "result dtype", out_dtype, WIDE_TYPES),
                a_layout, b_layout, tensor_scales is not None)


@functools.cache
def column_sum_kernel(shape: tuple[int, int], dtype: str, *, target: str = "cpu") -> compiler.Kernel:
    """The compiled column sum of a matrix of `shape` (mx.column_sum): [N] f32."""
    _check(len(shape) == 2, "column_sum", f"input has shape {tuple(shape)}; column_sum takes a matrix [M, N]")
    f = builder.Function("column_sum")
    f.returns(f.column_sum(f.arg(shape, _type_name("column_sum", "input dtype", dtype, WIDE_TYPES))))
    return compiler.compile(f, target)


def column_sum(x, *, target: str | None = None):
    """`mx.column_sum` of a matrix x [M, N] (float32, bfloat16 or float16; numpy or torch): the f32
    sum of every column, [N] (reference.column_sum's contract: within reference.column_sum_bound of
    the exact sum)."""
    _check_tensor("column_sum", "x", x)
    target = _target_of([x], target)
    shape, dtype = _describe(x)
    return _run("column_sum", column_sum_kernel, target, [x], [dtype], shape, dtype)


@functools.cache
def quantize_delayed_kernel(shape: tuple[int, ...], dtype: str, slots: int, history_length: int, index: int,
                            elem: str = "f8E4M3FN", transposed: bool = False, column_sum: bool = False,
                            in_place: bool = False, *, target: str = "cpu") -> compiler.Kernel:
    """The compiled delayed-scaling cast of tensor `index` of `slots` (mx.quantize_delayed):
    (data, scale_inv, new_history), or with `transposed` (data, scale_inv, transposed data,
    new_history), the second cast reading the first's history (one kernel on the GPU); with
    `column_sum` also mx.column_sum of the input, last (in the cast+transpose kernel on the GPU).
    `in_place`: the history argument is updated (builder.Function.arg's `updated`): the kernel
    records the amax in the caller's history and does not return it (no copy of it, on the GPU
    one kernel), its signature's `updated` says so."""
    _check(dtype in WIDE_TYPES, "quantize_delayed", f"input dtype {dtype} is not one of {', '.join(WIDE_TYPES)}")
    _check(0 <= index < slots, "quantize_delayed", f"index {index} is outside the {slots} scales")
    f = builder.Function("quantize_delayed")
    x, scales = f.arg(shape, dtype), f.arg((slots,), "f32")
    history = f.arg((history_length, slots), "f32", updated=in_place)
    data, scale_inv, new_history = f.quantize_delayed(x, scales, history, index, elem)
    results = [data, scale_inv]
    if transposed:
        data_t, _, new_history = f.quantize_delayed(x, scales, new_history, index, elem, transposed=True)
        results.append(data_t)
    results.append(new_history)
    if column_sum:
        results.append(f.column_sum(x))
    f.returns(*results)
    return compiler.compile(f, target)


@functools.cache
def update_amax_history_kernel(slots: int, history_length: int, elem: str = "f8E4M3FN",
                               algorithm: str = "max", margin: int = 0, *,
                               target: str = "cpu") -> compiler.Kernel:
    """The compiled amax-history update of `slots` tensors (mx.update_amax_history)."""
    f = builder.Function("update_amax_history")
    history, scales = f.arg((history_length, slots), "f32"), f.arg((slots,), "f32")
    f.returns(*f.update_amax_history(history, scales, elem, algorithm, margin))
    return compiler.compile(f, target)
