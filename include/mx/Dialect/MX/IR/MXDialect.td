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
  }];
  let useDefaultAttributePrinterParser = 1;
}

class MX_Op<string mnemonic, list<Trait> traits = []>
    : Op<MX_Dialect, mnemonic, traits>;

#endif // MX_DIALECT_MX_IR_MXDIALECT_TD
