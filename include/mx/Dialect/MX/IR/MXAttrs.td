//===- MXAttrs.td - Attributes of the mx dialect ------------*- tablegen -*-===//
//
// The enumerations that parameterize mx ops: how a block's amax becomes a
// scale (the one numerical knob of quantize), how a GEMM operand is stored,
// which GEMM-ready layout a scale swizzle produces, and how delayed scaling
// reads its amax history.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_MXATTRS_TD
#define MX_DIALECT_MX_IR_MXATTRS_TD

include "mx/Dialect/MX/IR/MXDialect.td"
include "mlir/IR/EnumAttr.td"

def MX_ScaleRounding : I32EnumAttr<"ScaleRounding",
    "how a block's amax / maxfinite becomes a scale", [
      I32EnumAttrCase<"ceil", 0>,
      I32EnumAttrCase<"floor", 1>,
      I32EnumAttrCase<"exact", 2>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mx";
  let description = [{
    * `ceil`: the smallest power of two not below amax / maxfinite (Transformer
      Engine, cuBLAS, and the SM100 `cvt.rp.satfinite.ue8m0x2.f32`); no
      element saturates.
    * `floor`: OCP MX v1.0, 2^(exponent(amax) - emax(element type)); elements
      may exceed the element's max finite value and saturate.
    * `exact`: the scale is amax / maxfinite itself; only for f32 scales.
  }];
}

def MX_ScaleRoundingAttr : EnumAttr<MX_Dialect, MX_ScaleRounding, "rounding">;

def MX_OperandLayout : I32EnumAttr<"OperandLayout",
    "how an operand of mx.scaled_matmul is stored", [
      I32EnumAttrCase<"k_contiguous", 0>,
      I32EnumAttrCase<"k_outer", 1>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mx";
  let description = [{
    * `k_contiguous`: `[..., M, K]` (lhs) or `[..., N, K]` (rhs), K innermost:
      the "TN" form, scaled by a rowwise quantize (`[..., 1, k]` blocks).
    * `k_outer`: `[..., K, M]` or `[..., K, N]`, scaled by a columnwise
      quantize (`[..., k, 1]` blocks); what the backward GEMMs of a linear
      layer read without transposing data.
  }];
}

def MX_OperandLayoutAttr
    : EnumAttr<MX_Dialect, MX_OperandLayout, "operand_layout">;

def MX_SwizzleLayout : I32EnumAttr<"SwizzleLayout",
    "the GEMM-ready layout that mx.swizzle writes", [
      I32EnumAttrCase<"tiles", 0>,
      I32EnumAttrCase<"blockwise", 1>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mx";
  let description = [{
    * `tiles`: the tensor cores' 128x4 tiles, `[..., R'/128, C'/4, 32, 4, 4]`
      (MX and NVFP4 scales).
    * `blockwise`: the FP8 blockwise recipe's GEMM-ready scales, transposed so
      that the unscaled dimension is innermost and zero padded to a multiple
      of 4: `[..., C, R'/4, 4]` with `R' = ceil(R/4)*4`.
  }];
}

def MX_SwizzleLayoutAttr
    : EnumAttr<MX_Dialect, MX_SwizzleLayout, "swizzle_layout">;

def MX_AmaxAlgorithm : I32EnumAttr<"AmaxAlgorithm",
    "which amax of the history a delayed scale is computed from", [
      I32EnumAttrCase<"max", 0>,
      I32EnumAttrCase<"most_recent", 1>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mx";
  let description = [{
    * `max`: the largest amax of the whole history window (Transformer
      Engine's default).
    * `most_recent`: the amax recorded in the current step (history row 0).
  }];
}

def MX_AmaxAlgorithmAttr
    : EnumAttr<MX_Dialect, MX_AmaxAlgorithm, "amax_algorithm">;

#endif // MX_DIALECT_MX_IR_MXATTRS_TD
