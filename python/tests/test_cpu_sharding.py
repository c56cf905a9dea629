"""Distributed mx on the CPU: the pieces that partitioning builds from, against mx.reference.

A sharded per-tensor quantize takes the whole tensor's amax (`amax` operand, after the all-reduce
that mx-partition inserts): each shard must then be quantized exactly as the whole tensor is, which
the CPU pipeline shows here for every rounding, element type and NVFP4's computed tensor scale. A
program partitioned for a grid of one device runs on the CPU pipeline and matches the unpartitioned
one; its collectives over more devices are rejected there (lit tests).
"""

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_bits_equal, random_input

import mx
from mx import reference, tools


def _quantize_shard_program(shape, dtype, block, elem, scale_type, rounding):
    x = tools.mlir_type(shape, dtype)
    data = tools.mlir_type(shape, tools.NUMPY_DTYPES[elem])
    scales = tools.mlir_type(reference.scales_shape(shape, block), tools.NUMPY_DTYPES[scale_type])
    nvfp4 = scale_type == "f8E4M3FN"
    results = f"{data}, {scales}" + (", tensor<f32>" if nvfp4 else "")
    rounding_text = "" if nvfp4 else f" rounding {rounding}"
    return (f"func.func @shard(%x: {x}, %a: tensor<f32>) -> ({results}) {{\n"
            f"  %r:{3 if nvfp4 else 2} = mx.quantize %x block [{', '.join(map(str, block))}]{rounding_text}"
            f" amax(%a : tensor<f32>) : {x} -> {results}\n"
            f"  return %r#0, %r#1{', %r#2' if nvfp4 else ''} : {results}\n}}\n")


@pytest.mark.parametrize("rounding", ["ceil", "floor", "exact"])
@pytest.mark.parametrize("elem", ["f8E4M3FN", "f8E5M2"])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_per_tensor_shards_with_the_whole_amax(rng, rounding, elem, dtype):
    x = random_input(rng, (6, 48), dtype)
    whole_data, whole_scale = reference.quantize(x, x.shape, elem, "f32", rounding)
    kernel = mx.compile(_quantize_shard_program((3, 48), dtype, x.shape, elem, "f32", rounding))
    amax = np.asarray(reference.amax(x), np.float32)
    for index, shard in enumerate(np.split(x, 2)):
        data, scale = kernel(np.ascontiguousarray(shard), amax)
        assert_bits_equal(data, np.split(whole_data, 2)[index], f"shard {index} data")
        assert_bits_equal(scale, whole_scale, f"shard {index} scale")


def test_nvfp4_shards_with_the_whole_finite_amax(rng):
    x = random_input(rng, (8, 64), np.float32)
    whole_data, whole_scales, whole_t = reference.quantize_nvfp4(x)
    finite = mx.compile("func.func @finite_amax(%x: tensor<4x64xf32>) -> tensor<1xf32> {\n"
                        "  %a = mx.amax %x finite : tensor<4x64xf32> -> tensor<f32>\n"
                        "  %a1 = tensor.expand_shape %a [] output_shape [1] : tensor<f32> into tensor<1xf32>\n"
                        "  return %a1 : tensor<1xf32>\n}\n")
    kernel = mx.compile(_quantize_shard_program((4, 64), np.float32, (1, 16), "f4E2M1FN", "f8E4M3FN", "ceil"))
    shards = [np.ascontiguousarray(s) for s in np.split(x, 2)]
    local = [finite(s)[0] for s in shards]
    for shard, amax in zip(shards, local):
        magnitudes = np.abs(shard[np.isfinite(shard)])
        assert amax == (magnitudes.max() if magnitudes.size else 0)
    amax = np.asarray(max(local), np.float32)  # the all-reduce (max)
    for index, shard in enumerate(shards):
        data, scales, t = kernel(shard, amax)
        assert_bits_equal(data, np.split(whole_data, 2)[index], f"shard {index} data")
        assert_bits_equal(scales, np.split(whole_scales, 2)[index], f"shard {index} scales")
        assert_bits_equal(np.asarray(t), np.asarray(whole_t), f"shard {index} tensor scale")


STEP = """
func.func @sharded_linear(%x: tensor<64x128xbf16>, %w: tensor<32x128xbf16>) -> tensor<64x32xf32> {{
{annotations}
  %xd, %xs = mx.quantize %x1 block [64, 128] : tensor<64x128xbf16> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>
  %wd, %ws = mx.quantize %w1 block [1, 32] : tensor<32x128xbf16> -> tensor<32x128xf8E4M3FN>, tensor<32x4xf8E8M0FNU>
  %y = mx.scaled_matmul %xd, %xs, %wd, %ws lhs_block [64, 128] rhs_block [1, 32]
      : tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<32x128xf8E4M3FN>, tensor<32x4xf8E8M0FNU> -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}}
"""
K_SPLIT = """
  %k = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x1 = shard.shard %x to %k : tensor<64x128xbf16>
  %w1 = shard.shard %w to %k : tensor<32x128xbf16>"""
UNSPLIT = """
  %x1 = tensor.cast %x : tensor<64x128xbf16> to tensor<64x128xbf16>
  %w1 = tensor.cast %w : tensor<32x128xbf16> to tensor<32x128xbf16>"""


def test_partitioned_for_one_device_runs_on_the_cpu(rng):
    """A per-tensor quantize and a K-split product partitioned for a grid of one device: its
    all-reduces run locally and the program computes what the unpartitioned one does."""
    source = "shard.grid @grid(shape = 1)\n" + STEP.format(annotations=K_SPLIT)
    partitioned = tools.run_mx_opt(source, "--mx-partition")
    assert partitioned.count("shard.all_reduce") == 2, partitioned  # the amax and the partial sums
    x = random_input(rng, (64, 128), ml_dtypes.bfloat16)
    w = random_input(rng, (32, 128), ml_dtypes.bfloat16)
    got = mx.compile(partitioned)(x, w)
    want = mx.compile(STEP.format(annotations=UNSPLIT))(x, w)
    assert_bits_equal(got, want, "partitioned product")
