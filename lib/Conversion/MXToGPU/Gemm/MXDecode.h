//===- MXDecode.h - MX codes to exact bf16 pairs ----------------*- C++ -*-===//
//
// Private to the GEMM generator. The one decoder of MX operands on SM90,
// which has no block-scaled tensor core: a unit of 16 consecutive codes of
// one row (any MX element type: FP8, FP6, FP4, INT8) and its E8M0 scale
// byte become eight bf16 pairs, each the code's value times 2^(b - 127).
// Both ways of running MX on bf16 wgmma use it: the fused main loop
// (Sm90DequantizedMainLoop.cpp), which converts each stage in registers,
// and the staging kernel (GemmStaging.cpp), which converts each operand
// once into a bf16 copy in global memory before a bf16 GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_MXDECODE_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_MXDECODE_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mx::gemm {

/// Elements of one decoded unit: 16 codes (16 bytes of FP8 or INT8, 12 of
/// FP6, 8 of FP4), half of an MX block of 32.
constexpr int64_t kDecodeUnitK = 16;

/// The i32 words of one row's unit as loaded (FP8 and INT8: 4, FP6: 3, FP4:
/// 2), and its E8M0 scale byte (i8).
struct LoadedUnit {
  llvm::SmallVector<mlir::Value, 4> words;
  mlir::Value scaleByte;
};

/// bf16 pairs of one unit (i32 words), in K order: word j holds elements 2j
/// (low half) and 2j + 1.
using UnitPairs = llvm::SmallVector<mlir::Value, 8>;

/// Converts a loaded unit of `elementType` codes to bf16 pairs: each code to
/// an exact f16 pair (FP8 by the hardware cvt; FP6 and FP4 widened into
/// E4M3 codes, cvt, times 2^(7 - bias); INT8 by the 1024 + byte trick),
/// times the scale in f32, the upper half of the f32 bits: exact unless the
/// product leaves bf16's exponent range; scale byte 0xFF gives NaN.
UnitPairs decodeMXUnit(mlir::ImplicitLocOpBuilder &b, mlir::Type elementType,
                       const LoadedUnit &unit);

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_MXDECODE_H
