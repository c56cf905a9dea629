"""bench/torch_scales: the power-of-two scale rules of docs/numerics.md in torch ops, shared by the
benchmarks' torch and torch.compile peers (bench/quantize.py, bench/gemm.py), so that every peer
computes the bits mx computes.
"""


def pow2_ceil_bytes(amax, fmax=448.0):
    """E8M0 byte (int32) of the `ceil` rule (spec section 3) for f32 amax."""
    import torch
    bits = (amax.float() / fmax).view(torch.int32)
    exponent, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    b = torch.where(exponent == 0, (bits > 0x400000).int(), exponent + (mantissa != 0).int())
    return torch.where(amax.isinf(), 254, b.clamp(max=254))


def pow2(b, sign):
    """Exact f32 2^(sign * (b - 127)) for b in 0..254, from bits (2^-127 is subnormal)."""
    import torch
    if sign > 0:
        return torch.where(b == 0, 0x400000, b << 23).view(torch.float32)
    return torch.where(b == 254, 0x400000, (254 - b) << 23).view(torch.float32)
