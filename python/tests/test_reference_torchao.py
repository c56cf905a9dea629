"""Cross-check of mx.reference against torchao's MX / NVFP4 quantizers, bit for bit.

Skipped unless `torch` and `torchao` import (a GPU box with torchao 0.18; the functions used are the
prototype ones of torchao/prototype/mx_formats at v0.18.0):

* `torchao.prototype.mx_formats.mx_tensor.to_mx(data_hp, elem_dtype, block_size, scaling_mode,
  is_swizzled_scales=False) -> (scale_e8m0 [..., K/32] float8_e8m0fnu, data)`, data in the fp8 dtype, or
  packed uint8 [..., K/2] (element 2i in the low nibble) for torch.float4_e2m1fn_x2.
  ScaleCalculationMode.RCEIL is our `ceil` (cuBLAS / cvt.rp.satfinite.ue8m0x2.f32), FLOOR is OCP's `floor`.
* `torchao.prototype.mx_formats.nvfp4_tensor.nvfp4_quantize(data_hp, block_size=16, per_tensor_scale=None)
  -> (scales float8_e4m3fn [M, K/16], packed uint8 data [M, K/2])` and `per_tensor_amax_to_scale(amax)`.
* `torchao.prototype.mx_formats.utils.to_blocked(scales_2d)`: the 128x4 tile layout.

Known differences, kept out of the random data here and listed in the final assertions' messages:
* torchao's RCEIL (eager) multiplies by 1.0 instead of 2**127 when the scale byte is 0 (amax <=
  maxfinite * 2**-127); FLOOR clamps that scale to 2**-126.  The data keeps every block amax far above that.
* torchao's eager RCEIL takes ceil(log2(q)) with an f32 log2, which rounds to an integer when q is within a
  few f32 ulps above a power of two, giving a scale one binade too small (the block max then saturates).
  Such blocks are recognised and allowed (they are rare); on CUDA, torch divides by a Python scalar as a
  multiply by its f32 reciprocal, which moves q by an ulp in the same place.
* Inf blocks: torchao's FLOOR takes the f32 exponent field of Inf (255) minus emax, e.g. byte 247 for E4M3,
  where the contract says 254 in every power-of-two mode; only RCEIL is compared on Inf data.
* NaN: torchao gives NaN elements (FP8) or garbage codes (FP4) where the contract writes 0x7F / code 0 for a
  whole NaN block, and NVFP4 with a NaN anywhere propagates through the tensor amax; no NaN is used here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")
mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
mx_config = pytest.importorskip("torchao.prototype.mx_formats.config")
nvfp4_tensor = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
mx_utils = pytest.importorskip("torchao.prototype.mx_formats.utils")

from mx import reference as ref  # noqa: E402

SEEDS = [0, 1, 2, 3]
SHAPES = [(256, 512), (128, 96)]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TORCH_ELEM = {"f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2, "f4E2M1FN": torch.float4_e2m1fn_x2}


def spread(seed: int, shape, inf: bool = False) -> np.ndarray:
    """Signed values over many binades: mantissa in [1, 2), exponent in [-40, 40), a per-row factor
    2**[-20, 20), a few exact zeros (and optionally a few +-Inf)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 2, shape) * np.exp2(rng.integers(-40, 40, shape))
    x *= np.exp2(rng.integers(-20, 20, shape[:-1] + (1,)))
    x = (x * rng.choice([-1.0, 1.0], shape)).astype(np.float32)
    x[rng.random(shape) < 0.02] = 0.0
    if inf:
        x.reshape(-1)[rng.integers(0, x.size, 4)] = [np.inf, -np.inf, np.inf, -np.inf]
    return x


def to_numpy_u8(t) -> np.ndarray:
    return t.detach().cpu().contiguous().view(torch.uint8).numpy()


def near_power_of_two(q: np.ndarray) -> np.ndarray:
    """q lies within 2**-16 relative above a power of two (where an f32 log2 or an f32 reciprocal can
    move ceil(log2(q)) down by one)."""
    mant = q.view(np.uint32) & 0x7FFFFF
    return (mant != 0) & (mant < (1 << 7))


def compare_mx(x: np.ndarray, elem: str, rounding: str, device: str) -> None:
    mode = {"ceil": mx_config.ScaleCalculationMode.RCEIL, "floor": mx_config.ScaleCalculationMode.FLOOR}[rounding]
    data, scales = ref.quantize(x, (1, 32), elem, "f8E8M0FNU", rounding)
    b = scales.view(np.uint8)
    assert (b > 0).all(), "test data must keep every block scale above 2**-127 (torchao special-cases b = 0)"
    t_scale, t_data = mx_tensor.to_mx(torch.from_numpy(x).to(device), TORCH_ELEM[elem], 32, scaling_mode=mode)
    tb = to_numpy_u8(t_scale).reshape(b.shape)
    codes = ref.pack_fp4(data) if elem == "f4E2M1FN" else data.view(np.uint8)
    t_codes = to_numpy_u8(t_data).reshape(codes.shape)
    bad = tb != b
    if rounding == "ceil" and bad.any():
        # the only accepted difference: torchao's scale one binade lower where q sits just above 2**k
        q = np.abs(x.reshape(b.shape + (32,))).max(axis=-1) / np.float32(ref.max_finite(elem))
        explained = bad & (tb.astype(int) == b.astype(int) - 1) & near_power_of_two(q.astype(np.float32))
        assert (explained == bad).all(), f"unexplained scale mismatches at {np.argwhere(bad & ~explained)[:5]}"
        assert bad.mean() < 0.01, f"{bad.sum()} log2-artifact blocks of {bad.size}"
    else:
        assert not bad.any(), f"{bad.sum()} scale mismatches, first at {np.argwhere(bad)[:5]}"
    per_block = 16 if elem == "f4E2M1FN" else 32                      # bytes of codes per block
    good = np.repeat(~bad, per_block, axis=-1)
    diff = (t_codes != codes) & good
    assert not diff.any(), f"{diff.sum()} element bytes differ, first at {np.argwhere(diff)[:5]}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2", "f4E2M1FN"])
