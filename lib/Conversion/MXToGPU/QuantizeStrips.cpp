//===- QuantizeStrips.cpp - Columnwise and fused quantize kernels ---------===//
//
// Columnwise ([32, 1]) quantization, alone or fused with the rowwise ([1, 32])
// quantization of the same input so that the input is read once. Each lane
// owns a strip of 16 rows x 4 columns, the two halves of a warp covering the
// two halves of a 32-row block: it loads the strip with one 8- or 16-byte load
// per row (16 lanes cover 64 contiguous columns, so every load instruction is
// coalesced), reduces the 4 column amaxes in registers and with one shuffle
// across the halves, and writes 4 FP8 bytes per row for the columnwise data.
// For the rowwise part, the 8 lanes that cover one 32-column block combine
// each row's amax with three xor-shuffles. Swizzles consuming either scales are fused as in the
// rowwise kernel: columnwise scales are tiled with K as the unscaled
// dimension, and the kernel's grid also covers the zero padding of the tiles.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

namespace {

/// A 32-row column block is split between the two halves of a warp (16 rows
/// each), which keeps a lane's strip at ~100 registers and so lets two
/// 256-thread blocks share an SM.
constexpr int64_t kHalfWarp = 16;
constexpr int64_t kRowsPerLane = kMXBlock / 2;
constexpr int64_t kLanesPerRowBlock = kMXBlock / kStripCols;

/// One quantization done by the strip kernel: its op, output buffers and
/// whether its scales are written tiled.
struct StripOutput {
  QuantizeOp op;
  SwizzleOp swizzle;
  Value data, scales;
};

/// The strip kernel, anchored at its columnwise quantize; when the plan fuses
/// it with the rowwise quantize of the same input, the kernel computes both.
struct ColumnwiseQuantizeToGPU : OpRewritePattern<QuantizeOp> {
  ColumnwiseQuantizeToGPU(MLIRContext *context, const QuantizeFusionPlan &plan)
      : OpRewritePattern(context), plan(plan) {}

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rewriter) const override {
    const QuantizePlan *planned = plan.lookup(op);
    if (op.getBlock() != ArrayRef<int64_t>{kMXBlock, 1} || !planned ||
        planned->kernel == QuantizeKernel::fp4)
      return rewriter.notifyMatchFailure(op, "not a planned columnwise quantize");
    QuantizeOp rowwiseOp = planned->sibling;
    // Build before the earlier op so that the results dominate both users.
    if (rowwiseOp && rowwiseOp->isBeforeInBlock(op))
      rewriter.setInsertionPoint(rowwiseOp);
    Location loc = op.getLoc();

    auto makeOutput = [&](QuantizeOp q) {
      StripOutput out{q, plan.lookup(q)->swizzle, {}, {}};
      out.data = allocDevice(rewriter, loc, q.getData().getType());
      out.scales = allocDevice(rewriter, loc,
                               out.swizzle ? out.swizzle.getResult().getType()
                                           : q.getScales().getType());
      return out;
    };
    Value input = toBuffer(rewriter, loc, op.getInput());
    SmallVector<StripOutput, 2> outputs = {makeOutput(op)};
    if (rowwiseOp)
      outputs.push_back(makeOutput(rowwiseOp));
    const StripOutput &columnwise = outputs.front();
    const StripOutput *rowwise = rowwiseOp ? &outputs.back() : nullptr;

    RankedTensorType inputType = op.getInput().getType();
    int64_t rows = inputType.getDimSize(0), cols = inputType.getDimSize(1);
    int64_t rowBlocks = llvm::divideCeil(rows, kMXBlock);
    int64_t colBlocks = llvm::divideCeil(cols, kMXBlock);
    // The grid covers every strip of the data and of the tiles' padding.
    int64_t stripRows = rowBlocks, stripCols = cols / kStripCols;
    if (columnwise.swizzle) {
      stripRows = std::max(stripRows, int64_t(llvm::alignTo(rowBlocks, kSwizzleTileCols)));
      stripCols = std::max(stripCols,
                           int64_t(llvm::alignTo(cols, kSwizzleTileRows)) / kStripCols);
    }
    if (rowwise && rowwise->swizzle) {
      stripRows = std::max(
          stripRows, int64_t(llvm::alignTo(rows, kSwizzleTileRows)) / kMXBlock);
      stripCols = std::max(stripCols, int64_t(llvm::alignTo(colBlocks, kSwizzleTileCols)) *
                                          kLanesPerRowBlock);
    }
    // Whole half-warps per row block: the rowwise shuffles (8-lane groups)
    // and the column-half shuffle (xor 16) then stay inside one block.
    stripCols = llvm::alignTo(stripCols, kHalfWarp);
    Type elementType = op.getData().getType().getElementType();
    Type scaleType = op.getScales().getType().getElementType();
    ScaleRounding rounding = op.getRounding();
    auto laneType = VectorType::get({kStripCols}, inputType.getElementType());

    buildLaunch(rewriter, loc, stripRows * stripCols * 2,
                [&](OpBuilder &b, Location l, Value thread) {
      // Warp w covers 16 strips of one row block; lane bit 4 picks the half.
      Value warp = arith::DivUIOp::create(b, l, thread, cIndex(b, l, 2 * kHalfWarp));
      Value lane = arith::RemUIOp::create(b, l, thread, cIndex(b, l, 2 * kHalfWarp));
      Value half = arith::DivUIOp::create(b, l, lane, cIndex(b, l, kHalfWarp));
      Value warpsPerRowBlock = cIndex(b, l, stripCols / kHalfWarp);
      Value rowBlock = arith::DivUIOp::create(b, l, warp, warpsPerRowBlock);
      Value strip = arith::AddIOp::create(
          b, l,
          arith::MulIOp::create(b, l,
                                arith::RemUIOp::create(b, l, warp, warpsPerRowBlock),
                                cIndex(b, l, kHalfWarp)),
          arith::RemUIOp::create(b, l, lane, cIndex(b, l, kHalfWarp)));
      Value row0 = arith::AddIOp::create(
          b, l, arith::MulIOp::create(b, l, rowBlock, cIndex(b, l, kMXBlock)),
          arith::MulIOp::create(b, l, half, cIndex(b, l, kRowsPerLane)));
      Value firstHalf = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, half,
                                              cIndex(b, l, 0));
      Value col = arith::MulIOp::create(b, l, strip, cIndex(b, l, kStripCols));
      Value colValid = cmpLT(b, l, col, cIndex(b, l, cols));
      Value loadCol = arith::MinUIOp::create(b, l, col, cIndex(b, l, cols - kStripCols));

      // The strip: every lane loads (clamped in bounds), stores are predicated.
      SmallVector<Value> rowIndex, rowValid, values;
      for (int64_t i = 0; i < kRowsPerLane; ++i) {
        Value row = arith::AddIOp::create(b, l, row0, cIndex(b, l, i));
        rowIndex.push_back(row);
        rowValid.push_back(cmpLT(b, l, row, cIndex(b, l, rows)));
        Value loadRow = arith::MinUIOp::create(b, l, row, cIndex(b, l, rows - 1));
        values.push_back(extendToF32(
            b, l, loadVector(b, l, laneType, input, loadRow, loadCol)));
      }
      auto f32Lane = cast<VectorType>(values.front().getType());
      auto maskType = f32Lane.clone(b.getI1Type());
      Value zero = arith::ConstantOp::create(
          b, l, DenseElementsAttr::get(f32Lane, b.getF32FloatAttr(0.0f)));
      auto storeBytes = [&](Value bytes, Value buffer, int64_t i) {
        buildIf(b, l, andI(b, l, rowValid[i], colValid),
                [&](OpBuilder &nb, Location nl) {
          vector::StoreOp::create(nb, nl, bytes, buffer,
                                  ValueRange{rowIndex[i], col},
                                  /*nontemporal=*/false, llvm::MaybeAlign(4));
        });
      };

      // Columnwise: one scale per column of the strip.
      Value colAmax = zero;
      for (int64_t i = 0; i < kRowsPerLane; ++i) {
        Value m = arith::SelectOp::create(b, l, andI(b, l, rowValid[i], colValid),
                                          magnitude(b, l, values[i]), zero);
        colAmax = arith::MaximumFOp::create(b, l, colAmax, m);
      }
      // Combine the two 16-row halves of the column block.
      SmallVector<Value> halves;
      for (int64_t j = 0; j < kStripCols; ++j) {
        Value own = vector::ExtractOp::create(b, l, colAmax, j);
        Value other = gpu::ShuffleOp::create(b, l, own, int32_t(kHalfWarp), 32,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult();
        halves.push_back(arith::MaximumFOp::create(b, l, own, other));
      }
      colAmax = vector::FromElementsOp::create(b, l, f32Lane, halves);
      SmallVector<Value> exponents, factors, nans;
      for (int64_t j = 0; j < kStripCols; ++j) {
        Value amax = vector::ExtractOp::create(b, l, colAmax, j);
        exponents.push_back(buildScaleExponent(b, l, amax, rounding, elementType));
        factors.push_back(buildInverseScaleValue(b, l, exponents.back()));
        nans.push_back(isNaNExponent(b, l, exponents.back()));
      }
      Value factor = vector::FromElementsOp::create(b, l, f32Lane, factors);
      Value nanMask = vector::FromElementsOp::create(b, l, maskType, nans);
      for (int64_t i = 0; i < kRowsPerLane; ++i) {
        Value scaled = arith::MulFOp::create(b, l, values[i], factor);
        storeBytes(convertToElements(b, l, scaled, elementType, nanMask),
                   columnwise.data, i);
      }
      // The first half of the warp writes the column scales.
      Value rowBlockValid = cmpLT(b, l, rowBlock, cIndex(b, l, rowBlocks));
      if (columnwise.swizzle) {
        Value padded = cmpLT(b, l, rowBlock,
                             cIndex(b, l, llvm::alignTo(rowBlocks, kSwizzleTileCols)));
        for (int64_t j = 0; j < kStripCols; ++j) {
          Value c = arith::AddIOp::create(b, l, col, cIndex(b, l, j));
          Value valid = andI(b, l, rowBlockValid, cmpLT(b, l, c, cIndex(b, l, cols)));
          Value inTiles = andI(
              b, l, padded,
              cmpLT(b, l, c, cIndex(b, l, llvm::alignTo(cols, kSwizzleTileRows))));
          Value scale = arith::SelectOp::create(
              b, l, valid, buildStoredScale(b, l, exponents[j], scaleType),
              buildZeroBits(b, l, scaleType));
          buildIf(b, l, andI(b, l, firstHalf, inTiles), [&](OpBuilder &nb, Location nl) {
            memref::StoreOp::create(nb, nl, scale, columnwise.scales,
                                    swizzledIndices(nb, nl, c, rowBlock));
          });
        }
      } else {
        SmallVector<Value> stored = llvm::map_to_vector(exponents, [&](Value e) {
          return buildStoredScale(b, l, e, scaleType);
        });
        Value scales = vector::FromElementsOp::create(
            b, l, f32Lane.clone(scaleType), stored);
        buildIf(b, l, andI(b, l, firstHalf, andI(b, l, rowBlockValid, colValid)),
                [&](OpBuilder &nb, Location nl) {
          vector::StoreOp::create(nb, nl, scales, columnwise.scales,
                                  ValueRange{rowBlock, col},
                                  /*nontemporal=*/false, llvm::MaybeAlign(4));
        });
      }
      if (!rowwise)
        return;

      // Rowwise: the 8 lanes of a 32-column block combine each row's amax.
      Value block = arith::DivUIOp::create(b, l, strip, cIndex(b, l, kLanesPerRowBlock));
      Value firstLane = arith::CmpIOp::create(
          b, l, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(b, l, strip, cIndex(b, l, kLanesPerRowBlock)),
          cIndex(b, l, 0));
      Value blockValid = cmpLT(b, l, block, cIndex(b, l, colBlocks));
      for (int64_t i = 0; i < kRowsPerLane; ++i) {
        Value m = arith::SelectOp::create(b, l, colValid, magnitude(b, l, values[i]), zero);
        Value amax = buildGroupMax(
            b, l, vector::ReductionOp::create(b, l, vector::CombiningKind::MAXIMUMF, m),
            kLanesPerRowBlock);
        Value exponent = buildScaleExponent(b, l, amax, rounding, elementType);
        Value scaled = arith::MulFOp::create(
            b, l, values[i],
            vector::BroadcastOp::create(b, l, f32Lane,
                                        buildInverseScaleValue(b, l, exponent)));
        Value rowNaN = vector::BroadcastOp::create(b, l, maskType,
                                                   isNaNExponent(b, l, exponent));
        storeBytes(convertToElements(b, l, scaled, elementType, rowNaN),
                   rowwise->data, i);
        Value scale = buildStoredScale(b, l, exponent, scaleType);
        Value valid = andI(b, l, rowValid[i], blockValid);
        if (rowwise->swizzle) {
          Value inTiles = andI(
              b, l,
              cmpLT(b, l, rowIndex[i], cIndex(b, l, llvm::alignTo(rows, kSwizzleTileRows))),
              cmpLT(b, l, block, cIndex(b, l, llvm::alignTo(colBlocks, kSwizzleTileCols))));
          Value stored = arith::SelectOp::create(b, l, valid, scale,
                                                 buildZeroBits(b, l, scaleType));
          buildIf(b, l, andI(b, l, firstLane, inTiles), [&](OpBuilder &nb, Location nl) {
            memref::StoreOp::create(nb, nl, stored, rowwise->scales,
                                    swizzledIndices(nb, nl, rowIndex[i], block));
          });
        } else {
          buildIf(b, l, andI(b, l, firstLane, valid), [&](OpBuilder &nb, Location nl) {
            memref::StoreOp::create(nb, nl, scale, rowwise->scales,
                                    ValueRange{rowIndex[i], block});
          });
        }
      }
    });

    for (const StripOutput &out : outputs)
      replaceQuantize(rewriter, out.op, out.swizzle,
                      toTensor(rewriter, loc, out.data),
                      toTensor(rewriter, loc, out.scales));
    return success();
  }

private:
  const QuantizeFusionPlan &plan;
};

} // namespace

void gpu_kernels::populateColumnwiseQuantizePatterns(
    RewritePatternSet &patterns, const QuantizeFusionPlan &plan) {
  patterns.add<ColumnwiseQuantizeToGPU>(patterns.getContext(), plan);
}
