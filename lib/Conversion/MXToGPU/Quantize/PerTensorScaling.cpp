//===- PerTensorScaling.cpp - Per-tensor amax and scaling kernels ---------===//
//
// The FP8 per-tensor recipes (Transformer Engine's current and delayed
// scaling) and their amax:
//
// * `mx.amax`: one kernel over the flattened tensor. Each CTA reduces its
//   chunks (max |x|, NaN-propagating) to one value: xor-shuffles, then the 8
//   warp maxima through shared memory; one thread raises the result, zeroed
//   by a `gpu.memset` first, by an atomic unsigned max on the f32 bits (see
//   buildAtomicMaxMagnitude: every NaN becomes 0x7FC00000, above +Inf, so a
//   NaN anywhere makes the amax the spec's NaN).
// * current scaling, `mx.quantize` with one block per matrix: that amax per
//   batch slice into a scratch buffer, then a second kernel that reads the
//   input again, derives the slice's scale with the quantize rules of every
//   other kernel (buildBlockScale) and casts; the spec's two reads. The amax
//   kernel's CTAs read contiguous chunks first to last, so the cast (plain,
//   or cast+transpose) visits its tiles last to first where the fusion plan
//   says so (QuantizePlan::reversedTiles): its first reads hit what the amax
//   pass left in L2.
// * `mx.quantize_delayed`: the cast with the given scales[index], reading
//   the input once; the same kernel records the amax in history[0, index]:
//   each CTA but the last few writes its amax to a partial and counts itself
//   in that entry (the entry's sign bit, clear in any amax, marks the count)
//   without waiting for anything; the last CTAs wait for the count and
//   reduce the partials in two levels, the last of them storing the max
//   there (AmaxRecording.h). So the entry needs no zeroing first, and the
//   cast updates the caller's history in place where it may (an
//   `mx.updated` argument, or a buffer of the program's own: one kernel);
//   otherwise a first, tiny kernel copies the history with that entry
//   zeroed.
// * `mx.update_amax_history`, which consumes the amaxes these casts record,
//   is in AmaxHistoryUpdate.cpp.
//
// The flat kernels read their elements in chunks of 16 (16-byte loads, one
// 16-byte FP8 store), so each matrix's (or tensor's) element count must be
// a multiple of 16; each CTA covers 4 passes of 256 consecutive chunks of one
// slice, which keeps 4 loads per thread in flight and one atomic per 16 Ki
// elements.
//
// A `transposed` cast (either op) runs the cast+transpose kernel instead,
// which also writes the plain cast of the same input and scale when the IR
// has one (Transformer Engine's cast+transpose: the input is read once).
// Each CTA casts 64 x 64 tiles side by side (one for current scaling, two
// for delayed: getCastTilesPerCTA): a thread converts 16 elements of one
// row of each (16-byte load and store of the plain data), stages the codes
// in shared memory, and after one barrier writes 16 codes of one column of
// each tile as one 16-byte row chunk of the transposed data. The staged rows
// are chunk-swizzled (chunk c of row r at chunk c ^ (r / 16)) so that the
// column reads of a warp fall in distinct banks. Rows and columns of every
// matrix must be multiples of 16.
//
// `mx.column_sum` (a linear layer's bias gradient) sums the columns of the
// same 64 x 64 tiles into f32 partials, one row per tile row, then adds the
// partials (ColumnSums.h). Where a transposed per-tensor cast of the same
// input has a cast+transpose kernel, that kernel computes the tiles' sums
// from the values it already holds (Transformer Engine's fused dbias: the
// input is read once for the casts and the sum); otherwise a kernel of its
// own reads the tiles.
//
//===----------------------------------------------------------------------===//

#include "AmaxRecording.h"
#include "ColumnSums.h"
#include "ElementConversion.h"
#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/ExportSignatures.h"
#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

constexpr int64_t kPasses = 4;

/// The flat kernels' work: `slices` slices of `elements` consecutive
/// elements (a multiple of 16), each covered by `blocksPerSlice` CTAs.
struct FlatGrid {
  int64_t slices, elements, blocksPerSlice;

  FlatGrid(int64_t slices, int64_t elements)
      : slices(slices), elements(elements),
        blocksPerSlice(llvm::divideCeil(elements / kElementsPerLane,
                                        kPasses * kThreadsPerBlock)) {}
  int64_t getNumBlocks() const { return slices * blocksPerSlice; }
};

/// One thread's chunks: its slice, whether it is the first thread of the
/// slice (the one that writes per-slice results), and per pass the chunk's
/// first element in the folded buffer, whether it exists, and its values.
struct FlatChunks {
  Value slice, sliceLeader;
  SmallVector<Value> offset, valid, values;
};

/// Loads a thread's chunks, clamped in bounds: every thread must reach the
/// barrier of buildCTAMax.
FlatChunks loadChunks(OpBuilder &b, Location l, const KernelIds &ids,
                      const FlatGrid &grid, Value input) {
  auto type = cast<MemRefType>(input.getType());
  auto laneType = VectorType::get({kElementsPerLane}, type.getElementType());
  FlatChunks chunks;
  chunks.slice = arith::DivUIOp::create(b, l, ids.block,
                                        cIndex(b, l, grid.blocksPerSlice));
  Value blockInSlice = arith::RemUIOp::create(
      b, l, ids.block, cIndex(b, l, grid.blocksPerSlice));
  chunks.sliceLeader = andI(b, l, isZeroIndex(b, l, blockInSlice),
                            isZeroIndex(b, l, ids.thread));
  Value sliceStart =
      arith::MulIOp::create(b, l, chunks.slice, cIndex(b, l, grid.elements));
  Value firstChunk = arith::AddIOp::create(
      b, l,
      arith::MulIOp::create(b, l, blockInSlice,
                            cIndex(b, l, kPasses * kThreadsPerBlock)),
      ids.thread);
  int64_t chunksPerSlice = grid.elements / kElementsPerLane;
  for (int64_t p = 0; p < kPasses; ++p) {
    Value chunk = arith::AddIOp::create(b, l, firstChunk,
                                        cIndex(b, l, p * kThreadsPerBlock));
    chunks.valid.push_back(cmpLT(b, l, chunk, cIndex(b, l, chunksPerSlice)));
    Value clamped =
        arith::MinUIOp::create(b, l, chunk, cIndex(b, l, chunksPerSlice - 1));
    auto offset = [&](Value c) {
      return arith::AddIOp::create(
          b, l, sliceStart,
          arith::MulIOp::create(b, l, c, cIndex(b, l, kElementsPerLane)));
    };
    chunks.offset.push_back(offset(chunk));
    chunks.values.push_back(extendToF32(
        b, l, loadVector(b, l, laneType, input, {offset(clamped)})));
  }
  return chunks;
}