@pytest.mark.parametrize("rounding", ["ceil", "floor"])
def test_to_mx_matches(device, elem, rounding):
    for seed in SEEDS:
        for shape in SHAPES:
            compare_mx(spread(seed, shape), elem, rounding, device)
    if rounding == "ceil":   # Inf blocks: b = 254, saturate (torchao's FLOOR gives exponent(Inf) - emax instead)
        compare_mx(spread(99, (64, 256), inf=True), elem, rounding, device)


@pytest.mark.parametrize("device", DEVICES)
def test_to_mx_bf16_input(device):
    x = spread(7, (128, 256)).astype(ml_dtypes.bfloat16)
    data, scales = ref.quantize(x, (1, 32), "f8E4M3FN")
    xt = torch.from_numpy(x.astype(np.float32)).to(device).to(torch.bfloat16)
    t_scale, t_data = mx_tensor.to_mx(xt, torch.float8_e4m3fn, 32, scaling_mode=mx_config.ScaleCalculationMode.RCEIL)
    np.testing.assert_array_equal(to_numpy_u8(t_scale).reshape(scales.shape), scales.view(np.uint8))
    np.testing.assert_array_equal(to_numpy_u8(t_data), data.view(np.uint8))


def compare_nvfp4(x: np.ndarray, device: str, tensor_scale) -> None:
    data, scales, t = ref.quantize_nvfp4(x, tensor_scale)
    xt = torch.from_numpy(x).to(device)
    pts = None if tensor_scale is not None and tensor_scale == 1.0 else torch.tensor(t, dtype=torch.float32,
                                                                                         device=device)
    t_scales, t_data = nvfp4_tensor.nvfp4_quantize(xt, 16, pts)
    bad = to_numpy_u8(t_scales).reshape(scales.shape) != scales.view(np.uint8)
    assert not bad.any(), f"{bad.sum()} scale mismatches (t = {t}, single level: {pts is None})"
    np.testing.assert_array_equal(to_numpy_u8(t_data), ref.pack_fp4(data))


@pytest.mark.parametrize("device", DEVICES)
def test_nvfp4_quantize_matches(device):
    for seed in SEEDS:
        for shape in SHAPES:
            x = spread(seed, shape)
            compare_nvfp4(x, device, None)                 # two-level, t = amax / 2688 (ours, passed on)
            compare_nvfp4(x, device, 1.0)                  # single level: torchao's per_tensor_scale=None
            compare_nvfp4(x, device, np.float32(0.37))     # any caller-given t
    # Inf blocks (t passed explicitly: torchao's tensor amax would be Inf)
    compare_nvfp4(spread(5, (64, 256), inf=True), device, np.float32(0.01))


@pytest.mark.parametrize("device", DEVICES)
def test_nvfp4_tensor_scale_matches(device):
    for seed in SEEDS:
        x = spread(seed, (256, 512))
        t = ref.quantize_nvfp4(x)[2]
        tt = nvfp4_tensor.per_tensor_amax_to_scale(torch.amax(torch.abs(torch.from_numpy(x).to(device))))
        got = np.float32(tt.item())
        if device == "cpu":
            assert got == t
        else:  # CUDA divides by the Python scalar 2688.0 as a multiply by its f32 reciprocal
            assert abs(int(np.array(got).view(np.int32)) - int(np.array(t).view(np.int32))) <= 1


def test_to_blocked_matches_swizzle():
    rng = np.random.default_rng(0)
    for r, c in [(256, 8), (500, 6), (130, 5), (4, 2)]:
        s = rng.integers(1, 255, (r, c)).astype(np.uint8)
        blocked = mx_utils.to_blocked(torch.from_numpy(s).view(torch.float8_e8m0fnu))
        np.testing.assert_array_equal(to_numpy_u8(blocked).ravel(),
                                      ref.swizzle(s.view(ml_dtypes.float8_e8m0fnu)).view(np.uint8).ravel())
        e4 = s.view(ml_dtypes.float8_e4m3fn)                 # NVFP4 scale bytes tile the same way
        blocked = mx_utils.to_blocked(torch.from_numpy(s).view(torch.float8_e4m3fn))
        np.testing.assert_array_equal(to_numpy_u8(blocked).ravel(), ref.swizzle(e4).view(np.uint8).ravel())
