//===- Sm90DequantizedMainLoop.cpp - Exact MX main loop on bf16 wgmma -----===//
//
// MX on SM90, which has no block-scaled tensor core: FP8 x 2^(b-127) is
// converted to bf16 (FP8 -> f16 by the exact hardware cvt, times the scale
// in f32, the upper half of the f32 bits: exact unless the product leaves
// bf16's exponent range; scale byte 0xFF gives NaN) and multiplied with bf16
// wgmma into one f32 accumulator (m64 x 256 per consumer), 64 K at a time.
//
// * A never goes back to shared memory: each thread loads the bytes of its
//   own wgmma A fragment from the FP8 stage (one 4-byte load per row and
//   K step, conflict-free under the 128-byte swizzle), converts them in
//   registers and hands them to a wgmma whose A operand is registers (an
//   inline-asm `wgmma.mma_async ... {a0, a1, a2, a3}, descB`: MLIR 22.1's
//   NVVM op has no register-A form).
// * B is converted into a bf16 buffer of shared memory (128B-swizzled, K
//   major), each consumer warpgroup its half of the rows; two buffers
//   alternate, so converting one overlaps the tensor cores reading the
//   other, and a named barrier of the consumers separates the conversion
//   from the wgmma that reads it.
// * The K order inside each 16-element group is permuted, the same way for
//   A and B (which a sum over K allows): the fragment wants thread q of a
//   row quad to hold K elements {2q, 2q+1, 2q+8, 2q+9}, and its 4-byte load
//   brings bytes 4q..4q+3, so byte 4q+i is K element 2q+i (i < 2) or
//   2q+8+i-2; B's converted words are stored in that order.
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

constexpr int64_t kRowBytes = 128;  // one 128B-swizzled row
constexpr int64_t kChunkBytes = 16; // one swizzled chunk: 16 FP8, 8 bf16
/// K elements of one bf16 wgmma step.
constexpr int64_t kStepK = 16;

/// One 16-byte chunk of B loaded for conversion: its bytes, its E8M0 scale
/// byte, and where its row sits in a 128B-swizzled tile.
struct FP8Chunk {
  Value data, scaleByte;
  Value rowBase, rowPhase; // row * 128 and row % 8
  Value chunkInHalf;       // 0..3 within the 64-K half
};

/// The registers of one A fragment step: a0..a3, bf16 pairs.
using AFragment = SmallVector<Value, 4>;

class Sm90DequantizedMainLoop : public GemmMainLoop {
public:
  using GemmMainLoop::GemmMainLoop;

  Value buildTile(const ConsumerThread &thread, TileOrigin origin,
                  Value iteration) override;

private:
  Type getAccumulatorType();
  /// Converts `bytes` (a vector of an even number of FP8 codes of one E8M0
  /// block) to bf16 pairs, one i32 word per pair.
  SmallVector<Value> dequantizePairs(Value bytes, Value scaleByte,
                                     Type elementType);
  /// The scale byte of (row, 32-element block `block` of the stage) in the
  /// stage's 128x4 chunk at `scaleChunk`.
  Value loadScaleByte(Value scaleChunk, Value row, Value block);
  /// This consumer's share of B's rows of one half (64 K) of the stage,
  /// 16 bytes per chunk, with each chunk's E8M0 scale byte.
  SmallVector<FP8Chunk> loadBChunks(const ConsumerThread &thread,
                                    RingSlot slot, int64_t half);
  /// Converts loaded B chunks into the bf16 buffer at `bf16Tile` (same rows,
  /// 128B swizzle, K permuted within each 16-element group).
  void storeB(ArrayRef<FP8Chunk> chunks, Value bf16Tile);
  /// The thread's A fragments of the half's four K steps, converted.
  SmallVector<AFragment> loadAFragments(const ConsumerThread &thread,
                                        RingSlot slot, int64_t half);
  /// The address of 16-byte chunk `chunk` of row `rowBase / 128` (phase
  /// `rowPhase`) of a 128B-swizzled tile at `tile`.
  Value getSwizzledChunk(Value tile, Value rowBase, Value rowPhase,
                         Value chunk);
  /// One bf16 wgmma m64 x tileN x 16 with A from `fragment`, B from the
  /// K-major tile described by `descB`, accumulating into `accumulator`.
  Value buildRegisterAWgmma(Value accumulator, const AFragment &fragment,
                            Value descB);

