//===- Sm90MainLoops.cpp - wgmma main loops of the SM90 GEMM kernels ------===//
//
// The consumer side of the SM90 kernels, one main loop per recipe on top of
// the skeleton (GemmSkeleton.cpp). Each consumer warpgroup owns 64 rows of
// the tile and issues m64 x tileN wgmma from 128B-swizzled shared memory,
// addressed by descriptors (WgmmaDescriptors.h) that step 32 bytes per K step.
//
// * FP8 recipes (blockwise, per-tensor): four k32 FP8 wgmma per 128-K stage
//   into a fresh accumulator, which is then promoted into the f32 one with
//   one FMA per element (times sa x sb for blockwise). Hopper's FP8 path
//   keeps only ~14 significant bits inside one chain, so the chain never
//   spans more than one scale block.
// * MX exact: the FP8 stage is dequantized by the consumers, 64 K at a time,
//   into a bf16 buffer with the same 128B swizzle (FP8 -> f16 by the exact
//   hardware cvt, times 2^(b-127) in f32, rounded to bf16: exact unless the
//   product leaves bf16's exponent range; scale byte 0xFF gives NaN), and
//   multiplied with bf16 wgmma. Two buffers alternate: converting one
//   overlaps the tensor cores reading the other. Each warpgroup converts its
//   own A rows and half of B, so a named barrier of the consumers separates
//   the conversion from the wgmma that reads it.
//
// The accumulator fragment of m64nNk* has element e of thread (warp w,
// lane l) at row 16w + l/4 + 8((e/2)%2), column 8(e/4) + 2(l%4) + e%2.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"
#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr int64_t kConsumerBarrierId = 1;
constexpr int64_t kRowBytes = 128; // one 128B-swizzled row
constexpr int64_t kChunkBytes = 16;
/// Accumulator elements (2i, 2i + 1) are adjacent columns of one row.
constexpr int64_t kFragmentRun = 2;

NVVM::WGMMATypes getWgmmaType(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return NVVM::WGMMATypes::e4m3;
  if (isa<Float8E5M2Type>(type))
    return NVVM::WGMMATypes::e5m2;
  return NVVM::WGMMATypes::bf16;
}

} // namespace

Value GemmKernelBuilder::buildWgmmaDescriptor(Value address) {
  constexpr uint64_t fixedFields = encodeWgmmaDescriptor(
      getKMajorSwizzledTile(/*startAddress=*/0, WgmmaSwizzle::bytes128));
  return withStartAddress(fixedFields, address);
}

Type GemmKernelBuilder::getAccumulatorType() {
  int64_t perThread = 64 * plan.tileN / kWarpgroupThreads;
  return LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(perThread, b.getF32Type()));
}

Value GemmKernelBuilder::buildWgmmaChain(Value accumulator, Value aTile,
                                         Value bTile, Type operandA,
                                         Type operandB, int64_t kBytes,
                                         bool freshAccumulator) {
  Value descA = buildWgmmaDescriptor(aTile);
  Value descB = buildWgmmaDescriptor(bTile);
  int64_t stepBytes = plan.mmaK * (operandA.getIntOrFloatBitWidth() / 8);
  auto shape =
      NVVM::MMAShapeAttr::get(b.getContext(), 64, plan.tileN, plan.mmaK);
  for (int64_t step = 0; step < kBytes / stepBytes; ++step) {
    Value offset = i64(getWgmmaAddressStep(step * stepBytes));
    bool zero = freshAccumulator && step == 0;
    accumulator = NVVM::WgmmaMmaAsyncOp::create(
        b, accumulator.getType(), accumulator,
        arith::AddIOp::create(b, descA, offset),
        arith::AddIOp::create(b, descB, offset), shape, getWgmmaType(operandA),
        getWgmmaType(operandB), NVVM::WGMMATypes::f32,
        zero ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
        NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr());
  }
  return accumulator;
}

