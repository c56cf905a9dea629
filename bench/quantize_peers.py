"""bench/quantize_peers: the torch, torch.compile and torchao programs that bench/quantize.py times beside
each mx program (see its docstring for which peer each row has and how they are run)."""

from __future__ import annotations

import sys

from torch_scales import pow2, pow2_ceil_bytes  # bench/ (the script's directory) is on sys.path

TORCHAO_MAX_ROW_TILE = 256      # torchao's Triton autotuning: configurations with at most this many rows


class NotAvailable(Exception):
    """A peer that is not run for this row; the message is the reason printed in the table."""


def torch_mxfp8(x, dim):
    """MXFP8 along `dim` (1: rowwise, 0: columnwise) of 2-D x: E4M3 data [M, K] and the 128x4-swizzled
    E8M0 bytes (columnwise: tiled with K as the unscaled dimension)."""
    import torch
    if dim == 0:
        data, tiles = torch_mxfp8(x.t(), 1)
        return data.t(), tiles
    m, k = x.shape
    blocks = x.float().reshape(m, k // 32, 32)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=-1))
    data = (blocks * pow2(b, -1)[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(m, k)
    return data, torch_swizzle(b.to(torch.uint8))


def torch_swizzle(scale_bytes):
    """Compact [R, C] -> 128x4 tiles [R/128, C/4, 32, 4, 4] (R % 128 == C % 4 == 0)."""
    r, c = scale_bytes.shape
    return scale_bytes.view(r // 128, 4, 32, c // 4, 4).permute(0, 3, 2, 1, 4).contiguous()


def torch_blockwise(x, block_rows):
    """FP8 blockwise, [block_rows, 128] blocks: E4M3 data and f32 power-of-two scales (`ceil`)."""
    import torch
    r, k = x.shape
    blocks = x.float().view(r // block_rows, block_rows, k // 128, 128)
    b = pow2_ceil_bytes(blocks.abs().amax(dim=(1, 3)))
    data = (blocks * pow2(b, -1)[:, None, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return data.view(r, k), pow2(b, 1).contiguous()


def _div_f32(a, b):
    """The correctly rounded f32 quotient of f32 tensors: divided in f64 and rounded once to f32 (exact
    for division), since Triton's f32 division, which Inductor emits, is not correctly rounded."""
    import torch
    return (a.double() / b.double()).to(torch.float32)


def torch_per_tensor(x):
    """Current scaling, `exact`: scale = amax / 448 (f32 division), data = sat(x / scale)."""
    import torch
    amax = x.float().abs().amax()
    scale = _div_f32(amax, torch.full_like(amax, 448.0))
    scale = torch.where(scale == 0, torch.full_like(scale, 2.0 ** -127), scale)
    data = _div_f32(x.float(), scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return data, scale.reshape(1, 1)


def torch_delayed(x, scales, history, index):
    """The delayed-scaling cast: sat(x * scales[index]), 1 / scales[index], amax into history[0, index]."""
    import torch
    s = scales[index]
    data = (x.float() * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    new_history = history.clone()
    new_history[0, index] = x.float().abs().amax()
    return data, _div_f32(torch.ones_like(s), s).reshape(1, 1), new_history


def torch_update_history(history, scales, fmax=448.0):
    """`max` over the history ignoring NaN (from 0), scale = fmax / amax where finite and > 0 (an
    infinite one clamped to the largest f32), then the rotation with row 0 zeroed."""
    import torch
    a = torch.where(history.isnan(), torch.zeros_like(history), history).amax(dim=0).clamp(min=0.0)
    fresh = _div_f32(torch.full_like(a, fmax), a)
    fresh = torch.where(fresh.isinf(), torch.full_like(a, torch.finfo(torch.float32).max), fresh)
    new_scales = torch.where(torch.isfinite(a) & (a > 0), fresh, scales)
    new_history = torch.roll(history, -1, 0)
    new_history[0] = 0.0
    return new_history, new_scales


def torch_dequantize(data, scale_bytes):
    """bf16(f32(E4M3) * 2^(b-127)); data and scales as uint8."""
    import torch
    r, k = data.shape
    b = scale_bytes.to(torch.int32)
    scale = torch.where(b == 255, torch.full_like(b, 0x7FC00000), torch.where(b == 0, 0x400000, b << 23))
    values = data.view(torch.float8_e4m3fn).float().view(r, k // 32, 32) * scale.view(torch.float32)[..., None]
    return values.view(r, k).to(torch.bfloat16)


# ---------------------------------------------------------------------------------------------------
# torchao


class TorchAO:
    """torchao 0.18's prototype mx_formats modules, imported once. Its MXFP8 Triton quantize kernels
    are defined only when `is_sm_at_least_100()` holds at import; the gate is bypassed for that one
    check (the CUDA-extension gate after it, and every other caller, see the real answer), and the
    kernels are pointed at their portable scale computation (IS_ROCM): the default one is the
    `cvt.rp.satfinite.ue8m0x2.f32` instruction, which needs sm_100a."""
    KERNELS = "torchao.prototype.mx_formats.kernels"

    def __init__(self, max_row_tile=TORCHAO_MAX_ROW_TILE):
        self.error, self.version, self.gate, self.tuning = None, None, "not tried", ""
        try:
            import torchao
            import torchao.utils as utils
            self.version = getattr(torchao, "__version__", "unknown")
        except Exception as exc:  # noqa: BLE001
            self.error = f"torchao not importable: {type(exc).__name__}: {exc}"
            return
        if self.KERNELS in sys.modules:
            self.gate = "not bypassed (kernels module imported before)"
        original = utils.is_sm_at_least_100
        kernels_name = self.KERNELS

        def gate():
            caller = sys._getframe(1).f_globals
            if caller.get("__name__") == kernels_name and "_triton_kernels_available" not in caller:
                return True
            return original()
        utils.is_sm_at_least_100 = gate
        try:
            from torchao.prototype.mx_formats import config, kernels, mx_tensor, nvfp4_tensor
            from torchao.prototype.mx_formats import utils as mx_utils
        except Exception as exc:  # noqa: BLE001
            self.error = f"torchao.prototype.mx_formats not importable: {type(exc).__name__}: {exc}"
            return
        finally:
            utils.is_sm_at_least_100 = original
            for module in list(sys.modules.values()):
                if getattr(module, "is_sm_at_least_100", None) is gate:
                    module.is_sm_at_least_100 = original
        self.modules = {"config": config, "kernels": kernels, "mx_tensor": mx_tensor,
                        "nvfp4_tensor": nvfp4_tensor, "utils": mx_utils}
        if getattr(kernels, "_triton_kernels_available", False) and hasattr(kernels, "IS_ROCM"):
            import triton.language as tl
            kernels.IS_ROCM = tl.constexpr(True)
            if self.gate == "not tried":
                self.gate = "bypassed (portable scale path)"
        elif self.gate == "not tried":
            self.gate = "still closed (no Triton, or CUDA < 12.8)"
        self.tuning = "all of torchao's autotuning configurations"
        if max_row_tile:
            kept = []
            for name in ("to_mxfp8_dim0_kernel", "to_mxfp8_dim1_kernel", "_dequant_mxfp8_kernel"):
                tuner = getattr(kernels, name, None)
                configs = getattr(tuner, "configs", None)
                if configs:
                    small = [c for c in configs if c.kwargs.get("ROW_TILE_SIZE", 0) <= max_row_tile]
                    if small and len(small) < len(configs):
                        tuner.configs = small
                        kept.append(f"{name} {len(small)} of {len(configs)}")
            if kept:
                self.tuning = (f"autotuning over the configurations with ROW_TILE_SIZE <= {max_row_tile} "
                               f"({', '.join(kept)}; the larger tiles take minutes each to compile; "
                               "--torchao-all-configs tunes over all)")

    def _module(self, name):
        if self.error:
            raise NotAvailable(self.error)
        return self.modules[name]

    def triton_kernels(self, gated=True):
        kernels = self._module("kernels")
        if gated and not getattr(kernels, "_triton_kernels_available", False):
            raise NotAvailable(f"torchao's MXFP8 Triton kernels are gated to SM100; gate {self.gate}")
        return kernels

    def config(self):
        return self._module("config")

    def mx_tensor(self):
        return self._module("mx_tensor")

    def nvfp4_tensor(self):
        return self._module("nvfp4_tensor")

    def utils(self):
        return self._module("utils")