  int64_t fragment() const { return kWaveRows * plan.tileN / kWarpgroupThreads; }
};

} // namespace

Type Sm90DequantizedMainLoop::getAccumulatorType() {
  return LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(fragment(), b.getF32Type()));
}

SmallVector<Value> Sm90DequantizedMainLoop::dequantizePairs(Value bytes,
                                                            Value scaleByte,
                                                            Type elementType) {
  Value factor = buildScaleValue(
      b, b.getLoc(), arith::ExtUIOp::create(b, b.getI32Type(), scaleByte));
  auto pairType = VectorType::get({2}, b.getF32Type());
  Value factors = vector::BroadcastOp::create(b, pairType, factor);
  int64_t count = cast<VectorType>(bytes.getType()).getNumElements();
  SmallVector<Value> words;
  for (int64_t i = 0; i < count; i += 2) {
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
    words.push_back(vector::ExtractOp::create(
        b,
        vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                  upper),
        0));
  }
  return words;
}

Value Sm90DequantizedMainLoop::loadScaleByte(Value scaleChunk, Value row,
                                             Value block) {
  // (row, block) of the tile sits at row / 128 * 512 + (row % 32) * 16 +
  // (row % 128) / 32 * 4 + block in the stage's 128x4 chunks.
  Value rowInChunk = arith::RemUIOp::create(b, row, k.i32(kScaleChunkRows));
  Value offset = arith::AddIOp::create(
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
      block);
  return LLVM::LoadOp::create(
      b, b.getI8Type(), k.sharedPointer(k.sharedAddress(scaleChunk, offset)));
}

Value Sm90DequantizedMainLoop::getSwizzledChunk(Value tile, Value rowBase,
                                                Value rowPhase, Value chunk) {
  Value position = arith::ShLIOp::create(
      b, arith::XOrIOp::create(b, chunk, rowPhase), k.i32(4));
  return k.sharedAddress(tile, arith::AddIOp::create(b, rowBase, position));
}

SmallVector<FP8Chunk>
Sm90DequantizedMainLoop::loadBChunks(const ConsumerThread &thread,
                                     RingSlot slot, int64_t half) {
  // The consumer's rows x 4 16-byte chunks of this half: thread t takes
  // (row, chunk) = (q % rows, q / rows) for q = t, t + 128, ..., so eight
  // lanes touch eight rows of one chunk column: conflict-free under the
  // swizzle.
  int64_t rows = plan.tileN / plan.consumerWarpgroups;
  int64_t chunksPerHalf = plan.dequantK / kChunkBytes;
  Value tile = k.stageAddress(&StageLayout::b, slot.stage);
  Value scales = k.stageAddress(&StageLayout::bScales, slot.stage);
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
    c.data = LLVM::LoadOp::create(
        b, VectorType::get({4}, b.getI32Type()),
        k.sharedPointer(getSwizzledChunk(tile, c.rowBase, c.rowPhase, chunk)),
        /*alignment=*/16);
    // 16 elements per chunk, 32 per block.
    c.scaleByte = loadScaleByte(scales, row,
                                arith::DivUIOp::create(b, chunk, k.i32(2)));
    chunks.push_back(c);
  }
  return chunks;
}