std::pair<Value, Value>
GemmKernelBuilder::getFragmentCoordinates(const ConsumerThread &thread,
                                          int64_t element) {
  Value row = arith::AddIOp::create(
      b,
      arith::AddIOp::create(b,
                            arith::MulIOp::create(b, thread.consumer,
                                                  i32(plan.rowsPerConsumer())),
                            arith::MulIOp::create(b, thread.warp, i32(16))),
      arith::AddIOp::create(b, arith::DivUIOp::create(b, thread.lane, i32(4)),
                            i32(8 * ((element / 2) % 2))));
  Value col = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, arith::RemUIOp::create(b, thread.lane, i32(4)),
                            i32(2)),
      i32(8 * (element / 4) + element % 2));
  return {row, col};
}

SmallVector<Value> GemmKernelBuilder::unpackAccumulator(Value accumulator) {
  auto type = cast<LLVM::LLVMStructType>(accumulator.getType());
  SmallVector<Value> values;
  for (int64_t i = 0, e = type.getBody().size(); i < e; ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, accumulator, i));
  return values;
}

//===----------------------------------------------------------------------===//
// FP8 recipes: wgmma per 128-K block, promoted in f32
//===----------------------------------------------------------------------===//

BlockScales GemmKernelBuilder::loadBlockScales(const ConsumerThread &thread,
                                               TileOrigin origin, Value kBlock,
                                               int64_t count) {
  // sa of the thread's two rows and sb of its columns (one value when a
  // [128, 128] B block covers the whole, aligned, tile width) for this
  // 128-K block, clamped into the matrix (elements outside are never
  // stored).
  // Compact scales are [row blocks, KB]; GEMM-ready ones [KB, pitch].
  auto scaleAt = [&](Value scales, Value index, const OperandPlan &operand) {
    Value clamped = arith::MinUIOp::create(b, index, i32(operand.rows - 1));
    Value block =
        arith::DivUIOp::create(b, clamped, i32(operand.scaleBlockRows));
    Value offset =
        operand.scaleRowPitch
            ? arith::AddIOp::create(
                  b,
                  arith::MulIOp::create(b, kBlock, i32(operand.scaleRowPitch)),
                  block)
            : arith::AddIOp::create(
                  b, arith::MulIOp::create(b, block, i32(plan.kBlocks())),
                  kBlock);
    return loadGlobalF32(scales, offset);
  };
  BlockScales scales;
  for (int64_t half = 0; half < 2; ++half) {
    Value row = arith::AddIOp::create(
        b, origin.m, getFragmentCoordinates(thread, 2 * half).first);
    scales.rows.push_back(scaleAt(args.aScales, row, plan.a));
  }
  if (plan.b.scaleBlockRows % plan.tileN == 0) {
    scales.columns.push_back(scaleAt(args.bScales, origin.n, plan.b));
    return scales;
  }
  for (int64_t e = 0; e < count; ++e) {
    Value col = arith::AddIOp::create(b, origin.n,
                                      getFragmentCoordinates(thread, e).second);
    scales.columns.push_back(scaleAt(args.bScales, col, plan.b));
  }
  return scales;
}

SmallVector<Value>
GemmKernelBuilder::multiplyBlockScales(const BlockScales &scales,
                                       int64_t count) {
  // sa[row] * sb[col] of each accumulator element; computed only where it is
  // used, after the wgmma wait, so that the loads' latency hides behind it.
  SmallVector<Value> products;
  if (scales.columns.size() == 1) {
    SmallVector<Value> perRow =
        llvm::map_to_vector(scales.rows, [&](Value row) {
          return arith::MulFOp::create(b, row, scales.columns.front())
              .getResult();
        });
    for (int64_t e = 0; e < count; ++e)
      products.push_back(perRow[(e / 2) % 2]);
    return products;
  }
  for (int64_t e = 0; e < count; ++e)
    products.push_back(
        arith::MulFOp::create(b, scales.rows[(e / 2) % 2], scales.columns[e]));
  return products;
}

