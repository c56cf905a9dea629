//===- ElementConversion.h - Element codes in the mx GPU kernels -*- C++
//-*-===//
//
// Private to the quantize kernels of the MXToGPU conversion: how a kernel
// turns scaled f32 values into the codes of an element format and back, on a
// chip, and how it stores them. The conversion is the format's own `cvt`
// where the chip has it (Target.h), the `cvt` of a wider FP8 format that
// embeds it (FP6 on sm_90a: E3M2 values are E5M2 values times 2^-12, E2M3
// values E4M3 values times 2^-6, subnormals included), or for MXINT8 the
// CPU lowering's rounding in fewer steps, so that every path rounds as the
// CPU lowering does. Codes travel as one byte per element; packed formats are
// packed when they are stored (DataBuffer).
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_ELEMENTCONVERSION_H
#define MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_ELEMENTCONVERSION_H

#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mx::gpu_kernels {

/// How the kernels of one chip convert between f32 and one element format.
struct ElementConversion {
  ElementFormat format;
  /// The format whose `cvt` rounds: `format` itself, or a wider FP8 format
  /// that embeds it; none for the software conversion (MXINT8).
  std::optional<ElementFormat> hardware;
  /// log2 of the factor that moves `format`'s values onto `hardware`'s:
  /// format.bias - hardware.bias (0 for the format's own `cvt`; -12 for E3M2
  /// onto E5M2, -6 for E2M3 onto E4M3).
  int shift = 0;

  /// The conversion of `elementType` on `chip`, or none where these kernels
  /// have none (E2M1 without its `cvt`: Fp4Kernels.cpp rounds it).
  static std::optional<ElementConversion> get(mlir::Type elementType,
                                              Chip chip);

  /// The conversion of `op`'s data on `chip` (one the kernels have), with
  /// what its input says about the scaled values (scaledFitF16).
  static ElementConversion forQuantize(QuantizeOp op, Chip chip);

  /// Whether every scaled value is exact in f16 where it matters: a 16-bit
  /// input (at most 11 significant bits) times a power-of-two factor, so
  /// that MXINT8 rounds pairs in f16x2 (convertToIntegerCodes). Values below
  /// f16's normal range round there, but to codes of 0 either way.
  bool scaledFitF16 = false;

  /// Whether the `cvt` is another format's, whose saturation is not this
  /// format's. Kernels that store whole groups of four codes of an embedded
  /// format pack them with convertToPackedFP6, which saturates the wider codes
  /// after `cvt` (a few integer steps per 4 codes); one code a byte
  /// (convertToElements) clamps the values before `cvt` instead (two f32
  /// steps an element). The codes are the same: see EmbeddedFP6Packing.h.
  bool isEmbedded() const { return hardware && hardware->type != format.type; }
};

/// A block's scale as the quantize kernels apply it, from the Numerics.h
/// rules that the CPU lowering uses too.
struct BlockScale {
  /// The scale as stored: the E8M0 byte or the f32 value.
  mlir::Value stored;
  /// The f32 that elements are multiplied by (2^(127-b) for power-of-two
  /// scales, times 2^shift of an embedded conversion) or divided by (the
  /// `exact` scale: the reference divides).
  mlir::Value factor;
  /// Whether the block holds a NaN, so that every element gets the NaN-block
  /// code.
  mlir::Value isNaN;
};

BlockScale buildBlockScale(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value amax, ScaleRounding rounding,
                           const ElementConversion &conversion,
                           mlir::Type scaleType);

/// `values` (an f32 vector) times `factors` (a vector of one factor per
/// element), or divided by them for `exact` rounding.
mlir::Value applyScaleFactors(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value values, mlir::Value factors,
                              ScaleRounding rounding);

/// The codes (an i8 vector, one per element) of an even-length f32 vector
/// already multiplied by its factor: round to nearest even, saturating, two
/// elements per `cvt`. Elements whose `nanMask` bit (an i1 vector of the same
/// length) is set get the format's NaN-block code (docs/numerics.md).
mlir::Value convertToElements(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value scaled,
                              const ElementConversion &conversion,
                              mlir::Value nanMask);

/// Per-tensor scaling's codes (an i8 vector) of an even-length f32 vector
/// times the f32 `scale`: one f32 multiplication an element, then
/// convertToElements, a NaN product (NaN input, 0 x Inf) being the NaN byte.
/// The one cast of `mx.quantize_delayed`, in its kernels and in the GEMM
/// epilogue that a delayed cast of the product fuses into.
mlir::Value castWithScale(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value values, mlir::Value scale,
                          const ElementConversion &conversion);

