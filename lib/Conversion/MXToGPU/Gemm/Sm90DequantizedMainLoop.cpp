//===- Sm90DequantizedMainLoop.cpp - Exact MX main loop on bf16 wgmma -----===//
//
// MX on SM90, which has no block-scaled tensor core: each code times
// 2^(b-127) is converted to bf16 and multiplied with bf16 wgmma into one f32
// accumulator (m64 x 256 per consumer), 64 K at a time. Every MX element
// type takes this loop, A and B in any mix (docs/gpu.md, "Main loops"),
// converted by the decoder of MXDecode.h in every stage of every tile (the
// staged form, Sm90StagedMainLoop.cpp, converts each operand once instead).
//
// * A never goes back to shared memory: each thread loads its own part of
//   the stage (one load per row and 64-K half, conflict-free under the
//   swizzle), converts it in registers and hands it to a wgmma whose A
//   operand is registers (an inline-asm `wgmma.mma_async ... {a0, a1, a2,
//   a3}, descB`: MLIR 22.1's NVVM op has no register-A form).
// * B is converted into a bf16 buffer of shared memory (128B-swizzled, K
//   major), each consumer warpgroup its half of the rows, each thread a
//   row; two buffers alternate, so converting one overlaps the tensor cores
//   reading the other, and a named barrier of the consumers separates the
//   conversion from the wgmma that reads it.
// * The K order inside each 64-element half is permuted, the same way for
//   A and B (which a sum over K allows): thread q of a row quad loads unit
//   q, elements 16q..16q+15 (16 bytes of FP8 or INT8, 12 of FP6, 8 of FP4),
//   and the fragment of K step s wants it to hold the logical K {2q, 2q+1,
//   2q+8, 2q+9}: those are its elements 16q+4s..16q+4s+3, and B's converted
//   words are stored in that order.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"
#include "MXDecode.h"

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"
#include "mx/Dialect/MX/IR/ElementFormat.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr int64_t kRowBytes = 128;  // one 128B-swizzled row of bf16
constexpr int64_t kChunkBytes = 16; // one swizzled chunk
/// K elements of one bf16 wgmma step, and of one thread's unit of a 64-K
/// half (four steps): unit q of a half is its elements 16q..16q+15.
constexpr int64_t kStepK = 16;
constexpr int64_t kUnitK = kDecodeUnitK;
/// Units of a 64-K half: one per thread of a row quad.
constexpr int64_t kUnits = 4;

/// The registers of one A fragment step: a0..a3, bf16 pairs.
using AFragment = SmallVector<Value, 4>;

class Sm90DequantizedMainLoop : public GemmMainLoop {
public:
  using GemmMainLoop::GemmMainLoop;