Value GemmKernelBuilder::buildPromotedTile(const ConsumerThread &thread,
                                           TileOrigin origin, Value iteration) {
  Type accType = getAccumulatorType();
  Value zero = LLVM::ZeroOp::create(b, accType);
  int64_t count = cast<LLVM::LLVMStructType>(accType).getBody().size();
  Value rowsOffset = arith::MulIOp::create(
      b, thread.consumer, i32(plan.rowsPerConsumer() * kRowBytes));
  auto loop = scf::ForOp::create(b, i32(0), i32(plan.kBlocks()), i32(1),
                                 ValueRange{iteration, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0), acc = loop.getRegionIterArg(1);
    RingSlot slot = getRingSlot(it, /*producer=*/false);
    // Issued before the wait so that their latency hides behind it.
    std::optional<BlockScales> blockScales;
    if (plan.recipe == GemmRecipe::blockwise)
      blockScales =
          loadBlockScales(thread, origin, loop.getInductionVar(), count);
    waitBarrier(fullBarrier(slot.stage), slot.parity);
    NVVM::WgmmaFenceAlignedOp::create(b);
    // The chain's first step does not accumulate: its input is ignored.
    Value partial = buildWgmmaChain(
        zero,
        sharedAddress(stageAddress(&StageLayout::a, slot.stage), rowsOffset),
        stageAddress(&StageLayout::b, slot.stage), plan.a.elementType,
        plan.b.elementType, plan.tileK, /*freshAccumulator=*/true);
    // Promoting while the next block's chain runs would need a second
    // partial accumulator read during a wgmma pipeline stage, which ptxas
    // answers by serializing every wgmma (C7514); the consumer warpgroups
    // interleave on the tensor cores instead.
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    releaseStage(thread, slot.stage);
    SmallVector<Value> scales;
    if (blockScales)
      scales = multiplyBlockScales(*blockScales, count);
    for (int64_t e = 0; e < count; ++e) {
      Value sum = LLVM::ExtractValueOp::create(b, acc, e);
      Value part = LLVM::ExtractValueOp::create(b, partial, e);
      sum = scales.empty()
                ? arith::AddFOp::create(b, sum, part).getResult()
                : LLVM::FMAOp::create(b, part, scales[e], sum).getResult();
      acc = LLVM::InsertValueOp::create(b, acc, sum, e);
    }
    scf::YieldOp::create(b,
                         ValueRange{arith::AddIOp::create(b, it, i32(1)), acc});
  }
  SmallVector<Value> values = unpackAccumulator(loop.getResult(1));
  if (plan.recipe == GemmRecipe::perTensor) {
    Value scale = arith::MulFOp::create(b, loadGlobalF32(args.aScales, i32(0)),
                                        loadGlobalF32(args.bScales, i32(0)));
    for (Value &value : values)
      value = arith::MulFOp::create(b, value, scale);
  }
  storeFragment(origin, values, kFragmentRun,
                [&](int64_t e) { return getFragmentCoordinates(thread, e); });
  return loop.getResult(0);
}

//===----------------------------------------------------------------------===//
// MX exact: dequantize to bf16 in shared memory, bf16 wgmma
//===----------------------------------------------------------------------===//

SmallVector<Value> GemmKernelBuilder::dequantizeChunk(Value data,
                                                      Value scaleByte,
                                                      Type elementType) {
  Value factor = buildScaleValue(
      b, b.getLoc(), arith::ExtUIOp::create(b, b.getI32Type(), scaleByte));
  auto pairType = VectorType::get({2}, b.getF32Type());
  Value factors = vector::BroadcastOp::create(b, pairType, factor);
  Value bytes =
      vector::BitCastOp::create(b, VectorType::get({16}, b.getI8Type()), data);
  SmallVector<Value> converted;
  for (int64_t i = 0; i < 16; i += 2) {
    Value pair =
        vector::ShuffleOp::create(b, bytes, bytes, ArrayRef<int64_t>{i, i + 1});
    Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
        b, VectorType::get({2}, b.getF16Type()), pair, /*relu=*/false,
        elementType);
    Value scaled = arith::MulFOp::create(
        b, arith::ExtFOp::create(b, pairType, halves), factors);
    // The product has at most 4 significant bits, so its bf16 value is the
    // upper half of its f32 bits (one byte permute for the pair instead of
    // a conversion): exact wherever bf16 holds the value.
    Value halfWords = vector::BitCastOp::create(
        b, VectorType::get({4}, b.getI16Type()), scaled);
    Value upper = vector::ShuffleOp::create(b, halfWords, halfWords,
                                            ArrayRef<int64_t>{1, 3});
    Value rounded = vector::BitCastOp::create(
        b, VectorType::get({2}, b.getBF16Type()), upper);
    for (int64_t j = 0; j < 2; ++j)
      converted.push_back(vector::ExtractOp::create(b, rounded, j));
  }
  return converted;
}

