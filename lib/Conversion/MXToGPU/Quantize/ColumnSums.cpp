//===- ColumnSums.cpp - Column sums of 64-row tiles -----------------------===//
//
// The two halves of `mx.column_sum` on the GPU (ColumnSums.h): a tile's
// column sums, built into the cast+transpose kernel or the standalone tile
// kernel (PerTensorScaling.cpp), and the kernel that adds the tiles' sums.
//
// A tile's 64 rows are 8 warps of 8 rows; in a warp, the 8 lanes of a 16-
// column chunk (lanes c, c + 4, ..., c + 28) reduce-scatter their 16 values:
// at each of 3 steps a lane keeps half of what it holds and adds the other
// half of its xor partner's (lane bit 4, 3, then 2), so that it ends with
// the sums of 2 of the chunk's columns over the warp's 8 rows, after 8 + 4 +
// 2 shuffles (an all-reduce would take 48). Lane 4j + c holds columns
// 16c + 2j and 16c + 2j + 1. The warps' sums meet in 2 KiB of shared memory.
//
// The strip quantize kernel of FP8 blockwise holds the same tiles in another
// layout (a lane: 16 rows x 4 columns) and adds them in the same order
// (storeStripColumnSums), so its partials are those of the tile kernel, bit
// for bit, and one partials kernel serves both.
//
//===----------------------------------------------------------------------===//

#include "ColumnSums.h"
#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Conversion/DeviceBuffers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

/// Threads of a tile row, each holding kElementsPerLane elements.
constexpr int64_t kChunksPerRow = kColumnSumTile / kElementsPerLane;
/// Partial rows a warp of the partials kernel loads before adding them.
constexpr int64_t kPartialsUnroll = 4;

Value negativeZero(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(-0.0f));
}

/// Whether bit `offset` of `lane` is set: such a lane keeps the upper half
/// of what it and its xor partner at `offset` hold.
Value hasBit(OpBuilder &b, Location loc, Value lane, int64_t offset) {
  Value bit = arith::AndIOp::create(b, loc, lane, cIndex(b, loc, offset));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, bit,
                               cIndex(b, loc, 0));
}

} // namespace

