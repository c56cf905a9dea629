//===- Sm90DequantizedMainLoop.cpp - Exact MX main loop on bf16 wgmma -----===//
//
// MX on SM90, which has no block-scaled tensor core: the FP8 stage is
// dequantized by the consumers, 64 K at a time, into a bf16 buffer with the
// same 128B swizzle (FP8 -> f16 by the exact hardware cvt, times 2^(b-127)
// in f32, rounded to bf16: exact unless the product leaves bf16's exponent
// range; scale byte 0xFF gives NaN), and multiplied with bf16 wgmma into one
// f32 accumulator (m64 x 256 per consumer). Two buffers alternate:
// converting one overlaps the tensor cores reading the other. Each
// warpgroup converts its own A rows and half of B, so a named barrier of
// the consumers separates the conversion from the wgmma that reads it.
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

constexpr int64_t kRowBytes = 128; // one 128B-swizzled row
constexpr int64_t kChunkBytes = 16;

/// One 16-byte chunk of FP8 operand data loaded for dequantization: its
/// bytes, its E8M0 scale byte, and where its row sits in a 128B-swizzled tile.
struct FP8Chunk {
  Value data, scaleByte;
  Value rowBase, rowPhase; // row * 128 and row % 8
  Value chunkInHalf;       // 0..3 within the 64-K half
};

class Sm90DequantizedMainLoop : public GemmMainLoop {
public:
  using GemmMainLoop::GemmMainLoop;

  Value buildTile(const ConsumerThread &thread, TileOrigin origin,
                  Value iteration) override;

private:
  Type getAccumulatorType();
  /// bf16 wgmma over one 128-byte row of K of the consumer's A rows at
  /// `aTile` and the B tile at `bTile`, accumulating into `accumulator`.
  Value buildChain(Value accumulator, Value aTile, Value bTile);
  /// Converts 16 FP8 values (vector<4xi32>) of one E8M0 block to bf16.
  SmallVector<Value> dequantizeChunk(Value data, Value scaleByte,
                                     Type elementType);
  /// Loads this consumer's `rows` rows of one half (64 K) of an FP8 stage
  /// tile, 16 bytes per chunk, with each chunk's E8M0 scale byte.
  SmallVector<FP8Chunk> loadChunks(const ConsumerThread &thread, Value fp8Tile,
                                   Value scaleChunk, int64_t half,
                                   int64_t rows);
  /// Dequantizes loaded chunks into the bf16 tile (same rows, 128B swizzle).
  void storeDequantized(ArrayRef<FP8Chunk> chunks, Value bf16Tile,
                        Type elementType);
  /// The address of 16-byte chunk `chunkIndex` of `chunk`'s row in a
  /// 128B-swizzled tile.
  Value getSwizzledChunk(Value tile, const FP8Chunk &chunk, Value chunkIndex);
};

} // namespace

Type Sm90DequantizedMainLoop::getAccumulatorType() {
  int64_t perThread = kWaveRows * plan.tileN / kWarpgroupThreads;
  return LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(perThread, b.getF32Type()));
}

Value Sm90DequantizedMainLoop::buildChain(Value accumulator, Value aTile,
                                          Value bTile) {
  constexpr uint64_t fixedFields = encodeWgmmaDescriptor(
      getKMajorSwizzledTile(/*startAddress=*/0, WgmmaSwizzle::bytes128));
  Value descA = k.withStartAddress(fixedFields, aTile);
  Value descB = k.withStartAddress(fixedFields, bTile);
  int64_t stepBytes = plan.mmaK * 2; // bf16
  auto shape =
      NVVM::MMAShapeAttr::get(b.getContext(), 64, plan.tileN, plan.mmaK);
  for (int64_t step = 0; step < kRowBytes / stepBytes; ++step) {
    Value offset = k.i64(getWgmmaAddressStep(step * stepBytes));
    accumulator = NVVM::WgmmaMmaAsyncOp::create(
        b, accumulator.getType(), accumulator,
        arith::AddIOp::create(b, descA, offset),
        arith::AddIOp::create(b, descB, offset), shape, NVVM::WGMMATypes::bf16,
        NVVM::WGMMATypes::bf16, NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
        NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr());
  }
  return accumulator;
}

