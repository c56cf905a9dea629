//===- QuantizeStrips.cpp - Columnwise and fused quantize kernels ---------===//
//
// Columnwise ([32, 1]) quantization, alone or fused with the rowwise ([1, 32])
// quantization of the same input so that the input is read once; written as
// it is or transposed (GEMM-ready: `transposed` with [1, 32] blocks of the
// data, a lane's 16 codes of a column being one 16-byte store). FP8
// blockwise's transposed `[1, 128]` quantize (the 1x128 blocks of the
// transposed input, read in place) is the same kernel with 128-row column
// blocks. Each lane owns a strip of 16 rows x 4 columns, a column block's
// strips being stacked over 2 (32 rows) or 8 (128 rows) lane groups of a warp
// of 16 or 4 lanes side by side: it loads the strip with one 8- or 16-byte
// load per row (a group covers 64 or 16 contiguous columns, whole 32-byte
// sectors, so every load instruction is coalesced), reduces the 4 column
// amaxes in registers and with one or three xor shuffles across the groups,
// and writes 4 FP8 bytes per row for the columnwise data.
// For the rowwise part, the 8 lanes that cover one 32-column block
// reduce-scatter their 16 row amaxes (14 shuffles), each computes and stores
// the scales of 2 rows, and one shuffle per row brings the factors back:
// computing every scale in all 8 lanes made the kernel issue-bound on the
// H200. bf16 and f16 amaxes are reduced on the loaded pairs, two elements an
// instruction, and two rows share a word in the reduce-scatter (7 shuffles).
// FP8 blockwise's rowwise [1, 128] part, fused with its transposed [1, 128]
// one, spans the 8 warps of a CTA (a 128 x 128 tile): the 4 lanes of a group
// reduce-scatter their row amaxes, the warps' partial amaxes meet in shared
// memory, the factors return through it (scaleRowsInCTA), and the codes
// leave through it as whole rows (storeStagedRowCodes).
// Swizzles consuming either scales are fused as in the rowwise kernel:
// columnwise scales are tiled with K as the unscaled dimension, and the
// kernel's grid also covers the zero padding of the tiles. Column blocks never
// span batch slices (the rows of a slice need not be a multiple of 32), so the
// grid runs over slices x row blocks, each slice padded to its own tiles.
// The fused kernel of a packed format (FP6) stages instead: a CTA copies its
// 32-row x 256-column tile into shared memory, then warps 0-3 quantize the
// columns and warps 4-7 the rows, each from the same strips read there, so
// that a lane holds one quantization's state (StagedQuantize.cpp; the strip
// steps both kernels share are declared in QuantizeStrips.h).
//
//===----------------------------------------------------------------------===//

#include "QuantizeStrips.h"
#include "ColumnSums.h"

#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>
#include <optional>

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

StripGrid gpu_kernels::getStripGrid(RankedTensorType inputType,
                                    const StripOutput &columnwise,
                                    const StripOutput *rowwise,
                                    int64_t warpsPerTile) {
  int64_t rank = inputType.getRank();
  StripGrid grid;
  grid.slices = getNumSlices(inputType, 2);
  grid.rows = inputType.getDimSize(rank - 2);
  grid.cols = inputType.getDimSize(rank - 1);
  grid.blockRows = getStripBlockRows(columnwise.op);
  grid.lanesAcross = getStripLanesAcross(grid.blockRows);
  grid.rowBlocks = llvm::divideCeil(grid.rows, grid.blockRows);
  grid.colBlocks = llvm::divideCeil(grid.cols, grid.blockRows);
  grid.gridRowBlocks = grid.rowBlocks;
  grid.gridStrips = grid.cols / kStripCols;
  if (columnwise.swizzle) {
    grid.gridRowBlocks = std::max<int64_t>(
        grid.gridRowBlocks, llvm::alignTo(grid.rowBlocks, SwizzleTiles::kCols));
    grid.gridStrips = std::max<int64_t>(
        grid.gridStrips,
        llvm::alignTo(grid.cols, SwizzleTiles::kRows) / kStripCols);
  }
  if (rowwise && rowwise->swizzle) {
    grid.gridRowBlocks = std::max<int64_t>(
        grid.gridRowBlocks,
        llvm::alignTo(grid.rows, SwizzleTiles::kRows) / grid.blockRows);
    grid.gridStrips = std::max<int64_t>(
        grid.gridStrips, llvm::alignTo(grid.colBlocks, SwizzleTiles::kCols) *
                             grid.getRowBlockStrips());
  }
  // A rowwise block of several warps is one CTA's: its warps share the
  // block's amaxes through workgroup memory.
  if (rowwise)
    warpsPerTile = std::max(warpsPerTile, grid.getRowBlockWarps());
  // Whole lane groups per row block: the columnwise shuffles across the
  // groups and the rowwise ones (8-lane blocks) then stay inside one block;
  // whole tiles of `warpsPerTile` warps' strips for the staged kernel and a
  // rowwise block of several warps, whose CTA tile spans one row block.
  grid.gridStrips =
      llvm::alignTo(grid.gridStrips, grid.lanesAcross * warpsPerTile);
  return grid;
}

Value gpu_kernels::inSlice(OpBuilder &b, Location loc, Value slice,
                           int64_t extent, Value local) {
  return IndexArith{b, loc}.fma(slice, extent, local);
}

