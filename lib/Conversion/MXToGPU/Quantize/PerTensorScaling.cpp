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
//   other kernel (buildBlockScale) and casts; the spec's two reads.
// * `mx.quantize_delayed`: the cast with the given scales[index], reading
//   the input once; the same kernel reduces the amax into history[0, index]
//   of the new history, which a first, tiny kernel copies from the old one
//   with that entry zeroed (the atomic max needs a zero start, and no kernel
//   can order its own CTAs).
// * `mx.update_amax_history`: one kernel for all N columns, a CTA per column:
//   its threads stride over the rows, write them rotated and reduce their
//   max (ignoring NaN, from 0, as Transformer Engine); thread 0 derives the
//   column's next scale with the CPU lowering's builder (Numerics.h).
//
// The flat kernels read their elements in chunks of 16 (16-byte loads, one
// 16-byte FP8 store), so each matrix's (or tensor's) element count must be
// a multiple of 16; each CTA covers 4 passes of 256 consecutive chunks of one
// slice, which keeps 4 loads per thread in flight and one atomic per 16 Ki
// elements.
//
//===----------------------------------------------------------------------===//

#include "ElementConversion.h"
#include "FusionPolicy.h"
#include "KernelBuilder.h"

#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

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

/// Stores the FP8 codes of every existing chunk.
void storeChunks(OpBuilder &b, Location l, const FlatChunks &chunks,
                 ArrayRef<Value> codes, const DataBuffer &data) {
  for (auto [valid, value, offset] :
       llvm::zip_equal(chunks.valid, codes, chunks.offset))
    data.store(b, l, valid, value, {offset});
}

Value zeroF32(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
}

/// The element count of `type`, if the flat kernels can read it in chunks.
bool isChunked(int64_t elements) { return elements % kElementsPerLane == 0; }

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
    gpu::MemsetOp::create(rewriter, loc, Type(), ValueRange(), result,
                          zeroF32(rewriter, loc));
    buildAmaxKernel(rewriter, loc, input,
                    FlatGrid(1, inputType.getNumElements()), result,
                    op.getFinite());
    rewriter.replaceOp(op, toTensor(rewriter, loc, result));
    return success();
  }
};

/// Current scaling: the amax of every matrix, then the cast.
struct PerTensorQuantizeToGPU : PlannedQuantizePattern {
  PerTensorQuantizeToGPU(MLIRContext *context, Chip chip,
                         const QuantizeFusionPlan &plan)
      : PlannedQuantizePattern(context, plan, QuantizeKernel::perTensor, chip) {
  }

  LogicalResult rewritePlanned(QuantizeOp op, const QuantizePlan &,
                               PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    RankedTensorType scalesType = op.getScales().getType();
    int64_t slices = getNumSlices(inputType, 2);
    FlatGrid grid(slices, inputType.getNumElements() / slices);
    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 1);
    DataBuffer data(rewriter, loc, op.getData().getType(), 1);
    Value scales = allocFolded(rewriter, loc, scalesType, 1);
    auto amaxType = MemRefType::get({slices}, rewriter.getF32Type());
    // A given amax (of the whole tensor this input is a shard of; the
    // verifier allows it for one slice only) replaces the first kernel.
    Value amaxes =
        op.getAmax()
            ? memref::ExpandShapeOp::create(
                  rewriter, loc, amaxType,
                  toBuffer(rewriter, loc, op.getAmax()),
                  ArrayRef<ReassociationIndices>{})
                  .getResult()
            : gpu::AllocOp::create(rewriter, loc, amaxType, Type(),
                                   ValueRange(), ValueRange(), ValueRange())
                  .getMemref();
    if (!op.getAmax()) {
      gpu::MemsetOp::create(rewriter, loc, Type(), ValueRange(), amaxes,
                            zeroF32(rewriter, loc));
      buildAmaxKernel(rewriter, loc, input, grid, amaxes);
    }