  Value buildTile(const ConsumerThread &thread, TileOrigin origin,
                  Value iteration) override;

private:
  Type getAccumulatorType();
  /// Loads `bytes` (16, 12 or 8) at byte `offset` of the row at `row` of
  /// the operand's stage tile at `tile` (swizzled as the plan says), as i32
  /// words.
  SmallVector<Value> loadRowWords(const OperandPlan &operand, Value tile,
                                  Value row, Value offset, int64_t bytes);
  /// The E8M0 scale byte of unit `unit` of half `half` of the row at `row`.
  Value loadUnitScale(Value scales, Value row, int64_t half, Value unit);
  /// The scale byte of (row, 32-element block `block` of the stage) in the
  /// stage's 128x4 chunk at `scaleChunk`.
  Value loadScaleByte(Value scaleChunk, Value row, Value block);
  /// Loads this consumer's rows of B's half `half` (one row per thread).
  SmallVector<LoadedUnit> loadB(const ConsumerThread &thread, RingSlot slot,
                                int64_t half, SmallVector<Value> &rows);
  /// Converts the loaded units of each row into the bf16 buffer at
  /// `bf16Tile` (128B swizzle, K permuted as the A fragments are).
  void storeB(ArrayRef<LoadedUnit> units, ArrayRef<Value> rows,
              Value bf16Tile);
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

SmallVector<Value> Sm90DequantizedMainLoop::loadRowWords(
    const OperandPlan &operand, Value tile, Value row, Value offset,
    int64_t bytes) {
  // The bytes never cross a 16-byte chunk, which the swizzle moves whole:
  // chunk c of row r sits at chunk c ^ (r % 8) (128B) or c ^ (r / 2 % 4)
  // (64B, rows of 64 bytes).
  if (operand.swizzleBytes) {
    Value phase = operand.swizzleBytes == 128
                      ? arith::AndIOp::create(b, row, k.i32(7)).getResult()
                      : arith::AndIOp::create(
                            b, arith::ShRUIOp::create(b, row, k.i32(1)),
                            k.i32(3))
                            .getResult();
    offset = arith::XOrIOp::create(
        b, offset, arith::ShLIOp::create(b, phase, k.i32(4)));
  }
  Value address = k.sharedAddress(
      tile, arith::AddIOp::create(
                b, arith::MulIOp::create(b, row, k.i32(operand.rowBytes)),
                offset));
  Value loaded = LLVM::LoadOp::create(
      b, VectorType::get({bytes / 4}, b.getI32Type()), k.sharedPointer(address),
      /*alignment=*/bytes & -bytes);
  SmallVector<Value> words;
  for (int64_t i = 0; i < bytes / 4; ++i)
    words.push_back(vector::ExtractOp::create(b, loaded, i));
  return words;
}

Value Sm90DequantizedMainLoop::loadUnitScale(Value scales, Value row,
                                             int64_t half, Value unit) {
  // Unit q of half h lies in 32-element block 2h + q / 2 of the stage.
  Value block = arith::AddIOp::create(
      b, arith::DivUIOp::create(b, unit, k.i32(kMXBlock / kUnitK)),
      k.i32(kUnits * kUnitK / kMXBlock * half));
  return loadScaleByte(scales, row, block);
}

SmallVector<LoadedUnit>
Sm90DequantizedMainLoop::loadB(const ConsumerThread &thread, RingSlot slot,
                               int64_t half, SmallVector<Value> &rows) {
  // Thread t converts whole rows t, t + 128, ... of the consumer's share,
  // loading the half's bytes of a row 16 at a time (FP8 and INT8: 4 loads,
  // FP6: 3, FP4: 2): eight lanes read eight rows of one chunk column,
  // conflict-free under the swizzle.
  int64_t consumerRows = plan.tileN / plan.consumerWarpgroups;
  assert(consumerRows % kWarpgroupThreads == 0 && "rows per thread");
  ElementFormat format = getVerifiedElementFormat(plan.b.elementType);
  int64_t halfBytes = format.getStoredBytes(kUnits * kUnitK);
  int64_t unitWords = format.getStoredBytes(kUnitK) / 4;
  Value tile = k.stageAddress(&StageLayout::b, slot.stage);
  Value scales = k.stageAddress(&StageLayout::bScales, slot.stage);
  SmallVector<LoadedUnit> units;
  for (int64_t i = 0; i < consumerRows / kWarpgroupThreads; ++i) {
    Value row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, thread.consumer, k.i32(consumerRows)),
        arith::AddIOp::create(b, thread.threadInGroup,
                              k.i32(kWarpgroupThreads * i)));
    rows.push_back(row);
    SmallVector<Value> words;
    for (int64_t chunk = 0; chunk < halfBytes / kChunkBytes; ++chunk)
      llvm::append_range(
          words, loadRowWords(plan.b, tile, row,
                              k.i32(halfBytes * half + kChunkBytes * chunk),
                              kChunkBytes));
    for (int64_t unit = 0; unit < kUnits; ++unit) {
      LoadedUnit loaded;
      loaded.words.assign(words.begin() + unit * unitWords,
                          words.begin() + (unit + 1) * unitWords);
      loaded.scaleByte = loadUnitScale(scales, row, half, k.i32(unit));
      units.push_back(loaded);
    }
  }
  return units;
}

