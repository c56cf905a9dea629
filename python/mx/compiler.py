"""mx.compiler: compile an mx program once, call it many times on numpy arrays and DLPack tensors.

`compile(program, target)` lowers MLIR text (or an `mx.builder.Function`) with `mx-opt` for the CPU
(`--mx-lower-to-cpu`, a host shared library) or an NVIDIA chip (`--mx-lower-to-nvvm`, a library that
calls libmx_runtime) and returns a `Kernel`. Libraries are cached on disk under $MX_CACHE_DIR
(default ~/.cache/mx), keyed by a hash of the source, the target, the pipeline options and the
toolchain's identity (mx.toolchain), like Triton's cache. Where there is no mx-opt (a GPU machine
without MLIR), a compile is served from the cache alone: the newest library built elsewhere for the
same source, target and options; copy the cache directory there.

A Kernel reads its signature from the compiled library (the `_mx_signatures` string that the
pipelines embed) and checks every argument against it before the call. On the CPU it takes numpy
arrays (or any CPU DLPack tensor) and returns numpy arrays that own the memory the compiled code
allocated. On a GPU it takes torch tensors, any CUDA DLPack tensor, or numpy arrays (uploaded), runs
on the caller's current stream (torch's, when torch tensors are given; the legacy default stream
otherwise) without synchronizing, and returns torch tensors that own the device memory (freed
stream-ordered through their DLPack deleter). A torch argument that does not start 16-byte aligned
(a view at an element offset) is copied first, since the kernels cannot take it; another DLPack
tensor is requested with the stream of the call and refused when misaligned. The packed types cross
the GPU boundary packed, as mx.formats says: FP4 (`f4E2M1FN`) two elements to a byte, a torch
argument a `uint8` or `float4_e2m1fn_x2` tensor whose last dimension is half the logical one; FP6
(`f6E3M2FN`, `f6E2M3FN`) four elements to three bytes, a `uint8` tensor whose last dimension is 3/4
of the logical one.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import math
import numbers
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from . import dlpack, formats, tools, toolchain
from .runtime import _descriptor_type

TARGETS = ("cpu", "sm_90a", "sm_100a")
GEMM_LOWERINGS = ("auto", "kernel", "cublas")
_CACHE_FORMAT = 1
_COMPILE_TOOLS = ("mx-opt", "mlir-translate", "llc")

NUMPY_DTYPES = tools.NUMPY_DTYPES
_SCALAR_CTYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i32": ctypes.c_int32,
                  "i64": ctypes.c_int64, "index": ctypes.c_int64}
# MLIR element type -> torch dtype names that carry it (the first is returned; mx.formats).
TORCH_DTYPES = {f.name: f.torch for f in formats.FORMATS}


@functools.lru_cache(maxsize=None)
def _element_type_name(dtype) -> str | None:
    if dtype is None:  # np.dtype(None) is float64
        return None
    if isinstance(dtype, str):
        if dtype in NUMPY_DTYPES:
            return dtype
    elif type(dtype).__module__.startswith("torch"):
        name = str(dtype).removeprefix("torch.")
        return formats.TORCH_NAMES.get(name)  # uint8 carries several types: it names none
    try:
        return tools.MLIR_TYPES.get(np.dtype(dtype))
    except TypeError:
        return None


def element_type_name(dtype) -> str | None:
    """The MLIR element type that `dtype` names: an MLIR type name ("bf16", "f8E4M3FN"), a numpy or
    ml_dtypes dtype, scalar type or dtype name (np.float32, ml_dtypes.float8_e4m3fn, "float16"), or a
    torch dtype (torch.bfloat16; torch.uint8, which carries several mx types, names none). None for
    anything else."""
    try:
        return _element_type_name(dtype)
    except TypeError:  # Unhashable: no dtype.
        return None


class CompileError(tools.ToolError):
    """The program does not compile (the message holds mx-opt's diagnostics), or no library for it
    can be had on this machine."""


@dataclass(frozen=True)
class TensorSpec:
    """One argument or result: kind ("tensor", "scalar" or "other"), shape (-1 dynamic), dtype."""
    kind: str
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        if self.kind != "tensor":
            return self.dtype
        dims = "".join(("?" if d < 0 else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"

    def matches(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.shape) and all(e < 0 or e == d for e, d in zip(self.shape, shape))


@dataclass(frozen=True)
class Signature:
    """A public function: its arguments, its results, and the indices of the arguments it updates
    in place (the source marked them writable and returned their new values, which the compiled
    function writes into the caller's buffers instead of returning them)."""
    name: str
    args: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    updated: tuple[int, ...] = ()

    def __str__(self) -> str:
        return (f"@{self.name}({', '.join(map(str, self.args))}) -> "
                f"({', '.join(map(str, self.results))})")


def _parse_signatures(text: str) -> dict[str, Signature]:
    def specs(entries):
        return tuple(TensorSpec(e["kind"], tuple(e["shape"]), e["dtype"]) for e in entries)
    table = json.loads(text)
    return {f["name"]: Signature(f["name"], specs(f["args"]), specs(f["results"]), tuple(f.get("updated", ())))
            for f in table["functions"]}


def cache_dir() -> Path:
    """$MX_CACHE_DIR, else $XDG_CACHE_HOME/mx, else ~/.cache/mx."""
    override = os.environ.get("MX_CACHE_DIR")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mx"


def _digest(**fields) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def _build(source: str, target: str, gemm: str, output: Path) -> None:
    if target == "cpu":
        tools.compile_cpu_library(source, output)
    else:
        tools.compile_gpu_library(source, output, chip=target, gemm=gemm)


def _cached_library(source: str, target: str, gemm: str, root: Path) -> Path:
    """The library of (source, target, gemm): from the cache, else built and stored there."""
    program_key = _digest(format=_CACHE_FORMAT, source=source, target=target, gemm=gemm)
    index = root / "index" / program_key
    try:
        toolchain_key = toolchain.toolchain_id(*_COMPILE_TOOLS)
    except FileNotFoundError as missing:
        cached = root / index.read_text().strip() / "kernel.so" if index.is_file() else None
        if cached and cached.is_file():
            return cached
        raise CompileError(f"{missing}; and the cache {root} holds no library of this program for "
                           f"{target}: compile it where mx-opt is, with the same $MX_CACHE_DIR, and "
                           "copy that directory here") from None
    entry = Path("lib") / _digest(program=program_key, toolchain=toolchain_key)
    library = root / entry / "kernel.so"
    if not library.is_file():
        (root / "lib").mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root / "lib", prefix=".build-"))
        try:
            (staging / "source.mlir").write_text(source)
            _build(source, target, gemm, staging / "kernel.so")
            (staging / "meta.json").write_text(json.dumps(
                {"target": target, "gemm": gemm, "toolchain": toolchain_key}))
            try:
                staging.rename(root / entry)
            except OSError:  # Another process stored the same library first.
                pass
        except tools.ToolError as error:
            raise CompileError(str(error)) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    index.parent.mkdir(parents=True, exist_ok=True)
    fresh_index = index.with_name(f".{index.name}.{os.getpid()}")
    fresh_index.write_text(str(entry))
    fresh_index.replace(index)
    return library