Strip gpu_kernels::loadStrip(OpBuilder &b, Location l, Value warp, Value lane,
                             const StripGrid &grid, Type elementType,
                             StripRowReader readRow, bool deferExtension) {
  IndexArith index{b, l};
  Strip s;
  s.reduction.elementType = elementType;
  s.lane = lane;
  Value group = index.div(lane, grid.lanesAcross);
  int64_t warpsPerRowBlock = grid.gridStrips / grid.lanesAcross;
  Value gridRowBlock = index.div(warp, warpsPerRowBlock);
  s.slice = index.div(gridRowBlock, grid.gridRowBlocks);
  s.sliceValid = cmpLT(b, l, s.slice, cIndex(b, l, grid.slices));
  s.rowBlock = index.rem(gridRowBlock, grid.gridRowBlocks);
  s.firstGroup = isZeroIndex(b, l, group);
  s.strip = inSlice(b, l, index.rem(warp, warpsPerRowBlock), grid.lanesAcross,
                    index.rem(lane, grid.lanesAcross));
  s.col = arith::MulIOp::create(b, l, s.strip, cIndex(b, l, kStripCols));
  s.colValid = cmpLT(b, l, s.col, cIndex(b, l, grid.cols));
  s.loadCol =
      arith::MinUIOp::create(b, l, s.col, cIndex(b, l, grid.cols - kStripCols));
  Value row0 =
      inSlice(b, l, s.rowBlock, grid.blockRows,
              arith::MulIOp::create(b, l, group, cIndex(b, l, kRowsPerLane)));
  for (int64_t i = 0; i < kRowsPerLane; ++i) {
    Value local = arith::AddIOp::create(b, l, row0, cIndex(b, l, i));
    s.rowInSlice.push_back(local);
    s.row.push_back(inSlice(b, l, s.slice, grid.rows, local));
    s.rowValid.push_back(
        andI(b, l, s.sliceValid, cmpLT(b, l, local, cIndex(b, l, grid.rows))));
    s.loaded.push_back(readRow(b, l, s, i));
    if (!deferExtension)
      s.values.push_back(s.getValues(b, l, i));
  }
  return s;
}

Value Strip::getValues(OpBuilder &b, Location l, int64_t i) const {
  if (i < int64_t(values.size()))
    return values[i];
  return extendToF32(b, l, loaded[i],
                     /*feedsMagnitudes=*/!reduction.isPacked());
}

/// Writes the stored column scales `stored` of a strip's consecutive
/// columns from `firstCol` where `writes` holds (the first lane group, or
/// each group its own): linear, all at a time, or tiled with K as the
/// unscaled dimension, where the padding of the tiles gets zero bits.
static void storeColumnScales(OpBuilder &b, Location l, const Strip &s,
                              const StripGrid &grid, const StripOutput &out,
                              ArrayRef<Value> stored, Value firstCol,
                              Value writes) {
  Type scaleType = stored.front().getType();
  Value rowBlockValid =
      andI(b, l, s.sliceValid,
           cmpLT(b, l, s.rowBlock, cIndex(b, l, grid.rowBlocks)));
  if (!out.swizzle) {
    Value vector = vector::FromElementsOp::create(
        b, l, VectorType::get({int64_t(stored.size())}, scaleType), stored);
    storeVectorIf(
        b, l, andI(b, l, writes, andI(b, l, rowBlockValid, s.colValid)), vector,
        out.scales,
        {inSlice(b, l, s.slice, grid.rowBlocks, s.rowBlock), firstCol});
    return;
  }
  int64_t paddedCols = llvm::alignTo(grid.cols, SwizzleTiles::kRows);
  Value rowBlockInTiles = andI(
      b, l, s.sliceValid,
      cmpLT(b, l, s.rowBlock,
            cIndex(b, l, llvm::alignTo(grid.rowBlocks, SwizzleTiles::kCols))));
  for (auto [j, scale] : llvm::enumerate(stored)) {
    Value c = arith::AddIOp::create(b, l, firstCol, cIndex(b, l, j));
    Value valid =
        andI(b, l, rowBlockValid, cmpLT(b, l, c, cIndex(b, l, grid.cols)));
    Value inTiles =
        andI(b, l, rowBlockInTiles, cmpLT(b, l, c, cIndex(b, l, paddedCols)));
    storeBlockScale(
        b, l, out.scales, /*tiled=*/true, scale, valid, {writes, inTiles},
        [&](OpBuilder &nb, Location nl) {
          return inSlice(nb, nl, s.slice, paddedCols, c);
        },
        s.rowBlock);
  }
}

namespace {
/// The packed rows of a lane's strip of one output: lane j of a run of 4
/// stores word j of the run's 3 per row, the funnel shift
/// (p_{j+1} : p_j << 8) >> (8 + 8j) of its row's 24 bits p_j and its right
/// neighbour's (one shuffle; bits 24-31 of each may be anything, the shift
/// drops them), where StripOutput::storesRowsFromOneAddress says: at an
/// immediate offset from one address computed once (each row's own address
/// is four instructions a row in ptxas's SASS), or at its indices.
struct PackedRowStores {
  Value lane, shift, stores, address;

  PackedRowStores(OpBuilder &b, Location l, const Strip &s,
                  const StripOutput &out);

  /// Stores row `i` (rows are consecutive from the strip's first) from the
  /// packed `bits` of its 4 codes.
  void store(OpBuilder &b, Location l, const Strip &s, const DataBuffer &data,
             int64_t i, Value bits) const;

private:
  /// The lane's word in each row.
  Value getWord(OpBuilder &b, Location l, const Strip &s) const;
};
} // namespace

PackedRowStores::PackedRowStores(OpBuilder &b, Location l, const Strip &s,
                                 const StripOutput &out) {
  IndexArith index{b, l};
  lane = index.rem(s.strip, kPackedRunLanes);
  shift = arith::IndexCastOp::create(b, l, b.getI32Type(),
                                     index.fma(lane, 8, cIndex(b, l, 8)));
  stores =
      andI(b, l, s.colValid, cmpLT(b, l, lane, cIndex(b, l, kPackedRunWords)));
  if (out.storesRowsFromOneAddress)
    address = out.data.getWordAddress(b, l, s.row.front(), getWord(b, l, s));
}

Value PackedRowStores::getWord(OpBuilder &b, Location l, const Strip &s) const {
  IndexArith index{b, l};
  return index.fma(index.div(s.strip, kPackedRunLanes), kPackedRunWords, lane);
}

