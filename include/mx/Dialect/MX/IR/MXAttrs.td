//===- MXAttrs.td - Attributes of the mx dialect ------------*- tablegen -*-===//
//
// The enumerations that parameterize mx ops. Scale rounding decides how a
// block's amax becomes a scale; it is the one numerical knob of quantize.
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

#endif // MX_DIALECT_MX_IR_MXATTRS_TD
