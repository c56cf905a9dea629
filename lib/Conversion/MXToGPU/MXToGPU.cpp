//===- MXToGPU.cpp - Lower mx to GPU kernels ------------------------------===//
//
// Each mx op becomes one `gpu.launch` on device buffers (`gpu.alloc` for the
// results, `bufferization.to_buffer` / `to_tensor` at the seams), which the
// NVVM pipeline outlines and compiles. The quantize kernel is the one that
// matters for speed, so it is shaped for the memory system: four lanes share
// a 32-element block, each lane moves 16 bytes with one vector load and 8
// bytes with one vector store (both coalesced across the warp), the block's
// amax is combined with two xor-shuffles, elements are converted two at a time
// by the hardware `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`, and a swizzle that
// consumes the scales is fused: the kernel then writes the 128x4-tiled layout
// directly, padding included. The scale exponent math is the same builder
// code as the CPU lowering (Numerics.h), which is why the two agree bit for
// bit. Dequantize, swizzle and unswizzle are simple one-thread-per-element
// kernels.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Conversion/Passes.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTMXTOGPU
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

constexpr int64_t kThreadsPerBlock = 256;
/// Quantize: lanes per 32-element block and elements per lane.
constexpr int64_t kLanesPerBlock = 4;
constexpr int64_t kElementsPerLane = 8;
constexpr int64_t kMXBlock = kLanesPerBlock * kElementsPerLane;

Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Emits a 1-D `gpu.launch` of `numThreads` threads (rounded up to whole
/// blocks) and builds its body with the global thread index.
void buildLaunch(OpBuilder &b, Location loc, int64_t numThreads,
                 function_ref<void(OpBuilder &, Location, Value)> body) {
  Value one = cIndex(b, loc, 1);
  int64_t blocks = llvm::divideCeil(numThreads, kThreadsPerBlock);
  auto launch = gpu::LaunchOp::create(b, loc, cIndex(b, loc, blocks), one, one,
                                      cIndex(b, loc, kThreadsPerBlock), one,
                                      one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value blockStart = arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                                           launch.getBlockSize().x);
  body(b, loc, arith::AddIOp::create(b, loc, blockStart, launch.getThreadIds().x));
  gpu::TerminatorOp::create(b, loc);
}

/// Runs `then` under `condition` inside a kernel.
void buildIf(OpBuilder &b, Location loc, Value condition,
             function_ref<void(OpBuilder &, Location)> then) {
  scf::IfOp::create(b, loc, condition, [&](OpBuilder &nb, Location nloc) {
    then(nb, nloc);
    scf::YieldOp::create(nb, nloc);
  });
}

Value cmpLT(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
}

Value allocDevice(OpBuilder &b, Location loc, RankedTensorType type) {
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  return gpu::AllocOp::create(b, loc, memrefType, /*asyncToken=*/Type(),
                              ValueRange(), ValueRange(), ValueRange())
      .getMemref();
}

Value toBuffer(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      /*read_only=*/true);
}

Value toTensor(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
      buffer, /*restrict=*/true, /*writable=*/true);
}

/// Indices of scale (r, c) in the 5-D swizzled layout
/// [r/128, c/4, r%32, (r%128)/32, c%4].
SmallVector<Value> swizzledIndices(OpBuilder &b, Location loc, Value r,
                                   Value c) {
  auto div = [&](Value x, int64_t d) {
    return arith::DivUIOp::create(b, loc, x, cIndex(b, loc, d)).getResult();
  };
  auto rem = [&](Value x, int64_t d) {
    return arith::RemUIOp::create(b, loc, x, cIndex(b, loc, d)).getResult();
  };
  return {div(r, kSwizzleTileRows), div(c, kSwizzleTileCols), rem(r, 32),
          div(rem(r, kSwizzleTileRows), 32), rem(c, kSwizzleTileCols)};
}

/// The swizzle user that a quantize kernel can absorb, if any.
SwizzleOp getFusableSwizzle(QuantizeOp op) {
  Value scales = op.getScales();
  if (!scales.hasOneUse())
    return {};
  auto swizzle = dyn_cast<SwizzleOp>(*scales.getUsers().begin());
  return swizzle && swizzle.getUnscaledDim() == 0 ? swizzle : SwizzleOp();
}

//===----------------------------------------------------------------------===//
// Quantize
//===----------------------------------------------------------------------===//