void PackedRowStores::store(OpBuilder &b, Location l, const Strip &s,
                            const DataBuffer &data, int64_t i,
                            Value bits) const {
  Value next =
      gpu::ShuffleOp::create(b, l, bits, 1, kWarpSize, gpu::ShuffleMode::DOWN)
          .getShuffleResult();
  Value low = arith::ShLIOp::create(b, l, bits,
                                    arith::ConstantIntOp::create(b, l, 8, 32));
  Value word = LLVM::FshrOp::create(b, l, next, low, shift);
  Value condition = andI(b, l, s.rowValid[i], stores);
  if (address)
    return data.storeWordAt(b, l, condition, word, address,
                            i * data.getRowBytes());
  data.storeWords(b, l, condition,
                  vector::BroadcastOp::create(
                      b, l, VectorType::get({1}, b.getI32Type()), word),
                  s.row[i], getWord(b, l, s));
}

/// The packed bits of a strip row's 4 codes from its scaled values (bits
/// 0-23): converted and packed in one recipe where FP6 is embedded (sm_90a),
/// else converted, then packed.
static Value packStripRow(OpBuilder &b, Location l, const StripOutput &out,
                          Value scaled, Value nanMask) {
  if (out.conversion.isEmbedded())
    return convertToPackedFP6(b, l, scaled, out.conversion, nanMask);
  return out.data.packBits(
      b, l, convertToElements(b, l, scaled, out.conversion, nanMask));
}

/// PackedRowStores for a strip's rows of `out` where its rows are packed
/// (never transposed).
static std::optional<PackedRowStores>
getPackedRowStores(OpBuilder &b, Location l, const Strip &s,
                   const StripOutput &out) {
  QuantizeOp op = out.op;
  if (!out.data.getFormat().isPacked() || op.getTransposed())
    return std::nullopt;
  return PackedRowStores(b, l, s, out);
}

/// Stores the codes of the strip's row `i` (4 columns) of one output of
/// one-byte codes (packed rows go through PackedRowStores).
static void storeStripRow(OpBuilder &b, Location l, const Strip &s,
                          const StripOutput &out, int64_t i, Value codes) {
  assert(!out.data.getFormat().isPacked() && "packed rows: PackedRowStores");
  out.data.store(b, l, andI(b, l, s.rowValid[i], s.colValid), codes,
                 {s.row[i], s.col});
}

/// The transposed columnwise output (`transposed`, GEMM-ready): the strip's
/// 16 codes of each column are one 16-byte chunk of a row of the transposed
/// data, and the lane groups of the warp write the 16-byte parts of its
/// 32- or 128-byte block run; linear scales go to [column, row block],
/// which for 128-row blocks is the rowwise `[1, 128]` quantize of the
/// transposed input. (Tiled scales need no
/// change: tiling [cols, row blocks] along its rows puts every scale where
/// tiling [row blocks, cols] along its columns does.)
static void storeTransposedColumns(OpBuilder &b, Location l, const Strip &s,
                                   const StripGrid &grid,
                                   const StripOutput &out,
                                   ArrayRef<Value> rowCodes,
                                   ArrayRef<BlockScale> scales) {
  Value firstRow = s.rowInSlice.front();
  // Rows are a multiple of 16: a run's first row exists iff all of it does.
  Value runValid = andI(b, l, s.rowValid.front(), s.colValid);
  Value rowBlockValid =
      andI(b, l, s.sliceValid,
           cmpLT(b, l, s.rowBlock, cIndex(b, l, grid.rowBlocks)));
  for (int64_t j = 0; j < kStripCols; ++j) {
    SmallVector<Value> column = llvm::map_to_vector(rowCodes, [&](Value codes) {
      return vector::ExtractOp::create(b, l, codes, j).getResult();
    });
    Value codes = vector::FromElementsOp::create(
        b, l, VectorType::get({kRowsPerLane}, b.getI8Type()), column);
    Value col = arith::AddIOp::create(b, l, s.col, cIndex(b, l, j));
    Value row = inSlice(b, l, s.slice, grid.cols, col);
    out.data.store(b, l, runValid, codes, {row, firstRow});
    if (out.swizzle)
      continue;
    buildIf(b, l,
            andI(b, l, s.firstGroup, andI(b, l, rowBlockValid, s.colValid)),
            [&](OpBuilder &nb, Location nl) {
              memref::StoreOp::create(nb, nl, scales[j].stored, out.scales,
                                      ValueRange{row, s.rowBlock});
            });
  }
}

/// The factor `scale`'s elements are scaled by, or NaN for a NaN block (no
/// other amax gives one): a factor that travels between lanes carries the
/// block's NaN mask with it.
static Value getMarkedFactor(OpBuilder &b, Location l,
                             const BlockScale &scale) {
  Value nan = arith::ConstantOp::create(
      b, l, b.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN()));
  return arith::SelectOp::create(b, l, scale.isNaN, nan, scale.factor);
}

/// One reduce-scatter step between lanes `mask` apart: the lane where
/// `upper` holds sends the lower half of `amaxes` and keeps the upper, its
/// partner the reverse, and each combines what it keeps with what it
/// receives (combine is commutative, sign bits included).
static SmallVector<Value> scatterAmaxes(OpBuilder &b, Location l,
                                        const AmaxReduction &reduction,
                                        ArrayRef<Value> amaxes, Value upper,
                                        int64_t mask) {
  int64_t half = amaxes.size() / 2;
  SmallVector<Value> kept;
  for (int64_t p = 0; p < half; ++p) {
    Value lo = amaxes[p], hi = amaxes[p + half];
    Value send = arith::SelectOp::create(b, l, upper, lo, hi);
    Value keep = arith::SelectOp::create(b, l, upper, hi, lo);
    Value received = gpu::ShuffleOp::create(b, l, send, int32_t(mask),
                                            kWarpSize, gpu::ShuffleMode::XOR)
                         .getShuffleResult();
    kept.push_back(reduction.combine(b, l, keep, received));
  }
  return kept;
}