    ElementConversion conversion = getConversion(op);
    ScaleRounding rounding = op.getRounding();
    buildBlockLaunch(
        rewriter, loc, grid.getNumBlocks(), TypeRange(),
        [&](OpBuilder &b, Location l, const KernelIds &ids) {
          FlatChunks chunks = loadChunks(b, l, ids, grid, input);
          Value amax = memref::LoadOp::create(b, l, amaxes, chunks.slice);
          BlockScale scale = buildBlockScale(b, l, amax, rounding, conversion,
                                             scalesType.getElementType());
          SmallVector<Value> bytes =
              llvm::map_to_vector(chunks.values, [&](Value v) {
                return quantizeVector(b, l, v, scale, rounding, conversion);
              });
          storeChunks(b, l, chunks, bytes, data);
          buildIf(b, l, chunks.sliceLeader, [&](OpBuilder &nb, Location nl) {
            memref::StoreOp::create(nb, nl, scale.stored, scales, chunks.slice);
          });
        });
    if (!op.getAmax())
      gpu::DeallocOp::create(rewriter, loc, Type(), ValueRange(), amaxes);

    rewriter.replaceOp(op,
                       {data.toTensor(rewriter, loc),
                        toUnfoldedTensor(rewriter, loc, scales, scalesType)});
    return success();
  }
};

/// Kernel: `history` into `newHistory` with [0, index] zeroed, the start of
/// the atomic max that records the cast's amax there.
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

struct QuantizeDelayedToGPU : OpRewritePattern<QuantizeDelayedOp> {
  QuantizeDelayedToGPU(MLIRContext *context, Chip chip)
      : OpRewritePattern(context), chip(chip) {}

  LogicalResult matchAndRewrite(QuantizeDelayedOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType inputType = op.getInput().getType();
    if (op.getTransposed())
      return rewriter.notifyMatchFailure(op, "transposed");
    if (!isChunked(inputType.getNumElements()))
      return rewriter.notifyMatchFailure(op, "element count not chunked");
    std::optional<ElementConversion> conversion =
        ElementConversion::get(op.getData().getType().getElementType(), chip);
    if (!conversion)
      return rewriter.notifyMatchFailure(op, "no conversion on the chip");
    Location loc = op.getLoc();
    int64_t index = op.getIndex();
    Value input = toFoldedBuffer(rewriter, loc, op.getInput(), 1);
    Value scales = toBuffer(rewriter, loc, op.getScales());
    Value history = toBuffer(rewriter, loc, op.getHistory());
    DataBuffer data(rewriter, loc, op.getData().getType(), 1);
    auto scaleInvType = cast<RankedTensorType>(op.getScaleInv().getType());
    Value scaleInv = allocFolded(rewriter, loc, scaleInvType, 1);
    Value newHistory = allocDevice(rewriter, loc, op.getNewHistory().getType());
    buildHistoryCopy(rewriter, loc, history, newHistory, index);

    FlatGrid grid(1, inputType.getNumElements());
    buildBlockLaunch(
        rewriter, loc, grid.getNumBlocks(), getCTAMaxBufferType(getContext()),
        [&](OpBuilder &b, Location l, const KernelIds &ids) {
          FlatChunks chunks = loadChunks(b, l, ids, grid, input);
          Value scale =
              memref::LoadOp::create(b, l, scales, cIndex(b, l, index));
          auto f32Lane = cast<VectorType>(chunks.values.front().getType());
          Value factor = vector::BroadcastOp::create(b, l, f32Lane, scale);
          SmallVector<Value> bytes;
          for (Value values : chunks.values) {
            // A NaN product (NaN input, 0 x Inf) is the NaN byte, element-wise.
            Value scaled = arith::MulFOp::create(b, l, values, factor);
            Value isNaN = arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO,
                                                scaled, scaled);
            bytes.push_back(
                convertToElements(b, l, scaled, *conversion, isNaN));
          }
          storeChunks(b, l, chunks, bytes, data);
          Value amax = reduceChunks(b, l, chunks, ids);
          buildIf(b, l, isZeroIndex(b, l, ids.thread),
                  [&](OpBuilder &nb, Location nl) {
                    buildAtomicMaxMagnitude(
                        nb, nl, amax, newHistory,
                        {cIndex(nb, nl, 0), cIndex(nb, nl, index)});
                  });
          buildIf(b, l, chunks.sliceLeader, [&](OpBuilder &nb, Location nl) {
            memref::StoreOp::create(nb, nl,
                                    buildDelayedScaleInverse(nb, nl, scale),
                                    scaleInv, cIndex(nb, nl, 0));
          });
        });

    rewriter.replaceOp(op,
                       {data.toTensor(rewriter, loc),
                        toUnfoldedTensor(rewriter, loc, scaleInv, scaleInvType),
                        toTensor(rewriter, loc, newHistory)});
    return success();
  }