MemRefType gpu_kernels::getColumnSumBufferType(MLIRContext *context) {
  return MemRefType::get(
      {kWarpsPerBlock, kColumnSumTile}, Float32Type::get(context),
      MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
}

Value gpu_kernels::allocColumnPartials(OpBuilder &b, Location loc,
                                       int64_t rows, int64_t cols) {
  return allocDevice(b, loc,
                     RankedTensorType::get(
                         {llvm::divideCeilSigned(rows, kColumnSumTile), cols},
                         b.getF32Type()));
}

void gpu_kernels::stageColumnSums(OpBuilder &b, Location loc, Value thread,
                                  Value values, Value valid,
                                  const ColumnPartials &sums) {
  IndexArith ia{b, loc};
  Value lane = ia.rem(thread, kWarpSize);
  Value masked = arith::SelectOp::create(
      b, loc, valid, values,
      splat(b, loc, values, b.getF32FloatAttr(-0.0f)));
  SmallVector<Value> columns;
  for (int64_t i = 0; i < kElementsPerLane; ++i)
    columns.push_back(vector::ExtractOp::create(b, loc, masked, i));
  // Lane bits 4, 3, 2 tell the 8 lanes of a chunk apart (lane = 4j + c).
  for (int64_t offset = kWarpSize / 2; offset >= kChunksPerRow; offset /= 2) {
    size_t half = columns.size() / 2;
    Value upper = hasBit(b, loc, lane, offset);
    SmallVector<Value> next;
    for (size_t i = 0; i < half; ++i) {
      Value low = columns[i], high = columns[half + i];
      Value keep = arith::SelectOp::create(b, loc, upper, high, low);
      Value give = arith::SelectOp::create(b, loc, upper, low, high);
      Value partner = gpu::ShuffleOp::create(b, loc, give, offset, kWarpSize,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult();
      next.push_back(arith::AddFOp::create(b, loc, keep, partner));
    }
    columns = std::move(next);
  }
  // Lane 4j + c: columns 16c + 2j, 16c + 2j + 1 of the tile.
  Value column = ia.fma(ia.rem(lane, kChunksPerRow), kElementsPerLane,
                        ia.fma(ia.div(lane, kChunksPerRow), 2,
                               cIndex(b, loc, 0)));
  Value pair = vector::FromElementsOp::create(
      b, loc, VectorType::get({2}, b.getF32Type()), columns);
  storeVector(b, loc, pair, sums.staging, {ia.div(thread, kWarpSize), column});
}

/// The sum of 8 consecutive rows `x` in the order of stageColumnSums's
/// reduce-scatter: rows j and j + 4 first, then those pairs 2 apart, then
/// the last two: ((x0 + x4) + (x2 + x6)) + ((x1 + x5) + (x3 + x7)).
static Value sumWarpRows(OpBuilder &b, Location loc, ValueRange x) {
  SmallVector<Value> level(x);
  for (size_t half = level.size() / 2; half >= 1; half /= 2)
    for (size_t j = 0; j < half; ++j)
      level[j] = arith::AddFOp::create(b, loc, level[j], level[j + half]);
  return level.front();
}

void gpu_kernels::storeStripColumnSums(OpBuilder &b, Location loc, Value lane,
                                       int64_t lanesAcross, Value firstRow,
                                       ValueRange values, Value rowsValid,
                                       Value col, Value valid, int64_t rows,
                                       Value partials) {
  constexpr int64_t kWarpRows = kWarpSize / kChunksPerRow;
  int64_t stripRows = values.size();
  int64_t chain = kColumnSumTile / stripRows;
  assert(stripRows % kWarpRows == 0 && kColumnSumTile % stripRows == 0 &&
         "a strip holds whole warps' rows of a tile, and a tile whole strips");
  IndexArith ia{b, loc};
  auto type = cast<VectorType>(values.front().getType());
  // The sums of the strip's 8-row groups; a strip past the matrix adds -0,
  // as the tile kernel's rows past it do (-0 + -0 is -0, and x + -0 is x).
  Value negZero = splat(b, loc, values.front(), b.getF32FloatAttr(-0.0f));
  SmallVector<Value> groups;
  for (int64_t g = 0; g < stripRows; g += kWarpRows) {
    Value sum = sumWarpRows(b, loc, values.slice(g, kWarpRows));
    groups.push_back(
        rowsValid ? arith::SelectOp::create(b, loc, rowsValid, sum, negZero)
                        .getResult()
                  : sum);
  }
  auto addGroups = [&](Value sum) {
    for (Value group : groups)
      sum = sum ? arith::AddFOp::create(b, loc, sum, group).getResult() : group;
    return sum;
  };
  // The tile's sum in row order: lane group k of the chain adds its groups to
  // what group k - 1 passed up.
  Value position = ia.rem(ia.div(lane, lanesAcross), chain);
  Value sum = addGroups(Value());
  for (int64_t k = 1; k < chain; ++k) {
    SmallVector<Value> received;
    for (int64_t c = 0; c < type.getNumElements(); ++c)
      received.push_back(gpu::ShuffleOp::create(
                             b, loc, vector::ExtractOp::create(b, loc, sum, c),
                             lanesAcross, kWarpSize, gpu::ShuffleMode::UP)
                             .getShuffleResult());
    Value chained =
        addGroups(vector::FromElementsOp::create(b, loc, type, received));
    Value mine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       position, cIndex(b, loc, k));
    sum = arith::SelectOp::create(b, loc, mine, chained, sum);
  }
  Value tileRow = ia.div(firstRow, kColumnSumTile);
  Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, position,
                                     cIndex(b, loc, chain - 1));
  Value stores =
      andI(b, loc, andI(b, loc, last, valid),
           cmpLT(b, loc, tileRow,
                 cIndex(b, loc, llvm::divideCeil(rows, kColumnSumTile))));
  storeVectorIf(b, loc, stores, sum, partials, {tileRow, col});
}

void gpu_kernels::replaceWithPartialsSum(PatternRewriter &rewriter,
                                         Location loc, ColumnSumOp op,
                                         Value partials) {
  Value result = allocDevice(rewriter, loc, op.getType());
  buildPartialsSum(rewriter, loc, partials, result);
  rewriter.replaceOp(op, toTensor(rewriter, loc, result));
}

