//===- StagedQuantize.cpp - The staged fused quantize of packed formats ---===//
//
// The fused rowwise + columnwise quantize of a packed format (MXFP6), whose
// register strip kernel (QuantizeStrips.cpp) needs 128 registers a lane: a
// CTA copies its 32-row x 256-column tile into shared memory, then warps 0-3
// quantize the tile's columns, each lane its 16 x 4 strip read there with
// the strip kernel's own steps (QuantizeStrips.h), and warps 4-7 its rows,
// each lane whole 32-element blocks read there (quantizeTileRows), so that
// a lane holds one quantization's state and the kernel fits 48 registers,
// five CTAs an SM. The columnwise part writes a lane's packed 24-bit rows
// from one address at immediate offsets (PackedRowStores; the register
// kernel stores each row at its own address, each measured faster so), and
// once its own tile is staged a CTA asks L2 to prefetch the tile of a CTA
// that starts later (prefetchLaterTile); docs/gpu.md has the measurements
// that chose each step.
//
//===----------------------------------------------------------------------===//

#include "QuantizeStrips.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

/// Warps of the staged kernel per quantization: warps 0-3 of a CTA quantize
/// the columns of its tile, warps 4-7 the rows.
constexpr int64_t kStagedWarpsPerPart = kWarpsPerBlock / 2;
/// The CTAs an SM of the staged kernel: 48 registers a thread. Five ran 7%
/// faster than four on an H200 and as fast on an H100 (docs/gpu.md).
constexpr int64_t kStagedCTAsPerSM = 5;
/// The staged tile is loaded in 16-byte chunks.
constexpr int64_t kStageChunkBytes = 16;
/// How far ahead a CTA prefetches, in CTAs per SM: the tile of the CTA that
/// starts 2 x (the SMs) CTAs after it, about half the resident CTAs later
/// (1, 1.5, 2 and 3 were measured; 2 was fastest).
constexpr int64_t kStagedPrefetchCTAsPerSM = 2;

bool gpu_kernels::stagesTile(RankedTensorType inputType,
                             const StripOutput &columnwise) {
  int64_t chunk =
      kStageChunkBytes * 8 / inputType.getElementType().getIntOrFloatBitWidth();
  return columnwise.data.getFormat().isPacked() &&
         inputType.getShape().back() % chunk == 0;
}

