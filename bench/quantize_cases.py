"""bench/quantize_cases: the rows of bench/quantize.py, one Case per mx program: its MLIR source, its
shape, bytes and goal, and its torch peer (see bench/quantize.py's docstring)."""

from __future__ import annotations

from quantize_peers import (NotAvailable, torch_blockwise, torch_delayed, torch_dequantize, torch_mxfp8,
                            torch_per_tensor, torch_swizzle, torch_update_history)

QUANTIZE_GOAL, OTHER_GOAL, UPDATE_GOAL_US = 0.90, 0.80, 10.0
HISTORY = (16, 1024)            # delayed scaling: history rows x tensors
DELAYED_INDEX = 3               # the tensor whose cast mx.quantize_delayed benchmarks


def _t(shape, elem):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def _dims(shape):
    return "x".join(map(str, shape))


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _tiles(scales_shape, unscaled_dim):
    """mx.swizzle's shape for compact scales (mx.reference's, imported when first needed)."""
    from mx import reference
    return reference.swizzled_shape(scales_shape, unscaled_dim)


def _block(block):
    return "[" + ", ".join(map(str, block)) + "]"


def _function(name, args, body, results):
    types = ", ".join(t for _, t in results)
    return "\n".join([f"func.func @{name}({', '.join(args)}) -> ({types}) {{", *body,
                      f"  return {', '.join(v for v, _ in results)} : {types}", "}"])


class Case:
    """One row: an mx program, its inputs, the bytes it moves, its check and its peers.

    outputs(): (label, bytes, rank) of each result, in order. check(host, outs) compares the results
    (`outs`: the raw bytes of each, whole) with mx.reference on the rows in `host`; it returns a list
    of (label, got bytes, expected bytes)."""
    title = ""
    goal = ("copy", QUANTIZE_GOAL)
    uses_x = True               # the input is a bf16 tensor x of self.shape
    amax_row = False            # the recipe has a global amax: the checked rows include its row
    torch_reason = "not written"
    # Rows of a few us also report the device times of a 1-element torch kernel (the fixed cost of
    # any kernel, which the copy, a memcpy, does not pay) and of torch's elementwise kernel moving
    # the same bytes (an int32 add of 0, 16-byte accesses): the copy as an SM kernel does it.
    reports_kernel_floor = False

    def __init__(self, shape):
        self.shape = tuple(shape)

    @property
    def rows(self):
        return _prod(self.shape[:-1])

    @property
    def k(self):
        return self.shape[-1]

    def nbytes(self):
        """Bytes moved: the bf16 input read once and every output written (a row reading more says so)."""
        return 2 * _prod(self.shape) + sum(n for _, n, _ in self.outputs())

    @property
    def shape_text(self):
        return _dims(self.shape) + (" bf16" if self.uses_x else "")

    def goal_text(self):
        kind, value = self.goal
        return f"< {value:g} us" if kind == "us" else f">= {value:.0%} of copy"

    # torch peers; None when not written (torch_reason says why)
    def torch_program(self):
        return None

    def torchao_program(self, tao):
        raise NotAvailable("no torchao kernel for this recipe")


def _select(raw, rows, row_bytes):
    """Rows `rows` of a row-major matrix stored as raw bytes, `row_bytes` each."""
    import numpy as np
    return np.asarray(raw).reshape(-1, row_bytes)[rows]


def _bytes(array):
    import numpy as np
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


# The MX element types of the MX rows: name prefix and title of each.
MX_FORMATS = {"f8E4M3FN": ("mxfp8", "MXFP8"), "f6E3M2FN": ("mxfp6_e3m2", "MXFP6 E3M2"),
              "f6E2M3FN": ("mxfp6_e2m3", "MXFP6 E2M3"), "i8": ("mxint8", "MXINT8")}


def _stored_bytes(elem, elements):
    """Bytes of `elements` elements of `elem` in device memory (FP6: 4 in 3)."""
    from mx import formats
    return formats.get(elem).stored_shape((elements,))[0]