/// The max |x| of the CTA's chunks (clamped duplicates do not change it),
/// over the finite elements only if `finite`.
Value reduceChunks(OpBuilder &b, Location l, const FlatChunks &chunks,
                   const KernelIds &ids, bool finite = false) {
  Value amax;
  for (Value values : chunks.values) {
    Value magnitudes = magnitude(b, l, values);
    if (finite) {
      auto constant = [&](float v) {
        return splat(b, l, magnitudes, b.getF32FloatAttr(v));
      };
      Value isFinite = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT,
                                             magnitudes, constant(INFINITY));
      magnitudes =
          arith::SelectOp::create(b, l, isFinite, magnitudes, constant(0.0f));
    }
    Value chunkMax = vector::ReductionOp::create(
        b, l, vector::CombiningKind::MAXIMUMF, magnitudes);
    amax = amax ? arith::MaximumFOp::create(b, l, amax, chunkMax) : chunkMax;
  }
  return buildCTAMax(b, l, amax, ids.thread, ids.workgroup.front());
}

/// Kernel: the amax of every slice of `input` (folded to 1-D), of its
/// finite elements if `finite`, into `amaxes[slice]`, which must hold +0.0.
void buildAmaxKernel(OpBuilder &b, Location loc, Value input,
                     const FlatGrid &grid, Value amaxes, bool finite = false) {
  buildBlockLaunch(
      b, loc, grid.getNumBlocks(), getCTAMaxBufferType(b.getContext()),
      [&](OpBuilder &nb, Location l, const KernelIds &ids) {
        FlatChunks chunks = loadChunks(nb, l, ids, grid, input);
        Value amax = reduceChunks(nb, l, chunks, ids, finite);
        auto rank = cast<MemRefType>(amaxes.getType()).getRank();
        buildIf(nb, l, isZeroIndex(nb, l, ids.thread),
                [&](OpBuilder &ib, Location il) {
                  buildAtomicMaxMagnitude(ib, il, amax, amaxes,
                                          rank ? ValueRange{chunks.slice}
                                               : ValueRange{});
                });
      });
}

/// `ids` with the CTAs counted from the last of `numBlocks` when `reversed`
/// (QuantizePlan::reversedTiles): the CTAs that start first take the tiles
/// at the end of the input, which its amax pass read last.
KernelIds inTileOrder(OpBuilder &b, Location l, const KernelIds &ids,
                      int64_t numBlocks, bool reversed) {
  if (!reversed)
    return ids;
  KernelIds ordered = ids;
  ordered.block =
      arith::SubIOp::create(b, l, cIndex(b, l, numBlocks - 1), ids.block);
  ordered.global = IndexArith{b, l}.fma(ordered.block, kThreadsPerBlock,
                                        ids.thread);
  return ordered;
}

/// Stores the FP8 codes of every existing chunk.
void storeChunks(OpBuilder &b, Location l, const FlatChunks &chunks,
                 ArrayRef<Value> codes, const DataBuffer &data) {
  for (auto [valid, value, offset] :
       llvm::zip_equal(chunks.valid, codes, chunks.offset))
    data.store(b, l, valid, value, {offset});
}

/// The element count of `type`, if the flat kernels can read it in chunks.
bool isChunked(int64_t elements) { return elements % kElementsPerLane == 0; }

/// Whether the cast+transpose kernel covers matrices of `type` (batch
/// dimensions first): 16-element chunks along both dimensions.
bool isTileable(RankedTensorType type) {
  ArrayRef<int64_t> matrix = type.getShape().take_back(2);
  return matrix[0] % kElementsPerLane == 0 && matrix[1] % kElementsPerLane == 0;
}

/// The cast+transpose kernel's tile, and the chunks of a tile row.
constexpr int64_t kTile = 64;
constexpr int64_t kChunksPerTileRow = kTile / kElementsPerLane;
static_assert(kTile * kChunksPerTileRow == kThreadsPerBlock,
              "one chunk of the tile per thread");
static_assert(kTile == kColumnSumTile,
              "a fused column sum sums the cast+transpose kernel's tiles");

/// The cast+transpose kernel's work: `slices` matrices of `rows` x `cols`,
/// one CTA per `tilesPerCTA` 64 x 64 tiles side by side along a tile row
/// (the column sum's kernel: one tile a CTA).
struct TileGrid {
  int64_t slices, rows, cols, tilesPerCTA;

  TileGrid(RankedTensorType input, int64_t tilesPerCTA)
      : slices(getNumSlices(input, 2)), rows(input.getShape().end()[-2]),
        cols(input.getShape().back()), tilesPerCTA(tilesPerCTA) {}
  int64_t getCTACols() const {
    return llvm::divideCeil(cols, kTile * tilesPerCTA);
  }
  int64_t getCTAsPerSlice() const {
    return llvm::divideCeil(rows, kTile) * getCTACols();
  }
  int64_t getNumBlocks() const { return slices * getCTAsPerSlice(); }
};