/// Converts 8 f32 values (already multiplied by the block factor) to 8 FP8
/// bytes with the hardware conversion, two at a time.
Value convertLane(OpBuilder &b, Location loc, Value scaled, Type elementType,
                  Value nanBlock) {
  SmallVector<Value> pairs;
  // A NaN block is all 0x7F bytes by definition (docs/numerics.md), whatever
  // the hardware makes of a NaN input.
  Value nanPair = arith::ConstantIntOp::create(b, loc, 0x7F7F, 16);
  for (int64_t i = 0; i < kElementsPerLane; i += 2) {
    Value lo = vector::ExtractOp::create(b, loc, scaled, i);
    Value hi = vector::ExtractOp::create(b, loc, scaled, i + 1);
    // The first operand lands in the high byte, i.e. at the higher address.
    Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
        b, loc, b.getI16Type(), hi, lo, NVVM::FPRoundingMode::RN,
        NVVM::SaturationMode::SATFINITE, /*relu=*/false, elementType);
    pairs.push_back(arith::SelectOp::create(b, loc, nanBlock, nanPair, pair));
  }
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({kElementsPerLane / 2}, b.getI16Type()), pairs);
  Value bytes = vector::BitCastOp::create(
      b, loc, VectorType::get({kElementsPerLane}, b.getI8Type()), packed);
  return arith::BitcastOp::create(
      b, loc, VectorType::get({kElementsPerLane}, elementType), bytes);
}

struct QuantizeToGPU : OpRewritePattern<QuantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rewriter) const override {
    std::string reason;
    if (failed(checkGPUSupport(op, reason)))
      return rewriter.notifyMatchFailure(op, reason);
    Location loc = op.getLoc();
    SwizzleOp swizzle = getFusableSwizzle(op);
    RankedTensorType inputType = op.getInput().getType();
    Type elementType = op.getData().getType().getElementType();
    Type scaleType = op.getScales().getType().getElementType();
    ScaleRounding rounding = op.getRounding();
    int64_t rows = inputType.getDimSize(0), cols = inputType.getDimSize(1);
    int64_t blocksPerRow = op.getScales().getType().getDimSize(1);
    // With swizzled scales the kernel also covers the zero padding of the
    // tiles: rows up to R' and block columns up to C'.
    int64_t paddedRows = swizzle ? llvm::alignTo(rows, kSwizzleTileRows) : rows;
    int64_t paddedBlocks =
        swizzle ? llvm::alignTo(blocksPerRow, kSwizzleTileCols) : blocksPerRow;

    Value input = toBuffer(rewriter, loc, op.getInput());
    Value data = allocDevice(rewriter, loc, op.getData().getType());
    Value scales = allocDevice(
        rewriter, loc,
        swizzle ? swizzle.getResult().getType() : op.getScales().getType());
    auto laneType = VectorType::get({kElementsPerLane}, inputType.getElementType());
    auto f32Lane = VectorType::get({kElementsPerLane}, rewriter.getF32Type());

