//===- MXDialect.td - The mx dialect ------------------------*- tablegen -*-===//
//
// Declares the `mx` dialect: microscaled low-precision tensors, i.e. FP8 data
// whose value is recovered by multiplying with one scale per block of
// elements. The dialect reuses MLIR's builtin float types (f8E4M3FN, f8E5M2,
// f8E8M0FNU, f32) instead of defining its own, so that its values flow into
// arith, linalg and the GPU dialects without casts.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_MXDIALECT_TD
#define MX_DIALECT_MX_IR_MXDIALECT_TD

include "mlir/IR/OpBase.td"

def MX_Dialect : Dialect {
  let name = "mx";
  let cppNamespace = "::mx";
  let summary = "Microscaled (MX, FP8 block-scaled) tensor math";
  let description = [{
    The `mx` dialect describes block-scaled low-precision math as used by
    MXFP8 (OCP Microscaling v1.0) and the FP8 blockwise / per-tensor recipes:
    quantization of a high-precision tensor into FP8 data plus one scale per
    block, dequantization, the 128x4 tiled scale layout that tensor cores
    read, and the block-scaled matrix product.

    All ops work on ranked tensors with static shapes. A block is written as
    a shape with one entry per tensor dimension (`[1, 32]` is MXFP8 rowwise,
    `[32, 1]` columnwise, `[128, 128]` the FP8 2-D blockwise recipe, and the
    full tensor shape is per-tensor scaling); scales have shape
    `ceil(shape / block)`, trailing partial blocks included. The numerics are
    fixed by the project's contract (docs/spec.md) and every lowering matches
    them bit for bit.

    The dialect has one argument attribute, which it verifies:
    `mx.updated`, a unit attribute on a ranked tensor or memref argument of a
    function (FunctionOpInterface), marks an argument whose new value the
    function returns and whose caller may find its buffer updated in place
    (`mx-drop-in-place-results`; `mx-export-signatures` lists such arguments
    and removes the mark). Any other `mx.` argument attribute is an error.

    ```mlir
    func.func @cast(%x: tensor<64xbf16>, %h: tensor<16x3xf32> {mx.updated})
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The argument attribute that marks an argument updated in place.
    static constexpr ::llvm::StringLiteral getUpdatedAttrName() {
      return "mx.updated";
    }
  }];
}

class MX_Op<string mnemonic, list<Trait> traits = []>
    : Op<MX_Dialect, mnemonic, traits>;

#endif // MX_DIALECT_MX_IR_MXDIALECT_TD