SmallVector<FP8Chunk>
GemmKernelBuilder::loadChunks(const ConsumerThread &thread, Value fp8Tile,
                              Value scaleChunk, int64_t half, int64_t rows) {
  // The consumer's `rows` rows x 4 16-byte chunks of this half: thread t
  // takes (row, chunk) = (q % rows, q / rows) for q = t, t + 128, ..., so
  // eight lanes touch eight rows of one chunk column: conflict-free under
  // the swizzle.
  int64_t chunksPerHalf = plan.dequantK / kChunkBytes; // 16 FP8 per chunk
  SmallVector<FP8Chunk> chunks;
  for (int64_t i = 0; i < rows * chunksPerHalf / kWarpgroupThreads; ++i) {
    FP8Chunk c;
    Value q = arith::AddIOp::create(b, thread.threadInGroup,
                                    i32(kWarpgroupThreads * i));
    Value row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, thread.consumer, i32(rows)),
        arith::RemUIOp::create(b, q, i32(rows)));
    c.chunkInHalf = arith::DivUIOp::create(b, q, i32(rows));
    c.rowPhase = arith::AndIOp::create(b, row, i32(7));
    c.rowBase = arith::MulIOp::create(b, row, i32(kRowBytes));
    Value chunk =
        arith::AddIOp::create(b, c.chunkInHalf, i32(chunksPerHalf * half));
    c.data = LLVM::LoadOp::create(b, VectorType::get({4}, b.getI32Type()),
                                  getSwizzledChunk(fp8Tile, c, chunk),
                                  /*alignment=*/16);
    // Scale (row, block) at the offset of the swizzled layout inside the
    // row's 128x4 chunk; 16 elements per 16-byte chunk, 32 per block.
    Value rowInChunk = arith::RemUIOp::create(b, row, i32(kScaleChunkRows));
    Value scaleOffset = arith::AddIOp::create(
        b,
        arith::AddIOp::create(
            b,
            arith::MulIOp::create(
                b, arith::DivUIOp::create(b, row, i32(kScaleChunkRows)),
                i32(kScaleChunkBytes)),
            arith::AddIOp::create(
                b,
                arith::MulIOp::create(
                    b, arith::RemUIOp::create(b, row, i32(32)), i32(16)),
                arith::MulIOp::create(
                    b, arith::DivUIOp::create(b, rowInChunk, i32(32)),
                    i32(4)))),
        arith::DivUIOp::create(b, chunk, i32(2)));
    c.scaleByte = LLVM::LoadOp::create(
        b, b.getI8Type(),
        sharedPointer(sharedAddress(scaleChunk, scaleOffset)));
    chunks.push_back(c);
  }
  return chunks;
}

Value GemmKernelBuilder::getSwizzledChunk(Value tile, const FP8Chunk &chunk,
                                          Value chunkIndex) {
  Value position = arith::ShLIOp::create(
      b, arith::XOrIOp::create(b, chunkIndex, chunk.rowPhase), i32(4));
  return sharedPointer(
      sharedAddress(tile, arith::AddIOp::create(b, chunk.rowBase, position)));
}