    buildLaunch(rewriter, loc, paddedRows * paddedBlocks * kLanesPerBlock,
                [&](OpBuilder &b, Location l, Value thread) {
      Value lanesPerRow = cIndex(b, l, paddedBlocks * kLanesPerBlock);
      Value row = arith::DivUIOp::create(b, l, thread, lanesPerRow);
      Value laneInRow = arith::RemUIOp::create(b, l, thread, lanesPerRow);
      Value block = arith::DivUIOp::create(b, l, laneInRow, cIndex(b, l, kLanesPerBlock));
      Value col = arith::MulIOp::create(b, l, laneInRow, cIndex(b, l, kElementsPerLane));
      Value rowValid = cmpLT(b, l, row, cIndex(b, l, rows));
      Value colValid = cmpLT(b, l, col, cIndex(b, l, cols));
      Value blockValid = arith::AndIOp::create(
          b, l, rowValid, cmpLT(b, l, block, cIndex(b, l, blocksPerRow)));

      // Every lane loads (clamped in bounds) so that all 32 lanes of the warp
      // take part in the shuffles below; only the stores are predicated.
      Value loadRow = arith::MinUIOp::create(b, l, row, cIndex(b, l, rows - 1));
      Value loadCol = arith::MinUIOp::create(
          b, l, col, cIndex(b, l, cols - kElementsPerLane));
      Value lane = vector::LoadOp::create(b, l, laneType, input,
                                          ValueRange{loadRow, loadCol},
                                          /*nontemporal=*/false,
                                          llvm::MaybeAlign(16));
      Value wide = inputType.getElementType().isF32()
                       ? lane
                       : arith::ExtFOp::create(b, l, f32Lane, lane).getResult();
      // |x| by clearing the sign bit: exact, NaN-preserving, and no libdevice
      // call (math.absf on vectors lowers to __nv_fabsf).
      auto bitsLane = VectorType::get({kElementsPerLane}, b.getI32Type());
      Value signMask = arith::ConstantOp::create(
          b, l, DenseElementsAttr::get(bitsLane, b.getI32IntegerAttr(0x7FFFFFFF)));
      Value magnitude = arith::BitcastOp::create(
          b, l, f32Lane,
          arith::AndIOp::create(
              b, l, arith::BitcastOp::create(b, l, bitsLane, wide), signMask));
      Value zero = arith::ConstantOp::create(
          b, l, DenseElementsAttr::get(f32Lane, b.getF32FloatAttr(0.0f)));
      magnitude = arith::SelectOp::create(b, l, colValid, magnitude, zero);
      Value amax = vector::ReductionOp::create(
          b, l, vector::CombiningKind::MAXIMUMF, magnitude);
      for (int32_t offset : {1, 2}) {
        Value other = gpu::ShuffleOp::create(b, l, amax, offset, 32,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult();
        amax = arith::MaximumFOp::create(b, l, amax, other);
      }

      Value exponent =
          buildScaleExponent(b, l, amax, rounding, elementType);
      Value factor = buildInverseScaleValue(b, l, exponent);
      Value scaled = arith::MulFOp::create(
          b, l, wide, vector::BroadcastOp::create(b, l, f32Lane, factor));
      Value nanBlock = arith::CmpIOp::create(
          b, l, arith::CmpIPredicate::eq, exponent,
          arith::ConstantIntOp::create(b, l, 255, 32));
      Value bytes = convertLane(b, l, scaled, elementType, nanBlock);
      buildIf(b, l, arith::AndIOp::create(b, l, rowValid, colValid),
              [&](OpBuilder &nb, Location nl) {
        vector::StoreOp::create(nb, nl, bytes, data, ValueRange{row, col},
                                /*nontemporal=*/false, llvm::MaybeAlign(8));
      });

      // One lane per block writes its scale; padding gets zero bytes.
      Value scale;
      if (scaleType.isF32()) {
        scale = buildScaleValue(b, l, exponent);
      } else {
        Value byte = arith::TruncIOp::create(b, l, b.getI8Type(), exponent);
        scale = arith::BitcastOp::create(b, l, scaleType, byte);
      }
      Value firstLane = arith::CmpIOp::create(
          b, l, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(b, l, laneInRow, cIndex(b, l, kLanesPerBlock)),
          cIndex(b, l, 0));
      if (swizzle) {
        Value inTiles = cmpLT(b, l, row, cIndex(b, l, paddedRows));
        Value padding = arith::BitcastOp::create(
            b, l, scaleType,
            arith::ConstantIntOp::create(b, l, 0, scaleType.getIntOrFloatBitWidth()));
        Value stored = arith::SelectOp::create(b, l, blockValid, scale, padding);
        buildIf(b, l, arith::AndIOp::create(b, l, firstLane, inTiles),
                [&](OpBuilder &nb, Location nl) {
          memref::StoreOp::create(nb, nl, stored, scales,
                                  swizzledIndices(nb, nl, row, block));
        });
      } else {
        buildIf(b, l, arith::AndIOp::create(b, l, firstLane, blockValid),
                [&](OpBuilder &nb, Location nl) {
          memref::StoreOp::create(nb, nl, scale, scales, ValueRange{row, block});
        });
      }
    });

    Value scalesTensor = toTensor(rewriter, loc, scales);
    Value dataTensor = toTensor(rewriter, loc, data);
    if (swizzle) {
      // The linear scales never exist: their only user reads the tiles.
      rewriter.replaceOp(swizzle, scalesTensor);
      rewriter.replaceAllUsesWith(op.getData(), dataTensor);
      rewriter.eraseOp(op);
      return success();
    }
    rewriter.replaceOp(op, {dataTensor, scalesTensor});
    return success();
  }
};

} // namespace

LogicalResult mx::checkGPUSupport(Operation *op, std::string &reason) {
  if (auto quantize = dyn_cast<QuantizeOp>(op)) {
    RankedTensorType type = quantize.getInput().getType();
    if (type.getRank() != 2 || quantize.getBlock() != ArrayRef<int64_t>{1, kMXBlock})
      reason = "the GPU kernel covers rowwise [1, 32] blocks of 2-D tensors";
    else if (quantize.getRounding() == ScaleRounding::exact)
      reason = "the GPU kernel covers power-of-two ('ceil', 'floor') scales";
    else if (type.getDimSize(1) % kElementsPerLane != 0)
      reason = "the GPU kernel needs K to be a multiple of 8 (16-byte rows)";
    return success(reason.empty());
  }
  reason = "no GPU kernel exists for this op yet; use the CPU pipeline";
  return failure();
}

namespace {

struct ConvertMXToGPUPass : mx::impl::ConvertMXToGPUBase<ConvertMXToGPUPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMXToGPUConversionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has no kernel: say which op and why.
    WalkResult result = getOperation()->walk([](Operation *op) {
      if (!isa<MXDialect>(op->getDialect()))
        return WalkResult::advance();
      std::string reason;
      (void)checkGPUSupport(op, reason);
      op->emitOpError("has no GPU lowering: ") << reason;
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mx::populateMXToGPUConversionPatterns(RewritePatternSet &patterns) {
  patterns.add<QuantizeToGPU>(patterns.getContext());
}