/// Tiles a cast+transpose CTA casts: two for delayed scaling, one for
/// current scaling. A delayed cast's CTA ends with its CTA max and the amax
/// recording; with one tile a CTA those short-lived CTAs left DRAM idle
/// between their phases (an H200: 75% of a copy at 8192^2, an H100: 89%).
/// Two tiles a CTA issue both loads before the first cast and share the
/// barrier, the CTA max and the recording: 86% and 92% (four: 88% and 91%,
/// docs/gpu.md). Current scaling's cast has neither the CTA max nor the
/// recording and reads part of its input from L2 after the amax pass; two
/// tiles only raised its registers (40 -> 55) and its time on the H100.
int64_t getCastTilesPerCTA(bool recordsAmax) { return recordsAmax ? 2 : 1; }

/// The cast+transpose kernel's grid for `input`, a delayed cast's if
/// `recordsAmax`.
TileGrid getCastTransposeGrid(RankedTensorType input, bool recordsAmax) {
  return TileGrid(input, getCastTilesPerCTA(recordsAmax));
}

/// The staging buffer of the codes of a CTA's tiles (workgroup memory),
/// tile j at rows 64 j.
MemRefType getTileBufferType(MLIRContext *context, int64_t tiles) {
  return MemRefType::get(
      {tiles * kTile, kTile}, IntegerType::get(context, 8),
      MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
}

/// The codes of a thread's chunk from its f32 values and its slice.
using ChunkCast = llvm::function_ref<Value(OpBuilder &, Location, Value slice,
                                           Value values)>;

/// A thread's chunk of the 64 x 64 tile `j` of its CTA (thread t: chunk
/// t % 4 of tile row t / 4): the tile's slice, origin, the chunk's position,
/// whether it lies in the matrix, and its f32 values (loaded clamped in
/// bounds, so that every thread reaches the barriers).
struct TileThread {
  Value slice, cta, tileRow, tileCol, r, c, row, col, valid, values;
};

TileThread loadTileChunk(OpBuilder &b, Location l, const KernelIds &ids,
                         const TileGrid &grid, Value input, int64_t j = 0) {
  IndexArith ia{b, l};
  TileThread t;
  t.slice = ia.div(ids.block, grid.getCTAsPerSlice());
  t.cta = ia.rem(ids.block, grid.getCTAsPerSlice());
  t.tileRow = ia.div(t.cta, grid.getCTACols());
  t.tileCol = ia.fma(ia.rem(t.cta, grid.getCTACols()), grid.tilesPerCTA * kTile,
                     cIndex(b, l, j * kTile));
  t.r = ia.div(ids.thread, kChunksPerTileRow);
  t.c = ia.rem(ids.thread, kChunksPerTileRow);
  t.row = ia.fma(t.tileRow, kTile, t.r);
  t.col = ia.fma(t.c, kElementsPerLane, t.tileCol);
  t.valid = andI(b, l, cmpLT(b, l, t.row, cIndex(b, l, grid.rows)),
                 cmpLT(b, l, t.col, cIndex(b, l, grid.cols)));
  auto clamp = [&](Value x, int64_t last) {
    return arith::MinUIOp::create(b, l, x, cIndex(b, l, last)).getResult();
  };
  auto type = cast<MemRefType>(input.getType());
  auto laneType = VectorType::get({kElementsPerLane}, type.getElementType());
  t.values = extendToF32(
      b, l,
      loadVector(b, l, laneType, input,
                 {ia.fma(t.slice, grid.rows, clamp(t.row, grid.rows - 1)),
                  clamp(t.col, grid.cols - kElementsPerLane)}));
  return t;
}

/// A thread's chunks of the cast+transpose kernel: their slice, and the f32
/// values of each (clamped in bounds, so the amax may take them all).
struct TileChunks {
  Value slice, sliceLeader;
  SmallVector<Value> values;
};

/// Thread t's part of the transposed write of tile `j` (staged at rows 64 j
/// of `staging`): rows 16 (t % 4) .. + 16 of tile column t / 4, one chunk
/// of a transposed row.
void storeTransposedChunk(OpBuilder &b, Location l, const KernelIds &ids,
                          const TileGrid &grid, const TileThread &t,
                          Value staging, int64_t j, VectorType codesType,
                          const DataBuffer &transposed) {
  IndexArith ia{b, l};
  Value column = ia.div(ids.thread, kChunksPerTileRow);
  Value group = ia.rem(ids.thread, kChunksPerTileRow);
  Value swizzledChunk =
      arith::XOrIOp::create(b, l, ia.div(column, kElementsPerLane), group);
  Value readAt = ia.fma(swizzledChunk, kElementsPerLane,
                        ia.rem(column, kElementsPerLane));
  SmallVector<Value> bytes;
  for (int64_t i = 0; i < kElementsPerLane; ++i)
    bytes.push_back(memref::LoadOp::create(
        b, l, staging,
        ValueRange{ia.fma(group, kElementsPerLane, cIndex(b, l, j * kTile + i)),
                   readAt}));
  Value columnCodes = vector::FromElementsOp::create(b, l, codesType, bytes);
  Value tRow = arith::AddIOp::create(b, l, t.tileCol, column);
  Value tCol = ia.fma(
      t.tileRow, kTile,
      arith::MulIOp::create(b, l, group, cIndex(b, l, kElementsPerLane)));
  Value tValid = andI(b, l, cmpLT(b, l, tRow, cIndex(b, l, grid.cols)),
                      cmpLT(b, l, tCol, cIndex(b, l, grid.rows)));
  transposed.store(b, l, tValid, columnCodes,
                   {ia.fma(t.slice, grid.cols, tRow), tCol});
}

/// The body of the cast+transpose kernel (workgroup buffers: the tiles'
/// staging buffer, then buildCTAMax's): casts this thread's chunk of each
/// of the CTA's tiles with `castChunk`, stores it into `plain` (if any), and
/// writes the tiles' columns into `transposed`, folded to
/// [slices * cols, rows]. Every load is issued before the first cast. With
/// `partials` (a fused mx.column_sum, of one slice) the tiles' column sums
/// go there too, tile j's staged in `sumStaging[j]`
/// (getColumnSumBufferType).
TileChunks buildTileCast(OpBuilder &b, Location l, const KernelIds &ids,
                         const TileGrid &grid, Value input,
                         const DataBuffer *plain, const DataBuffer &transposed,
                         ChunkCast castChunk, Value partials = Value(),
                         ValueRange sumStaging = {}) {
  IndexArith ia{b, l};
  SmallVector<TileThread> tiles;
  for (int64_t j = 0; j < grid.tilesPerCTA; ++j)
    tiles.push_back(loadTileChunk(b, l, ids, grid, input, j));
  Value staging = ids.workgroup.front();
  SmallVector<ColumnPartials> sums;
  VectorType codesType;
  for (auto [j, t] : llvm::enumerate(tiles)) {
    // The column sums first: their temporaries are dead before the cast's
    // (ptxas, sm_90a, bf16: 40 registers for current scaling, not 55).
    if (partials) {
      sums.push_back({partials, sumStaging[j], t.tileRow, t.tileCol});
      stageColumnSums(b, l, ids.thread, t.values, t.valid, sums.back());
    }
    Value codes = castChunk(b, l, t.slice, t.values);
    codesType = cast<VectorType>(codes.getType());
    if (plain)
      plain->store(b, l, t.valid, codes,
                   {ia.fma(t.slice, grid.rows, t.row), t.col});
    // Stage the codes, chunk-swizzled by the row's group of 16.
    Value staged =
        arith::XOrIOp::create(b, l, t.c, ia.div(t.r, kElementsPerLane));
    storeVector(
        b, l, codes, staging,
        {ia.fma(cIndex(b, l, j), kTile, t.r),
         arith::MulIOp::create(b, l, staged, cIndex(b, l, kElementsPerLane))});
  }
  gpu::BarrierOp::create(b, l);
  for (auto [j, t] : llvm::enumerate(tiles)) {
    if (partials)
      storeColumnSums(b, l, ids.thread, grid.cols, sums[j]);
    storeTransposedChunk(b, l, ids, grid, t, staging, j, codesType, transposed);
  }
  TileChunks chunks{tiles.front().slice,
                    andI(b, l, isZeroIndex(b, l, tiles.front().cta),
                         isZeroIndex(b, l, ids.thread)),
                    {}};
  for (const TileThread &t : tiles)
    chunks.values.push_back(t.values);
  return chunks;
}

/// The max |x| of the CTA's tile chunks (every thread must call it).
Value reduceTile(OpBuilder &b, Location l, const TileChunks &chunks,
                 const KernelIds &ids) {
  Value amax;
  for (Value values : chunks.values) {
    Value chunkMax = vector::ReductionOp::create(
        b, l, vector::CombiningKind::MAXIMUMF, magnitude(b, l, values));
    amax = amax ? arith::MaximumFOp::create(b, l, amax, chunkMax) : chunkMax;
  }
  return buildCTAMax(b, l, amax, ids.thread, ids.workgroup[1]);
}

/// The transposed cast that the cast+transpose kernel computes together with
/// `op` (a plain cast): the only user of `op`'s new history, casting the same
/// input to the same type with the same scale, in the same block.
QuantizeDelayedOp getTransposedPartner(QuantizeDelayedOp op) {
  if (op.getTransposed() || !op.getNewHistory().hasOneUse() ||
      !isTileable(op.getInput().getType()))
    return {};
  auto partner =
      dyn_cast<QuantizeDelayedOp>(*op.getNewHistory().getUsers().begin());
  if (!partner || !partner.getTransposed() ||
      partner.getHistory() != op.getNewHistory() ||
      partner.getInput() != op.getInput() ||
      partner.getScales() != op.getScales() ||
      partner.getIndex() != op.getIndex() ||
      partner.getData().getType().getElementType() !=
          op.getData().getType().getElementType() ||
      partner->getBlock() != op->getBlock())
    return {};
  return partner;
}

/// The CTAs of the kernel that computes `op`: the cast+transpose kernel's
/// for a transposed cast or one with a transposed partner, else the flat
/// kernel's.
int64_t getDelayedNumBlocks(QuantizeDelayedOp op) {
  RankedTensorType type = op.getInput().getType();
  return op.getTransposed() || getTransposedPartner(op)
             ? getCastTransposeGrid(type, /*recordsAmax=*/true).getNumBlocks()
             : FlatGrid(1, type.getNumElements()).getNumBlocks();
}

/// Where the cast+transpose kernel of `op`, a transposed cast, is built:
/// before the plain cast it computes too (the earlier of the two), or
/// before `op`; null where no cast+transpose kernel computes `op`.
Operation *getCastTransposeStart(Operation *op,
                                 const QuantizeFusionPlan &plan) {
  if (auto quantize = dyn_cast<QuantizeOp>(op)) {
    const QuantizePlan *planned = plan.lookup(quantize);
    if (!planned || planned->kernel != QuantizeKernel::perTensor ||
        !quantize.getTransposed())
      return nullptr;
    QuantizeOp plain = planned->sibling;
    return plain && plain->isBeforeInBlock(op) ? plain : op;
  }
  auto delayed = dyn_cast<QuantizeDelayedOp>(op);
  if (!delayed || !delayed.getTransposed() ||
      !isTileable(delayed.getInput().getType()))
    return nullptr;
  auto producer = delayed.getHistory().getDefiningOp<QuantizeDelayedOp>();
  return producer && getTransposedPartner(producer) == delayed
             ? producer.getOperation()
             : op;
}

/// Where the kernel that computes `op` is built, if that kernel can also
/// compute the tile sums of a column sum of `op`'s input: a cast+transpose
/// kernel, or a strip kernel of FP8 blockwise (getStripColumnSumStart).
Operation *getColumnSumKernelStart(Operation *op,
                                   const QuantizeFusionPlan &plan) {
  if (Operation *start = getCastTransposeStart(op, plan))
    return start;
  auto quantize = dyn_cast<QuantizeOp>(op);
  return quantize ? getStripColumnSumStart(quantize, plan) : nullptr;
}

} // namespace