/// The factors of the strip's 4 columns (NaN for a NaN block) where the 2
/// lane groups of the column block share its scales
/// (StripOutput::splitsColumnScales): one scatterAmaxes step over the groups
/// leaves group g the block's amaxes of columns 2g and 2g + 1 (half the
/// shuffles of combining all 4 in both), g computes and stores those 2
/// scales, and one shuffle per column brings it the other group's factors.
/// Each amax is the max of the same magnitudes whichever lane combines them,
/// so the scales are the bits of the unsplit ones.
static SmallVector<Value> scaleColumnsSplit(OpBuilder &b, Location l,
                                            const Strip &s,
                                            const StripGrid &grid,
                                            const StripOutput &out,
                                            ArrayRef<Value> colAmax) {
  assert(grid.getGroups() == 2 && "a column block over two lane groups");
  QuantizeOp op = out.op;
  Type scaleType = op.getScales().getType().getElementType();
  Value upper = arith::XOrIOp::create(b, l, s.firstGroup,
                                      arith::ConstantIntOp::create(b, l, 1, 1));
  int64_t half = kStripCols / 2;
  SmallVector<Value> stored, own;
  for (Value amax : s.reduction.toF32(b, l,
                                      scatterAmaxes(b, l, s.reduction, colAmax,
                                                    upper, grid.lanesAcross))) {
    BlockScale scale = buildBlockScale(b, l, amax, op.getRounding(),
                                       out.conversion, scaleType);
    stored.push_back(scale.stored);
    own.push_back(getMarkedFactor(b, l, scale));
  }
  Value firstCol = arith::AddIOp::create(
      b, l, s.col,
      arith::SelectOp::create(b, l, upper, cIndex(b, l, half),
                              cIndex(b, l, 0)));
  storeColumnScales(b, l, s, grid, out, stored, firstCol,
                    arith::ConstantIntOp::create(b, l, 1, 1));
  SmallVector<Value> factors(kStripCols);
  for (auto [q, factor] : llvm::enumerate(own)) {
    Value other =
        gpu::ShuffleOp::create(b, l, factor, int32_t(grid.lanesAcross),
                               kWarpSize, gpu::ShuffleMode::XOR)
            .getShuffleResult();
    factors[q] = arith::SelectOp::create(b, l, upper, other, factor);
    factors[q + half] = arith::SelectOp::create(b, l, upper, factor, other);
  }
  return factors;
}

void gpu_kernels::quantizeColumns(OpBuilder &b, Location l, const Strip &s,
                                  const StripGrid &grid,
                                  const StripOutput &out) {
  QuantizeOp op = out.op;
  Type scaleType = op.getScales().getType().getElementType();
  auto f32Lane =
      cast<VectorType>(s.loaded.front().getType()).clone(b.getF32Type());
  const AmaxReduction &reduction = s.reduction;
  SmallVector<Value> colAmax;
  for (int64_t i = 0; i < kRowsPerLane; ++i) {
    SmallVector<Value> elements =
        reduction.elements(b, l, s.loaded[i], s.getValues(b, l, i),
                           andI(b, l, s.rowValid[i], s.colValid));
    if (colAmax.empty())
      colAmax = elements;
    else
      for (auto [acc, element] : llvm::zip_equal(colAmax, elements))
        acc = reduction.combine(b, l, acc, element);
  }
  SmallVector<BlockScale> scales;
  SmallVector<Value> factors, nans;
  if (out.splitsColumnScales) {
    factors = scaleColumnsSplit(b, l, s, grid, out, colAmax);
    for (Value factor : factors)
      nans.push_back(arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO,
                                           factor, factor));
  } else {
    for (Value &own : colAmax)
      for (int64_t mask = grid.lanesAcross; mask < kWarpSize; mask *= 2) {
        Value other = gpu::ShuffleOp::create(b, l, own, int32_t(mask),
                                             kWarpSize, gpu::ShuffleMode::XOR)
                          .getShuffleResult();
        own = reduction.combine(b, l, own, other);
      }
    for (Value amax : reduction.toF32(b, l, colAmax)) {
      scales.push_back(buildBlockScale(b, l, amax, op.getRounding(),
                                       out.conversion, scaleType));
      factors.push_back(scales.back().factor);
      nans.push_back(scales.back().isNaN);
    }
  }
  Value factor = vector::FromElementsOp::create(b, l, f32Lane, factors);
  Value nanMask =
      vector::FromElementsOp::create(b, l, f32Lane.clone(b.getI1Type()), nans);
  std::optional<PackedRowStores> rowStores = getPackedRowStores(b, l, s, out);
  SmallVector<Value> rowCodes;
  for (int64_t i = 0; i < kRowsPerLane; ++i) {
    Value scaled =
        applyScaleFactors(b, l, s.getValues(b, l, i), factor, op.getRounding());
    if (rowStores) {
      rowStores->store(b, l, s, out.data, i,
                       packStripRow(b, l, out, scaled, nanMask));
      continue;
    }
    rowCodes.push_back(
        convertToElements(b, l, scaled, out.conversion, nanMask));
    if (!op.getTransposed())
      storeStripRow(b, l, s, out, i, rowCodes.back());
  }
  if (op.getTransposed())
    storeTransposedColumns(b, l, s, grid, out, rowCodes, scales);
  if (!out.splitsColumnScales && (!op.getTransposed() || out.swizzle))
    storeColumnScales(
        b, l, s, grid, out,
        llvm::map_to_vector(
            scales, [](const BlockScale &scale) { return scale.stored; }),
        s.col, s.firstGroup);
}

/// Reduce-scatters the strip's row amaxes (one per row, or packed one word
/// per two rows) over the `lanes` lanes of a lane group that share a rowwise
/// block: each xor step (scatterAmaxes) halves the values a lane holds, so
/// that lane g ends with the amaxes of rows (16 / lanes) g + q over the
/// lanes' columns. For MX's 8 lanes that is 14 shuffles (7 packed) instead
/// of 48, and each row's scale is then computed once per block rather than
/// once per lane.
static SmallVector<Value> scatterRowAmaxes(OpBuilder &b, Location l,
                                           const AmaxReduction &reduction,
                                           SmallVector<Value> amaxes,
                                           Value laneInBlock, int64_t lanes) {
  for (int64_t mask = lanes / 2; mask >= 1; mask /= 2) {
    Value upper = arith::CmpIOp::create(
        b, l, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, l, laneInBlock, cIndex(b, l, mask)),
        cIndex(b, l, 0));
    amaxes = scatterAmaxes(b, l, reduction, amaxes, upper, mask);
  }
  return amaxes;
}

