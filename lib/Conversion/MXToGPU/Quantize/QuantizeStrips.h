//===- QuantizeStrips.h - The strips of the strip quantize kernel -*- C++
//-*-===//
//
// Private to the strip quantize kernels of the MXToGPU conversion: what the
// register kernel (QuantizeStrips.cpp: columnwise, fused, FP8 blockwise's
// transposed `[1, 128]`) and the staged kernel of packed formats
// (StagedQuantize.cpp: MXFP6 fused) share. Both place a lane's strip of 16
// rows x 4 columns on the same grid and quantize its columns and rows with
// the same steps; they differ only in where the strip is read from (global
// memory, or the CTA's tile in shared memory) and in which lanes do which
// part.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_QUANTIZESTRIPS_H
#define MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_QUANTIZESTRIPS_H

#include "ElementConversion.h"
#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mx::gpu_kernels {

/// A column block is split between lane groups of a warp, 16 rows each (one
/// 16-byte store of a column's codes when written transposed), which keeps a
/// lane's strip at ~100 registers and so lets two 256-thread blocks share an
/// SM.
constexpr int64_t kRowsPerLane = 16;

/// One quantization done by the strip kernel: its op, how it converts its
/// elements, its output buffers and whether its scales are written tiled.
struct StripOutput {
  QuantizeOp op;
  SwizzleOp swizzle;
  ElementConversion conversion;
  DataBuffer data;
  mlir::Value scales;
  /// Whether the 2 lane groups of a column block share its strips' column
  /// scales, each group computing and storing 2 of a strip's 4
  /// (scaleColumnsSplit; the staged kernel).
  bool splitsColumnScales = false;
  /// Whether a lane stores its packed rows at immediate offsets from one
  /// address computed once (the staged kernel, measured faster so), rather
  /// than each at the address of its indices (the register kernel, measured
  /// faster so: MXFP6 columnwise at 8192^2 on an H100, 65.9-66.3 us against
  /// 69.5-70.0; docs/gpu.md).
  bool storesRowsFromOneAddress = false;
};

/// A packed format's lanes of a run fill whole 32-bit words together: FP6's
/// 4 codes a lane are 24 bits, so 4 lanes fill 3 words.
constexpr int64_t kPackedLaneBits = 24, kPackedRunLanes = 4,
                  kPackedRunWords = 3;

/// The work of a strip kernel, per batch slice of `rows` x `cols`: the
/// `blockRows`-row blocks of the columnwise part (stacked over lane groups
/// of `lanesAcross` lanes) and the `blockRows`-column blocks of the rowwise
/// part (the fusion plan pairs [1, 32] with 32-row and [1, 128] with 128-row
/// column blocks), and the row blocks and strips that the grid covers (the
/// tiles' padding included; whole lane groups of strips).
struct StripGrid {
  int64_t slices, rows, cols, blockRows, lanesAcross, rowBlocks, colBlocks,
      gridRowBlocks, gridStrips;

  /// The lane groups of a warp, over which a column block is stacked.
  int64_t getGroups() const { return kWarpSize / lanesAcross; }
  /// The strips of a rowwise block: 8 (MX), 32 (FP8 blockwise).
  int64_t getRowBlockStrips() const { return blockRows / kStripCols; }
  /// The lanes of one lane group that share a rowwise block.
  int64_t getRowBlockLanes() const {
    return std::min(getRowBlockStrips(), lanesAcross);
  }
  /// The warps that share a rowwise block: 1 for MX, whose block's 8 lanes
  /// are half a lane group; the CTA's 8 for FP8 blockwise, whose lane
  /// groups of 4 cover 16 of the block's 128 columns.
  int64_t getRowBlockWarps() const {
    return getRowBlockStrips() / getRowBlockLanes();
  }
};

/// The grid of the strip kernel that quantizes `columnwise` (and `rowwise`
/// when fused) of an input of `inputType`, whose CTA tiles span
/// `warpsPerTile` warps' strips of one row block (1: any warps).
StripGrid getStripGrid(mlir::RankedTensorType inputType,
                       const StripOutput &columnwise,
                       const StripOutput *rowwise, int64_t warpsPerTile);

/// `slice * extent + local`: a slice's entry in a folded buffer.
mlir::Value inSlice(mlir::OpBuilder &b, mlir::Location loc, mlir::Value slice,
                    int64_t extent, mlir::Value local);

/// How the strip's amaxes are reduced. 16-bit inputs stay packed two to a
/// word and each step is one `max.NaN.xorsign.abs` on a pair (exact, and NaN
/// where either element is): that halves the maxima and leaves the f32
/// values to the conversion alone. f32 inputs take f32 maxima of magnitudes.
struct AmaxReduction {
  mlir::Type elementType;

  bool isPacked() const { return elementType.getIntOrFloatBitWidth() == 16; }

  /// The running max of `x` and `y`: f32 magnitudes, or words of pairs whose
  /// magnitudes are maxed pair by pair (their sign bits are left arbitrary
  /// and cleared by toF32).
  mlir::Value combine(mlir::OpBuilder &b, mlir::Location l, mlir::Value x,
                      mlir::Value y) const;

  /// The reduced elements of `loaded` (one row of the strip, or a whole
  /// block) where `valid` (a null `valid`: everywhere), zero elsewhere: f32
  /// magnitudes of `values`, or words of pairs.
  llvm::SmallVector<mlir::Value> elements(mlir::OpBuilder &b, mlir::Location l,
                                          mlir::Value loaded,
                                          mlir::Value values,
                                          mlir::Value valid) const;