Operation *gpu_kernels::getColumnSumHost(ColumnSumOp op,
                                         const QuantizeFusionPlan &plan) {
  if (!isTileable(op.getInput().getType()))
    return nullptr;
  Block *block = op->getBlock();
  Operation *host = nullptr, *start = nullptr;
  for (Operation *user : op.getInput().getUsers()) {
    if (user->getBlock() != block)
      continue;
    if (isa<ColumnSumOp>(user) && user->isBeforeInBlock(op))
      return nullptr;
    Operation *kernelStart = getColumnSumKernelStart(user, plan);
    if (kernelStart && (!start || kernelStart->isBeforeInBlock(start))) {
      host = user;
      start = kernelStart;
    }
  }
  if (!host)
    return nullptr;
  for (Operation *user : op->getUsers()) {
    Operation *ancestor = block->findAncestorOpInBlock(*user);
    if (!ancestor || !start->isBeforeInBlock(ancestor))
      return nullptr;
  }
  return host;
}

ColumnSumOp gpu_kernels::getFusedColumnSum(Operation *host, Value input,
                                           const QuantizeFusionPlan &plan) {
  for (Operation *user : input.getUsers())
    if (auto sum = dyn_cast<ColumnSumOp>(user))
      if (getColumnSumHost(sum, plan) == host)
        return sum;
  return {};
}