def compile(program, target: str = "cpu", *, entry: str | None = None, gemm: str = "auto",
            cache: str | os.PathLike | None = None) -> Kernel:
    """Compiles `program` (MLIR text, or an mx.builder.Function) for `target` ("cpu", "sm_90a",
    "sm_100a") and returns its public function `entry` (the only one when None) as a Kernel.
    `gemm` picks the GPU lowering of mx.scaled_matmul (mx-lower-to-nvvm's option); `cache`
    overrides cache_dir(). Loading the library (and, on a GPU target, the GPU) waits for the first
    call or signature access, so that GPU programs can be compiled on a machine without a GPU."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if gemm not in GEMM_LOWERINGS:
        raise ValueError(f"unknown gemm lowering {gemm!r}; expected one of {', '.join(GEMM_LOWERINGS)}")
    source = program if isinstance(program, str) else program.to_mlir()
    root = Path(cache) if cache is not None else cache_dir()
    return Kernel(_cached_library(source, target, gemm, root), target, entry)


_loaded: dict[Path, tuple[ctypes.CDLL, dict[str, Signature]]] = {}


def _load(path: Path, target: str) -> tuple[ctypes.CDLL, dict[str, Signature]]:
    if path not in _loaded:
        if target == "cpu":
            library = ctypes.CDLL(os.fspath(path))
        else:
            from . import runtime
            library = runtime.load_compiled(path)
        try:
            text = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(library, "_mx_signatures")))
        except ValueError:
            raise CompileError(f"{path} has no _mx_signatures: it was not built by mx's pipelines, "
                               "or it has no public function") from None
        _loaded[path] = (library, _parse_signatures(text.decode()))
    return _loaded[path]


_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]


class _HostAllocation:
    """Owns a malloc'ed result of CPU code; numpy arrays over it keep it alive."""

    def __init__(self, allocated: int, data: int, nbytes: int):
        self.allocated = allocated
        self.__array_interface__ = {"data": (data, False), "shape": (nbytes,), "typestr": "|u1",
                                    "version": 3}

    def __del__(self):
        _libc.free(self.allocated)