/// The four FP6 codes of a 4-element f32 vector already multiplied by its
/// factor, packed into bits 0-23 of an i32 (element 0 lowest; bits 24-31
/// unspecified), for an embedded conversion: the FP8 `cvt`, then
/// EmbeddedFP6Packing.h's recipe, which narrows, saturates, masks NaN-block
/// elements (`nanMask`, as for convertToElements) and packs in one.
mlir::Value convertToPackedFP6(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Value scaled,
                               const ElementConversion &conversion,
                               mlir::Value nanMask);

/// The codes of an f32 vector whose block has the scale `scale`.
mlir::Value quantizeVector(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value values, const BlockScale &scale,
                           ScaleRounding rounding,
                           const ElementConversion &conversion);

/// Quantizes `values` (an f32 vector of one block, `scale`'s) into `data`
/// at `indices` where `condition` holds (always for a null condition). An
/// embedded packed format in whole 32-bit words (16 FP6 codes) converts and
/// packs each 4 codes in one step (convertToPackedFP6) and joins their 24
/// bits into the words; other formats take quantizeVector's codes.
void storeQuantized(mlir::OpBuilder &b, mlir::Location loc,
                    const class DataBuffer &data, mlir::Value condition,
                    mlir::Value values, const BlockScale &scale,
                    ScaleRounding rounding, const ElementConversion &conversion,
                    mlir::ValueRange indices,
                    llvm::Align packedAlignment = llvm::Align(4));

/// The wider format's codes (four bytes of an i32, code 0 lowest) of the
/// four embedded FP6 codes in bits 0-23 of `group` (bits 24-31 unused): the
/// inverse of convertToPackedFP6's narrowing, in eight integer steps.
mlir::Value widenPackedFP6(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value group);

/// The exact f32 values of an even-length vector of codes (i8, one per
/// element) of `conversion`'s format: for an embedded conversion the wider
/// format's codes (widenPackedFP6).
mlir::Value decodeElements(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value codes,
                           const ElementConversion &conversion);

/// The device memory of a quantize result, folded to `[rows, cols]` (or 1-D
/// for per-tensor kernels): the elements themselves for one-byte formats; for
/// packed formats bytes, written 32-bit words at a time, which the result
/// views as the data's element type.
class DataBuffer {
public:
  /// Allocates the data of `type`, its dimensions before the last `inner`
  /// folded into the first of them (packed formats: inner = 2 and an
  /// innermost extent of whole words).
  DataBuffer(mlir::OpBuilder &b, mlir::Location loc,
             mlir::RankedTensorType type, int64_t inner);

  /// Stores `codes` (an i8 vector, one code per element) at (row, col) of the
  /// folded data where `condition` holds (always for a null condition); a
  /// packed format's codes must fill whole 32-bit words.
  void store(mlir::OpBuilder &b, mlir::Location loc, mlir::Value condition,
             mlir::Value codes, mlir::ValueRange indices) const;

  /// The packed 32-bit words of `codes` (a packed format's whole groups).
  mlir::Value packWords(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value codes) const;

  /// Stores the packed 32-bit `words` (a vector) of the codes from element
  /// `indices` (a packed format; the first index the folded row) where
  /// `condition` holds; the caller vouches for `alignment` beyond a word's.
  void storePacked(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::Value condition, mlir::Value words,
                   mlir::ValueRange indices,
                   llvm::Align alignment = llvm::Align(4)) const;

  /// The bits of `codes` (at most 32), packed into one i32 from bit 0.
  mlir::Value packBits(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value codes) const;

  /// Stores the 32-bit `words` (a vector) at word `word` of folded row `row`
  /// (packed formats) where `condition` holds.
  void storeWords(mlir::OpBuilder &b, mlir::Location loc, mlir::Value condition,
                  mlir::Value words, mlir::Value row, mlir::Value word,
                  llvm::Align alignment = llvm::Align(4)) const;

  /// The device address (an index) of word `word` of folded row `row`
  /// (packed formats): rows after it are getRowBytes() apart, so that
  /// storeWordAt writes them at immediate offsets from one register.
  mlir::Value getWordAddress(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value row, mlir::Value word) const;
  /// The bytes of one folded row (packed formats).
  int64_t getRowBytes() const;
  /// Stores the i32 `word` at `offset` bytes past `address` (from
  /// getWordAddress) where `condition` holds.
  void storeWordAt(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::Value condition, mlir::Value word,
                   mlir::Value address, int64_t offset) const;

  /// The data tensor of `type` the buffer holds once written.
  mlir::Value toTensor(mlir::OpBuilder &b, mlir::Location loc) const;

  const ElementFormat &getFormat() const { return format; }

private:
  mlir::RankedTensorType type;
  ElementFormat format;
  /// The folded elements, or the packed format's bytes and their words.
  mlir::Value elements, bytes, words;
};

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_ELEMENTCONVERSION_H