namespace {

/// A fused column sum's buffers: the partials that the cast+transpose
/// kernel writes, and its result, which the partials kernel writes after it.
struct FusedColumnSum {
  ColumnSumOp op;
  Value partials;

  FusedColumnSum(OpBuilder &b, Location loc, ColumnSumOp op) : op(op) {
    if (op) {
      RankedTensorType type = op.getInput().getType();
      partials = allocColumnPartials(b, loc, type.getDimSize(0),
                                     type.getDimSize(1));
    }
  }

  /// The workgroup buffers of a cast+transpose kernel of `grid`: its tiles'
  /// staging buffer, `others`, then the column sums' of each tile.
  SmallVector<Type> getBuffers(MLIRContext *context, const TileGrid &grid,
                               ArrayRef<Type> others = {}) const {
    SmallVector<Type> types{getTileBufferType(context, grid.tilesPerCTA)};
    llvm::append_range(types, others);
    if (op)
      types.append(grid.tilesPerCTA, getColumnSumBufferType(context));
    return types;
  }

  /// The column sums' workgroup buffers in the kernel, one a tile (the
  /// last), if any.
  ValueRange getStaging(const KernelIds &ids, const TileGrid &grid) const {
    return op ? ValueRange(ids.workgroup).take_back(grid.tilesPerCTA)
              : ValueRange();
  }

  /// After the cast+transpose kernel: the partials kernel, whose result
  /// replaces the column sum.
  void finish(PatternRewriter &rewriter, Location loc) const {
    if (op)
      replaceWithPartialsSum(rewriter, loc, op, partials);
  }
};

struct AmaxToGPU : OpRewritePattern<AmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AmaxOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType inputType = op.getInput().getType();
    if (!isChunked(inputType.getNumElements()))
      return rewriter.notifyMatchFailure(op, "element count not chunked");
    Location loc = op.getLoc();
    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 1);
    Value result = allocDevice(rewriter, loc, op.getType());
    // +0.0 and buildAtomicMaxMagnitude's bits: magnitudes for a collective.
    result.getDefiningOp()->setAttr(kMagnitudeBitsAttr, rewriter.getUnitAttr());
    gpu::MemsetOp::create(rewriter, loc, Type(), ValueRange(), result,
                          zeroF32(rewriter, loc));
    buildAmaxKernel(rewriter, loc, input,
                    FlatGrid(1, inputType.getNumElements()), result,
                    op.getFinite());
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }
};

/// A column sum that no cast+transpose kernel computes (getColumnSumHost):
/// a kernel of the cast+transpose kernel's tiles that only sums their
/// columns into the partials (any rows, columns a multiple of 16), then the
/// partials kernel. The sums are those of the fused kernel, bit for bit.
struct ColumnSumToGPU : OpRewritePattern<ColumnSumOp> {
  ColumnSumToGPU(MLIRContext *context, const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), plan(plan) {}

  LogicalResult matchAndRewrite(ColumnSumOp op,
                                PatternRewriter &rewriter) const override {
    if (getColumnSumHost(op, plan))
      return rewriter.notifyMatchFailure(op, "summed by a cast+transpose");
    RankedTensorType inputType = op.getInput().getType();
    if (inputType.getDimSize(1) % kElementsPerLane)
      return rewriter.notifyMatchFailure(op, "columns not in chunks of 16");
    Location loc = op.getLoc();
    Value input = toBuffer(rewriter, loc, op.getInput());
    TileGrid tiles(inputType, /*tilesPerCTA=*/1);
    Value partials = allocColumnPartials(rewriter, loc, tiles.rows, tiles.cols);
    buildBlockLaunch(
        rewriter, loc, tiles.getNumBlocks(),
        getColumnSumBufferType(getContext()),
        [&](OpBuilder &b, Location l, const KernelIds &ids) {
          TileThread t = loadTileChunk(b, l, ids, tiles, input);
          ColumnPartials sums{partials, ids.workgroup.front(), t.tileRow,
                              t.tileCol};
          stageColumnSums(b, l, ids.thread, t.values, t.valid, sums);
          gpu::BarrierOp::create(b, l);
          storeColumnSums(b, l, ids.thread, tiles.cols, sums);
        });
    replaceWithPartialsSum(rewriter, loc, op, partials);
    return success();
  }

private:
  const QuantizeFusionPlan &plan;
};

