//===- Numerics.h - Scalar builders for the mx numerics ---------*- C++ -*-===//
//
// Builders that emit the mx scale and element conversion rules
// (docs/numerics.md) as scalar arith ops on integer bit patterns, for every
// element format of ElementFormat.h. The CPU lowering uses all of them, since
// LLVM has no FP8, FP6 or FP4 types; the GPU lowering shares the scale rules
// and replaces only the element conversion with the hardware `cvt` or a
// vector form of the same rounding. Keeping one implementation of the
// exponent math is what makes the lowerings agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_UTILS_NUMERICS_H
#define MX_DIALECT_MX_UTILS_NUMERICS_H

#include "mx/Dialect/MX/IR/MXDialect.h"

#include "mlir/IR/Builders.h"

namespace mx {

/// The E8M0 byte (as i32, 0..255) of a block whose f32 `amax` (non-negative,
/// or NaN) is given, for the power-of-two roundings `ceil` and `floor`; 255
/// marks a NaN block. `ceil` is the spec's exponent of amax / maxfinite
/// computed without the division (CeilScaleExponent.h).
mlir::Value buildScaleExponent(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Value amax, ScaleRounding rounding,
                               mlir::Type elementType);

/// The f32 scale of `exact` rounding: amax / maxfinite, 2^-127 when that
/// quotient is zero, the largest finite f32 for a block holding an infinity,
/// the quiet NaN 0x7FC00000 for a NaN block (whatever NaN the division gives).
mlir::Value buildExactScale(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value amax, mlir::Type elementType);

/// 2^(e - 127) as f32 for an i32 E8M0 byte `e` (NaN for 255).
mlir::Value buildScaleValue(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value exponent);

/// 2^(127 - e) as f32 for an i32 E8M0 byte `e` (NaN for 255): the factor that
/// moves a block into the element range with one exact multiplication.
mlir::Value buildInverseScaleValue(mlir::OpBuilder &b, mlir::Location loc,
                                   mlir::Value exponent);

/// The stored form of an i32 E8M0 exponent: the f8E8M0FNU byte, or the f32
/// value 2^(e-127) for f32 scales.
mlir::Value buildStoredScale(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value exponent, mlir::Type scaleType);

/// A constant of `type` whose bits are all zero (E8M0 has no zero value, but
/// its zero byte is the padding the swizzled layout wants).
mlir::Value buildZeroBits(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Type type);

/// The f32 value of one scale: f32 as is, f8E8M0FNU as 2^(b-127) (NaN for
/// 0xFF), f8E4M3FN (NVFP4) decoded exactly.
mlir::Value buildScaleToF32(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value scale);

/// The `mx.dequantize` of one element, of type `resultType` (f32, bf16 or
/// f16): float(element) * scale as one f32 multiplication, times
/// `tensorScale` (NVFP4's f32 tensor scale) when given, for an `element` of
/// any mx element type and any scale of buildScaleToF32,
/// rounded to nearest even to `resultType`. Every NaN result is the positive
/// quiet NaN of `resultType` (docs/numerics.md): the sign and payload that
/// 0 x Inf, a NaN scale or the target's arithmetic would give differ between
/// CPUs and GPUs.
mlir::Value buildDequantized(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value element, mlir::Value scale,
                             mlir::Value tensorScale, mlir::Type resultType);

/// Converts f32 `value` to the code (an integer of the element's width) of
/// the mx element type `elementType` with round-to-nearest-even, saturation
/// to +-maxfinite and subnormal results (MXINT8: clamp(rne(value * 64),
/// -127, 127)); NaN becomes the format's NaN-block code (the positive NaN
/// byte 0x7F of FP8, 0 for the formats without NaN). MXINT8 (`i8`) also
/// converts f32 vectors, elementwise.
mlir::Value buildTruncToElementBits(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::Value value, mlir::Type elementType);

/// Decodes the code (an integer of the element's width) of an `elementType`
/// value to f32 exactly (MXINT8: also vectors of codes, elementwise).
mlir::Value buildExtFromElementBits(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::Value bits, mlir::Type elementType);

/// NVFP4's f32 tensor scale from the amax of the tensor's finite elements:
/// amax / (448 * 6), or 1 where that is not a normal f32 (zero amax).
mlir::Value buildNVFP4TensorScale(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value finiteAmax);

/// NVFP4's f8E4M3FN block scale: e4m3(clamp((amax / 6) / t, 2^-6, 448)) in
/// f32, rounded to nearest even; a NaN block gets the NaN byte 0x7F.
mlir::Value buildNVFP4BlockScale(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value amax, mlir::Value tensorScale);

/// The f32 factor r = (1 / t) / float(s) that moves an NVFP4 block into
/// E2M1's range (the element is then e2m1(x * r), saturating).
mlir::Value buildNVFP4Factor(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value tensorScale, mlir::Value blockScale);

//===----------------------------------------------------------------------===//
// Delayed per-tensor scaling
//===----------------------------------------------------------------------===//

/// The `scale_inv` of a delayed-scaling cast: 1 / scale (one f32 division),
/// the quiet NaN 0x7FC00000 where that is NaN.
mlir::Value buildDelayedScaleInverse(mlir::OpBuilder &b, mlir::Location loc,
                                     mlir::Value scale);

/// The delayed-scaling scale of one tensor from its amax `a`:
/// (maxfinite / a) / 2^margin in f32 when a is finite and positive (the
/// largest finite f32 where that overflows), else `scale` unchanged.
mlir::Value buildDelayedScale(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value a, mlir::Value scale,
                              mlir::Type elementType, int64_t margin);

} // namespace mx

#endif // MX_DIALECT_MX_UTILS_NUMERICS_H