private:
  Chip chip;
};

/// One launch for all columns: CTA j rotates column j and derives scale j.
struct UpdateAmaxHistoryToGPU : OpRewritePattern<UpdateAmaxHistoryOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UpdateAmaxHistoryOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType historyType = op.getHistory().getType();
    int64_t rows = historyType.getDimSize(0);
    int64_t columns = historyType.getDimSize(1);
    Value history = toBuffer(rewriter, loc, op.getHistory());
    Value scales = toBuffer(rewriter, loc, op.getScales());
    Value newHistory = allocDevice(rewriter, loc, historyType);
    Value newScales = allocDevice(rewriter, loc, op.getScales().getType());
    bool mostRecent = op.getAlgorithm() == AmaxAlgorithm::most_recent;
    buildBlockLaunch(
        rewriter, loc, columns, getCTAMaxBufferType(getContext()),
        [&](OpBuilder &b, Location l, const KernelIds &ids) {
          Value column = ids.block;
          // Row i moves to row i - 1 (row 0 to the last); the new row 0, where
          // the oldest entry (row 1) lands, is zero.
          auto loop = scf::ForOp::create(
              b, l, ids.thread, cIndex(b, l, rows),
              cIndex(b, l, kThreadsPerBlock), ValueRange{zeroF32(b, l)},
              [&](OpBuilder &nb, Location nl, Value row, ValueRange max) {
                Value value = memref::LoadOp::create(nb, nl, history,
                                                     ValueRange{row, column});
                Value dest = arith::RemUIOp::create(
                    nb, nl,
                    arith::AddIOp::create(nb, nl, row,
                                          cIndex(nb, nl, rows - 1)),
                    cIndex(nb, nl, rows));
                Value stored = arith::SelectOp::create(
                    nb, nl, isZeroIndex(nb, nl, dest), zeroF32(nb, nl), value);
                memref::StoreOp::create(nb, nl, stored, newHistory,
                                        ValueRange{dest, column});
                scf::YieldOp::create(
                    nb, nl,
                    arith::MaxNumFOp::create(nb, nl, max.front(), value)
                        .getResult());
              });
          // `max` ignores NaN and starts from 0, as Transformer Engine's fmaxf.
          Value amax =
              mostRecent
                  ? memref::LoadOp::create(b, l, history,
                                           ValueRange{cIndex(b, l, 0), column})
                        .getResult()
                  : buildCTAMax(b, l, loop.getResult(0), ids.thread,
                                ids.workgroup.front(),
                                vector::CombiningKind::MAXNUMF);
          buildIf(b, l, isZeroIndex(b, l, ids.thread),
                  [&](OpBuilder &nb, Location nl) {
                    Value scale = buildDelayedScale(
                        nb, nl, amax,
                        memref::LoadOp::create(nb, nl, scales, column),
                        op.getElement(), op.getMargin());
                    memref::StoreOp::create(nb, nl, scale, newScales, column);
                  });
        });
    rewriter.replaceOp(op, {toTensor(rewriter, loc, newHistory),
                            toTensor(rewriter, loc, newScales)});
    return success();
  }
};

} // namespace

std::string gpu_kernels::getPerTensorUnsupportedReason(Operation *op) {
  Value input;
  if (auto amax = dyn_cast<AmaxOp>(op))
    input = amax.getInput();
  else if (auto delayed = dyn_cast<QuantizeDelayedOp>(op))
    input = delayed.getInput();
  if (auto delayed = dyn_cast<QuantizeDelayedOp>(op);
      delayed && delayed.getTransposed())
    return "no GPU kernel computes a transposed quantize_delayed yet";
  if (input &&
      !isChunked(cast<RankedTensorType>(input.getType()).getNumElements()))
    return "the per-tensor GPU kernels need the element count of the tensor "
           "to be a multiple of 16";
  return "";
}

void gpu_kernels::populatePerTensorScalingPatterns(
    RewritePatternSet &patterns, Chip chip, const QuantizeFusionPlan &plan) {
  patterns.add<AmaxToGPU, UpdateAmaxHistoryToGPU>(patterns.getContext());
  patterns.add<QuantizeDelayedToGPU>(patterns.getContext(), chip);
  patterns.add<PerTensorQuantizeToGPU>(patterns.getContext(), chip, plan);
}