/// Stores the rowwise scale of the strip row `local` (in the slice), linear
/// or at its tiled address, where rows and blocks of the tiles' padding get
/// zero bits.
Value gpu_kernels::isRowBlockInInput(OpBuilder &b, Location l,
                                     const StripGrid &grid, Value sliceValid,
                                     Value local, Value block) {
  Value rowValid =
      andI(b, l, sliceValid, cmpLT(b, l, local, cIndex(b, l, grid.rows)));
  return andI(b, l, rowValid, cmpLT(b, l, block, cIndex(b, l, grid.colBlocks)));
}

void gpu_kernels::storeRowScale(OpBuilder &b, Location l, const StripGrid &grid,
                                const StripOutput &out, Value slice,
                                Value sliceValid, Value local, Value block,
                                Value stored) {
  Value valid = isRowBlockInInput(b, l, grid, sliceValid, local, block);
  SmallVector<Value, 1> guards;
  int64_t sliceRows = grid.rows;
  if (out.swizzle) {
    sliceRows = llvm::alignTo(grid.rows, SwizzleTiles::kRows);
    guards.push_back(andI(
        b, l, sliceValid,
        andI(b, l, cmpLT(b, l, local, cIndex(b, l, sliceRows)),
             cmpLT(
                 b, l, block,
                 cIndex(b, l,
                        llvm::alignTo(grid.colBlocks, SwizzleTiles::kCols))))));
  }
  storeBlockScale(
      b, l, out.scales, bool(out.swizzle), stored, valid, guards,
      [&](OpBuilder &nb, Location nl) {
        return inSlice(nb, nl, slice, sliceRows, local);
      },
      block);
}

/// The scale of a rowwise block of amax `amax`, stored for row `local` of
/// the slice; returns its marked factor (getMarkedFactor), the row's NaN
/// mask as well.
static Value scaleRow(OpBuilder &b, Location l, const Strip &s,
                      const StripGrid &grid, const StripOutput &out, Value amax,
                      Value local, Value block) {
  QuantizeOp op = out.op;
  BlockScale scale =
      buildBlockScale(b, l, amax, op.getRounding(), out.conversion,
                      op.getScales().getType().getElementType());
  storeRowScale(b, l, grid, out, s.slice, s.sliceValid, local, block,
                scale.stored);
  return getMarkedFactor(b, l, scale);
}

namespace mx::gpu_kernels {

/// The workgroup memory through which the warps of a CTA share their rowwise
/// blocks (FP8 blockwise's 128 columns span the CTA's 8 warps): each warp's
/// amaxes of the 128 rows over its 16 columns, then the rows' factors.
/// With `codes`, the rowwise codes meet there too (stagesRowCodes).
struct RowExchange {
  Value partialAmaxes, factors, thread, codes;

  /// Whether the rowwise codes go through shared memory: each lane's 4 codes
  /// of a row are 4 bytes, a lane group's 16, so stored from registers every
  /// row of the tile is 8 partial-sector requests to L2, which with the
  /// strips' one-sector loads held the kernel at L2's request rate (64-69%
  /// of copy on an H200, docs/gpu.md); staged, a warp stores 4 whole
  /// 128-byte rows an instruction. Rows must be whole 16-byte chunks.
  static bool stagesRowCodes(const StripGrid &grid) {
    return grid.cols % kCodeChunk == 0;
  }

  static SmallVector<Type> getBufferTypes(MLIRContext *context,
                                          const StripGrid &grid) {
    auto workgroup =
        gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
    Type f32 = Float32Type::get(context);
    SmallVector<Type> types = {
        MemRefType::get({kWarpsPerBlock, grid.blockRows}, f32,
                        MemRefLayoutAttrInterface(), workgroup),
        MemRefType::get({grid.blockRows}, f32, MemRefLayoutAttrInterface(),
                        workgroup)};
    if (stagesRowCodes(grid))
      types.push_back(MemRefType::get({grid.blockRows, grid.blockRows},
                                      IntegerType::get(context, 8),
                                      MemRefLayoutAttrInterface(), workgroup));
    return types;
  }

  /// The codes' 16-byte chunks: the store of the copy out.
  static constexpr int64_t kCodeChunk = 16;
};

} // namespace mx::gpu_kernels

/// Factors of a block in one warp (MX): lane g of the block's 8 computes and
/// stores the scales of the rows whose amaxes it holds, and one shuffle per
/// row brings each row's factor to every lane of the block.
static SmallVector<Value> scaleRowsInWarp(OpBuilder &b, Location l,
                                          const Strip &s, const StripGrid &grid,
                                          const StripOutput &out,
                                          ArrayRef<Value> amaxes,
                                          Value laneInBlock, Value block) {
  int64_t rowsPerLane = amaxes.size();
  Value firstOwnedRow =
      IndexArith{b, l}.fma(laneInBlock, rowsPerLane, s.rowInSlice.front());
  SmallVector<Value> owned;
  for (auto [q, amax] : llvm::enumerate(amaxes))
    owned.push_back(scaleRow(
        b, l, s, grid, out, amax,
        arith::AddIOp::create(b, l, firstOwnedRow, cIndex(b, l, q)), block));
  Value blockLane0 = arith::IndexCastOp::create(
      b, l, b.getI32Type(), arith::SubIOp::create(b, l, s.lane, laneInBlock));
  SmallVector<Value> factors;
  for (int64_t i = 0; i < kRowsPerLane; ++i) {
    Value source = arith::AddIOp::create(
        b, l, blockLane0,
        arith::ConstantIntOp::create(b, l, i / rowsPerLane, 32));
    factors.push_back(gpu::ShuffleOp::create(
                          b, l, owned[i % rowsPerLane], source,
                          arith::ConstantIntOp::create(b, l, kWarpSize, 32),
                          gpu::ShuffleMode::IDX)
                          .getShuffleResult());
  }
  return factors;
}