void Sm90DequantizedMainLoop::storeB(ArrayRef<FP8Chunk> chunks,
                                     Value bf16Tile) {
  auto wordsType = VectorType::get({4}, b.getI32Type());
  for (const FP8Chunk &chunk : chunks) {
    Value bytes = vector::BitCastOp::create(
        b, VectorType::get({16}, b.getI8Type()), chunk.data);
    SmallVector<Value> words =
        dequantizePairs(bytes, chunk.scaleByte, plan.b.elementType);
    // Words 2j hold K elements 4j, 4j + 1 (logical 2j, 2j + 1: the first 8
    // logical elements); words 2j + 1 the logical 8 + 2j, 9 + 2j.
    for (int64_t part = 0; part < 2; ++part) {
      Value stored = vector::FromElementsOp::create(
          b, wordsType,
          ValueRange{words[part], words[part + 2], words[part + 4],
                     words[part + 6]});
      Value target = arith::AddIOp::create(
          b, arith::MulIOp::create(b, chunk.chunkInHalf, k.i32(2)),
          k.i32(part));
      LLVM::StoreOp::create(
          b, stored,
          k.sharedPointer(getSwizzledChunk(bf16Tile, chunk.rowBase,
                                           chunk.rowPhase, target)),
          /*alignment=*/16);
    }
  }
}

SmallVector<AFragment>
Sm90DequantizedMainLoop::loadAFragments(const ConsumerThread &thread,
                                        RingSlot slot, int64_t half) {
  Value tile = k.stageAddress(&StageLayout::a, slot.stage);
  Value scales = k.stageAddress(&StageLayout::aScales, slot.stage);
  // Rows 16w + l/4 and 8 below it of the consumer's 64; bytes 4(l%4)..+3 of
  // each 16-byte K step.
  Value row = k.getFragmentCoordinates(thread, 0, 0).first;
  Value quad = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, thread.lane, k.i32(4)), k.i32(4));
  struct Row {
    Value base, phase;
    SmallVector<Value> scaleBytes; // per 32-element block of the half
  };
  SmallVector<Row> rows;
  int64_t blocksPerHalf = plan.dequantK / kMXBlock;
  for (int64_t offset : {0, 8}) {
    Row r;
    Value index = arith::AddIOp::create(b, row, k.i32(offset));
    r.base = arith::AddIOp::create(
        b, arith::MulIOp::create(b, index, k.i32(kRowBytes)), quad);
    r.phase = arith::AndIOp::create(b, index, k.i32(7));
    for (int64_t block = 0; block < blocksPerHalf; ++block)
      r.scaleBytes.push_back(loadScaleByte(
          scales, index, k.i32(blocksPerHalf * half + block)));
    rows.push_back(r);
  }
  int64_t steps = plan.dequantK / kStepK;
  SmallVector<SmallVector<Value>> loaded;
  for (int64_t step = 0; step < steps; ++step) {
    Value chunk = k.i32(steps * half + step);
    for (const Row &r : rows)
      loaded.push_back({LLVM::LoadOp::create(
          b, VectorType::get({4}, b.getI8Type()),
          k.sharedPointer(getSwizzledChunk(tile, r.base, r.phase, chunk)),
          /*alignment=*/4)});
  }
  // All loads are issued before the first conversion.
  SmallVector<AFragment> fragments;
  for (int64_t step = 0; step < steps; ++step) {
    int64_t block = step * kStepK / kMXBlock;
    SmallVector<Value> top = dequantizePairs(
        loaded[2 * step][0], rows[0].scaleBytes[block], plan.a.elementType);
    SmallVector<Value> bottom = dequantizePairs(
        loaded[2 * step + 1][0], rows[1].scaleBytes[block], plan.a.elementType);
    // a0, a1: logical K 2q, 2q + 1 of rows r and r + 8; a2, a3: 2q + 8,
    // 2q + 9.
    fragments.push_back({top[0], bottom[0], top[1], bottom[1]});
  }
  return fragments;
}