/// Current scaling: the amax of every matrix, then the cast; a transposed
/// cast (with its plain sibling, if planned) by the cast+transpose kernel.
/// Either cast visits its CTAs in the plan's order (reversedTiles).
struct PerTensorQuantizeToGPU : PlannedQuantizePattern {
  PerTensorQuantizeToGPU(MLIRContext *context, Chip chip,
                         const QuantizeFusionPlan &plan)
      : PlannedQuantizePattern(context, plan, QuantizeKernel::perTensor, chip) {
  }

  LogicalResult rewritePlanned(QuantizeOp op, const QuantizePlan &planned,
                               PatternRewriter &rewriter) const override {
    QuantizeOp plain = planned.sibling;
    if (!op.getTransposed() && plain)
      return rewriter.notifyMatchFailure(op, "cast by its transposed sibling");
    // Build before the earlier op so that the results dominate both users.
    if (Operation *start = getCastTransposeStart(op, plan))
      rewriter.setInsertionPoint(start);
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    int64_t slices = getNumSlices(inputType, 2);
    FlatGrid grid(slices, inputType.getNumElements() / slices);
    Value amaxes = buildSliceAmaxes(rewriter, op, grid);
    ElementConversion conversion = getConversion(op);
    ScaleRounding rounding = op.getRounding();
    Type scaleType = op.getScales().getType().getElementType();
    auto scaleOf = [&](OpBuilder &b, Location l, Value slice) {
      Value amax = memref::LoadOp::create(b, l, amaxes, slice);
      return buildBlockScale(b, l, amax, rounding, conversion, scaleType);
    };

    // Each output: its op, data and folded scales.
    struct Output {
      QuantizeOp op;
      DataBuffer data;
      Value scales;
    };
    SmallVector<Output, 2> outputs;
    for (QuantizeOp q : {op, plain})
      if (q)
        outputs.push_back(
            {q, DataBuffer(rewriter, loc, q.getData().getType(),
                           op.getTransposed() ? 2 : 1),
             allocFolded(rewriter, loc, q.getScales().getType(), 1)});
    auto storeScale = [&](OpBuilder &b, Location l, Value leader,
                          Value stored, Value slice) {
      buildIf(b, l, leader, [&](OpBuilder &nb, Location nl) {
        for (Output &out : outputs)
          memref::StoreOp::create(nb, nl, stored, out.scales, slice);
      });
    };

    if (!op.getTransposed()) {
      Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 1);
      buildBlockLaunch(
          rewriter, loc, grid.getNumBlocks(), TypeRange(),
          [&](OpBuilder &b, Location l, const KernelIds &launchIds) {
            KernelIds ids = inTileOrder(b, l, launchIds, grid.getNumBlocks(),
                                        planned.reversedTiles);
            FlatChunks chunks = loadChunks(b, l, ids, grid, input);
            BlockScale scale = scaleOf(b, l, chunks.slice);
            SmallVector<Value> bytes =
                llvm::map_to_vector(chunks.values, [&](Value v) {
                  return quantizeVector(b, l, v, scale, rounding, conversion);
                });
            storeChunks(b, l, chunks, bytes, outputs.front().data);
            storeScale(b, l, chunks.sliceLeader, scale.stored, chunks.slice);
          });
    } else {
      Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 2);
      TileGrid tiles = getCastTransposeGrid(inputType, /*recordsAmax=*/false);
      const DataBuffer *plainData = plain ? &outputs.back().data : nullptr;
      FusedColumnSum sum(rewriter, loc,
                         getFusedColumnSum(op, op.getInput(), plan));
      buildBlockLaunch(
          rewriter, loc, tiles.getNumBlocks(),
          sum.getBuffers(getContext(), tiles),
          [&](OpBuilder &b, Location l, const KernelIds &launchIds) {
            KernelIds ids = inTileOrder(b, l, launchIds, tiles.getNumBlocks(),
                                        planned.reversedTiles);
            // One scale for the CTA: every tile is of the same slice.
            std::optional<BlockScale> scale;
            TileChunks chunks = buildTileCast(
                b, l, ids, tiles, input, plainData, outputs.front().data,
                [&](OpBuilder &nb, Location nl, Value slice, Value values) {
                  if (!scale)
                    scale = scaleOf(nb, nl, slice);
                  return quantizeVector(nb, nl, values, *scale, rounding,
                                        conversion);
                },
                sum.partials, sum.getStaging(ids, tiles));
            storeScale(b, l, chunks.sliceLeader, scale->stored, chunks.slice);
          });
      sum.finish(rewriter, loc);
    }
    if (!op.getAmax())
      gpu::DeallocOp::create(rewriter, loc, Type(), ValueRange(), amaxes);

    for (Output &out : outputs)
      rewriter.replaceOp(
          out.op, {out.data.toTensor(rewriter, loc),
                   toUnfoldedTensor(rewriter, loc, out.scales,
                                    out.op.getScales().getType())});
    return success();
  }

private:
  /// The amax of every matrix of `op`'s input ([slices] f32): the given
  /// amax (of the whole tensor this input is a shard of; the verifier allows
  /// it for one slice only), or a fresh buffer that an amax kernel fills.
  Value buildSliceAmaxes(PatternRewriter &rewriter, QuantizeOp op,
                         const FlatGrid &grid) const {
    Location loc = op.getLoc();
    auto amaxType = MemRefType::get({grid.slices}, rewriter.getF32Type());
    if (op.getAmax())
      return memref::ExpandShapeOp::create(
          rewriter, loc, amaxType, toBuffer(rewriter, loc, op.getAmax()),
          ArrayRef<ReassociationIndices>{});
    Value amaxes = gpu::AllocOp::create(rewriter, loc, amaxType, Type(),
                                        ValueRange(), ValueRange(), ValueRange())
                       .getMemref();
    gpu::MemsetOp::create(rewriter, loc, Type(), ValueRange(), amaxes,
                          zeroF32(rewriter, loc));
    buildAmaxKernel(rewriter, loc,
                    toFoldedBuffer(rewriter, loc, op.getInput(), 1), grid,
                    amaxes);
    return amaxes;
  }
};