/// Factors of a block that spans the CTA (FP8 blockwise): every lane writes
/// its rows' amaxes over its warp's columns (one 16-byte store), and after a
/// barrier thread t < 128 reduces row t's over the 8 warps, stores its scale
/// and writes its factor; after a second barrier each lane reads the factors
/// of its 16 rows (four 16-byte loads, broadcast to the lanes of a group).
static SmallVector<Value>
scaleRowsInCTA(OpBuilder &b, Location l, const Strip &s, const StripGrid &grid,
               const StripOutput &out, ArrayRef<Value> amaxes,
               Value laneInBlock, Value block, const RowExchange &exchange) {
  IndexArith index{b, l};
  auto f32 = b.getF32Type();
  Value firstTileRow = index.div(s.lane, grid.lanesAcross);
  firstTileRow =
      arith::MulIOp::create(b, l, firstTileRow, cIndex(b, l, kRowsPerLane));
  Value ownedTileRow = index.fma(laneInBlock, amaxes.size(), firstTileRow);
  Value warp = index.div(exchange.thread, kWarpSize);
  storeVector(b, l,
              vector::FromElementsOp::create(
                  b, l, VectorType::get({int64_t(amaxes.size())}, f32), amaxes),
              exchange.partialAmaxes, {warp, ownedTileRow});
  gpu::BarrierOp::create(b, l);
  buildIf(b, l, cmpLT(b, l, exchange.thread, cIndex(b, l, grid.blockRows)),
          [&](OpBuilder &nb, Location nl) {
            Value amax = memref::LoadOp::create(
                nb, nl, exchange.partialAmaxes,
                ValueRange{cIndex(nb, nl, 0), exchange.thread});
            for (int64_t w = 1; w < kWarpsPerBlock; ++w)
              amax = arith::MaximumFOp::create(
                  nb, nl, amax,
                  memref::LoadOp::create(
                      nb, nl, exchange.partialAmaxes,
                      ValueRange{cIndex(nb, nl, w), exchange.thread}));
            Value local = IndexArith{nb, nl}.fma(s.rowBlock, grid.blockRows,
                                                 exchange.thread);
            memref::StoreOp::create(
                nb, nl, scaleRow(nb, nl, s, grid, out, amax, local, block),
                exchange.factors, exchange.thread);
          });
  gpu::BarrierOp::create(b, l);
  constexpr int64_t kFactorsPerLoad = 4;
  auto loadType = VectorType::get({kFactorsPerLoad}, f32);
  SmallVector<Value> factors;
  for (int64_t i = 0; i < kRowsPerLane; i += kFactorsPerLoad) {
    Value loaded = loadVector(
        b, l, loadType, exchange.factors,
        {arith::AddIOp::create(b, l, firstTileRow, cIndex(b, l, i))});
    for (int64_t j = 0; j < kFactorsPerLoad; ++j)
      factors.push_back(vector::ExtractOp::create(b, l, loaded, j));
  }
  return factors;
}

/// Where a code chunk of tile row `tileRow` (its 16-row lane group g) sits
/// in the staged codes: chunk c of the row at chunk c ^ g, so that the 8
/// groups of a warp, which store rows 16 apart, write distinct banks.
static Value stagedChunk(OpBuilder &b, Location l, Value tileRow, Value chunk) {
  Value group = IndexArith{b, l}.div(tileRow, kRowsPerLane);
  return arith::XOrIOp::create(b, l, chunk, group);
}

/// Stages the codes of the strip's row `i` (4 columns) in `exchange.codes`.
static void stageRowCodes(OpBuilder &b, Location l, const Strip &s,
                          const StripGrid &grid, const RowExchange &exchange,
                          int64_t i, Value codes) {
  IndexArith index{b, l};
  Value tileRow = index.rem(s.rowInSlice[i], grid.blockRows);
  Value colInTile = index.rem(s.col, grid.blockRows);
  Value chunk = index.div(colInTile, RowExchange::kCodeChunk);
  Value column =
      index.fma(stagedChunk(b, l, tileRow, chunk), RowExchange::kCodeChunk,
                index.rem(colInTile, RowExchange::kCodeChunk));
  storeVector(b, l, codes, exchange.codes, {tileRow, column});
}

/// After a barrier, the CTA copies its tile's staged codes out: thread t
/// stores chunks t + 256 k, row-major, each one 16-byte store of the rows
/// and columns that exist.
static void storeStagedRowCodes(OpBuilder &b, Location l, const Strip &s,
                                const StripGrid &grid, const StripOutput &out,
                                const RowExchange &exchange) {
  gpu::BarrierOp::create(b, l);
  IndexArith index{b, l};
  constexpr int64_t chunkBytes = RowExchange::kCodeChunk;
  int64_t rowChunks = grid.blockRows / chunkBytes;
  Value firstCol =
      arith::SubIOp::create(b, l, s.col, index.rem(s.col, grid.blockRows));
  auto type = VectorType::get({chunkBytes}, b.getI8Type());
  for (int64_t k = 0; k < grid.blockRows * rowChunks; k += kThreadsPerBlock) {
    Value linear =
        arith::AddIOp::create(b, l, exchange.thread, cIndex(b, l, k));
    Value tileRow = index.div(linear, rowChunks);
    Value staged = index.rem(linear, rowChunks);
    Value codes =
        loadVector(b, l, type, exchange.codes,
                   {tileRow, arith::MulIOp::create(b, l, staged,
                                                   cIndex(b, l, chunkBytes))});
    Value col =
        index.fma(stagedChunk(b, l, tileRow, staged), chunkBytes, firstCol);
    Value local = index.fma(s.rowBlock, grid.blockRows, tileRow);
    Value valid = andI(b, l, s.sliceValid,
                       andI(b, l, cmpLT(b, l, local, cIndex(b, l, grid.rows)),
                            cmpLT(b, l, col, cIndex(b, l, grid.cols))));
    out.data.store(b, l, valid, codes,
                   {inSlice(b, l, s.slice, grid.rows, local), col});
  }
}