Value Sm90DequantizedMainLoop::buildRegisterAWgmma(Value accumulator,
                                                   const AFragment &fragment,
                                                   Value descB) {
  // Operands: the accumulator as outputs $0.. tied to the same inputs, then
  // a0..a3 and B's descriptor.
  int64_t n = this->fragment();
  std::string accumulators, constraints;
  for (int64_t i = 0; i < n; ++i) {
    accumulators += "$" + std::to_string(i) + (i + 1 < n ? ", " : "");
    constraints += "=f,";
  }
  for (int64_t i = 0; i < n; ++i)
    constraints += std::to_string(i) + ",";
  constraints += "r,r,r,r,l,r";
  auto operand = [&](int64_t i) { return "$" + std::to_string(2 * n + i); };
  // scale-d is a predicate: 1, the accumulator is always added to (the
  // tile's first chain adds to zeros).
  std::string asmString =
      "{\n.reg .pred p;\nsetp.ne.b32 p, " + operand(5) +
      ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(plan.tileN) +
      "k16.f32.bf16.bf16 {" + accumulators + "}, {" + operand(0) + ", " +
      operand(1) + ", " + operand(2) + ", " + operand(3) + "}, " + operand(4) +
      ", p, 1, 1, 0;\n}";
  SmallVector<Value> operands;
  for (int64_t i = 0; i < n; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(b, accumulator, i));
  operands.append(fragment.begin(), fragment.end());
  operands.push_back(descB);
  operands.push_back(k.i32(1));
  return LLVM::InlineAsmOp::create(
             b, accumulator.getType(), operands, asmString, constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
             ArrayAttr())
      .getResult(0);
}

Value Sm90DequantizedMainLoop::buildTile(const ConsumerThread &thread,
                                         TileOrigin origin, Value iteration) {
  constexpr uint64_t fixedFields = encodeWgmmaDescriptor(
      getKMajorSwizzledTile(/*startAddress=*/0, WgmmaSwizzle::bytes128));
  auto loop = scf::ForOp::create(
      b, k.i32(0), k.i32(plan.kBlocks()), k.i32(1),
      ValueRange{iteration, LLVM::ZeroOp::create(b, getAccumulatorType())});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0), acc = loop.getRegionIterArg(1);
    RingSlot slot = k.getRingSlot(it, /*producer=*/false);
    k.waitBarrier(k.fullBarrier(slot.stage), slot.parity);
    // One step per 64 K of the stage, each into the next bf16 buffer.
    int64_t halves = plan.tileK / plan.dequantK;
    for (int64_t half = 0; half < halves; ++half) {
      Value bufferB =
          k.sharedAddress(plan.dequantB[half % plan.dequantBuffers]);
      // All loads of the step are issued before the first store, which the
      // compiler may not move them across (both are shared memory).
      SmallVector<FP8Chunk> bChunks = loadBChunks(thread, slot, half);
      SmallVector<AFragment> aFragments = loadAFragments(thread, slot, half);
      storeB(bChunks, bufferB);
      // The bf16 tile is read by the tensor cores (async proxy); the
      // previous chain, which read the other buffer and its own A
      // registers, must be done before either warpgroup overwrites them at
      // the next step.
      NVVM::FenceProxyOp::create(
          b, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(b.getContext(),
                                     NVVM::SharedSpace::shared_cta));
      NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
      k.syncConsumers();
      if (half == halves - 1)
        k.releaseStage(thread, slot.stage);
      NVVM::WgmmaFenceAlignedOp::create(b);
      Value descB = k.withStartAddress(fixedFields, bufferB);
      for (auto [step, fragment] : llvm::enumerate(aFragments))
        acc = buildRegisterAWgmma(
            acc, fragment,
            arith::AddIOp::create(
                b, descB,
                k.i64(getWgmmaAddressStep(step * kStepK * 2 /* bf16 */))));
      NVVM::WgmmaGroupSyncAlignedOp::create(b);
    }
    scf::YieldOp::create(
        b, ValueRange{arith::AddIOp::create(b, it, k.i32(1)), acc});
  }
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  Value accumulator = loop.getResult(1);
  SmallVector<Value> values;
  for (int64_t e = 0; e < fragment(); ++e)
    values.push_back(LLVM::ExtractValueOp::create(b, accumulator, e));
  k.storeWaves(thread, origin, {values});
  return loop.getResult(0);
}

std::unique_ptr<GemmMainLoop>
gemm::createSm90DequantizedMainLoop(GemmKernelBuilder &k) {
  return std::make_unique<Sm90DequantizedMainLoop>(k);
}