/// Kernel: `history` into `newHistory` with [0, index] zeroed, for a cast
/// that cannot record its amax in the history's own buffer
/// (canUpdateInPlace): the count of buildRecordAmax then starts from an amax
/// whatever the caller's entry held.
void buildHistoryCopy(OpBuilder &b, Location loc, Value history,
                      Value newHistory, int64_t index) {
  auto type = cast<MemRefType>(history.getType());
  int64_t count = type.getNumElements(), columns = type.getDimSize(1);
  buildLaunch(b, loc, count, [&](OpBuilder &nb, Location l, Value thread) {
    buildIf(
        nb, l, cmpLT(nb, l, thread, cIndex(nb, l, count)),
        [&](OpBuilder &ib, Location il) {
          Value row =
              arith::DivUIOp::create(ib, il, thread, cIndex(ib, il, columns));
          Value col =
              arith::RemUIOp::create(ib, il, thread, cIndex(ib, il, columns));
          Value recorded = arith::CmpIOp::create(
              ib, il, arith::CmpIPredicate::eq, thread, cIndex(ib, il, index));
          Value value = arith::SelectOp::create(
              ib, il, recorded, zeroF32(ib, il),
              memref::LoadOp::create(ib, il, history, ValueRange{row, col}));
          memref::StoreOp::create(ib, il, value, newHistory,
                                  ValueRange{row, col});
        });
  });
}

/// Whether a cast may record its amax in the buffer of `history` itself: its
/// only user, and either a buffer of the function's own (an op's result) or
/// an argument that the source marks `mx.updated`, whose caller then finds
/// it updated (mx-drop-in-place-results). Otherwise the cast writes a copy.
bool canUpdateInPlace(Value history) {
  if (!history.hasOneUse() || matchPattern(history, m_Constant()))
    return false;
  auto argument = dyn_cast<BlockArgument>(history);
  if (!argument)
    return true;
  auto func = dyn_cast<FunctionOpInterface>(argument.getOwner()->getParentOp());
  return func && func.getArgAttr(argument.getArgNumber(), kUpdatedAttrName);
}

/// What every kernel of one delayed cast shares: the scale it reads, the
/// inverse it writes and the history its amax is recorded in.
struct DelayedCast {
  /// The cast's entry in the scales and the history (its `index`).
  int64_t index;
  ElementConversion conversion;
  AmaxRecordPlan recordPlan;
  Value scales, scaleInv, newHistory, partials;

  /// The scale of the cast, loaded in a kernel.
  Value loadScale(OpBuilder &b, Location l) const {
    return memref::LoadOp::create(b, l, scales, cIndex(b, l, index))
        .getResult();
  }

  /// What every CTA ends with: the scale's inverse from the first thread,
  /// and its amax recorded in the new history (`buffer`: the CTA's max
  /// buffer).
  void finish(OpBuilder &b, Location l, const KernelIds &ids, Value amax,
              Value leader, Value scale, Value buffer) const {
    buildIf(b, l, leader, [&](OpBuilder &nb, Location nl) {
      memref::StoreOp::create(nb, nl, buildDelayedScaleInverse(nb, nl, scale),
                              scaleInv, cIndex(nb, nl, 0));
    });
    buildRecordAmax(b, l, ids, amax, partials, newHistory, index, recordPlan,
                    buffer);
  }
};

/// The flat kernel of a plain delayed cast of `inputTensor` without a
/// transposed partner.
void buildFlatDelayedCast(OpBuilder &rewriter, Location loc,
                          const DelayedCast &delayed, Value inputTensor,
                          const DataBuffer &data) {
  Value input = toFoldedBuffer(rewriter, loc, inputTensor, 1);
  FlatGrid grid(1,
                cast<RankedTensorType>(inputTensor.getType()).getNumElements());
  buildBlockLaunch(
      rewriter, loc, grid.getNumBlocks(),
      getCTAMaxBufferType(rewriter.getContext()),
      [&](OpBuilder &b, Location l, const KernelIds &ids) {
        FlatChunks chunks = loadChunks(b, l, ids, grid, input);
        Value scale = delayed.loadScale(b, l);
        SmallVector<Value> bytes =
            llvm::map_to_vector(chunks.values, [&](Value values) {
              return castWithScale(b, l, values, scale, delayed.conversion);
            });
        storeChunks(b, l, chunks, bytes, data);
        delayed.finish(b, l, ids, reduceChunks(b, l, chunks, ids),
                       chunks.sliceLeader, scale, ids.workgroup.front());
      });
}

/// The cast+transpose kernel of a transposed delayed cast of `inputTensor`:
/// `transposed` the data of `transposedOp`, `plain` its plain partner's (or
/// null), with the column sum that `plan` fuses into it.
void buildTransposedDelayedCast(PatternRewriter &rewriter, Location loc,
                                const DelayedCast &delayed, Value inputTensor,
                                QuantizeDelayedOp transposedOp,
                                const DataBuffer &transposed,
                                const DataBuffer *plain,
                                const QuantizeFusionPlan &plan) {
  MLIRContext *context = rewriter.getContext();
  Value input = toFoldedBuffer(rewriter, loc, inputTensor, 2);
  TileGrid tiles = getCastTransposeGrid(
      cast<RankedTensorType>(inputTensor.getType()), /*recordsAmax=*/true);
  FusedColumnSum sum(rewriter, loc,
                     getFusedColumnSum(transposedOp, inputTensor, plan));
  buildBlockLaunch(
      rewriter, loc, tiles.getNumBlocks(),
      sum.getBuffers(context, tiles, {getCTAMaxBufferType(context)}),
      [&](OpBuilder &b, Location l, const KernelIds &ids) {
        Value scale = delayed.loadScale(b, l);
        TileChunks chunks = buildTileCast(
            b, l, ids, tiles, input, plain, transposed,
            [&](OpBuilder &nb, Location nl, Value, Value values) {
              return castWithScale(nb, nl, values, scale, delayed.conversion);
            },
            sum.partials, sum.getStaging(ids, tiles));
        delayed.finish(b, l, ids, reduceTile(b, l, chunks, ids),
                       chunks.sliceLeader, scale, ids.workgroup[1]);
      });
  sum.finish(rewriter, loc);
}

