//===- ScaleProducts.h - tf32 operands of the wgrad form's scale products ===//
//
// Private to the GEMM generator. The SM90 FP8 kernel of 1x128 scales on both
// operands (the wgrad form, GemmPlan::scaleProducts) takes the products
// sa[row] x sb[column] of each K-block from one tf32 wgmma rather than an
// FMUL per element. Its operands are rows of four tf32 values built from
// each f32 scale s, split into hi (the top 11 significant bits, which tf32
// keeps) and lo = s - hi (rounded to 11 more bits by the tensor cores):
// A' = [hi, hi, lo, lo] and B' = [hi, lo, hi, lo], so that a row of A'
// times a row of B' is hi.hi + hi.lo + lo.hi + lo.lo = sa x sb to about
// 2^-21. A small kernel writes them once per GEMM, [KB, P, 4] f32 from the
// scales as they come, GEMM-ready [KB, R'] or compact [R, KB] (P: the rows
// rounded up to whole tiles, zeros past the scales' rows), so that compact
// scales need no swizzle kernel before it, and each stage loads its
// K-block's tile rows by TMA as the
// first 16-byte K chunk of an unswizzled K-major tile (the second chunk is
// zeros in shared memory). The TMA map reads them as lines of 128 bytes,
// 8 rows a line: a box of 16-byte rows took a request a row, and the
// kernel ran 1.6x slower (bench/RESULTS.md).
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_SCALEPRODUCTS_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_SCALEPRODUCTS_H

#include "GemmPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mx::gemm {

/// The f32 values of one row of the scale products' operands, and the rows
/// of one 128-byte line of them.
constexpr int64_t kScaleProductRowValues = 4;
constexpr int64_t kScaleProductLineRows = 8;

/// P: the rows of one K-block of the operand rows of `operand`'s scales,
/// whole tiles of `tileRows` rows.
inline int64_t getScaleProductPitch(const OperandPlan &operand,
                                    int64_t tileRows) {
  return llvm::alignTo(operand.rows, tileRows);
}

/// Whether the operand rows of both of `plan`'s operands, for a tileM x
/// tileN tile, have fewer than 2^31 f32 values: the GEMM kernel and the
/// rows' kernel index them in i32 (a larger problem keeps the FMUL form).
inline bool fitsScaleProductRows(const GemmPlan &plan, int64_t tileM,
                                 int64_t tileN) {
  auto values = [&](const OperandPlan &operand, int64_t tileRows) {
    return plan.kBlocks() * getScaleProductPitch(operand, tileRows) *
           kScaleProductRowValues;
  };
  return values(plan.a, tileM) < (int64_t(1) << 31) &&
         values(plan.b, tileN) < (int64_t(1) << 31);
}

/// Where the scale of (row, K-block) is in an operand's f32 scales: at
/// row * rowStride + kBlock * blockStride, for rows below `rows`.
struct ScalesLayout {
  int64_t rows, rowStride, blockStride;

  /// GEMM-ready [KB, pitch] (padding rows included, zeros).
  static ScalesLayout gemmReady(int64_t pitch) { return {pitch, 1, pitch}; }
  /// Compact [rows, KB], as the quantize writes them.
  static ScalesLayout compact(int64_t rows, int64_t kBlocks) {
    return {rows, kBlocks, 1};
  }
};

/// Host code at `b`'s insertion point that launches the kernel writing the
/// scale products' operand rows (A's form where `lhs`, else B's) of the
/// [kBlocks] K-blocks of f32 scales at device pointer `scales`, laid out as
/// `layout` says, into `rows` ([kBlocks, productPitch, 4] f32). The kernel
/// is built in its own gpu.module of `module` on first use and shared by
/// later launches of the same form, layout and shape.
void launchScaleProductsKernel(mlir::ImplicitLocOpBuilder &b,
                               mlir::ModuleOp module, bool lhs, int64_t kBlocks,
                               ScalesLayout layout, int64_t productPitch,
                               mlir::Value scales, mlir::Value rows);

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_SCALEPRODUCTS_H
