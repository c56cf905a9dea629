//===- ElementFormat.h - The element formats of mx data ---------*- C++ -*-===//
//
// The one description of an mx element type that every layer asks: the
// verifiers (which scales and blocks a format takes, its packing), the scalar
// numerics builders (bit layout, bias, max finite, NaN code), the GPU kernels
// (packing, which conversion a chip has), the device-buffer ABI and the
// cuBLASLt mapping. The facts of a float format are derived from its builtin
// type's APFloat semantics, those of MXINT8 from `i8`; no layer keeps a table
// of its own, and a type outside the model is an error, never a fall-through
// to another format's numbers. docs/numerics.md lists what else a new format
// needs ("Adding an element format").
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_ELEMENTFORMAT_H
#define MX_DIALECT_MX_IR_ELEMENTFORMAT_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mx {

/// How the elements of one mx element type encode values and sit in memory.
struct ElementFormat {
  /// The builtin type: f8E4M3FN, f8E5M2, f6E3M2FN, f6E2M3FN, f4E2M1FN or i8.
  mlir::Type type;
  /// Bits of one element code, sign included.
  unsigned bitWidth;
  /// MXINT8: two's complement codes c meaning c * 2^-mantissaBits, at most
  /// +-maxFiniteCode. Otherwise a sign-magnitude float with `exponentBits`
  /// biased by `bias` and `mantissaBits` stored mantissa bits, subnormals
  /// included.
  bool isInteger;
  unsigned exponentBits, mantissaBits;
  int bias;
  /// The largest finite value, its code and emax (the exponent of the
  /// largest power of two not above it).
  double maxFinite;
  uint32_t maxFiniteCode;
  int emax;
  /// The code of the contract's NaN (the positive NaN with every exponent
  /// and mantissa bit set), if the format has NaN; and whether it has Inf.
  std::optional<uint32_t> nanCode;
  bool hasInfinity;
  /// Memory holds `packedElements` elements in `packedBytes` bytes, element
  /// 0 of a group in the lowest bits (little-endian): 1 in 1 (FP8, INT8),
  /// 2 in 1 (FP4), 4 in 3 (FP6).
  int64_t packedElements, packedBytes;

  /// The code of every element of a NaN block: the NaN code, or 0 for the
  /// formats without NaN (spec sections 10 and 11).
  uint32_t getNaNBlockCode() const { return nanCode.value_or(0); }

  /// Whether elements share bytes, so that memory holds fewer bytes than
  /// elements and the innermost extent must be whole groups.
  bool isPacked() const { return packedElements > 1; }

  /// Bytes that `elements` elements (a multiple of packedElements) occupy.
  int64_t getStoredBytes(int64_t elements) const {
    return elements / packedElements * packedBytes;
  }

  /// Whether the FP8 recipes take the format: f32 scales of any block (FP8
  /// blockwise, per-tensor current and delayed scaling). The others are MX
  /// only: E8M0 scales per 32 elements.
  bool takesFP8Recipes() const { return !isInteger && bitWidth == 8; }

  /// Whether NVFP4's two-level scaling (E4M3 scales per 16 elements and an
  /// f32 tensor scale) takes the format: E2M1 only.
  bool takesNVFP4Scales() const { return !isInteger && bitWidth == 4; }

  /// Whether every value v of this float format times 2^(bias - wider.bias)
  /// is a value of `wider` with the same exponent field and mantissa
  /// bits, subnormals included: same mantissa bits, at least as many exponent
  /// bits. Rounding into `wider` after that scaling is then rounding into
  /// this format, up to its saturation (FP6 E3M2 into FP8 E5M2, E2M3 into
  /// E4M3).
  bool embedsIn(const ElementFormat &wider) const {
    return !isInteger && !wider.isInteger &&
           mantissaBits == wider.mantissaBits &&
           exponentBits <= wider.exponentBits;
  }
};

/// Every mx element type, the one list of them: f8E4M3FN, f8E5M2, f6E3M2FN,
/// f6E2M3FN, f4E2M1FN and i8 (MXINT8).
llvm::SmallVector<mlir::Type> getElementTypes(mlir::MLIRContext *context);

/// The format of `type`, or none when `type` is not an mx element type.
std::optional<ElementFormat> getElementFormat(mlir::Type type);

/// Whether `type` is an mx element type (the ODS constraint of data tensors),
/// and one that the FP8 recipes take (takesFP8Recipes).
bool isElementType(mlir::Type type);
bool isFP8ElementType(mlir::Type type);

/// The format of `type`, which the caller knows to be an mx element type (an
/// op's verified data type); anything else is a fatal error.
ElementFormat getVerifiedElementFormat(mlir::Type type);

/// Shorthands of getVerifiedElementFormat for the two facts the scale rules
/// read.
double getMaxFinite(mlir::Type elementType);
int64_t getEmax(mlir::Type elementType);

} // namespace mx

#endif // MX_DIALECT_MX_IR_ELEMENTFORMAT_H