void gpu_kernels::quantizeRows(OpBuilder &b, Location l, const Strip &s,
                               const StripGrid &grid, const StripOutput &out,
                               const RowExchange *exchange) {
  QuantizeOp op = out.op;
  int64_t lanes = grid.getRowBlockLanes();
  Value block = arith::DivUIOp::create(b, l, s.strip,
                                       cIndex(b, l, grid.getRowBlockStrips()));
  Value laneInBlock =
      arith::RemUIOp::create(b, l, s.strip, cIndex(b, l, lanes));
  const AmaxReduction &reduction = s.reduction;
  SmallVector<Value> amaxes;
  for (int64_t i = 0; i < kRowsPerLane; ++i) {
    SmallVector<Value> elements =
        reduction.elements(b, l, s.loaded[i], s.getValues(b, l, i), s.colValid);
    Value rowAmax = elements.front();
    for (Value element : ArrayRef(elements).drop_front())
      rowAmax = reduction.combine(b, l, rowAmax, element);
    amaxes.push_back(rowAmax);
  }
  // Packed, a word then holds the two pairs of one row; pairing rows 2g and
  // 2g + 1 gives words of two rows' amaxes, which scatter to the lanes as
  // the f32 amaxes do.
  if (reduction.isPacked()) {
    SmallVector<Value> paired;
    for (int64_t i = 0; i < kRowsPerLane; i += 2)
      paired.push_back(reduction.pairRows(b, l, amaxes[i], amaxes[i + 1]));
    amaxes = std::move(paired);
  }
  amaxes = reduction.toF32(
      b, l, scatterRowAmaxes(b, l, reduction, amaxes, laneInBlock, lanes));
  SmallVector<Value> factors =
      exchange
          ? scaleRowsInCTA(b, l, s, grid, out, amaxes, laneInBlock, block,
                           *exchange)
          : scaleRowsInWarp(b, l, s, grid, out, amaxes, laneInBlock, block);
  std::optional<PackedRowStores> rowStores = getPackedRowStores(b, l, s, out);
  for (auto [i, factor] : llvm::enumerate(factors)) {
    Value isNaN =
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, factor, factor);
    Value values = s.getValues(b, l, i);
    if (rowStores) {
      auto type = cast<VectorType>(values.getType());
      Value scaled = applyScaleFactors(
          b, l, values, vector::BroadcastOp::create(b, l, type, factor),
          op.getRounding());
      Value nanMask =
          vector::BroadcastOp::create(b, l, type.clone(b.getI1Type()), isNaN);
      rowStores->store(b, l, s, out.data, i,
                       packStripRow(b, l, out, scaled, nanMask));
      continue;
    }
    Value codes = quantizeVector(b, l, values, {Value(), factor, isNaN},
                                 op.getRounding(), out.conversion);
    if (exchange && exchange->codes)
      stageRowCodes(b, l, s, grid, *exchange, i, codes);
    else
      storeStripRow(b, l, s, out, i, codes);
  }
  if (exchange && exchange->codes)
    storeStagedRowCodes(b, l, s, grid, out, *exchange);
}

/// Whether `op` quantizes its input's columns: block [32, 1], or written
/// transposed with block [1, 32] in the data's dimensions.
static bool readsColumns(QuantizeOp op) {
  ArrayRef<int64_t> block = op.getBlock();
  return (op.getTransposed() ? block.end()[-2] : block.back()) == 1;
}

/// CTAs an SM of the fused register kernel (127-128 registers of bf16 or
/// f32 strips on sm_90a; docs/gpu.md).
constexpr int64_t kFusedCTAsPerSM = 2;

/// Where the strip kernel anchored at `op` (its columnwise quantize) is
/// built: before the earlier of `op` and its fused sibling, so that the
/// results dominate both users; null where `op` anchors no strip kernel.
static Operation *getStripKernelStart(QuantizeOp op,
                                      const QuantizeFusionPlan &plan) {
  const QuantizePlan *planned = plan.lookup(op);
  if (!planned ||
      (planned->kernel != QuantizeKernel::stripColumnwise &&
       planned->kernel != QuantizeKernel::stripFused) ||
      !readsColumns(op))
    return nullptr;
  QuantizeOp sibling = planned->sibling;
  return sibling && sibling->isBeforeInBlock(op) ? sibling : op;
}

Operation *gpu_kernels::getStripColumnSumStart(QuantizeOp op,
                                               const QuantizeFusionPlan &plan) {
  if (op.getInput().getType().getRank() != 2 ||
      getStripBlockRows(op) != kBlockwiseExtent)
    return nullptr;
  return getStripKernelStart(op, plan);
}