  /// The f32 amaxes that `reduced` (as combine leaves them) hold, in order.
  llvm::SmallVector<mlir::Value>
  toF32(mlir::OpBuilder &b, mlir::Location l,
        llvm::ArrayRef<mlir::Value> reduced) const;

  /// Words holding the amaxes of two rows, from `a` and `c`, the reduced
  /// pairs of each row: [a0, c0] and [a1, c1] combined.
  mlir::Value pairRows(mlir::OpBuilder &b, mlir::Location l, mlir::Value a,
                       mlir::Value c) const;

  /// The f32 amax of `loaded` (a whole block as read, every element valid),
  /// combined as a tree so that the maxima form short chains.
  mlir::Value reduce(mlir::OpBuilder &b, mlir::Location l,
                     mlir::Value loaded) const;
};

/// What one lane owns: its strip's place and its 16 rows of 4 values.
struct Strip {
  mlir::Value lane, slice, sliceValid, rowBlock, firstGroup, strip, col,
      colValid;
  /// The column that global loads of the strip start at: `col` clamped in
  /// bounds.
  mlir::Value loadCol;
  /// Per row: the row in the slice, in the folded data, whether it exists,
  /// the values as loaded and, unless deferred (loadStrip), as f32.
  llvm::SmallVector<mlir::Value> rowInSlice, row, rowValid, loaded, values;
  /// How the amaxes of the input's element type are reduced.
  AmaxReduction reduction;

  /// Row `i`'s values as f32: those extended after the loads, or where the
  /// extension is deferred, extended here.
  mlir::Value getValues(mlir::OpBuilder &b, mlir::Location l, int64_t i) const;
};

/// Reads row `i` of a lane's strip (placed by loadStrip): a vector of
/// kStripCols input elements.
using StripRowReader = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, const Strip &, int64_t i)>;

/// Places the lane `lane` of the grid's warp `warp` (warp w covers
/// `lanesAcross` strips of one row block; the high lane bits pick the group)
/// and reads its strip with `readRow`: every lane reads (clamped in bounds)
/// so that all lanes take part in the shuffles; stores are predicated. With
/// `deferExtension` the rows' f32 values are built where they are used
/// (Strip::getValues): extended after the loads, the staged kernel's
/// values stayed live through the columnwise amaxes' shuffles, and at its
/// 48 registers ptxas spilled.
Strip loadStrip(mlir::OpBuilder &b, mlir::Location l, mlir::Value warp,
                mlir::Value lane, const StripGrid &grid, mlir::Type elementType,
                StripRowReader readRow, bool deferExtension = false);

/// Columnwise: one scale per column of the strip, its amax combined across
/// the lane groups (16 rows each) of the column block by xor shuffles.
void quantizeColumns(mlir::OpBuilder &b, mlir::Location l, const Strip &s,
                     const StripGrid &grid, const StripOutput &out);

/// Whether block `block` of row `local` of batch slice `slice` (which exists
/// where `sliceValid` holds) is one of the input's, not the tiles' padding.
mlir::Value isRowBlockInInput(mlir::OpBuilder &b, mlir::Location l,
                              const StripGrid &grid, mlir::Value sliceValid,
                              mlir::Value local, mlir::Value block);

/// Stores the rowwise scale `stored` of block `block` of row `local` of
/// batch slice `slice` (which exists where `sliceValid` holds): linear, or
/// tiled, where the tiles' padding gets zero bits.
void storeRowScale(mlir::OpBuilder &b, mlir::Location l, const StripGrid &grid,
                   const StripOutput &out, mlir::Value slice,
                   mlir::Value sliceValid, mlir::Value local, mlir::Value block,
                   mlir::Value stored);

/// The workgroup memory through which the warps of a CTA share their
/// rowwise blocks (QuantizeStrips.cpp).
struct RowExchange;

/// Rowwise: the lanes of a lane group that share a rowwise block
/// reduce-scatter the rows' amaxes over their columns; the scales are
/// computed once per row (in the warp, or for a block of several warps in
/// the CTA through `exchange`), and each row is scaled by its factor, a NaN
/// factor marking a NaN block.
void quantizeRows(mlir::OpBuilder &b, mlir::Location l, const Strip &s,
                  const StripGrid &grid, const StripOutput &out,
                  const RowExchange *exchange);

/// Whether the fused kernel of `columnwise` and a rowwise quantize of an
/// input of `inputType` stages its tile in shared memory (see
/// buildStagedKernel): for packed formats, whose register kernel needs 128
/// registers and so ran at 73% of copy on the H100 (MXFP6), where FP8's and
/// MXINT8's reach 94-95% and keep the register kernel. Rows must take whole
/// 16-byte chunks.
bool stagesTile(mlir::RankedTensorType inputType,
                const StripOutput &columnwise);

/// Whether the staged kernel's rowwise part reads whole blocks, a lane each
/// (the input's columns a multiple of the block), rather than strips.
bool stagesWholeRowBlocks(const StripGrid &grid);

/// The fused kernel of packed formats (StagedQuantize.cpp): a CTA copies a
/// row block x 256 columns of the input into shared memory once (16 KiB of
/// bf16), and after a barrier warps 0-3 quantize its columns, each lane
/// reading its 16 x 4 strip there, and warps 4-7 its rows (whole blocks a
/// lane where stagesWholeRowBlocks, else strips). A lane then holds one
/// quantization's state, not both, which takes the registers from 128 to
/// 48-64 and so more than doubles the CTAs an SM.
void buildStagedKernel(mlir::OpBuilder &builder, mlir::Location loc,
                       mlir::RankedTensorType inputType, mlir::Value input,
                       const StripOutput &columnwise,
                       const StripOutput &rowwise);

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_QUANTIZESTRIPS_H