def _packed(elem, data):
    """An element array as device memory holds it, as bytes."""
    from mx import reference
    return _bytes(reference.pack(data))


class MXFP8(Case):
    """MX (E8M0 per 32, `ceil`) with the scales swizzled: rowwise [1, 32], columnwise [32, 1], or both
    from one read (the strip kernel); MXFP8 (E4M3) unless `elem` says another MX element type."""

    def __init__(self, shape, parts, elem="f8E4M3FN"):
        super().__init__(shape)
        self.parts = tuple(parts)          # "rowwise" / "columnwise"
        self.elem = elem
        prefix, title = MX_FORMATS[elem]
        self.name = f"{prefix}_" + "_".join(self.parts) + "_" + _dims(self.shape)
        if self.parts == ("rowwise", "columnwise"):
            self.title = f"{title} rowwise + columnwise fused, both scales swizzled"
        else:
            self.title = f"{title} {self.parts[0]} + swizzle" + (" (N-D input)" if len(self.shape) > 2 else "")
        if elem != "f8E4M3FN":
            self.torch_reason = "not written: only MXFP8 in torch ops"

    def layout(self, part):
        """(block, compact scales shape, unscaled dim) of one output."""
        rank, s = len(self.shape), self.shape
        if part == "rowwise":
            return (1,) * (rank - 1) + (32,), (*s[:-1], s[-1] // 32), rank - 2
        return (1,) * (rank - 2) + (32, 1), (*s[:-2], s[-2] // 32, s[-1]), rank - 1

    def source(self):
        x = _t(self.shape, "bf16")
        data = _t(self.shape, self.elem)
        body, results = [], []
        for i, part in enumerate(self.parts):
            block, scales, dim = self.layout(part)
            linear, tiles = _t(scales, "f8E8M0FNU"), _t(_tiles(scales, dim), "f8E8M0FNU")
            body += [f"  %d{i}, %s{i} = mx.quantize %x block {_block(block)} rounding ceil : {x} -> {data}, {linear}",
                     f"  %t{i} = mx.swizzle %s{i} unscaled_dim {dim} : {linear} -> {tiles}"]
            results += [(f"%d{i}", data), (f"%t{i}", tiles)]
        return _function(self.name, [f"%x: {x}"], body, results)

    def outputs(self):
        out = []
        for part in self.parts:
            _, scales, dim = self.layout(part)
            out += [(f"{part} data", _stored_bytes(self.elem, _prod(self.shape)), len(self.shape)),
                    (f"{part} scales (swizzled)", _prod(_tiles(scales, dim)), len(self.shape) + 3)]
        return out

    def check(self, host, outs):
        import ml_dtypes
        from mx import reference
        rows, xs = host["rows"], host["x_rows"]
        pairs = []
        for i, part in enumerate(self.parts):
            block, scales_shape, dim = self.layout(part)
            tiles = outs[2 * i + 1].view(ml_dtypes.float8_e8m0fnu).reshape(_tiles(scales_shape, dim))
            linear = reference.unswizzle(tiles, scales_shape, dim).reshape(-1, scales_shape[-1])
            if part == "rowwise":
                want_data, want_scales = reference.quantize(xs, (1, 32), self.elem)
                got_scales = linear[rows]
            else:
                want_data, want_scales = reference.quantize(xs, (32, 1), self.elem)
                got_scales = linear[rows[::32] // 32]
            row_bytes = _stored_bytes(self.elem, self.k)
            pairs += [(f"{part} data", _select(outs[2 * i], rows, row_bytes),
                       _packed(self.elem, want_data).reshape(len(rows), row_bytes)),
                      (f"{part} scales", got_scales, want_scales)]
        return pairs

    def torch_program(self):
        if self.elem != "f8E4M3FN":
            return None
        parts, k = self.parts, self.k

        def program(x):
            x2 = x.reshape(-1, k)
            outputs = []
            for part in parts:
                data, tiles = torch_mxfp8(x2, 1 if part == "rowwise" else 0)
                outputs += [data.contiguous(), tiles]
            return outputs
        return program

    def torchao_program(self, tao):
        if self.elem != "f8E4M3FN":
            raise NotAvailable("no torchao kernel for this element type")
        kernels = tao.triton_kernels()
        parts, k = self.parts, self.k

        def program(x):
            outputs = []
            for part in parts:
                if part == "rowwise":
                    data, scales = kernels.triton_to_mxfp8_dim0(x, 32, "rceil")
                    outputs += [data, kernels.triton_mx_block_rearrange(scales.reshape(-1, k // 32))]
                else:   # data [M, K] column-major, scales [K, M/32]: swizzled as ours with unscaled_dim 1
                    data, scales = kernels.triton_to_mxfp8_dim1(x, 32, "rceil")
                    outputs += [data, kernels.triton_mx_block_rearrange(scales)]
            return outputs
        names = " + ".join("triton_to_mxfp8_dim0" if p == "rowwise" else "triton_to_mxfp8_dim1" for p in parts)
        return program, f"{names} + triton_mx_block_rearrange (Triton, SM100 gate bypassed)"


class Blockwise(Case):
    """FP8 blockwise: E4M3 with f32 power-of-two scales (`ceil`) per [1, 128] or [128, 128]. 1x128 may
    also be written transposed ("transposed": the 1x128 blocks along the rows, [K, M] data and [K, M/128]
    scales, GEMM-ready for wgrad) alone or with the rowwise part ("rowwise", "transposed"): mx.torch's
    "both" program of activations and gradients, one kernel reading the input once."""

    def __init__(self, shape, block_rows, parts=("rowwise",)):
        super().__init__(shape)
        self.block_rows, self.parts = block_rows, tuple(parts)
        kind = {("rowwise",): ("", ""), ("transposed",): ("transposed_", "transposed "),
                ("rowwise", "transposed"): ("both_", "rowwise + transposed, one kernel ")}[self.parts]
        self.name = f"fp8_blockwise_{block_rows}x128_{kind[0]}{_dims(shape)}"
        self.title = f"FP8 blockwise {block_rows}x128 {kind[1]}(f32 scales)"

    def layout(self, part):
        """(data shape, scales shape, input as quantized) of one output."""
        m, k = self.shape
        if part == "transposed":
            return (k, m), (k, m // 128), True
        return (m, k), (m // self.block_rows, k // 128), False

    def source(self):
        x = _t(self.shape, "bf16")
        body, results = [], []
        for i, part in enumerate(self.parts):
            shape, scales_shape, transposed = self.layout(part)
            data, scales = _t(shape, "f8E4M3FN"), _t(scales_shape, "f32")
            block = [1, 128] if transposed else [self.block_rows, 128]
            body.append(f"  %d{i}, %s{i} = mx.quantize %x{' transposed' * transposed} block {_block(block)} "
                        f"rounding ceil : {x} -> {data}, {scales}")
            results += [(f"%d{i}", data), (f"%s{i}", scales)]
        return _function(self.name, [f"%x: {x}"], body, results)

    def outputs(self):
        out = []
        for part in self.parts:
            shape, scales_shape, _ = self.layout(part)
            out += [(f"{part} data", _prod(shape), 2), (f"{part} scales", 4 * _prod(scales_shape), 2)]
        return out

    def check(self, host, outs):
        """Rowwise: the checked rows; transposed: their columns, whole 128-row blocks of x."""
        import numpy as np
        from mx import reference
        rows, xs = host["rows"], host["x_rows"]
        pairs = []
        for i, part in enumerate(self.parts):
            shape, scales_shape, transposed = self.layout(part)
            scales = outs[2 * i + 1].view(np.float32).reshape(scales_shape)
            if transposed:
                want_data, want_scales = reference.quantize(np.ascontiguousarray(xs.T), (1, 128), "f8E4M3FN",
                                                            "f32", "ceil")
                got_data = np.asarray(outs[2 * i]).reshape(shape)[:, rows]
                got_scales = scales[:, rows[::128] // 128]
            else:
                want_data, want_scales = reference.quantize(xs, (self.block_rows, 128), "f8E4M3FN", "f32", "ceil")
                got_data = _select(outs[2 * i], rows, self.k)
                got_scales = scales[rows[::self.block_rows] // self.block_rows]
            pairs += [(f"{part} data", got_data, want_data), (f"{part} scales", got_scales, want_scales)]
        return pairs

    def torch_program(self):
        block_rows, parts = self.block_rows, self.parts
        return lambda x: [a for part in parts
                          for a in torch_blockwise(x.t().contiguous() if part == "transposed" else x,
                                                   1 if part == "transposed" else block_rows)]

class PerTensor(Case):
    """FP8 per-tensor current scaling: scale = amax / 448 (`exact`), data = x / scale; two kernels, the
    amax pass and the cast, or with `both` the cast+transpose kernel that also writes the transposed
    data (mx.torch's "both" program of X and dY)."""
    amax_row = True

    def __init__(self, shape, both=False):
        super().__init__(shape)
        self.both = both
        self.name = f"fp8_per_tensor_{'both_' * both}{_dims(shape)}"
        self.title = "FP8 per-tensor current scaling (amax pass + cast" + " + transpose" * both + ")"

    def source(self):
        x, data = _t(self.shape, "bf16"), _t(self.shape, "f8E4M3FN")
        body = [f"  %d, %s = mx.quantize %x block {_block(self.shape)} rounding exact : {x} -> {data}, "
                "tensor<1x1xf32>"]
        results = [("%d", data), ("%s", "tensor<1x1xf32>")]
        if self.both:
            transposed = _t(self.shape[::-1], "f8E4M3FN")
            body.append(f"  %t, %ts = mx.quantize %x transposed block {_block(self.shape[::-1])} rounding exact : "
                        f"{x} -> {transposed}, tensor<1x1xf32>")
            results += [("%t", transposed), ("%ts", "tensor<1x1xf32>")]
        return _function(self.name, [f"%x: {x}"], body, results)

    def outputs(self):
        out = [("data", _prod(self.shape), 2), ("scale", 4, 2)]
        return out + [("transposed data", _prod(self.shape), 2), ("transposed scale", 4, 2)] * self.both

    def nbytes(self):  # the input read twice (the amax pass and the cast)
        return 2 * 2 * _prod(self.shape) + sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        """The checked rows; transposed, their columns."""
        import numpy as np
        from mx import reference
        rows, xs = host["rows"], host["x_rows"]
        want_data, want_scale = reference.quantize(xs, xs.shape, "f8E4M3FN", "f32", "exact")
        pairs = [("data", _select(outs[0], rows, self.k), want_data), ("scale", outs[1], want_scale)]
        if self.both:
            got = np.asarray(outs[2]).reshape(self.k, -1)[:, rows]
            pairs += [("transposed data", got, np.ascontiguousarray(want_data.T)),
                      ("transposed scale", outs[3], want_scale)]
        return pairs

    def torch_program(self):
        if not self.both:
            return lambda x: list(torch_per_tensor(x))

        def program(x):
            data, scale = torch_per_tensor(x)
            return [data, scale, data.t().contiguous(), scale]
        return program


class Delayed(Case):
    """mx.quantize_delayed: sat(x * scales[i]) to E4M3, scale_inv = 1 / scales[i], amax into history; with
    `both`, the transposed cast of the same input too, one cast+transpose kernel (mx.torch's program of X
    and dY under delayed scaling)."""
    amax_row = True

    def __init__(self, shape, both=False):
        super().__init__(shape)
        self.both = both
        self.name = f"fp8_delayed_{'both_' * both}{_dims(shape)}"
        self.title = (f"FP8 delayed-scaling cast{' + transpose' * both} + amax (history {_dims(HISTORY)})")

    def source(self):
        x, data = _t(self.shape, "bf16"), _t(self.shape, "f8E4M3FN")
        s, h, inv = _t(HISTORY[1:], "f32"), _t(HISTORY, "f32"), "tensor<1x1xf32>"
        body = [f"  %d, %i, %h1 = mx.quantize_delayed %x, %s, %h index {DELAYED_INDEX} : {x}, {s}, {h} -> "
                f"{data}, {inv}, {h}"]
        results = [("%d", data), ("%i", inv)]
        if self.both:
            transposed = _t(self.shape[::-1], "f8E4M3FN")
            body.append(f"  %t, %i2, %h2 = mx.quantize_delayed %x, %s, %h1 index {DELAYED_INDEX} transposed : "
                        f"{x}, {s}, {h} -> {transposed}, {inv}, {h}")
            results += [("%t", transposed), ("%h2", h)]
        else:
            results += [("%h1", h)]
        return _function(self.name, [f"%x: {x}", f"%s: {s}", f"%h: {h}"], body, results)

    def outputs(self):
        out = [("data", _prod(self.shape), 2), ("scale_inv", 4, 2)]
        out += [("transposed data", _prod(self.shape), 2)] * self.both
        return out + [("history", 4 * _prod(HISTORY), 2)]

    def nbytes(self):   # x and the scale read, every output, the history read (copied with one entry set)
        return 2 * _prod(self.shape) + 4 + sum(n for _, n, _ in self.outputs()) + 4 * _prod(HISTORY)

    def check(self, host, outs):
        import numpy as np
        from mx import reference
        data, inv, history = reference.quantize_delayed(host["x_rows"], host["scales"], host["history"],
                                                        DELAYED_INDEX)
        pairs = [("data", _select(outs[0], host["rows"], self.k), data), ("scale_inv", outs[1], inv)]
        if self.both:
            got = np.asarray(outs[2]).reshape(self.k, -1)[:, host["rows"]]
            pairs += [("transposed data", got, np.ascontiguousarray(data.T))]
        return pairs + [("history", outs[-1].view(np.float32), history)]

    def torch_program(self):
        if not self.both:
            return lambda x, scales, history: list(torch_delayed(x, scales, history, DELAYED_INDEX))

        def program(x, scales, history):
            data, inv, new_history = torch_delayed(x, scales, history, DELAYED_INDEX)
            return [data, inv, data.t().contiguous(), new_history]
        return program


class MXFP4(Case):
    """MXFP4: E2M1 (packed) with E8M0 scales per [1, 32], `ceil`, compact scales."""

    def __init__(self, shape):
        super().__init__(shape)
        self.name = f"mxfp4_rowwise_{_dims(shape)}"
        self.title = "MXFP4 rowwise (E2M1 packed, E8M0 [1, 32])"
        self.torch_reason = "not written: E2M1 rounding in torch ops"

    def scales_shape(self):
        return (*self.shape[:-1], self.k // 32)

    def source(self):
        x, data, scales = _t(self.shape, "bf16"), _t(self.shape, "f4E2M1FN"), _t(self.scales_shape(), "f8E8M0FNU")
        body = [f"  %d, %s = mx.quantize %x block [1, 32] rounding ceil : {x} -> {data}, {scales}"]
        return _function(self.name, [f"%x: {x}"], body, [("%d", data), ("%s", scales)])

    def outputs(self):
        return [("data (packed)", _prod(self.shape) // 2, 2), ("scales", _prod(self.scales_shape()), 2)]

    def check(self, host, outs):
        from mx import reference
        rows = host["rows"]
        data, scales = reference.quantize(host["x_rows"], (1, 32), "f4E2M1FN", "f8E8M0FNU", "ceil")
        return [("data", _select(outs[0], rows, self.k // 2), reference.pack_fp4(data)),
                ("scales", _select(outs[1], rows, self.k // 32), scales)]

    def torchao_program(self, tao):
        to_mx, rceil = tao.mx_tensor().to_mx, tao.config().ScaleCalculationMode.RCEIL
        import torch

        def program(x):
            scales, data = to_mx(x, torch.float4_e2m1fn_x2, 32, rceil)
            return [data, scales]
        return program, "to_mx(float4_e2m1fn_x2, RCEIL) (eager torch ops)"


class NVFP4(Case):
    """NVFP4: E2M1 (packed) with E4M3 scales per [1, 16] and an f32 tensor scale, given or computed
    (amax / 2688 over the finite elements: an amax pass first)."""

    def __init__(self, shape, given):
        super().__init__(shape)
        self.given = given
        self.amax_row = not given
        self.name = f"nvfp4_{'given' if given else 'computed'}_{_dims(shape)}"
        self.title = f"NVFP4 (E4M3 [1, 16]), tensor scale {'given' if given else 'computed (amax pass + cast)'}"
        self.torch_reason = "not written: E2M1 rounding in torch ops"

    def scales_shape(self):
        return (*self.shape[:-1], self.k // 16)

    def source(self):
        x, data, scales = _t(self.shape, "bf16"), _t(self.shape, "f4E2M1FN"), _t(self.scales_shape(), "f8E4M3FN")
        if self.given:
            body = [f"  %d, %s = mx.quantize %x block [1, 16] tensor_scale(%t : tensor<f32>) : {x} -> {data}, {scales}"]
            return _function(self.name, [f"%x: {x}", "%t: tensor<f32>"], body, [("%d", data), ("%s", scales)])
        body = [f"  %d, %s, %t = mx.quantize %x block [1, 16] : {x} -> {data}, {scales}, tensor<f32>"]
        return _function(self.name, [f"%x: {x}"], body, [("%d", data), ("%s", scales), ("%t", "tensor<f32>")])

    def outputs(self):
        out = [("data (packed)", _prod(self.shape) // 2, 2), ("scales", _prod(self.scales_shape()), 2)]
        return out + ([] if self.given else [("tensor scale", 4, 0)])

    def nbytes(self):
        reads = 2 * _prod(self.shape) * (1 if self.given else 2)
        return reads + 4 + sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        import numpy as np
        from mx import reference
        rows = host["rows"]
        data, scales, t = reference.quantize_nvfp4(host["x_rows"], host.get("t"))
        pairs = [("data", _select(outs[0], rows, self.k // 2), reference.pack_fp4(data)),
                 ("scales", _select(outs[1], rows, self.k // 16), scales)]
        return pairs + ([] if self.given else [("tensor scale", outs[2], np.array([t], np.float32))])

    def torchao_program(self, tao):
        nvfp4 = tao.nvfp4_tensor()
        import torch
        if self.given:
            def program(x, t):
                scales, data = nvfp4.nvfp4_quantize(x, 16, t)
                return [data, scales]
            return program, "nvfp4_quantize(per_tensor_scale=t) (eager torch ops)"

        def computed(x):
            t = nvfp4.per_tensor_amax_to_scale(torch.amax(torch.abs(x)))
            scales, data = nvfp4.nvfp4_quantize(x, 16, t)
            return [data, scales, t]
        return computed, "per_tensor_amax_to_scale(amax) + nvfp4_quantize (eager torch ops)"


class UpdateHistory(Case):
    """mx.update_amax_history (`max`, margin 0, E4M3) of every tensor in one launch."""
    goal = ("us", UPDATE_GOAL_US)
    uses_x = False

    def __init__(self, shape):
        super().__init__(shape)
        self.name = f"fp8_update_amax_history_{_dims(shape)}"
        self.title = f"FP8 delayed-scaling history update, {shape[1]} tensors (one launch)"

    @property
    def shape_text(self):
        return f"history {_dims(self.shape)} f32"

    def source(self):
        h, s = _t(self.shape, "f32"), _t(self.shape[1:], "f32")
        body = [f"  %h1, %s1 = mx.update_amax_history %h, %s element f8E4M3FN algorithm max margin 0 : "
                f"{h}, {s} -> {h}, {s}"]
        return _function(self.name, [f"%h: {h}", f"%s: {s}"], body, [("%h1", h), ("%s1", s)])

    def outputs(self):
        return [("history", 4 * _prod(self.shape), 2), ("scales", 4 * self.shape[1], 1)]

    def nbytes(self):
        return 2 * sum(n for _, n, _ in self.outputs())

    def check(self, host, outs):
        import numpy as np
        from mx import reference
        history, scales = reference.update_amax_history(host["history"], host["scales"], "max", 0)
        return [("history", outs[0].view(np.float32), history), ("scales", outs[1].view(np.float32), scales)]

    def torch_program(self):
        return lambda history, scales: list(torch_update_history(history, scales))


class Dequantize(Case):
    """MX dequantize: data (E4M3 unless `elem` says another MX element type; FP6 packed) and compact
    E8M0 scales [M, K/32] -> bf16."""
    goal = ("copy", OTHER_GOAL)
    uses_x = False

    def __init__(self, shape, elem="f8E4M3FN"):
        super().__init__(shape)
        self.elem = elem
        prefix, title = MX_FORMATS[elem]
        self.name = f"{prefix}_dequantize_{_dims(shape)}"
        self.title = f"{title} dequantize -> bf16"
        if elem != "f8E4M3FN":
            self.torch_reason = "not written: only MXFP8 in torch ops"
            self.goal = ("copy", QUANTIZE_GOAL)   # issue 23: the new formats' kernels, both ways

    @property
    def shape_text(self):
        return f"{_dims(self.shape)} {self.elem} + {_dims(self.scales_shape())} E8M0"

    def scales_shape(self):
        return (self.shape[0], self.k // 32)

    def source(self):
        data, scales, out = _t(self.shape, self.elem), _t(self.scales_shape(), "f8E8M0FNU"), _t(self.shape, "bf16")
        body = [f"  %y = mx.dequantize %d, %s block [1, 32] : {data}, {scales} -> {out}"]
        return _function(self.name, [f"%d: {data}", f"%s: {scales}"], body, [("%y", out)])

    def outputs(self):
        return [("bf16", 2 * _prod(self.shape), 2)]

    def nbytes(self):
        return _stored_bytes(self.elem, _prod(self.shape)) + _prod(self.scales_shape()) + 2 * _prod(self.shape)

    def check(self, host, outs):
        import ml_dtypes
        from mx import reference
        data = reference.unpack(host["data_rows"], self.elem)
        scales = host["scale_rows"].view(ml_dtypes.float8_e8m0fnu)
        want = reference.dequantize(data, scales, (1, 32), ml_dtypes.bfloat16)
        return [("bf16", _select(outs[0], host["rows"], 2 * self.k), want)]

    def torch_program(self):
        if self.elem != "f8E4M3FN":
            return None
        return lambda data, scales: [torch_dequantize(data, scales)]

    def torchao_program(self, tao):
        import torch
        if self.elem != "f8E4M3FN":
            raise NotAvailable("no torchao kernel for this element type")
        kernels = tao.triton_kernels(gated=False)

        def program(data, scales):
            return [kernels.triton_mxfp8_dequant_dim0(data.view(torch.float8_e4m3fn), scales, torch.bfloat16, 32)]
        return program, "triton_mxfp8_dequant_dim0 (Triton)"


class Swizzle(Case):
    """mx.swizzle (unswizzle=False) or mx.unswizzle of the E8M0 scales of rowwise MXFP8 data: compact
    [R, C] <-> 128x4 tiles [R/128, C/4, 32, 4, 4]."""
    goal = ("copy", OTHER_GOAL)
    uses_x = False
    reports_kernel_floor = True

    def __init__(self, shape, unswizzle):
        super().__init__(shape)
        self.unswizzle = unswizzle
        op = "unswizzle" if unswizzle else "swizzle"
        self.name = f"mxfp8_{op}_{_dims(shape)}"
        self.title = f"{op} (E8M0 scales of {shape[0]}x{shape[1] * 32} rowwise)"

    @property
    def shape_text(self):
        return f"{_dims(self.shape)} E8M0"

    def source(self):
        linear, tiles = _t(self.shape, "f8E8M0FNU"), _t(_tiles(self.shape, 0), "f8E8M0FNU")
        if self.unswizzle:
            body = [f"  %u = mx.unswizzle %w unscaled_dim 0 : {tiles} -> {linear}"]
            return _function(self.name, [f"%w: {tiles}"], body, [("%u", linear)])
        body = [f"  %t = mx.swizzle %s unscaled_dim 0 : {linear} -> {tiles}"]
        return _function(self.name, [f"%s: {linear}"], body, [("%t", tiles)])

    def outputs(self):
        if self.unswizzle:
            return [("compact scales", _prod(self.shape), 2)]
        return [("tiles", _prod(_tiles(self.shape, 0)), 5)]

    def nbytes(self):
        return _prod(self.shape) + _prod(_tiles(self.shape, 0))

    def check(self, host, outs):
        import ml_dtypes
        from mx import reference
        source = host["source"].view(ml_dtypes.float8_e8m0fnu)
        if self.unswizzle:
            return [("compact scales", outs[0], reference.unswizzle(source, self.shape, 0))]
        return [("tiles", outs[0], reference.swizzle(source, 0))]

    def torch_program(self):
        rows, cols = self.shape
        if self.unswizzle:
            return lambda tiles: [tiles.permute(0, 3, 2, 1, 4).reshape(rows, cols).contiguous()]
        return lambda scales: [torch_swizzle(scales)]

    def torchao_program(self, tao):
        if self.unswizzle:
            from_blocked, (rows, cols) = tao.utils().from_blocked, self.shape
            return (lambda tiles: [from_blocked(tiles.reshape(-1), rows, cols)],
                    "from_blocked (torch ops)")
        kernels = tao.triton_kernels(gated=False)
        return (lambda scales: [kernels.triton_mx_block_rearrange(scales)],
                "triton_mx_block_rearrange (Triton)")


def cases():
    """Every row, in table order."""
    big = [(8192, 8192), (16384, 16384)]
    rows = []
    rows += [MXFP8(s, ("rowwise", "columnwise")) for s in big]
    rows += [MXFP8(s, ("rowwise",)) for s in big]
    rows += [MXFP8(s, ("columnwise",)) for s in big]
    rows += [MXFP8((8, 1024, 8192), ("rowwise",))]
    rows += [Blockwise(s, 1) for s in big] + [Blockwise(s, 128) for s in big]
    # The 1x128 "both" program of mx.torch (bench/linear's blockwise step quantizes X and dY so), and
    # its transposed part alone, at 8192^2 and at the 5B model's M x K (15872 x 4096).
    rows += [Blockwise((15872, 4096), 1)]
    for shape in [big[0], (15872, 4096)]:
        rows += [Blockwise(shape, 1, ("rowwise", "transposed")), Blockwise(shape, 1, ("transposed",))]
    # Current scaling at 8192^2, 16384^2 and the 5B model's 15872 x 4096, and mx.torch's cast+transpose
    # program of it at the two step shapes.
    step = [big[0], (15872, 4096)]
    rows += [PerTensor(s) for s in [*big, step[1]]] + [PerTensor(s, both=True) for s in step]
    rows += [Delayed(s) for s in big] + [Delayed(s, both=True) for s in step]
    rows += [MXFP4(s) for s in big]
    rows += [NVFP4(s, True) for s in big] + [NVFP4(s, False) for s in big]
    rows += [UpdateHistory(HISTORY)]
    rows += [Dequantize((8192, 8192)), Swizzle((8192, 256), False), Swizzle((8192, 256), True)]
    for elem in ["f6E3M2FN", "f6E2M3FN", "i8"]:
        rows += [MXFP8(big[0], ("rowwise", "columnwise"), elem), MXFP8(big[0], ("rowwise",), elem),
                 MXFP8(big[0], ("columnwise",), elem), Dequantize(big[0], elem)]
    return rows