class Kernel:
    """A compiled public function of an mx program: call it like a Python function."""

    def __init__(self, path: Path, target: str, entry: str | None):
        self.path, self.target, self._entry = path, target, entry
        self._function = None
        self._gpu = None  # _GpuLayouts, made on the first GPU call

    def _bind(self):
        if self._function is None:
            library, signatures = _load(self.path, self.target)
            if self._entry is None:
                if len(signatures) != 1:
                    raise ValueError(f"the program has public functions {', '.join(sorted(signatures))}; "
                                     "pass entry= to pick one")
                self._entry = next(iter(signatures))
            if self._entry not in signatures:
                raise ValueError(f"the program has no public function @{self._entry}; it has "
                                 f"{', '.join(sorted(signatures))}")
            signature = signatures[self._entry]
            unsupported = [r for r in signature.results if r.kind != "tensor"]
            if unsupported:
                raise CompileError(f"@{self._entry} returns {unsupported[0]}; a Kernel returns tensors only")
            function = getattr(library, "_mlir_ciface_" + self._entry)
            function.restype, function.argtypes = None, None
            self._function_address = ctypes.cast(function, ctypes.c_void_p).value
            self._signature = signature
            self._result_type = self._results_struct(signature)
            self._function = function
        return self._function

    @staticmethod
    def _results_struct(signature: Signature):
        fields = [(f"r{i}", _descriptor_type(len(r.shape))) for i, r in enumerate(signature.results)]
        return type("Results", (ctypes.Structure,), {"_fields_": fields}) if fields else None

    @property
    def signature(self) -> Signature:
        self._bind()
        return self._signature

    def __repr__(self) -> str:
        described = str(self._signature) if self._function else (self._entry or "?")
        return f"<mx.Kernel {described} for {self.target} at {self.path}>"

    def _mismatch(self, index: int, spec: TensorSpec, got: str) -> TypeError:
        return TypeError(f"@{self._entry} argument {index} must be {spec}, got {got}")

    def __call__(self, *args):
        values = self.run(*args)
        return values[0] if len(values) == 1 else tuple(values)

    def run(self, *args) -> list:
        """The call's results as a list, whatever their number (what calling the Kernel returns:
        the result, or a tuple of them)."""
        function = self._bind()
        signature = self._signature
        if len(args) != len(signature.args):
            raise TypeError(f"{signature} takes {len(signature.args)} arguments, got {len(args)}")
        if self.target == "cpu":
            results = self._result_type() if self._result_type else None
            call = _CpuCall(self, args)
            function(*([ctypes.byref(results)] if results is not None else []), *call.arguments)
            for argument, updated in call.write_back:
                np.copyto(argument, updated)
            values = [call.result(getattr(results, f"r{i}"), spec) for i, spec in enumerate(signature.results)]
        else:
            if self._gpu is None:
                self._gpu = _GpuLayouts(self._signature, self._result_type)
            values = _gpu_call(self, self._gpu, args)
        return values


_INTEGER_BITS = {"i32": 32, "i64": 64, "index": 64}
_F32_MAX = float(np.finfo(np.float32).max)


def _scalar(kernel: Kernel, index: int, spec: TensorSpec, value):
    """A scalar argument as its C type. Integers must be ints in the type's range and floats real
    numbers that the type holds (or an infinity or NaN): ctypes would wrap or round them silently."""
    integer = spec.dtype in _INTEGER_BITS
    kind = numbers.Integral if integer else numbers.Real
    if spec.dtype not in _SCALAR_CTYPES or not isinstance(value, kind) or isinstance(value, bool):
        raise kernel._mismatch(index, spec, repr(value))
    if integer:
        bound = 1 << (_INTEGER_BITS[spec.dtype] - 1)
        if not -bound <= int(value) < bound:
            raise ValueError(f"@{kernel._entry} argument {index} ({spec.dtype}) must be in "
                             f"[-2**{_INTEGER_BITS[spec.dtype] - 1}, 2**{_INTEGER_BITS[spec.dtype] - 1}), "
                             f"got {int(value)}")
    elif spec.dtype == "f32" and math.isfinite(value) and abs(value) > _F32_MAX:
        raise ValueError(f"@{kernel._entry} argument {index} (f32) {value!r} is out of f32's range")
    return _SCALAR_CTYPES[spec.dtype](value)