void Sm90DequantizedMainLoop::storeB(ArrayRef<LoadedUnit> units,
                                     ArrayRef<Value> rows, Value bf16Tile) {
  auto wordsType = VectorType::get({4}, b.getI32Type());
  for (auto [i, row] : llvm::enumerate(rows)) {
    SmallVector<UnitPairs> pairs;
    for (const LoadedUnit &unit : units.slice(i * kUnits, kUnits))
      pairs.push_back(decodeMXUnit(b, plan.b.elementType, unit));
    Value rowBase = arith::MulIOp::create(b, row, k.i32(kRowBytes));
    Value rowPhase = arith::AndIOp::create(b, row, k.i32(7));
    // Step s's logical K 2q, 2q + 1 (chunk 2s, word q) are unit q's
    // elements 4s, 4s + 1 (pair 2s); its logical 2q + 8, 2q + 9 (chunk
    // 2s + 1) the elements 4s + 2, 4s + 3 (pair 2s + 1).
    for (int64_t chunk = 0; chunk < 2 * kUnitK / 4; ++chunk) {
      SmallVector<Value> words;
      for (const UnitPairs &unit : pairs)
        words.push_back(unit[chunk]);
      LLVM::StoreOp::create(
          b, vector::FromElementsOp::create(b, wordsType, words),
          k.sharedPointer(
              getSwizzledChunk(bf16Tile, rowBase, rowPhase, k.i32(chunk))),
          /*alignment=*/16);
    }
  }
}

SmallVector<AFragment>
Sm90DequantizedMainLoop::loadAFragments(const ConsumerThread &thread,
                                        RingSlot slot, int64_t half) {
  Value tile = k.stageAddress(&StageLayout::a, slot.stage);
  Value scales = k.stageAddress(&StageLayout::aScales, slot.stage);
  // Rows 16w + l/4 and 8 below it of the consumer's 64; unit l % 4 of each.
  Value row = k.getFragmentCoordinates(thread, 0, 0).first;
  Value unit = arith::RemUIOp::create(b, thread.lane, k.i32(kUnits));
  ElementFormat format = getVerifiedElementFormat(plan.a.elementType);
  int64_t unitBytes = format.getStoredBytes(kUnitK);
  Value offset = arith::AddIOp::create(
      b, k.i32(format.getStoredBytes(kUnits * kUnitK * half)),
      arith::MulIOp::create(b, unit, k.i32(unitBytes)));
  SmallVector<LoadedUnit> loaded;
  for (int64_t rowOffset : {0, 8}) {
    Value rowIndex = arith::AddIOp::create(b, row, k.i32(rowOffset));
    LoadedUnit l;
    l.words.assign(
        loadRowWords(plan.a, tile, rowIndex, offset, unitBytes));
    l.scaleByte = loadUnitScale(scales, rowIndex, half, unit);
    loaded.push_back(l);
  }
  // All loads are issued before the first conversion.
  UnitPairs top = decodeMXUnit(b, plan.a.elementType, loaded[0]);
  UnitPairs bottom = decodeMXUnit(b, plan.a.elementType, loaded[1]);
  // Step s: a0, a1 are logical K 2q, 2q + 1 of rows r and r + 8 (the
  // unit's pair 2s), a2, a3 the logical 2q + 8, 2q + 9 (pair 2s + 1).
  SmallVector<AFragment> fragments;
  for (int64_t step = 0; step < plan.dequantK / kStepK; ++step)
    fragments.push_back({top[2 * step], bottom[2 * step], top[2 * step + 1],
                         bottom[2 * step + 1]});
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
      SmallVector<Value> bRows;
      SmallVector<LoadedUnit> bUnits = loadB(thread, slot, half, bRows);
      SmallVector<AFragment> aFragments = loadAFragments(thread, slot, half);
      storeB(bUnits, bRows, bufferB);
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