void gpu_kernels::storeColumnSums(OpBuilder &b, Location loc, Value thread,
                                  int64_t cols, const ColumnPartials &sums) {
  Value col = arith::AddIOp::create(b, loc, sums.tileCol, thread);
  Value mine = andI(b, loc, cmpLT(b, loc, thread, cIndex(b, loc, kColumnSumTile)),
                    cmpLT(b, loc, col, cIndex(b, loc, cols)));
  buildIf(b, loc, mine, [&](OpBuilder &nb, Location nl) {
    Value sum;
    for (int64_t w = 0; w < kWarpsPerBlock; ++w) {
      Value warpSum = memref::LoadOp::create(
          nb, nl, sums.staging, ValueRange{cIndex(nb, nl, w), thread});
      sum = sum ? arith::AddFOp::create(nb, nl, sum, warpSum).getResult()
                : warpSum;
    }
    memref::StoreOp::create(nb, nl, sum, sums.partials,
                            ValueRange{sums.tileRow, col});
  });
}

void gpu_kernels::buildPartialsSum(OpBuilder &b, Location loc, Value partials,
                                   Value result) {
  auto type = cast<MemRefType>(partials.getType());
  int64_t tiles = type.getDimSize(0), cols = type.getDimSize(1);
  int64_t perWarp = llvm::divideCeil(tiles, kWarpsPerBlock);
  int64_t groups = llvm::divideCeil(perWarp, kPartialsUnroll);
  buildBlockLaunch(
      b, loc, llvm::divideCeil(cols, kWarpSize),
      getColumnSumBufferType(b.getContext()),
      [&](OpBuilder &kb, Location l, const KernelIds &ids) {
        IndexArith ia{kb, l};
        Value lane = ia.rem(ids.thread, kWarpSize);
        Value warp = ia.div(ids.thread, kWarpSize);
        Value col = ia.fma(ids.block, kWarpSize, lane);
        Value clampedCol =
            arith::MinUIOp::create(kb, l, col, cIndex(kb, l, cols - 1));
        // Warp w adds partial rows w, w + 8, ... in order, loading
        // kPartialsUnroll of them before adding (rows past the end: -0).
        auto loop = scf::ForOp::create(
            kb, l, cIndex(kb, l, 0), cIndex(kb, l, groups), cIndex(kb, l, 1),
            ValueRange{negativeZero(kb, l)},
            [&](OpBuilder &nb, Location nl, Value group, ValueRange iter) {
              IndexArith na{nb, nl};
              SmallVector<Value> loaded;
              for (int64_t k = 0; k < kPartialsUnroll; ++k) {
                Value step =
                    na.fma(group, kPartialsUnroll, cIndex(nb, nl, k));
                Value row = na.fma(step, kWarpsPerBlock, warp);
                Value inside = cmpLT(nb, nl, row, cIndex(nb, nl, tiles));
                Value clamped = arith::MinUIOp::create(
                    nb, nl, row, cIndex(nb, nl, tiles - 1));
                Value value = memref::LoadOp::create(
                    nb, nl, partials, ValueRange{clamped, clampedCol});
                loaded.push_back(arith::SelectOp::create(
                    nb, nl, inside, value, negativeZero(nb, nl)));
              }
              Value sum = iter.front();
              for (Value value : loaded)
                sum = arith::AddFOp::create(nb, nl, sum, value);
              scf::YieldOp::create(nb, nl, sum);
            });
        Value staging = ids.workgroup.front();
        memref::StoreOp::create(kb, l, loop.getResult(0), staging,
                                ValueRange{warp, lane});
        gpu::BarrierOp::create(kb, l);
        Value mine = andI(kb, l, isZeroIndex(kb, l, warp),
                          cmpLT(kb, l, col, cIndex(kb, l, cols)));
        buildIf(kb, l, mine, [&](OpBuilder &nb, Location nl) {
          Value sum = memref::LoadOp::create(
              nb, nl, staging, ValueRange{cIndex(nb, nl, 0), lane});
          for (int64_t w = 1; w < kWarpsPerBlock; ++w)
            sum = arith::AddFOp::create(
                nb, nl, sum,
                memref::LoadOp::create(nb, nl, staging,
                                       ValueRange{cIndex(nb, nl, w), lane}));
          memref::StoreOp::create(nb, nl, sum, result, col);
        });
      });
}