def _row_major(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[i + 1:]) for i in range(len(shape))]


def _fill(shape: Sequence[int], data: int) -> ctypes.Structure:
    descriptor = _descriptor_type(len(shape))()
    descriptor.allocated = descriptor.aligned = data
    descriptor.sizes[:] = shape
    descriptor.strides[:] = _row_major(shape)
    return descriptor


class _CpuCall:
    """One call of a CPU kernel: numpy arguments in, numpy results that own their memory out."""

    def __init__(self, kernel: Kernel, args):
        self.arrays, self.arguments, self.owned = [], [], set()  # arrays: kept alive for the call
        self.write_back = []  # (argument, its contiguous copy) of updated arguments
        for index, (arg, spec) in enumerate(zip(args, kernel._signature.args)):
            if spec.kind == "scalar":
                self.arguments.append(_scalar(kernel, index, spec, arg))
                continue
            if spec.kind != "tensor":
                raise kernel._mismatch(index, spec, "an argument a Kernel cannot pass")
            array = arg if isinstance(arg, np.ndarray) else _host_array(kernel, index, spec, arg)
            if array.dtype != NUMPY_DTYPES.get(spec.dtype) or not spec.matches(array.shape):
                raise kernel._mismatch(index, spec, f"an array of shape {array.shape} and dtype {array.dtype}")
            passed = np.ascontiguousarray(array)
            if index in kernel._signature.updated:
                if not array.flags.writeable:
                    raise kernel._mismatch(index, spec, "a read-only array (the function updates it in place)")
                if passed is not array:  # a contiguous copy: its update is copied back after the call
                    self.write_back.append((array, passed))
            self.arrays.append(passed)
            self.arguments.append(ctypes.byref(_fill(passed.shape, passed.ctypes.data)))

    def result(self, descriptor, spec: TensorSpec) -> np.ndarray:
        shape, dtype = tuple(descriptor.sizes), NUMPY_DTYPES[spec.dtype]
        nbytes = math.prod(shape) * dtype.itemsize
        data = descriptor.aligned + descriptor.offset * dtype.itemsize
        allocated = descriptor.allocated or 0
        # The CPU pipeline returns a fresh malloc'ed buffer for every result (deallocation clones
        # arguments and constants), but two results may be the same buffer: free it once.
        shared = allocated in self.owned
        self.owned.add(allocated)
        if shared:
            raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(data)).copy()
        else:
            raw = np.asarray(_HostAllocation(allocated, data, nbytes))
        return raw.view(dtype).reshape(shape)


def _host_array(kernel: Kernel, index: int, spec: TensorSpec, arg) -> np.ndarray:
    if not hasattr(arg, "__dlpack__"):
        raise kernel._mismatch(index, spec, f"a {type(arg).__name__} (pass a numpy array or a CPU "
                                            "DLPack tensor)")
    try:
        return np.from_dlpack(arg)
    except (BufferError, RuntimeError, TypeError) as error:
        raise kernel._mismatch(index, spec, f"a tensor numpy cannot read ({error})") from None


def _stored_shape(spec: TensorSpec) -> tuple[int, ...]:
    """The shape of the memory holding a tensor: packed types (FP4, FP6) have fewer bytes than elements
    in the innermost dimension."""
    fmt = formats.BY_NAME.get(spec.dtype)
    return fmt.stored_shape(spec.shape) if fmt is not None else spec.shape


class _CallFrame:
    """The ctypes memory of one GPU call, reused by later calls of the same Kernel: the memref
    descriptors of the arguments in one block of 64-bit words (their sizes and strides written
    once; a call sets each argument's two pointers), the array of pointers to them that mxrtInvoke
    takes, the results' descriptors, and the exported and owned arrays it fills."""

    def __init__(self, layouts: _GpuLayouts):
        self.words = (ctypes.c_int64 * len(layouts.template))(*layouts.template)
        base = ctypes.addressof(self.words)
        self.pointers = (ctypes.c_void_p * len(layouts.pointer_words))(
            *[base + 8 * word for word in layouts.pointer_words])
        self.results = layouts.result_type() if layouts.result_type else None
        self.results_address = ctypes.addressof(self.results) if self.results is not None else None
        count = len(layouts.result_dtypes)
        self.exported, self.owned = (ctypes.c_void_p * count)(), (ctypes.c_int32 * count)()