void GemmKernelBuilder::storeDequantized(ArrayRef<FP8Chunk> chunks,
                                         Value bf16Tile, Type elementType) {
  for (const FP8Chunk &chunk : chunks) {
    SmallVector<Value> values =
        dequantizeChunk(chunk.data, chunk.scaleByte, elementType);
    for (int64_t part = 0; part < 2; ++part) {
      Value eight = vector::FromElementsOp::create(
          b, VectorType::get({8}, b.getBF16Type()),
          ArrayRef<Value>(values).slice(8 * part, 8));
      Value target = arith::AddIOp::create(
          b, arith::MulIOp::create(b, chunk.chunkInHalf, i32(2)), i32(part));
      LLVM::StoreOp::create(b, eight, getSwizzledChunk(bf16Tile, chunk, target),
                            /*alignment=*/16);
    }
  }
}

Value GemmKernelBuilder::buildDequantizedTile(const ConsumerThread &thread,
                                              TileOrigin origin,
                                              Value iteration) {
  Type accType = getAccumulatorType();
  Value rowsOffset = arith::MulIOp::create(
      b, thread.consumer, i32(plan.rowsPerConsumer() * kRowBytes));
  auto loop = scf::ForOp::create(
      b, i32(0), i32(plan.kBlocks()), i32(1),
      ValueRange{iteration, LLVM::ZeroOp::create(b, accType)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0), acc = loop.getRegionIterArg(1);
    RingSlot slot = getRingSlot(it, /*producer=*/false);
    waitBarrier(fullBarrier(slot.stage), slot.parity);
    // One step per 64 K of the stage, each into the next bf16 buffer.
    int64_t steps = plan.tileK / plan.dequantK;
    for (int64_t half = 0; half < steps; ++half) {
      Value bufferA = sharedAddress(plan.dequantA[half % plan.dequantBuffers]);
      Value bufferB = sharedAddress(plan.dequantB[half % plan.dequantBuffers]);
      // Each consumer converts its own A rows and its share of B's. All
      // loads are issued before the first store, which the compiler may not
      // move them across (both are shared memory).
      SmallVector<FP8Chunk> aChunks =
          loadChunks(thread, stageAddress(&StageLayout::a, slot.stage),
                     stageAddress(&StageLayout::aScales, slot.stage), half,
                     plan.rowsPerConsumer());
      SmallVector<FP8Chunk> bChunks =
          loadChunks(thread, stageAddress(&StageLayout::b, slot.stage),
                     stageAddress(&StageLayout::bScales, slot.stage), half,
                     plan.tileN / plan.consumerWarpgroups);
      storeDequantized(aChunks, bufferA, plan.a.elementType);
      storeDequantized(bChunks, bufferB, plan.b.elementType);
      // The bf16 tiles are read by the tensor cores (async proxy); the
      // previous chain, which read the other buffer, must be done before
      // either warpgroup overwrites it at the next step.
      NVVM::FenceProxyOp::create(
          b, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(b.getContext(),
                                     NVVM::SharedSpace::shared_cta));
      NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
      NVVM::BarrierOp::create(b, TypeRange(), i32(kConsumerBarrierId),
                              i32(kWarpgroupThreads * plan.consumerWarpgroups),
                              NVVM::BarrierReductionAttr(), Value());
      if (half == steps - 1)
        releaseStage(thread, slot.stage);
      NVVM::WgmmaFenceAlignedOp::create(b);
      acc = buildWgmmaChain(acc, sharedAddress(bufferA, rowsOffset), bufferB,
                            b.getBF16Type(), b.getBF16Type(), kRowBytes,
                            /*freshAccumulator=*/false);
      NVVM::WgmmaGroupSyncAlignedOp::create(b);
    }
    scf::YieldOp::create(b,
                         ValueRange{arith::AddIOp::create(b, it, i32(1)), acc});
  }
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  storeFragment(origin, unpackAccumulator(loop.getResult(1)), kFragmentRun,
                [&](int64_t e) { return getFragmentCoordinates(thread, e); });
  return loop.getResult(0);
}

Value GemmKernelBuilder::buildSm90Tile(const ConsumerThread &thread,
                                       TileOrigin origin, Value iteration) {
  if (plan.recipe == GemmRecipe::mxExact)
    return buildDequantizedTile(thread, origin, iteration);
  return buildPromotedTile(thread, origin, iteration);
}
