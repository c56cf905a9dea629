//===- ColumnSums.h - Column sums of 64-row tiles ---------------*- C++ -*-===//
//
// Private to the quantize kernels of the MXToGPU conversion: the pieces of
// `mx.column_sum` on the GPU. A CTA of 256 threads that holds a 64 x 64 tile
// of a matrix, a thread 16 consecutive elements of one row (the layout of
// the cast+transpose kernel, PerTensorScaling.cpp), sums the tile's columns
// into one row of f32 partials `[ceil(M / 64), N]`; a second kernel sums the
// partials of each column. Both orders are fixed, so the result is
// deterministic and needs no atomics, and the standalone column sum and the
// one fused into a cast+transpose give the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_COLUMNSUMS_H
#define MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_COLUMNSUMS_H

#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mx::gpu_kernels {

/// The rows (and columns) of the tiles whose column sums are the partials.
constexpr int64_t kColumnSumTile = 64;

/// The workgroup buffer of a tile's column sums: one row of f32 per warp.
mlir::MemRefType getColumnSumBufferType(mlir::MLIRContext *context);

/// A device buffer of the partials of an `[rows, cols]` matrix: one row of
/// f32 per 64-row tile.
mlir::Value allocColumnPartials(mlir::OpBuilder &b, mlir::Location loc,
                                int64_t rows, int64_t cols);

/// Where a tile's column sums go: the partials, row `tileRow` (the tile's
/// index along the rows), from column `tileCol`; `staging` is the CTA's
/// getColumnSumBufferType buffer.
struct ColumnPartials {
  mlir::Value partials, staging, tileRow, tileCol;
};

/// Before the CTA's barrier: reduces the 16 f32 `values` of every thread
/// (thread t: row t / 4 of the tile, columns 16 (t % 4) .. + 16; `valid`
/// false for rows past the matrix, which count as -0) over the 8 rows of its
/// warp, by a reduce-scatter of xor-shuffles (14 a lane: each of the 8
/// lanes of a column chunk ends with 2 of its 16 column sums), and stages
/// the warp's 64 sums in `sums.staging`.
void stageColumnSums(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value thread, mlir::Value values, mlir::Value valid,
                     const ColumnPartials &sums);

/// After the barrier: threads 0-63 add the 8 warps' sums of their column in
/// warp order and store them into the partials (columns below `cols`).
void storeColumnSums(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value thread, int64_t cols,
                     const ColumnPartials &sums);

/// The strip quantize kernel's share (QuantizeStrips.cpp, FP8 blockwise's
/// 128-row column blocks): a warp's 8 lane groups of 4 lanes stack 16-row
/// strips of 4 columns, so the 64-row tiles of the partials are lane groups
/// 0-3 and 4-7. A lane sums each 8 rows of its strip as the 64-row tile
/// kernel sums a warp's 8 rows (the tree of its reduce-scatter), the 8 sums
/// of a tile are added in row order down the chain of its 4 lane groups
/// (shuffles up by 4 lanes), and the last group stores the tile's partials:
/// the bits of the tile kernel's. `lanesAcross` is the lanes of a lane
/// group (4), `values` the strip's 16 rows (f32 vectors of 4), `rowsValid`
/// whether they are in the matrix (all or none: the strip kernel's rows are
/// a multiple of 16; null: they are), `firstRow` the strip's first row,
/// `col` its first column and `valid` whether it lies in the grid's matrix
/// (`rows` rows).
void storeStripColumnSums(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value lane, int64_t lanesAcross,
                          mlir::Value firstRow, mlir::ValueRange values,
                          mlir::Value rowsValid, mlir::Value col,
                          mlir::Value valid, int64_t rows,
                          mlir::Value partials);
/// Replaces `op` by the sum of its tiles' `partials` (buildPartialsSum into
/// a new device buffer).
void replaceWithPartialsSum(mlir::PatternRewriter &rewriter, mlir::Location loc,
                            ColumnSumOp op, mlir::Value partials);
/// Kernel: `result[n]` (f32 `[cols]`) = the sum of column n of `partials`
/// (allocColumnPartials of `rows` x `cols`): each warp adds every 8th
/// partial row in order, then the 8 warps' sums are added in warp order.
void buildPartialsSum(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value partials, mlir::Value result);

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_COLUMNSUMS_H
