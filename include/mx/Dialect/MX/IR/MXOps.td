//===- MXOps.td - Operations of the mx dialect --------------*- tablegen -*-===//
//
// The five mx operations. Their semantics (scale rule, element conversion,
// special values, the 128x4 scale layout) are written once in
// docs/numerics.md; the descriptions below state them in short.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_MXOPS_TD
#define MX_DIALECT_MX_IR_MXOPS_TD

include "mx/Dialect/MX/IR/MXDialect.td"
include "mx/Dialect/MX/IR/MXAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def MX_WideFloat : AnyTypeOf<[F32, BF16, F16]>;
def MX_ElementFloat : AnyTypeOf<[F8E4M3FN, F8E5M2]>;
def MX_ScaleFloat : AnyTypeOf<[F8E8M0FNU, F32]>;

def MX_WideTensor : RankedTensorOf<[F32, BF16, F16]>;
def MX_ElementTensor : RankedTensorOf<[F8E4M3FN, F8E5M2]>;
def MX_ScaleTensor : RankedTensorOf<[F8E8M0FNU, F32]>;

//===----------------------------------------------------------------------===//
// QuantizeOp
//===----------------------------------------------------------------------===//

def MX_QuantizeOp : MX_Op<"quantize", [Pure]> {
  let summary = "quantize a tensor to FP8 data and one scale per block";
  let description = [{
    Splits `input` into blocks of shape `block` (one entry per dimension;
    trailing partial blocks cover only the elements that exist) and, per
    block, computes `amax = max |x|` in f32 and a scale from
    `amax / maxfinite(element type)` according to `rounding`:

    * `ceil` (default): the smallest power of two 2^(b-127) with
      amax / 2^(b-127) <= maxfinite; b clamped to 0..254.
    * `floor`: 2^(exponent(amax) - emax), emax = 8 (E4M3) or 15 (E5M2).
    * `exact`: the f32 quotient itself (f32 scales only).

    Each element becomes `x * 2^(127-b)` (`x / scale` for `exact`), rounded to
    nearest even into the element type with saturation to +-maxfinite.
    A block containing NaN gets the NaN scale (E8M0 byte 0xFF) and NaN
    elements; a block containing +-Inf gets b = 254 and saturated elements; an
    all-zero block gets b = 0 and signed zeros.

    `scales` has shape `ceil(shape(input) / block)` and element type
    `f8E8M0FNU` (MX) or `f32` (FP8 blockwise and per-tensor recipes).

    Example (MXFP8 rowwise, 1x32 blocks):

    ```mlir
    %data, %scales = mx.quantize %x block [1, 32]
        : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
    ```

    Columnwise with the OCP rounding rule:

    ```mlir
    %d, %s = mx.quantize %x block [32, 1] rounding floor
        : tensor<64x64xf32> -> tensor<64x64xf8E5M2>, tensor<2x64xf8E8M0FNU>
    ```
  }];

  let arguments = (ins
    MX_WideTensor:$input,
    DenseI64ArrayAttr:$block,
    DefaultValuedAttr<MX_ScaleRoundingAttr, "::mx::ScaleRounding::ceil">:$rounding);
  let results = (outs MX_ElementTensor:$data, MX_ScaleTensor:$scales);
  let assemblyFormat = [{
    $input `block` $block (`rounding` `` $rounding^)? attr-dict
    `:` type($input) `->` type($data) `,` type($scales)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// DequantizeOp
//===----------------------------------------------------------------------===//

def MX_DequantizeOp : MX_Op<"dequantize", [Pure]> {
  let summary = "recover high-precision values from FP8 data and block scales";
  let description = [{
    Computes `float(data) * scale(block)` as one f32 multiplication per
    element, with the scale of the block that holds the element (`block` and
    the shape rules are those of `mx.quantize`), then rounds the f32 product
    to nearest even into the result type (f32, bf16 or f16). An E8M0 scale
    byte 0xFF (NaN) makes the whole block NaN.

    Example:

    ```mlir
    %x = mx.dequantize %data, %scales block [1, 32]
        : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU> -> tensor<128x96xbf16>
    ```
  }];

  let arguments = (ins MX_ElementTensor:$data, MX_ScaleTensor:$scales,
                       DenseI64ArrayAttr:$block);
  let results = (outs MX_WideTensor:$result);
  let assemblyFormat = [{
    $data `,` $scales `block` $block attr-dict
    `:` type($data) `,` type($scales) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SwizzleOp / UnswizzleOp
//===----------------------------------------------------------------------===//

def MX_SwizzleOp : MX_Op<"swizzle", [Pure]> {
  let summary = "lay 2-D block scales out as the tensor cores' 128x4 tiles";
  let description = [{
    Views the scales as an `[R, C]` matrix, R being dimension `unscaled_dim`
    (the dimension the quantization block did not reduce: M for rowwise
    scales `[M, K/32]`, so `unscaled_dim = 0`; K for columnwise scales
    `[M/32, K]`, so `unscaled_dim = 1`) and C the other one. The matrix is
    padded with zero bytes to `R' = ceil(R/128)*128`, `C' = ceil(C/4)*4` and
    stored as row-major 128x4 tiles, each tile holding its 128 rows as four
    interleaved groups of 32. The result is the row-major tensor
    `[R'/128, C'/4, 32, 4, 4]` indexed `[r/128, c/4, r%32, (r%128)/32, c%4]`.

    Example (M = 500, K = 192, MX rowwise scales):

    ```mlir
    %t = mx.swizzle %scales
        : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
    ```
  }];

  let arguments = (ins MX_ScaleTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$unscaled_dim);
  let results = (outs MX_ScaleTensor:$result);
  let assemblyFormat = [{
    $input (`unscaled_dim` $unscaled_dim^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MX_UnswizzleOp : MX_Op<"unswizzle", [Pure]> {
  let summary = "read 2-D block scales back from 128x4 tiles";
  let description = [{
    The inverse of `mx.swizzle`: the result type names the 2-D scale shape
    (which the padded tile shape cannot recover) and padding is dropped.
    `unswizzle(swizzle(x))` folds to `x`. The reverse,
    `swizzle(unswizzle(t))`, is not folded: it resets `t`'s padding to zero.

    Example:

    ```mlir
    %s = mx.unswizzle %t
        : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
    ```
  }];

  let arguments = (ins MX_ScaleTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$unscaled_dim);
  let results = (outs MX_ScaleTensor:$result);
  let assemblyFormat = [{
    $input (`unscaled_dim` $unscaled_dim^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

def MX_ScaledMatmulOp : MX_Op<"scaled_matmul", [Pure]> {
  let summary = "block-scaled matrix product C = deq(A) * deq(B)^T";
  let description = [{
    Computes `C[m, n] = sum_k deq(A)[m, k] * deq(B)[n, k]` with `A` `[M, K]`
    and `B` `[N, K]` (both K-contiguous, the "TN" form of the hardware),
    accumulating in f32 and rounding to the result type (f32, bf16, f16).
    `lhs_block` / `rhs_block` are the quantization blocks of A and B (e.g.
    `[1, 32]` for MXFP8, `[1, 128]` and `[128, 128]` for FP8 blockwise,
    `[M, K]` / `[N, K]` per tensor); K must be a multiple of each block's K
    extent. Scales come linear (`ceil([M, K] / lhs_block)`) or, for `[1, k]`
    blocks, swizzled as produced by `mx.swizzle` (5-D); both mean the same
    product.

    Example (MXFP8, swizzled scales):

    ```mlir
    %c = mx.scaled_matmul %a, %as, %b, %bs
        lhs_block [1, 32] rhs_block [1, 32]
        : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>,
          tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU>
        -> tensor<256x128xbf16>
    ```
  }];

  let arguments = (ins MX_ElementTensor:$lhs, MX_ScaleTensor:$lhs_scales,
                       MX_ElementTensor:$rhs, MX_ScaleTensor:$rhs_scales,
                       DenseI64ArrayAttr:$lhs_block,
                       DenseI64ArrayAttr:$rhs_block);
  let results = (outs MX_WideTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $lhs_scales `,` $rhs `,` $rhs_scales
    `lhs_block` $lhs_block `rhs_block` $rhs_block attr-dict
    `:` type($lhs) `,` type($lhs_scales) `,` type($rhs) `,` type($rhs_scales)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MX_DIALECT_MX_IR_MXOPS_TD
