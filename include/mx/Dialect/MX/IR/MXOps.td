//===- MXOps.td - Operations of the mx dialect --------------*- tablegen -*-===//
//
// The mx operations. Their semantics (scale rule, element conversion,
// special values, the GEMM-ready scale layouts, delayed scaling) are fixed by
// the project spec and docs/numerics.md; the descriptions below state them in
// short. Every tensor of data has rank >= 2: the leading dimensions are batch
// dimensions, which blocks do not span and swizzles keep.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_MXOPS_TD
#define MX_DIALECT_MX_IR_MXOPS_TD

include "mx/Dialect/MX/IR/MXDialect.td"
include "mx/Dialect/MX/IR/MXAttrs.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The element types of quantized data are those of the element-format model
// (ElementFormat.h), asked here rather than listed.
def MX_ElementType : Type<CPred<"::mx::isElementType($_self)">,
                          "mx element type">;
def MX_FP8ElementType : Type<CPred<"::mx::isFP8ElementType($_self)">,
                             "FP8 element type">;

def MX_WideTensor : RankedTensorOf<[F32, BF16, F16]>;
def MX_ElementTensor : RankedTensorOf<[MX_ElementType]>;
def MX_ScaleTensor : RankedTensorOf<[F8E8M0FNU, F32, F8E4M3FN]>;
def MX_TensorScale : 0DTensorOf<[F32]>;

//===----------------------------------------------------------------------===//
// QuantizeOp
//===----------------------------------------------------------------------===//