/// The strip kernel that keeps the strip in registers: each lane loads its
/// strip from global memory and quantizes its columns, then (fused) its rows;
/// a CTA is one row block's 8 warps where a rowwise block spans them. With
/// `partials` (a fused column sum; getStripColumnSumStart) the lanes also
/// store the column sums of its 64-row tiles there, from the values as
/// loaded (ColumnSums.h).
static void buildRegisterKernel(OpBuilder &builder, Location loc,
                                RankedTensorType inputType, Value input,
                                const StripOutput &columnwise,
                                const StripOutput *rowwise, Value partials) {
  StripGrid grid =
      getStripGrid(inputType, columnwise, rowwise, /*warpsPerTile=*/1);
  bool exchangesRows = rowwise && grid.getRowBlockWarps() > 1;
  assert((!exchangesRows || grid.getRowBlockWarps() == kWarpsPerBlock) &&
         "a rowwise block spans one warp or the CTA");
  Type elementType = inputType.getElementType();
  auto laneType = VectorType::get({kStripCols}, elementType);
  auto readGlobal = [&](OpBuilder &nb, Location nl, const Strip &s, int64_t i) {
    Value row = arith::MinUIOp::create(
        nb, nl, s.row[i], cIndex(nb, nl, grid.slices * grid.rows - 1));
    return loadVector(nb, nl, laneType, input, {row, s.loadCol});
  };
  SmallVector<Type> workgroup;
  if (exchangesRows)
    workgroup = RowExchange::getBufferTypes(builder.getContext(), grid);
  int64_t threads =
      grid.slices * grid.gridRowBlocks * grid.gridStrips * grid.getGroups();
  buildBlockLaunch(
      builder, loc, llvm::divideCeil(threads, kThreadsPerBlock), workgroup,
      [&](OpBuilder &b, Location l, const KernelIds &ids) {
        IndexArith index{b, l};
        Strip strip = loadStrip(b, l, index.div(ids.global, kWarpSize),
                                index.rem(ids.global, kWarpSize), grid,
                                elementType, readGlobal);
        // Strips past the matrix only where it ends inside a row block. The
        // sums' temporaries must not cost the fused kernel its second CTA an
        // SM (128 registers), so where ptxas went above (sm_90a: f32 134, a
        // 16-bit kernel with strips past the matrix 139-142) its first load
        // asks for two (KernelOccupancy; then up to 16 and 44 bytes
        // spilled). The other 16-bit kernels stay at 122-128 unasked.
        bool masks = grid.rows % grid.blockRows != 0;
        if (partials) {
          if (masks || elementType.isF32())
            strip.loaded.front().getDefiningOp()->setAttr(
                "mx.min_ctas_per_sm", b.getI64IntegerAttr(kFusedCTAsPerSM));
          storeStripColumnSums(
              b, l, strip.lane, grid.lanesAcross, strip.rowInSlice.front(),
              strip.values, masks ? strip.rowValid.front() : Value(), strip.col,
              andI(b, l, strip.sliceValid, strip.colValid), grid.rows,
              partials);
        }
        quantizeColumns(b, l, strip, grid, columnwise);
        if (!rowwise)
          return;
        RowExchange exchange;
        if (exchangesRows)
          exchange = {ids.workgroup[0], ids.workgroup[1], ids.thread,
                      RowExchange::stagesRowCodes(grid) ? ids.workgroup[2]
                                                        : Value()};
        quantizeRows(b, l, strip, grid, *rowwise,
                     exchangesRows ? &exchange : nullptr);
      });
}

namespace {

/// The strip kernel, anchored at its columnwise quantize; when the plan fuses
/// it with the rowwise quantize of the same input, the kernel computes both.
struct ColumnwiseQuantizeToGPU : OpRewritePattern<QuantizeOp> {
  ColumnwiseQuantizeToGPU(MLIRContext *context, Chip chip,
                          const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), chip(chip), plan(plan) {}

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rewriter) const override {
    Operation *start = getStripKernelStart(op, plan);
    if (!start)
      return rewriter.notifyMatchFailure(op,
                                         "not a planned columnwise quantize");
    QuantizeOp rowwiseOp = plan.lookup(op)->sibling;
    rewriter.setInsertionPoint(start);
    Location loc = op.getLoc();

    auto makeOutput = [&](QuantizeOp q) {
      SwizzleOp swizzle = plan.lookup(q)->swizzle;
      DataBuffer data(rewriter, loc, q.getData().getType(), 2);
      Value scales =
          swizzle ? allocFolded(rewriter, loc, swizzle.getResult().getType(), 5)
                  : allocFolded(rewriter, loc, q.getScales().getType(), 2);
      return StripOutput{q, swizzle, ElementConversion::forQuantize(q, chip),
                         data, scales};
    };
    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 2);
    SmallVector<StripOutput, 2> outputs = {makeOutput(op)};
    if (rowwiseOp)
      outputs.push_back(makeOutput(rowwiseOp));
    const StripOutput &columnwise = outputs.front();
    const StripOutput *rowwise = rowwiseOp ? &outputs.back() : nullptr;

    RankedTensorType inputType = op.getInput().getType();
    ColumnSumOp sum = getFusedColumnSum(op, op.getInput(), plan);
    Value partials =
        sum ? allocColumnPartials(rewriter, loc, inputType.getDimSize(0),
                                  inputType.getDimSize(1))
            : Value();
    if (rowwise && stagesTile(inputType, columnwise)) {
      for (StripOutput &out : outputs)
        out.storesRowsFromOneAddress = true;
      // Its two lane groups share a strip's column scales (measured 1.7 us
      // faster at 8192^2 on an H100, docs/gpu.md).
      outputs.front().splitsColumnScales = true;
      assert(!sum && "staged kernels are MX's (32-row blocks): no column sums");
      buildStagedKernel(rewriter, loc, inputType, input, columnwise, *rowwise);
    } else
      buildRegisterKernel(rewriter, loc, inputType, input, columnwise, rowwise,
                          partials);
    if (sum)
      replaceWithPartialsSum(rewriter, loc, sum, partials);

    for (StripOutput &out : outputs) {
      RankedTensorType scalesType = out.swizzle
                                        ? out.swizzle.getResult().getType()
                                        : out.op.getScales().getType();
      replaceQuantize(rewriter, out.op, out.swizzle,
                      out.data.toTensor(rewriter, loc),
                      toUnfoldedTensor(rewriter, loc, out.scales, scalesType));
    }
    return success();
  }

private:
  Chip chip;
  const QuantizeFusionPlan &plan;
};

} // namespace

int64_t gpu_kernels::getStripColumnMultiple(const ElementFormat &format) {
  if (!format.isPacked())
    return kStripCols;
  if (kStripCols * format.bitWidth == kPackedLaneBits)
    return kStripCols * kPackedRunLanes;
  return 0;
}

int64_t gpu_kernels::getStripBlockRows(QuantizeOp op) {
  ArrayRef<int64_t> block = op.getBlock();
  return op.getTransposed() ? block.back() : block.end()[-2];
}

int64_t gpu_kernels::getStripLanesAcross(int64_t blockRows) {
  if (blockRows != kMXBlock && blockRows != kBlockwiseExtent)
    return 0;
  return kWarpSize * kRowsPerLane / blockRows;
}

void gpu_kernels::populateColumnwiseQuantizePatterns(
    RewritePatternSet &patterns, Chip chip, const QuantizeFusionPlan &plan) {
  patterns.add<ColumnwiseQuantizeToGPU>(patterns.getContext(), chip, plan);
}