class _GpuLayouts:
    """What a GPU Kernel's calls reuse, so that a call costs little host time: per argument its
    stored shape, accepted torch dtypes and the word of its descriptor that a call sets; per result
    the layout mxrtInvoke exports it by and its torch dtype; the runtime and torch's current-stream
    query; and a pool of call frames (a call takes one and gives it back after, so that calls from
    several threads never share one)."""

    def __init__(self, signature: Signature, result_type):
        import torch
        from . import runtime
        if any(d < 0 for spec in (*signature.args, *signature.results) for d in spec.shape):
            raise CompileError(f"{signature} has a dynamic dimension; GPU Kernels take static shapes")
        if any(spec.kind != "tensor" for spec in signature.args) or len(signature.args) > 16:
            raise CompileError(f"{signature}: GPU Kernels take up to 16 tensor arguments (no scalars)")
        self.torch, self.runtime, self.library = torch, runtime, runtime.load_library()
        self.from_dlpack = getattr(torch._C, "_from_dlpack", torch.utils.dlpack.from_dlpack)
        get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.current_stream = get_raw or (lambda index: torch.cuda.current_stream(index).cuda_stream)
        # Each descriptor: allocated, aligned, offset (0), sizes, strides. The template's pointers
        # are zero; each call writes its own.
        self.template, self.pointer_words, self.arguments = [], [], []
        for spec in signature.args:
            self.pointer_words.append(len(self.template))
            self.arguments.append((_stored_shape(spec),
                                   {getattr(torch, name) for name in TORCH_DTYPES.get(spec.dtype, ())
                                    if hasattr(torch, name)}, len(self.template)))
            self.template += [0, 0, 0, *spec.shape, *_row_major(spec.shape)]
        self.result_type = result_type
        self.updated = signature.updated
        results = signature.results
        self.result_layouts = (runtime.ResultLayout * len(results))()
        self.result_layouts_address = ctypes.addressof(self.result_layouts)
        self.result_shapes, self.result_dtypes = [], []
        for layout, spec in zip(self.result_layouts, results):
            stored = _stored_shape(spec)
            shape = (ctypes.c_int64 * len(stored))(*stored)
            self.result_shapes.append(shape)  # kept alive: the layouts point at them
            layout.rank, layout.storedRank, layout.storedShape = len(spec.shape), len(stored), shape
            layout.code, layout.bits = _result_dlpack_type(torch, spec.dtype)
            fmt = formats.get(spec.dtype)
            layout.itemBytes = 1 if fmt.packed else fmt.dtype.itemsize
            self.result_dtypes.append(getattr(torch, TORCH_DTYPES[spec.dtype][0], None))
        self.frames: list[_CallFrame] = []


def _result_dlpack_type(torch, elem: str) -> tuple[int, int]:
    """The DLPack (code, bits) that a GPU result of element type `elem` is exported with: the code
    under which torch exports its torch dtype (DLPack 1.1's FP8 and E8M0 codes), so that torch
    imports the result as that dtype and no call views it, where torch gives it the carrier's bits
    and one lane; else the carrier's (mx.formats: uint8 for packed FP4 and FP6)."""
    carrier = dlpack.DL_TYPES[elem]
    wanted = getattr(torch, TORCH_DTYPES[elem][0], None)
    if wanted is None:
        return carrier
    try:
        code, bits, lanes = dlpack.Imported(torch.empty(1, dtype=wanted)).dtype
    except (BufferError, RuntimeError, TypeError):
        return carrier
    return (code, bits) if (bits, lanes) == (carrier[1], 1) else carrier