SmallVector<Value> Sm90DequantizedMainLoop::dequantizeChunk(Value data,
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
Sm90DequantizedMainLoop::loadChunks(const ConsumerThread &thread, Value fp8Tile,
                                    Value scaleChunk, int64_t half,
                                    int64_t rows) {
  // The consumer's `rows` rows x 4 16-byte chunks of this half: thread t
  // takes (row, chunk) = (q % rows, q / rows) for q = t, t + 128, ..., so
  // eight lanes touch eight rows of one chunk column: conflict-free under
  // the swizzle.
  int64_t chunksPerHalf = plan.dequantK / kChunkBytes; // 16 FP8 per chunk
  SmallVector<FP8Chunk> chunks;
  for (int64_t i = 0; i < rows * chunksPerHalf / kWarpgroupThreads; ++i) {
    FP8Chunk c;
    Value q = arith::AddIOp::create(b, thread.threadInGroup,
                                    k.i32(kWarpgroupThreads * i));
    Value row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, thread.consumer, k.i32(rows)),
        arith::RemUIOp::create(b, q, k.i32(rows)));
    c.chunkInHalf = arith::DivUIOp::create(b, q, k.i32(rows));
    c.rowPhase = arith::AndIOp::create(b, row, k.i32(7));
    c.rowBase = arith::MulIOp::create(b, row, k.i32(kRowBytes));
    Value chunk =
        arith::AddIOp::create(b, c.chunkInHalf, k.i32(chunksPerHalf * half));
    c.data = LLVM::LoadOp::create(b, VectorType::get({4}, b.getI32Type()),
                                  getSwizzledChunk(fp8Tile, c, chunk),
                                  /*alignment=*/16);
    // Scale (row, block) at the offset of the swizzled layout inside the
    // row's 128x4 chunk; 16 elements per 16-byte chunk, 32 per block.
    Value rowInChunk = arith::RemUIOp::create(b, row, k.i32(kScaleChunkRows));
    Value scaleOffset = arith::AddIOp::create(
        b,
        arith::AddIOp::create(
            b,
            arith::MulIOp::create(
                b, arith::DivUIOp::create(b, row, k.i32(kScaleChunkRows)),
                k.i32(kScaleChunkBytes)),
            arith::AddIOp::create(
                b,
                arith::MulIOp::create(
                    b, arith::RemUIOp::create(b, row, k.i32(32)), k.i32(16)),
                arith::MulIOp::create(
                    b, arith::DivUIOp::create(b, rowInChunk, k.i32(32)),
                    k.i32(4)))),
        arith::DivUIOp::create(b, chunk, k.i32(2)));
    c.scaleByte = LLVM::LoadOp::create(
        b, b.getI8Type(),
        k.sharedPointer(k.sharedAddress(scaleChunk, scaleOffset)));
    chunks.push_back(c);
  }
  return chunks;
}

Value Sm90DequantizedMainLoop::getSwizzledChunk(Value tile,
                                                const FP8Chunk &chunk,
                                                Value chunkIndex) {
  Value position = arith::ShLIOp::create(
      b, arith::XOrIOp::create(b, chunkIndex, chunk.rowPhase), k.i32(4));
  return k.sharedPointer(
      k.sharedAddress(tile, arith::AddIOp::create(b, chunk.rowBase, position)));
}

void Sm90DequantizedMainLoop::storeDequantized(ArrayRef<FP8Chunk> chunks,
                                               Value bf16Tile,
                                               Type elementType) {
  for (const FP8Chunk &chunk : chunks) {
    SmallVector<Value> values =
        dequantizeChunk(chunk.data, chunk.scaleByte, elementType);
    for (int64_t part = 0; part < 2; ++part) {
      Value eight = vector::FromElementsOp::create(
          b, VectorType::get({8}, b.getBF16Type()),
          ArrayRef<Value>(values).slice(8 * part, 8));
      Value target = arith::AddIOp::create(
          b, arith::MulIOp::create(b, chunk.chunkInHalf, k.i32(2)),
          k.i32(part));
      LLVM::StoreOp::create(b, eight, getSwizzledChunk(bf16Tile, chunk, target),
                            /*alignment=*/16);
    }
  }
}

Value Sm90DequantizedMainLoop::buildTile(const ConsumerThread &thread,
                                         TileOrigin origin, Value iteration) {
  Type accType = getAccumulatorType();
  Value rowsOffset = arith::MulIOp::create(
      b, thread.consumer, k.i32(plan.rowsPerConsumer() * kRowBytes));
  auto loop = scf::ForOp::create(
      b, k.i32(0), k.i32(plan.kBlocks()), k.i32(1),
      ValueRange{iteration, LLVM::ZeroOp::create(b, accType)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0), acc = loop.getRegionIterArg(1);
    RingSlot slot = k.getRingSlot(it, /*producer=*/false);
    k.waitBarrier(k.fullBarrier(slot.stage), slot.parity);
    // One step per 64 K of the stage, each into the next bf16 buffer.
    int64_t steps = plan.tileK / plan.dequantK;
    for (int64_t half = 0; half < steps; ++half) {
      Value bufferA =
          k.sharedAddress(plan.dequantA[half % plan.dequantBuffers]);
      Value bufferB =
          k.sharedAddress(plan.dequantB[half % plan.dequantBuffers]);
      // Each consumer converts its own A rows and its share of B's. All
      // loads are issued before the first store, which the compiler may not
      // move them across (both are shared memory).
      SmallVector<FP8Chunk> aChunks =
          loadChunks(thread, k.stageAddress(&StageLayout::a, slot.stage),
                     k.stageAddress(&StageLayout::aScales, slot.stage), half,
                     plan.rowsPerConsumer());
      SmallVector<FP8Chunk> bChunks =
          loadChunks(thread, k.stageAddress(&StageLayout::b, slot.stage),
                     k.stageAddress(&StageLayout::bScales, slot.stage), half,
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
      k.syncConsumers();
      if (half == steps - 1)
        k.releaseStage(thread, slot.stage);
      NVVM::WgmmaFenceAlignedOp::create(b);
      acc = buildChain(acc, k.sharedAddress(bufferA, rowsOffset), bufferB);
      NVVM::WgmmaGroupSyncAlignedOp::create(b);
    }
    scf::YieldOp::create(
        b, ValueRange{arith::AddIOp::create(b, it, k.i32(1)), acc});
  }
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  Value accumulator = loop.getResult(1);
  SmallVector<Value> values;
  int64_t count = cast<LLVM::LLVMStructType>(accType).getBody().size();
  for (int64_t e = 0; e < count; ++e)
    values.push_back(LLVM::ExtractValueOp::create(b, accumulator, e));
  k.storeWaves(thread, origin, {values});
  return loop.getResult(0);
}

std::unique_ptr<GemmMainLoop>
gemm::createSm90DequantizedMainLoop(GemmKernelBuilder &k) {
  return std::make_unique<Sm90DequantizedMainLoop>(k);
}