/// A plain delayed cast by the flat kernel, a transposed one (with its plain
/// partner, see getTransposedPartner) by the cast+transpose kernel.
struct QuantizeDelayedToGPU : OpRewritePattern<QuantizeDelayedOp> {
  QuantizeDelayedToGPU(MLIRContext *context, Chip chip,
                       const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), chip(chip), plan(plan) {}

  LogicalResult matchAndRewrite(QuantizeDelayedOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType inputType = op.getInput().getType();
    if (op.getTransposed()) {
      auto producer = op.getHistory().getDefiningOp<QuantizeDelayedOp>();
      if (producer && getTransposedPartner(producer) == op)
        return rewriter.notifyMatchFailure(op, "cast with its plain partner");
      if (!isTileable(inputType))
        return rewriter.notifyMatchFailure(op, "matrix not tileable");
    } else if (!isChunked(inputType.getNumElements())) {
      return rewriter.notifyMatchFailure(op, "element count not chunked");
    }
    std::optional<ElementConversion> conversion =
        ElementConversion::get(op.getData().getType().getElementType(), chip);
    if (!conversion)
      return rewriter.notifyMatchFailure(op, "no conversion on the chip");
    int64_t numBlocks = getDelayedNumBlocks(op);
    if (!AmaxRecordPlan::fits(numBlocks))
      return rewriter.notifyMatchFailure(op, "too many CTAs to count");
    QuantizeDelayedOp partner = getTransposedPartner(op);
    Location loc = op.getLoc();
    auto scaleInvType = cast<RankedTensorType>(op.getScaleInv().getType());
    DelayedCast delayed{static_cast<int64_t>(op.getIndex()), *conversion,
                        AmaxRecordPlan(numBlocks),
                        toBuffer(rewriter, loc, op.getScales()),
                        allocFolded(rewriter, loc, scaleInvType, 1)};
    // The amax goes into the history's own buffer where it may (the cast's
    // in-place update), else into a copy; the partials after it.
    if (canUpdateInPlace(op.getHistory())) {
      delayed.newHistory = toUpdatedBuffer(rewriter, loc, op.getHistory());
    } else {
      delayed.newHistory =
          allocDevice(rewriter, loc, op.getNewHistory().getType());
      buildHistoryCopy(rewriter, loc, toBuffer(rewriter, loc, op.getHistory()),
                       delayed.newHistory, op.getIndex());
    }
    delayed.partials = allocDevice(
        rewriter, loc, delayed.recordPlan.getPartialsType(rewriter));

    SmallVector<std::pair<QuantizeDelayedOp, DataBuffer>, 2> outputs;
    if (!op.getTransposed() && !partner) {
      outputs.push_back(
          {op, DataBuffer(rewriter, loc, op.getData().getType(), 1)});
      buildFlatDelayedCast(rewriter, loc, delayed, op.getInput(),
                           outputs.front().second);
    } else {
      // The transposed output first, then the plain partner's.
      for (QuantizeDelayedOp q : {partner ? partner : op, partner ? op : nullptr})
        if (q)
          outputs.push_back(
              {q, DataBuffer(rewriter, loc, q.getData().getType(), 2)});
      buildTransposedDelayedCast(rewriter, loc, delayed, op.getInput(),
                                 outputs.front().first, outputs.front().second,
                                 partner ? &outputs.back().second : nullptr,
                                 plan);
    }

    Value scaleInvTensor =
        toUnfoldedTensor(rewriter, loc, delayed.scaleInv, scaleInvType);
    Value newHistoryTensor = toTensor(rewriter, loc, delayed.newHistory);
    for (auto &[q, data] : outputs)
      rewriter.replaceOp(q, {data.toTensor(rewriter, loc), scaleInvTensor,
                             newHistoryTensor});
    return success();
  }

private:
  Chip chip;
  /// Which column sums the cast+transpose kernels compute
  /// (getColumnSumHost).
  const QuantizeFusionPlan &plan;
};

} // namespace

std::string gpu_kernels::getPerTensorUnsupportedReason(Operation *op) {
  auto delayed = dyn_cast<QuantizeDelayedOp>(op);
  if (delayed && delayed.getTransposed() &&
      !isTileable(delayed.getInput().getType()))
    return "the cast+transpose GPU kernel needs both matrix dimensions to be "
           "multiples of 16";
  if (auto sum = dyn_cast<ColumnSumOp>(op))
    return sum.getInput().getType().getDimSize(1) % kElementsPerLane
               ? "the column-sum GPU kernel needs the column count to be a "
                 "multiple of 16"
               : "";
  Value input = delayed ? delayed.getInput() : Value();
  if (auto amax = dyn_cast<AmaxOp>(op))
    input = amax.getInput();
  if (input &&
      !isChunked(cast<RankedTensorType>(input.getType()).getNumElements()))
    return "the per-tensor GPU kernels need the element count of the tensor "
           "to be a multiple of 16";
  if (delayed && !AmaxRecordPlan::fits(getDelayedNumBlocks(delayed)))
    return llvm::formatv("the delayed cast's kernel would have {0} CTAs; the "
                         "history entry counts at most 2^31",
                         getDelayedNumBlocks(delayed))
        .str();
  return "";
}

void gpu_kernels::populatePerTensorScalingPatterns(
    RewritePatternSet &patterns, Chip chip, const QuantizeFusionPlan &plan) {
  patterns.add<AmaxToGPU>(patterns.getContext());
  patterns.add<QuantizeDelayedToGPU, PerTensorQuantizeToGPU>(
      patterns.getContext(), chip, plan);
  patterns.add<ColumnSumToGPU>(patterns.getContext(), plan);
}