def _gpu_call(kernel: Kernel, layouts: _GpuLayouts, args) -> list:
    """One call of a GPU kernel on the caller's stream through mxrtInvoke (one foreign call); its
    results become torch tensors that own their memory (a copy where a result is an argument or
    another result). An argument that the function updates in place and that was passed as a
    copy (not contiguous, or misaligned) gets the copy's new value back, on the same stream."""
    tensor_type = layouts.torch.Tensor
    # torch's current stream where torch tensors are given (the first argument, in every call from
    # mx.torch), else the legacy default stream (torch's default): DLPack producers are asked to
    # order their writes before it.
    torch_given = bool(args) and isinstance(args[0], tensor_type) or \
        any(isinstance(a, tensor_type) for a in args)
    stream = layouts.current_stream(0) if torch_given else 0
    frame = layouts.frames.pop() if layouts.frames else _CallFrame(layouts)
    try:
        keep, words = [], frame.words  # keep: what must outlive the call (copies, uploads)
        updated = layouts.updated
        passed = list(args) if updated else args  # what the call wrote, where updated
        alignment = layouts.runtime.ARGUMENT_ALIGNMENT
        for index, (arg, (stored, dtypes, word)) in enumerate(zip(args, layouts.arguments)):
            # The common case, a torch tensor of the stored shape and an accepted dtype on cuda:0,
            # checked in one expression.
            if isinstance(arg, tensor_type) and arg.shape == stored and arg.dtype in dtypes and \
                    arg.get_device() == 0:
                if not arg.is_contiguous():
                    arg = arg.contiguous()
                    keep.append(arg)
                data = arg.data_ptr()
                if data % alignment:
                    # A view at an element offset: the kernels take 16-byte aligned bases only.
                    arg = arg.clone(memory_format=layouts.torch.contiguous_format)
                    keep.append(arg)
                    data = arg.data_ptr()
            else:
                data = _device_argument(kernel, layouts, index, arg, stream, keep)
            if updated:
                passed[index] = arg
            words[word] = words[word + 1] = data
        status = layouts.library.mxrtInvoke(
            kernel._function_address, stream, len(args), frame.pointers, frame.results_address,
            len(layouts.result_dtypes), layouts.result_layouts_address, frame.exported, frame.owned)
        if status:
            runtime = layouts.runtime
            raise runtime.MXRuntimeError(status, runtime.last_error() or f"mxrtInvoke failed ({status})")
        for index in updated:
            if passed[index] is not args[index]:
                args[index].copy_(passed[index])
        tensors = []
        for managed, is_owned, wanted in zip(frame.exported, frame.owned, layouts.result_dtypes):
            tensor = layouts.from_dlpack(dlpack.capsule(managed))
            if not is_owned:
                tensor = tensor.clone()
            tensors.append(tensor.view(wanted) if wanted is not None and wanted != tensor.dtype else tensor)
        return tensors
    finally:
        layouts.frames.append(frame)


def _device_argument(kernel: Kernel, layouts: _GpuLayouts, index: int, arg, stream: int, keep: list) -> int:
    """Any other argument: a numpy array (uploaded), a DLPack tensor, or a mismatch to report."""
    spec, runtime = kernel._signature.args[index], layouts.runtime
    if isinstance(arg, layouts.torch.Tensor):
        dtype_name = str(arg.dtype).removeprefix("torch.")
        where = f"on {arg.device} (mx runs on cuda:0)" if arg.is_cuda else f"on {arg.device}"
        raise kernel._mismatch(index, spec, f"a {dtype_name} tensor of shape {tuple(arg.shape)} {where}")
    if isinstance(arg, np.ndarray):
        if index in layouts.updated:
            raise kernel._mismatch(index, spec, "a numpy array (the function updates this argument in "
                                                "place: pass a device tensor)")
        if arg.dtype != NUMPY_DTYPES.get(spec.dtype) or not spec.matches(arg.shape):
            raise kernel._mismatch(index, spec, f"an array of shape {arg.shape} and dtype {arg.dtype}")
        buffer = runtime.DeviceBuffer.from_numpy(arg)
        keep.append(buffer)
        return buffer.ptr
    memref = runtime.MemRef.from_dlpack(arg, stream)
    if memref.strides != tuple(_row_major(memref.shape)) or not spec.matches(memref.shape):
        raise kernel._mismatch(index, spec, f"a row-major-contiguous tensor of shape {memref.shape}")
    if memref.aligned % runtime.ARGUMENT_ALIGNMENT:
        raise kernel._mismatch(index, spec, f"a tensor at address {memref.aligned:#x}, which is not "
                               f"{runtime.ARGUMENT_ALIGNMENT}-byte aligned (pass a copy)")
    keep.append(memref)
    return memref.aligned