/// The staged tile: the CTA's row block x the columns of its
/// kStagedWarpsPerPart warps' strips, in workgroup memory.
static MemRefType getStagedTileType(const StripGrid &grid, Type elementType) {
  MLIRContext *context = elementType.getContext();
  return MemRefType::get(
      {grid.blockRows, kStagedWarpsPerPart * grid.lanesAcross * kStripCols},
      elementType, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
}

/// Copies the CTA's tile (its first row `firstRow` of the folded input, its
/// first column `firstCol`) into `tile`: each warp moves whole tile rows in
/// 16-byte chunks, every load issued before the first store; rows and
/// columns past the input are clamped, as the register kernel's loads are.
static void stageTile(OpBuilder &b, Location l, const StripGrid &grid,
                      Value input, Value tile, Value thread, Value firstRow,
                      Value firstCol) {
  IndexArith index{b, l};
  auto tileType = cast<MemRefType>(tile.getType());
  int64_t chunk =
      kStageChunkBytes * 8 / tileType.getElementType().getIntOrFloatBitWidth();
  int64_t chunksPerRow = tileType.getDimSize(1) / chunk;
  int64_t rowsPerPass = kThreadsPerBlock / chunksPerRow;
  auto chunkType = VectorType::get({chunk}, tileType.getElementType());
  Value row0 = index.div(thread, chunksPerRow);
  Value col = arith::MulIOp::create(b, l, index.rem(thread, chunksPerRow),
                                    cIndex(b, l, chunk));
  Value loadCol =
      arith::MinUIOp::create(b, l, arith::AddIOp::create(b, l, firstCol, col),
                             cIndex(b, l, grid.cols - chunk));
  SmallVector<Value> rows, chunks;
  for (int64_t r = 0; r < tileType.getDimSize(0); r += rowsPerPass) {
    rows.push_back(arith::AddIOp::create(b, l, row0, cIndex(b, l, r)));
    Value loadRow = arith::MinUIOp::create(
        b, l, arith::AddIOp::create(b, l, firstRow, rows.back()),
        cIndex(b, l, grid.slices * grid.rows - 1));
    chunks.push_back(loadVector(b, l, chunkType, input, {loadRow, loadCol}));
  }
  for (auto [row, values] : llvm::zip_equal(rows, chunks))
    storeVector(b, l, values, tile, {row, col});
}

namespace {
/// Where the staged tiles lie: tiles run along a row block first, then
/// down, through each batch slice's row blocks (its padding included).
struct StagedTiles {
  const StripGrid &grid;
  MemRefType tileType;
  int64_t tilesPerRowBlock, numBlocks;

  StagedTiles(const StripGrid &grid, MemRefType tileType)
      : grid(grid), tileType(tileType),
        tilesPerRowBlock(grid.gridStrips / (tileType.getDimSize(1) /
                                             kStripCols)),
        numBlocks(grid.slices * grid.gridRowBlocks * tilesPerRowBlock) {}

  /// A tile's batch slice, its first row in the slice and its first column.
  struct Place {
    Value slice, firstLocal, firstCol;
  };
  Place locate(OpBuilder &b, Location l, Value tile) const {
    IndexArith index{b, l};
    Value gridRowBlock = index.div(tile, tilesPerRowBlock);
    return {index.div(gridRowBlock, grid.gridRowBlocks),
            arith::MulIOp::create(b, l,
                                  index.rem(gridRowBlock, grid.gridRowBlocks),
                                  cIndex(b, l, grid.blockRows)),
            arith::MulIOp::create(b, l, index.rem(tile, tilesPerRowBlock),
                                  cIndex(b, l, tileType.getDimSize(1)))};
  }

  /// Tile `tile`'s first row of the folded input and its first column.
  std::pair<Value, Value> getOrigin(OpBuilder &b, Location l,
                                    Value tile) const {
    Place place = locate(b, l, tile);
    return {inSlice(b, l, place.slice, grid.rows, place.firstLocal),
            place.firstCol};
  }
};
} // namespace

bool gpu_kernels::stagesWholeRowBlocks(const StripGrid &grid) {
  return grid.cols % grid.blockRows == 0;
}

/// The rowwise part of the staged tile `tile` (tile number `tileIndex`)
/// where the input's rows are whole blocks (stagesWholeRowBlocks): thread
/// `partThread` of the part's warps quantizes blocks partThread, + 128, ...
/// of the tile, each a row's 32 elements read from shared memory in four
/// 16-byte loads. A block's amax then takes no shuffle, its scale is built
/// once, and its 24 packed bytes leave in three 8-byte stores that the
/// lanes of a warp make contiguous (the strip form reduce-scatters amaxes
/// over 8 lanes, shuffles each row's factor back and joins neighbours'
/// 24-bit rows into 4-byte stores).
static void quantizeTileRows(OpBuilder &b, Location l, const StagedTiles &tiles,
                             Value tile, Value tileIndex, Value partThread,
                             const StripOutput &out) {
  IndexArith index{b, l};
  const StripGrid &grid = tiles.grid;
  QuantizeOp op = out.op;
  // The fusion plan pairs [1, 32] blocks with 32-row column blocks.
  int64_t width = grid.blockRows;
  int64_t tileCols = tiles.tileType.getDimSize(1);
  int64_t blocksPerRow = tileCols / width;
  int64_t blocks = tiles.tileType.getDimSize(0) * blocksPerRow;
  int64_t threads = kStagedWarpsPerPart * kWarpSize;
  assert(tileCols % width == 0 && blocks % threads == 0 &&
         "the part's threads share the tile's whole blocks");
  Type elementType = tiles.tileType.getElementType();
  AmaxReduction reduction{elementType};
  auto blockType = VectorType::get({width}, elementType);
  // A block's codes start at a multiple of its packed bytes, which with
  // whole blocks a row (and rows of whole blocks) are 8-byte aligned for
  // FP6's 24 bytes.
  int64_t blockBytes = width * out.data.getFormat().bitWidth / 8;
  llvm::Align alignment(
      blockBytes % 8 == 0 && out.data.getRowBytes() % 8 == 0 ? 8 : 4);

  StagedTiles::Place place = tiles.locate(b, l, tileIndex);
  Value sliceValid = cmpLT(b, l, place.slice, cIndex(b, l, grid.slices));
  Value firstBlock = index.div(place.firstCol, width);
  for (int64_t first = 0; first < blocks; first += threads) {
    Value q = arith::AddIOp::create(b, l, partThread, cIndex(b, l, first));
    Value tileRow = index.div(q, blocksPerRow);
    Value blockInTile = index.rem(q, blocksPerRow);
    Value loaded =
        loadVector(b, l, blockType, tile,
                   {tileRow, arith::MulIOp::create(b, l, blockInTile,
                                                   cIndex(b, l, width))});
    BlockScale scale = buildBlockScale(
        b, l, reduction.reduce(b, l, loaded), op.getRounding(), out.conversion,
        op.getScales().getType().getElementType());
    Value local = arith::AddIOp::create(b, l, place.firstLocal, tileRow);
    Value block = arith::AddIOp::create(b, l, firstBlock, blockInTile);
    storeRowScale(b, l, grid, out, place.slice, sliceValid, local, block,
                  scale.stored);
    storeQuantized(b, l, out.data,
                   isRowBlockInInput(b, l, grid, sliceValid, local, block),
                   extendToF32(b, l, loaded, /*feedsMagnitudes=*/false), scale,
                   op.getRounding(), out.conversion,
                   {inSlice(b, l, place.slice, grid.rows, local),
                    arith::MulIOp::create(b, l, block, cIndex(b, l, width))},
                   alignment);
  }
}

/// Asks L2 to prefetch the tile of CTA `block` + kStagedPrefetchCTAsPerSM x
/// %nsmid, one `cp.async.bulk.prefetch` of a tile row by each of the first
/// blockRows threads (sm_90 and later: every chip mx targets). A CTA holds
/// 16 KiB in flight only until its tile arrives, and then quantizes; with
/// four CTAs an SM (as when this was measured), too few bytes were in flight
/// to hide DRAM's latency.
/// The prefetch keeps requests in flight without registers or shared
/// memory, and the later CTA's loads hit L2 (docs/gpu.md: 89 -> 85 us on an
/// H100). Rows and columns stay inside the input, as the staged loads do.
static void prefetchLaterTile(OpBuilder &b, Location l,
                              const StagedTiles &tiles, Value input,
                              Value thread, Value block) {
  IndexArith index{b, l};
  const StripGrid &grid = tiles.grid;
  Value smCount = arith::IndexCastOp::create(
      b, l, b.getIndexType(), NVVM::SmDimOp::create(b, l, b.getI32Type()));
  Value later = index.fma(smCount, kStagedPrefetchCTAsPerSM, block);
  Value prefetches =
      andI(b, l, cmpLT(b, l, later, cIndex(b, l, tiles.numBlocks)),
           cmpLT(b, l, thread, cIndex(b, l, tiles.tileType.getDimSize(0))));
  buildIf(b, l, prefetches, [&](OpBuilder &nb, Location nl) {
    IndexArith nindex{nb, nl};
    auto [firstRow, firstCol] = tiles.getOrigin(nb, nl, later);
    Value row = arith::MinUIOp::create(
        nb, nl, arith::AddIOp::create(nb, nl, firstRow, thread),
        cIndex(nb, nl, grid.slices * grid.rows - 1));
    Value columns = arith::MinUIOp::create(
        nb, nl, cIndex(nb, nl, tiles.tileType.getDimSize(1)),
        arith::SubIOp::create(nb, nl, cIndex(nb, nl, grid.cols), firstCol));
    int64_t elementBytes =
        tiles.tileType.getElementType().getIntOrFloatBitWidth() / 8;
    Value offset = nindex.fma(row, grid.cols, firstCol);
    Value address = nindex.fma(
        offset, elementBytes,
        memref::ExtractAlignedPointerAsIndexOp::create(nb, nl, input));
    Value pointer = getGlobalPointer(nb, nl, address);
    Value bytes = arith::IndexCastOp::create(
        nb, nl, nb.getI32Type(),
        arith::MulIOp::create(nb, nl, columns, cIndex(nb, nl, elementBytes)));
    NVVM::CpAsyncBulkPrefetchOp::create(nb, nl, pointer, bytes,
                                        /*l2CacheHint=*/Value());
  });
}

void gpu_kernels::buildStagedKernel(OpBuilder &builder, Location loc,
                                    RankedTensorType inputType, Value input,
                                    const StripOutput &columnwise,
                                    const StripOutput &rowwise) {
  StripGrid grid =
      getStripGrid(inputType, columnwise, &rowwise, kStagedWarpsPerPart);
  Type elementType = inputType.getElementType();
  MemRefType tileType = getStagedTileType(grid, elementType);
  StagedTiles tiles(grid, tileType);
  auto laneType = VectorType::get({kStripCols}, elementType);
  auto body = [&](OpBuilder &b, Location l, const KernelIds &ids) {
    IndexArith index{b, l};
    Value tile = ids.workgroup.front();
    auto [firstRow, firstCol] = tiles.getOrigin(b, l, ids.block);
    stageTile(b, l, grid, input, tile, ids.thread, firstRow, firstCol);
    // After the staging, whose stores to shared memory wait for the tile:
    // issued before it, the prefetches competed with the CTA's own loads
    // (docs/gpu.md).
    prefetchLaterTile(b, l, tiles, input, ids.thread, ids.block);
    auto barrier = gpu::BarrierOp::create(b, l);
    // Five CTAs an SM (48 registers) with 16-bit inputs on sm_90a, where
    // ptxas gives the kernel 63 registers unasked (KernelOccupancy); f32
    // inputs (87) and sm_100a's FP6 `cvt` (54) are left to ptxas.
    if (columnwise.conversion.isEmbedded() &&
        elementType.getIntOrFloatBitWidth() == 16)
      barrier->setAttr("mx.min_ctas_per_sm",
                       b.getI64IntegerAttr(kStagedCTAsPerSM));

    // Warp w of the CTA is warp w % 4 of its part among the grid's warps.
    Value warp = index.div(ids.thread, kWarpSize);
    Value lane = index.rem(ids.thread, kWarpSize);
    Value partWarp = index.rem(warp, kStagedWarpsPerPart);
    Value gridWarp = index.fma(ids.block, kStagedWarpsPerPart, partWarp);
    Value tileRow0 = arith::MulIOp::create(
        b, l, index.div(lane, grid.lanesAcross), cIndex(b, l, kRowsPerLane));
    Value tileCol =
        arith::MulIOp::create(b, l,
                              index.fma(partWarp, grid.lanesAcross,
                                        index.rem(lane, grid.lanesAcross)),
                              cIndex(b, l, kStripCols));
    auto readStaged = [&](OpBuilder &nb, Location nl, const Strip &,
                          int64_t i) {
      Value row = arith::AddIOp::create(nb, nl, tileRow0, cIndex(nb, nl, i));
      return loadVector(nb, nl, laneType, tile, {row, tileCol});
    };
    auto part = [&](auto quantize) {
      return [&, quantize](OpBuilder &nb, Location nl) {
        Strip strip = loadStrip(nb, nl, gridWarp, lane, grid, elementType,
                                readStaged, /*deferExtension=*/true);
        quantize(nb, nl, strip);
        scf::YieldOp::create(nb, nl);
      };
    };
    auto rows = [&](OpBuilder &nb, Location nl) {
      if (!stagesWholeRowBlocks(grid))
        return part([&](OpBuilder &nb, Location nl, const Strip &s) {
          quantizeRows(nb, nl, s, grid, rowwise, nullptr);
        })(nb, nl);
      quantizeTileRows(nb, nl, tiles, tile, ids.block,
                       arith::SubIOp::create(
                           nb, nl, ids.thread,
                           cIndex(nb, nl, kStagedWarpsPerPart * kWarpSize)),
                       rowwise);
      scf::YieldOp::create(nb, nl);
    };
    scf::IfOp::create(b, l,
                      cmpLT(b, l, warp, cIndex(b, l, kStagedWarpsPerPart)),
                      part([&](OpBuilder &nb, Location nl, const Strip &s) {
                        quantizeColumns(nb, nl, s, grid, columnwise);
                      }),
                      rows);
  };
  buildBlockLaunch(builder, loc, tiles.numBlocks, tileType, body);
}