def MX_QuantizeOp : MX_Op<"quantize", [Pure, AttrSizedOperandSegments]> {
  let summary = "quantize a tensor to FP8, FP6, FP4 or MXINT8 data and one "
                "scale per block";
  let description = [{
    Splits `input` into blocks of shape `block` (one entry per dimension;
    trailing partial blocks cover only the elements that exist) and, per
    block, computes `amax = max |x|` in f32 and a scale from
    `amax / maxfinite(element type)` according to `rounding`:

    * `ceil` (default): the smallest power of two 2^(b-127) with
      amax / 2^(b-127) <= maxfinite; b clamped to 0..254.
    * `floor`: 2^(exponent(amax) - emax), emax = 8 (E4M3), 15 (E5M2), 4
      (E3M2), 2 (E2M3, E2M1) or 0 (MXINT8).
    * `exact`: the f32 quotient itself (f32 scales only).

    Each element becomes `x * 2^(127-b)` (`x / scale` for `exact`), rounded to
    nearest even into the element type with saturation to +-maxfinite.
    A block containing NaN gets the NaN scale (E8M0 byte 0xFF) and NaN
    elements; a block containing +-Inf gets b = 254 and saturated elements; an
    all-zero block gets b = 0 and signed zeros.

    `scales` has shape `ceil(shape(input) / block)` and element type
    `f8E8M0FNU` (MX) or `f32` (FP8 blockwise and per-tensor recipes). The
    input has rank >= 2 and `block` is 1 on every batch (leading) dimension.

    MXFP6 (`f6E3M2FN`, max finite 28; `f6E2M3FN`, max finite 7.5) and
    MXINT8 (`i8`, code c meaning c * 2^-6, max finite 127/64: the element is
    clamp(rne(y * 64), -127, 127)) take `f8E8M0FNU` scales per block of 32
    along one of the last two dimensions; a NaN block gets scale 0xFF and
    element code 0 (they have no NaN). FP6 is held four elements in three
    bytes in memory, so its innermost extent is a multiple of 4.

    FP4 (`f4E2M1FN` data, max finite 6, emax 2; in memory two elements to a
    byte, element 2i in the low nibble, so the innermost extent is even):
    * MXFP4: `f8E8M0FNU` scales per block of 32, by the rules above; a NaN
      block gets scale 0xFF and element code 0 (E2M1 has no NaN).
    * NVFP4: `f8E4M3FN` scales per block of 16 and one f32 tensor scale t,
      given as `tensor_scale` or computed and returned as a third result:
      `t = amax(x) / (448 * 6)` (1 when that amax is 0); per block
      `s = e4m3(clamp((amax / 6) / t, 2^-6, 448))`; per element
      `q = e2m1(clamp(x * ((1 / t) / s), -6, 6))`, all in f32, rounding to
      nearest even. `rounding` does not apply.

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

    MXFP6 columnwise:

    ```mlir
    %d, %s = mx.quantize %x block [32, 1]
        : tensor<64x96xbf16> -> tensor<64x96xf6E3M2FN>, tensor<2x96xf8E8M0FNU>
    ```

    NVFP4 with a computed tensor scale:

    ```mlir
    %q, %s, %t = mx.quantize %x block [1, 16]
        : tensor<128x64xbf16> -> tensor<128x64xf4E2M1FN>,
          tensor<128x4xf8E4M3FN>, tensor<f32>
    ```

    `amax` gives the op the amax of a tensor that its input is a part of
    (a shard, the amax reduced over the devices that hold the others), in
    place of the amax of its input, so that every part is quantized as the
    whole tensor is: with one block over the whole input (per-tensor current
    scaling), the block's `max |x|` (as `mx.amax` computes it); for NVFP4
    with a computed tensor scale, the finite amax that the tensor scale is
    derived from (as `mx.amax finite` computes it).

    ```mlir
    %d, %s = mx.quantize %x block [64, 128] amax(%a : tensor<f32>)
        : tensor<64x128xbf16> -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>
    ```

    `transposed` quantizes the input with its last two dimensions swapped:
    `data` and `scales` are exactly those of quantizing `transpose(input)`,
    and `block` and the scales' shape are given in the data's (transposed)
    dimensions. This is how a GEMM operand that the contraction reads
    K-outer (the backward GEMMs' `W^T`, `dY^T`, `X^T`) is written GEMM-ready,
    K-contiguous, by the quantize itself rather than by a byte transpose
    afterwards (Hopper's FP8 tensor cores read K-major operands only). Where
    the same input is also quantized as it is, the GPU lowering computes
    both in one kernel that reads the input once (Transformer Engine's
    cast+transpose); for one scale per matrix (per-tensor scaling) the
    transposed data are then the transposed bytes of the other.

    The columnwise MXFP8 operand of the weight gradient, GEMM-ready:

    ```mlir
    %xt, %xts = mx.quantize %x transposed block [1, 32]
        : tensor<256x96xbf16> -> tensor<96x256xf8E4M3FN>,
          tensor<96x8xf8E8M0FNU>
    ```

    Attention-shaped V `[B, H, S, D]`, scaled along S:

    ```mlir
    %vd, %vs = mx.quantize %v block [1, 1, 32, 1]
        : tensor<2x3x200x72xbf16> -> tensor<2x3x200x72xf8E4M3FN>,
          tensor<2x3x7x72xf8E8M0FNU>
    ```
  }];

  let arguments = (ins
    MX_WideTensor:$input,
    Optional<MX_TensorScale>:$tensor_scale,
    Optional<MX_TensorScale>:$amax,
    DenseI64ArrayAttr:$block,
    DefaultValuedAttr<MX_ScaleRoundingAttr, "::mx::ScaleRounding::ceil">:$rounding,
    UnitAttr:$transposed);
  let results = (outs MX_ElementTensor:$data, MX_ScaleTensor:$scales,
                      Optional<MX_TensorScale>:$computed_tensor_scale);
  let assemblyFormat = [{
    $input (`transposed` $transposed^)? `block` $block (`rounding` `` $rounding^)?
    (`tensor_scale` `(` $tensor_scale^ `:` type($tensor_scale) `)`)?
    (`amax` `(` $amax^ `:` type($amax) `)`)? attr-dict
    `:` type($input) `->` type($data) `,` type($scales)
    (`,` type($computed_tensor_scale)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// DequantizeOp
//===----------------------------------------------------------------------===//

def MX_DequantizeOp : MX_Op<"dequantize", [Pure]> {
  let summary = "recover high-precision values from quantized data and its "
                "block scales";
  let description = [{
    Computes `float(data) * scale(block)` as one f32 multiplication per
    element, with the scale of the block that holds the element (`block` and
    the shape rules are those of `mx.quantize`), then rounds the f32 product
    to nearest even into the result type (f32, bf16 or f16). An E8M0 scale
    byte 0xFF (NaN) makes the whole block NaN. NVFP4 data (`f8E4M3FN`
    scales) takes its f32 tensor scale t: `(float(q) * float(s)) * t`.

    Example:

    ```mlir
    %x = mx.dequantize %data, %scales block [1, 32]
        : tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU> -> tensor<128x96xbf16>
    ```
  }];

  let arguments = (ins MX_ElementTensor:$data, MX_ScaleTensor:$scales,
                       Optional<MX_TensorScale>:$tensor_scale,
                       DenseI64ArrayAttr:$block);
  let results = (outs MX_WideTensor:$result);
  let assemblyFormat = [{
    $data `,` $scales `block` $block
    (`tensor_scale` `(` $tensor_scale^ `:` type($tensor_scale) `)`)? attr-dict
    `:` type($data) `,` type($scales) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SwizzleOp / UnswizzleOp
//===----------------------------------------------------------------------===//

def MX_SwizzleOp : MX_Op<"swizzle", [Pure]> {
  let summary = "lay block scales out in a GEMM-ready layout";
  let description = [{
    Views the last two dimensions of the scales as an `[R, C]` matrix, R
    being dimension `unscaled_dim` (the one the quantization block did not
    reduce: M for rowwise scales `[M, K/32]`, so `unscaled_dim = 0`; K for
    columnwise scales `[M/32, K]`, so `unscaled_dim = 1`; for batched scales
    the absolute index of one of the last two dimensions) and C the other.
    Leading (batch) dimensions are kept; each batch slice is laid out alone.

    * `layout tiles` (the default; MX and NVFP4 scales): the matrix is padded
      with zero bytes to `R' = ceil(R/128)*128`, `C' = ceil(C/4)*4` and stored
      as row-major 128x4 tiles, each tile holding its 128 rows as four
      interleaved groups of 32: the row-major tensor
      `[..., R'/128, C'/4, 32, 4, 4]` indexed
      `[..., r/128, c/4, r%32, (r%128)/32, c%4]`.
    * `layout blockwise` (FP8 blockwise f32 scales): the compact scales become
      the GEMM-ready ones, transposed so that R is innermost and zero padded
      to `R' = ceil(R/4)*4`: `[..., C, R'/4, 4]`, element `[c, r/4, r%4]`.
      Rowwise 1x128 scales `[A, B/128]` give `[B/128, A'/4, 4]`; columnwise
      `[A/128, B]` (`unscaled_dim = 1`) give `[A/128, B'/4, 4]`.

    Example (M = 500, K = 192, MX rowwise scales):

    ```mlir
    %t = mx.swizzle %scales
        : tensor<500x6xf8E8M0FNU> -> tensor<4x2x32x4x4xf8E8M0FNU>
    ```

    FP8 blockwise rowwise scales of a `[250, 512]` tensor:

    ```mlir
    %g = mx.swizzle %scales layout blockwise
        : tensor<250x4xf32> -> tensor<4x63x4xf32>
    ```
  }];

  let arguments = (ins MX_ScaleTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$unscaled_dim,
                       DefaultValuedAttr<MX_SwizzleLayoutAttr,
                                         "::mx::SwizzleLayout::tiles">:$layout);
  let results = (outs MX_ScaleTensor:$result);
  let assemblyFormat = [{
    $input (`unscaled_dim` $unscaled_dim^)? (`layout` `` $layout^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MX_UnswizzleOp : MX_Op<"unswizzle", [Pure]> {
  let summary = "read block scales back from a GEMM-ready layout";
  let description = [{
    The inverse of `mx.swizzle` with the same `unscaled_dim` and `layout`:
    the result type names the compact scale shape (which the padded shape
    cannot recover) and padding is dropped. `unswizzle(swizzle(x))` folds to
    `x`. The reverse, `swizzle(unswizzle(t))`, is not folded: it resets
    `t`'s padding to zero.

    Example:

    ```mlir
    %s = mx.unswizzle %t
        : tensor<4x2x32x4x4xf8E8M0FNU> -> tensor<500x6xf8E8M0FNU>
    ```
  }];

  let arguments = (ins MX_ScaleTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$unscaled_dim,
                       DefaultValuedAttr<MX_SwizzleLayoutAttr,
                                         "::mx::SwizzleLayout::tiles">:$layout);
  let results = (outs MX_ScaleTensor:$result);
  let assemblyFormat = [{
    $input (`unscaled_dim` $unscaled_dim^)? (`layout` `` $layout^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

def MX_ScaledMatmulOp : MX_Op<"scaled_matmul", [Pure, AttrSizedOperandSegments]> {
  let summary = "block-scaled matrix product C = deq(A) * deq(B)^T";
  let description = [{
    Computes `C[..., m, n] = sum_k deq(A)[..., m, k] * deq(B)[..., n, k]`,
    accumulating in f32 and rounding to the result type (f32, bf16, f16).
    Leading dimensions are batch dimensions, equal for both operands and the
    result: a batched product over them.

    Each operand is stored K-contiguous (`lhs_layout k_contiguous`, the
    default: A `[..., M, K]`, B `[..., N, K]`, the "TN" form) or K-outer
    (`k_outer`: A `[..., K, M]`, B `[..., K, N]`, as a columnwise quantize
    leaves it). `lhs_block` / `rhs_block` are the operands' quantization
    blocks in their own dimensions (`[1, 32]` MXFP8 rowwise, `[32, 1]` for a
    K-outer MXFP8 operand, `[1, 128]` and `[128, 128]` FP8 blockwise, the
    whole shape per tensor), 1 on batch dimensions; K must be a multiple of
    each block's K extent.

    Scales come in one of three forms, told apart by their rank r:
    * linear, `ceil(shape / block)` (r = rank of the data);
    * 128x4 tiles as written by `mx.swizzle` with the operand's M or N as
      the unscaled dimension (r = rank + 3), for blocks of extent 1 across K;
    * FP8 blockwise GEMM-ready as written by `mx.swizzle layout blockwise`
      (r = rank + 1), for blocks of extent 1 across K.
    All three mean the same product.

    Operands may be of any element type (FP8, FP6, FP4 as MXFP4 or NVFP4,
    MXINT8), the same or not. When either operand is NVFP4 (`f8E4M3FN`
    scales), `tensor_scales` gives the f32 tensor scales of both, lhs first
    (1.0 for an operand that has none); each operand is then dequantized as
    `mx.dequantize` does with its tensor scale.

    Example (MXFP8, swizzled scales):

    ```mlir
    %c = mx.scaled_matmul %a, %as, %b, %bs
        lhs_block [1, 32] rhs_block [1, 32]
        : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>,
          tensor<128x512xf8E4M3FN>, tensor<1x4x32x4x4xf8E8M0FNU>
        -> tensor<256x128xbf16>
    ```

    A linear layer's weight gradient `dW = dY^T X` from the columnwise
    quantizations of dY `[M, N]` and X `[M, K]` (contraction over M):

    ```mlir
    %dw = mx.scaled_matmul %dy, %dys, %x, %xs
        lhs_block [32, 1] lhs_layout k_outer rhs_block [32, 1] rhs_layout k_outer
        : tensor<256x64xf8E5M2>, tensor<8x64xf8E8M0FNU>,
          tensor<256x96xf8E4M3FN>, tensor<8x96xf8E8M0FNU> -> tensor<64x96xf32>
    ```

    Epilogues (what a training step adds to a product, in the same kernel):
    `bias` adds a vector `[N]` (f32, bf16 or f16) to every row (a linear
    layer's forward), and `accumulate` adds an existing output `D` of the
    result's type (`C += A B^T`: gradient accumulation into an f32 main
    gradient, Transformer Engine's `fuse_wgrad_accumulation`). In f32, before
    the one rounding to the result type:
    `result = round(((sum_k ...) + bias[n]) + D[..., m, n])`.

    ```mlir
    %main1 = mx.scaled_matmul %dy, %dys, %x, %xs
        lhs_block [32, 1] lhs_layout k_outer rhs_block [32, 1] rhs_layout k_outer
        accumulate(%main : tensor<64x96xf32>)
        : tensor<256x64xf8E5M2>, tensor<8x64xf8E8M0FNU>,
          tensor<256x96xf8E4M3FN>, tensor<8x96xf8E8M0FNU> -> tensor<64x96xf32>
    ```

    FP8 output (Transformer Engine's `D_SCALE` / `AMAX_D`) is written as the
    product followed by `mx.quantize_delayed` of it; where that cast is the
    product's only use, the GPU lowering fuses it into the generated
    kernel's epilogue, with the same results (docs/gpu.md).
  }];

  let arguments = (ins MX_ElementTensor:$lhs, MX_ScaleTensor:$lhs_scales,
                       MX_ElementTensor:$rhs, MX_ScaleTensor:$rhs_scales,
                       Variadic<MX_TensorScale>:$tensor_scales,
                       Optional<MX_WideTensor>:$bias,
                       Optional<MX_WideTensor>:$accumulator,
                       DenseI64ArrayAttr:$lhs_block,
                       DenseI64ArrayAttr:$rhs_block,
                       DefaultValuedAttr<MX_OperandLayoutAttr,
                           "::mx::OperandLayout::k_contiguous">:$lhs_layout,
                       DefaultValuedAttr<MX_OperandLayoutAttr,
                           "::mx::OperandLayout::k_contiguous">:$rhs_layout);
  let results = (outs MX_WideTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $lhs_scales `,` $rhs `,` $rhs_scales
    `lhs_block` $lhs_block (`lhs_layout` `` $lhs_layout^)?
    `rhs_block` $rhs_block (`rhs_layout` `` $rhs_layout^)?
    (`tensor_scales` `(` $tensor_scales^ `:` type($tensor_scales) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`accumulate` `(` $accumulator^ `:` type($accumulator) `)`)?
    attr-dict
    `:` type($lhs) `,` type($lhs_scales) `,` type($rhs) `,` type($rhs_scales)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The operand's shape read as `[batch..., MN, K]`, whatever its layout.
    ::mx::MatmulOperandShape getLhsShape();
    ::mx::MatmulOperandShape getRhsShape();
  }];
}

//===----------------------------------------------------------------------===//
// Per-tensor scaling: amax, delayed-scaling cast, amax history update
//===----------------------------------------------------------------------===//

def MX_AmaxOp : MX_Op<"amax", [Pure]> {
  let summary = "the largest magnitude of a tensor";
  let description = [{
    `max |x|` over the whole input, computed in f32 (bf16 and f16 widen
    exactly); NaN when any element is NaN. This is the observation that
    current per-tensor scaling divides by maxfinite and that delayed scaling
    records in its history. With `finite`, `max |x|` over the finite
    elements only (0 when there are none): the amax that NVFP4's tensor
    scale is derived from.

    Example:

    ```mlir
    %a = mx.amax %x : tensor<64x128xbf16> -> tensor<f32>
    %f = mx.amax %x finite : tensor<64x128xbf16> -> tensor<f32>
    ```
  }];

  let arguments = (ins MX_WideTensor:$input, UnitAttr:$finite);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input (`finite` $finite^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MX_QuantizeDelayedOp : MX_Op<"quantize_delayed", [Pure]> {
  let summary = "per-tensor FP8 cast with a given scale, recording its amax";
  let description = [{
    The cast of delayed per-tensor scaling (Transformer Engine's FP8
    recipe), reading the input once. With `s = scales[index]`:

    * `data = sat(x * s)`: one f32 multiplication per element, rounded to
      nearest even into the FP8 element type (f8E4M3FN or f8E5M2; the
      verifier rejects FP4, which takes block scales) with saturation to
      +-maxfinite (NaN gives the element NaN);
    * `scale_inv = 1 / s` (f32 division), of shape `[1, ..., 1]`, the
      per-tensor scale that `mx.dequantize` (block = the whole shape) and
      `mx.scaled_matmul` take;
    * `new_history` is `history` with `[0, index]` set to `amax(x)`, the
      observation that `mx.update_amax_history` turns into the next scale.

    `scales` is `[N]` and `history` `[L, N]` for N quantized tensors with a
    history window of L steps; `index` (static) selects this tensor's column.

    `transposed` casts the input with its last two dimensions swapped, as
    `mx.quantize` does: `data` is `sat(transpose(x) * s)`, the GEMM-ready
    K-contiguous operand of a backward GEMM; the amax is the same. A plain
    and a transposed cast of one input with the same scales and index, the
    second reading the first's `new_history` (or the same history), run as
    one GPU kernel that reads the input once (Transformer Engine's
    cast+transpose).

    `new_history` bufferizes in place where it can: a public function that
    returns it for a history argument marked `mx.updated` updates the
    caller's history and does not return it (`mx-drop-in-place-results`);
    the GPU cast then records the amax in that buffer itself, counting its
    CTAs in `history[0, index]` (which must hold an amax there: >= 0, -0 or
    NaN), and is one kernel with no copy of the history.

    Example:

    ```mlir
    %y, %sinv, %h1 = mx.quantize_delayed %x, %scales, %history index 1
        : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32>
        -> tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
    %yt, %sinv2, %h2 = mx.quantize_delayed %x, %scales, %h1 index 1 transposed
        : tensor<64x128xbf16>, tensor<3xf32>, tensor<16x3xf32>
        -> tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, tensor<16x3xf32>
    ```
  }];

  let arguments = (ins MX_WideTensor:$input, 1DTensorOf<[F32]>:$scales,
                       2DTensorOf<[F32]>:$history, I64Attr:$index,
                       UnitAttr:$transposed);
  let results = (outs MX_ElementTensor:$data, RankedTensorOf<[F32]>:$scale_inv,
                      2DTensorOf<[F32]>:$new_history);
  let assemblyFormat = [{
    $input `,` $scales `,` $history `index` $index (`transposed` $transposed^)?
    attr-dict
    `:` type($input) `,` type($scales) `,` type($history)
    `->` type($data) `,` type($scale_inv) `,` type($new_history)
  }];
  let hasVerifier = 1;
}

def MX_UpdateAmaxHistoryOp : MX_Op<"update_amax_history", [Pure]> {
  let summary = "delayed scaling: next scales from the amax history, then "
                "rotate it";
  let description = [{
    Once per step, for every column j of `history` `[L, N]` (row 0 holds the
    amaxes that this step's `mx.quantize_delayed` casts recorded):

    * `a = max(history[:, j])` (`algorithm max`, the default) or
      `a = history[0, j]` (`most_recent`);
    * `new_scales[j] = (maxfinite / a) / 2^margin` in f32 when a is finite
      and positive, the largest finite f32 where that overflows (as
      Transformer Engine does), and `scales[j]` unchanged otherwise;
      maxfinite is that of `element`, the FP8 type the scales are for, and
      `margin` lies in -126..127;
    * the history rotates: `[c, a_1, ..., a_L-1]` becomes
      `[0, a_2, ..., a_L-1, c]` (a single-row history becomes `[0]`).

    The scales are computed before the rotation.

    Example:

    ```mlir
    %h, %s = mx.update_amax_history %history, %scales element f8E4M3FN
        algorithm max margin 0
        : tensor<16x3xf32>, tensor<3xf32> -> tensor<16x3xf32>, tensor<3xf32>
    ```
  }];

  let arguments = (ins 2DTensorOf<[F32]>:$history, 1DTensorOf<[F32]>:$scales,
                       TypeAttrOf<MX_FP8ElementType>:$element,
                       DefaultValuedAttr<MX_AmaxAlgorithmAttr,
                           "::mx::AmaxAlgorithm::max">:$algorithm,
                       DefaultValuedAttr<I64Attr, "0">:$margin);
  let results = (outs 2DTensorOf<[F32]>:$new_history,
                      1DTensorOf<[F32]>:$new_scales);
  let assemblyFormat = [{
    $history `,` $scales `element` $element
    (`algorithm` `` $algorithm^)? (`margin` $margin^)? attr-dict
    `:` type($history) `,` type($scales)
    `->` type($new_history) `,` type($new_scales)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ColumnSumOp
//===----------------------------------------------------------------------===//

def MX_ColumnSumOp : MX_Op<"column_sum", [Pure]> {
  let summary = "the f32 sum of every column of a matrix";
  let description = [{
    `result[n] = sum_m input[m, n]` for an `[M, N]` input of f32, bf16 or
    f16, accumulated in f32 (bf16 and f16 widen exactly): a linear layer's
    bias gradient, the column sum of its output gradient dY.

    Every addition is an f32 addition, so NaN and Inf propagate as f32
    addition does (a NaN, or +Inf and -Inf, in a column make its sum NaN),
    and a column of negative zeros sums to -0. The order of the additions is
    not specified; it is fixed for a given lowering and shape (the result is
    deterministic), and the result lies within `(M - 1) * eps_f32 *
    sum_m |input[m, n]|` of the exact sum (docs/numerics.md). The GPU
    lowering sums 64-row tiles and then the tiles, and computes the tile
    sums in the cast+transpose kernel of a transposed per-tensor cast of the
    same input (Transformer Engine's fused bias gradient) where there is
    one.

    Example:

    ```mlir
    %db = mx.column_sum %dy : tensor<256x96xbf16> -> tensor<96xf32>
    ```
  }];

  let arguments = (ins MX_WideTensor:$input);
  let results = (outs RankedTensorOf<[AnyType]>:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pipelined gathers (mx-pipeline-gathers)
//===----------------------------------------------------------------------===//

def MX_GatherChunkOp : MX_Op<"gather_chunk",
    [AllTypesMatch<["dest", "result"]>]> {
  let summary = "all-gather one chunk of rows of every device's part, each "
                "into its place";
  let description = [{
    The all-gather of a partitioned program (every one of `devices`
    processes holds a part of `P = dest.dim(0) / devices` rows and each gets
    the whole, parts in process order), one chunk of rows at a time:
    `result` is `dest` with rows `[d * P + row, d * P + row + chunk.dim(0))`
    set to process d's `chunk`, for every process d. Calls at rows `c * h`
    for every chunk c of h rows give the `shard.all_gather` (gather_axis 0)
    of the parts. The other dimensions of `chunk` and `dest` are equal.

    `mx-pipeline-gathers` emits these, one per chunk of a quantize's
    gathered results, so that the exchange of a chunk overlaps the
    quantize of the next; the GPU pipeline runs each as
    `mxrtAllGatherPlaced` on the communicator's side stream, the chunks of
    one quantize's results as one NCCL group. The chain of a gathered value
    starts at a `tensor.empty` and ends at `mx.gather_join`, the only place
    where it may be read. The group is the whole grid of the partitioned
    program (the runtime has one communicator per process). Not pure: it
    communicates, and the chain's order is the order of the exchanges.

    Example:

    ```mlir
    %e = tensor.empty() : tensor<256x512xf8E4M3FN>
    %g0 = mx.gather_chunk %c0 into %e at row 0 of 2 devices
        : tensor<64x512xf8E4M3FN> into tensor<256x512xf8E4M3FN>
    %g1 = mx.gather_chunk %c1 into %g0 at row 64 of 2 devices
        : tensor<64x512xf8E4M3FN> into tensor<256x512xf8E4M3FN>
    %g = mx.gather_join %g1 : tensor<256x512xf8E4M3FN>
    ```
  }];

  let arguments = (ins AnyRankedTensor:$chunk, AnyRankedTensor:$dest,
                       I64Attr:$row, I64Attr:$devices);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $chunk `into` $dest `at` `row` $row `of` $devices `devices` attr-dict `:`
    type($chunk) `into` type($dest)
  }];
  let hasVerifier = 1;
}

def MX_GatherJoinOp : MX_Op<"gather_join", [InferTypeOpAdaptor]> {
  let summary = "the values of chunked gathers, once their exchanges are "
                "complete";
  let description = [{
    Each result is its operand, the end of a chain of `mx.gather_chunk`:
    the whole gathered value, which the ops after it read. On the GPU it is
    `mxrtCollectivesJoin`: the call stream waits for every exchange that
    the side stream ran before it, so that nothing reads a gathered buffer,
    and nothing frees a chunk or a gathered buffer, while an exchange still
    uses it. One join serves all chains of a quantize.

    Example:

    ```mlir
    %d, %s = mx.gather_join %gd, %gs
        : tensor<256x8192xf8E4M3FN>, tensor<256x256xf8E8M0FNU>
    ```
  }];

  let arguments = (ins Variadic<AnyRankedTensor>:$gathered);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $gathered attr-dict `:` type($gathered)
  }];
  let hasVerifier = 1;
}

#endif // MX_DIALECT_MX_IR_MXOPS_TD
