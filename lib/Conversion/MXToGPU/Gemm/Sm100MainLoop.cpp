//===- Sm100MainLoop.cpp - tcgen05 main loop of the SM100 GEMM kernel -----===//
//
// The MX kernel of SM100 on top of the skeleton (GemmSkeleton.cpp), which
// runs its tile order, TMA loads of A, B and the 128x4 scale chunks, stage
// ring and output stores unchanged from SM90. What is SM100's own:
//
// * tensor memory, allocated by warp 1 before the roles start (its address
//   handed to every thread through shared memory) and freed by it after they
//   end; its columns are the plan's (TensorMemoryPlan);
// * the MMA thread, one elected thread of warp 1: per stage it copies the
//   stage's scale chunks into the stage's scale columns with
//   `tcgen05.cp .32x128b.warpx4` (a 128x4 chunk is 32 rows of 16 bytes, each
//   row the 4 K-block scales of rows r, r + 32, r + 64, r + 96, lands in lane
//   r, one column per row group; the copy repeats it in the 4 lane quarters,
//   and the tensor core reads row m's scales at lane m % 32 of its quarter,
//   column m / 32), then issues the stage's `tcgen05.mma.block_scale`s:
//   four of K = 32 (kind::mxf8f6f4) whose instruction descriptors pick scale
//   byte k of each column, or for two packed E2M1 operands two of K = 64
//   (kind::mxf4, scale_vec::2X) that pick bytes 2k and 2k + 1
//   (Tcgen05Descriptors.h), and `tcgen05.commit`s the stage's empty barrier:
//   the commit arrives when the tensor core has read the stage. After a
//   tile's last stage it commits the accumulator-full barrier;
// * the epilogue warpgroup: thread t owns tile row t, which is tensor-memory
//   lane t (warp w of the group may read lanes 32w..32w+31). It reads the
//   accumulator 32 columns at a time with `tcgen05.ld .32x32b.x32`, releases
//   it to the MMA thread after the last read, and stores 16-byte runs of its
//   row through the skeleton's masked store.
//
// One accumulator (256 columns) and 4 stages of scale columns fill 304 of
// the 512 columns, and a second accumulator would not fit: the MMA of the
// next tile waits until the epilogue has read this one, which it does
// between its stores (holding a whole row of 256 columns before storing it
// needs more than the 255 registers a thread has: ptxas spills), so only
// the last 32 columns' stores overlap the next tile's MMAs.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mx/Conversion/MXToGPU/Gemm/Tcgen05Descriptors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

/// The warp that owns tensor memory and whose elected thread issues MMAs.
constexpr int64_t kMmaWarp = 1;
/// Columns of one 128x4 scale chunk in tensor memory (16 bytes per lane).
constexpr int64_t kChunkColumns = 4;
/// Accumulator columns one tcgen05.ld .32x32b.x32 reads per thread.
constexpr int64_t kLoadColumns = 32;
constexpr int64_t kStoreBytes = 16;

/// The format of an operand the plan admitted (FP8, FP6, FP4), as
/// kind::mxf8f6f4 numbers it (the encoder renumbers E2M1 for kind::mxf4).
Tcgen05OperandFormat getOperandFormat(Type type) {
  return TypeSwitch<Type, Tcgen05OperandFormat>(type)
      .Case([](Float8E5M2Type) { return Tcgen05OperandFormat::e5m2; })
      .Case([](Float6E3M2FNType) { return Tcgen05OperandFormat::e3m2; })
      .Case([](Float6E2M3FNType) { return Tcgen05OperandFormat::e2m3; })
      .Case([](Float4E2M1FNType) { return Tcgen05OperandFormat::e2m1; })
      .Case([](Float8E4M3FNType) { return Tcgen05OperandFormat::e4m3; })
      .Default([](Type) -> Tcgen05OperandFormat {
        llvm_unreachable("the plan admits FP8, FP6 and FP4 operands only");
      });
}

/// The NVVM spelling of `kind`.
NVVM::MMABlockScaleKind getBlockScaleKind(Tcgen05BlockScaledKind kind) {
  switch (kind) {
  case Tcgen05BlockScaledKind::mxf8f6f4:
    return NVVM::MMABlockScaleKind::MXF8F6F4;
  case Tcgen05BlockScaledKind::mxf4:
    return NVVM::MMABlockScaleKind::MXF4;
  case Tcgen05BlockScaledKind::mxf4nvf4:
    return NVVM::MMABlockScaleKind::MXF4NVF4;
  }
  llvm_unreachable("unknown block-scaled kind");
}

class Sm100MainLoop : public GemmMainLoop {
public:
  using GemmMainLoop::GemmMainLoop;

  void initBarriers() override;
  /// Warp 1 allocates the plan's tensor memory and writes its address to
  /// the shared slot; after the CTA barrier every thread reads it.
  void beforeSync() override;
  void afterSync() override;
  /// The MMA thread, one elected thread of warp 1: per stage, tcgen05.cp of
  /// the scale chunks and four block-scaled MMAs; tcgen05.commit frees the
  /// stage and, after a tile's last stage, hands the accumulator to the
  /// epilogue.
  void buildProducerRoles() override;
  /// The epilogue of tile number `tilesDone` of this CTA: tcgen05.ld of the
  /// accumulator 32 columns at a time, stored in the output type. Returns
  /// tilesDone + 1.
  Value buildTile(const ConsumerThread &thread, TileOrigin origin,
                  Value tilesDone) override;
  /// After every role has finished: warp 1 frees the tensor memory.
  void tearDown() override;

private:
  /// The tensor-memory address of (`lane`, base column + `column`).
  Value getTensorMemoryAddress(Value lane, Value column);
  void buildMmaIssuer();
  void issueStageMmas(RingSlot slot, Value accumulateFirst);
  Value accumulatorFull() {
    return k.sharedPointer(k.sharedAddress(plan.accumulatorFull));
  }
  Value accumulatorEmpty() {
    return k.sharedPointer(k.sharedAddress(plan.accumulatorEmpty));
  }

  Value tensorMemoryBase; // i32 tcgen05.alloc result
};

} // namespace

void Sm100MainLoop::initBarriers() {
  NVVM::MBarrierInitOp::create(b, accumulatorFull(), k.i32(1), Value());
  NVVM::MBarrierInitOp::create(b, accumulatorEmpty(),
                               k.i32(kWarpgroupThreads), Value());
}

void Sm100MainLoop::beforeSync() {
  Value slot = k.sharedPointer(k.sharedAddress(plan.tensorMemorySlot));
  k.ifThen(k.isInWarp(kMmaWarp), [&] {
    NVVM::Tcgen05AllocOp::create(b, slot, k.i32(plan.tensorMemory.columns));
    NVVM::Tcgen05RelinquishAllocPermitOp::create(b);
  });
  // The barrier that publishes the barriers' initialization also publishes
  // the address; the fences order the allocation around it.
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
}

void Sm100MainLoop::afterSync() {
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  tensorMemoryBase = LLVM::LoadOp::create(
      b, b.getI32Type(),
      k.sharedPointer(k.sharedAddress(plan.tensorMemorySlot)));
}

void Sm100MainLoop::tearDown() {
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  NVVM::Barrier0Op::create(b);
  k.ifThen(k.isInWarp(kMmaWarp), [&] {
    NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
    NVVM::Tcgen05DeallocOp::create(b, getTensorMemoryAddress(k.i32(0), k.i32(0)),
                                   k.i32(plan.tensorMemory.columns));
  });
}

Value Sm100MainLoop::getTensorMemoryAddress(Value lane, Value column) {
  // A tensor-memory address is the lane in bits 16-31 and the column in
  // bits 0-15.
  Value address = arith::AddIOp::create(
      b, tensorMemoryBase,
      arith::AddIOp::create(b, arith::ShLIOp::create(b, lane, k.i32(16)),
                            column));
  return LLVM::IntToPtrOp::create(
      b,
      LLVM::LLVMPointerType::get(b.getContext(),
                                 unsigned(NVVM::NVVMMemorySpace::Tensor)),
      address);
}

void Sm100MainLoop::issueStageMmas(RingSlot slot, Value accumulateFirst) {
  const TensorMemoryPlan &tmem = plan.tensorMemory;
  auto stageColumn = [&](ArrayRef<int64_t> columns, int64_t offset) {
    return arith::AddIOp::create(
        b, k.i32(columns[0] + offset),
        arith::MulIOp::create(b, slot.stage, k.i32(columns[1] - columns[0])));
  };
  // The stage's scale chunks into its scale columns. Shared memory holds
  // them row tile major (chunk r * alongK + j), tensor memory K chunk major:
  // the MMAs of K chunk j read the columns of every row tile from
  // kChunkColumns * rowTiles * j on.
  constexpr uint64_t chunkFields =
      encodeTcgen05SmemDescriptor(getTcgen05ScaleChunk(/*startAddress=*/0));
  int64_t alongK = plan.scaleChunksAlongK();
  auto copyChunks = [&](int64_t StageLayout::*buffer, ArrayRef<int64_t> columns,
                        int64_t tileRows) {
    int64_t rowTiles = tileRows / kScaleChunkRows;
    for (int64_t chunk = 0; chunk < plan.scaleChunks(tileRows); ++chunk) {
      Value source = k.sharedAddress(k.stageAddress(buffer, slot.stage),
                                   k.i32(kScaleChunkBytes * chunk));
      int64_t column = kChunkColumns * ((chunk % alongK) * rowTiles +
                                        chunk / alongK);
      NVVM::Tcgen05CpOp::create(
          b, NVVM::Tcgen05CpShape::SHAPE_32x128b, NVVM::CTAGroupKind::CTA_1,
          NVVM::Tcgen05CpMulticast::WARPX4, NVVM::Tcgen05CpSrcFormatAttr(),
          getTensorMemoryAddress(k.i32(0), stageColumn(columns, column)),
          k.withStartAddress(chunkFields, source));
    }
  };
  copyChunks(&StageLayout::aScales, tmem.aScales, plan.tileM);
  copyChunks(&StageLayout::bScales, tmem.bScales, plan.tileN);

  // Both operands' rows are as wide (the plan gives packed rows to
  // kind::mxf4 only, on both).
  assert(plan.a.rowBytes == plan.b.rowBytes && "operand rows differ");
  uint64_t tileFields = encodeTcgen05SmemDescriptor(
      getTcgen05KMajorSwizzledTile(0, plan.a.rowBytes));
  Value descA =
      k.withStartAddress(tileFields, k.stageAddress(&StageLayout::a, slot.stage));
  Value descB =
      k.withStartAddress(tileFields, k.stageAddress(&StageLayout::b, slot.stage));
  Value accumulator = getTensorMemoryAddress(k.i32(0), k.i32(tmem.accumulator));
  // MMA s reads 32 bytes of each row from 32s on (32 unpacked or 64 packed
  // elements) and the scales of its K blocks: byte sf_id of each scale
  // column, one per MMA of kind::mxf8f6f4, two (scale_vec::2X, sf_id 0 or
  // 2) per MMA of kind::mxf4, all four (scale_vec::4X, sf_id 0) of the
  // MMA's own K chunk for NVFP4's blocks of 16.
  int64_t stepBytes = plan.a.rowBytes * plan.mmaK / plan.tileK;
  int64_t blocksPerMma = plan.mmaK / plan.scaleBlockK;
  constexpr int64_t kBlocksPerChunk = 4;
  bool nvfp4 = plan.hasTensorScales();
  for (int64_t s = 0; s < plan.tileK / plan.mmaK; ++s) {
    int64_t block = s * blocksPerMma;
    int64_t chunk = block / kBlocksPerChunk;
    BlockScaledInstructionFields fields;
    fields.kind = plan.mmaKind;
    fields.a = getOperandFormat(plan.a.elementType);
    fields.b = getOperandFormat(plan.b.elementType);
    fields.scaleFormat =
        nvfp4 ? Tcgen05ScaleFormat::ue4m3 : Tcgen05ScaleFormat::ue8m0;
    fields.m = plan.tileM;
    fields.n = plan.tileN;
    fields.aScaleId = fields.bScaleId = block % kBlocksPerChunk;
    assert(isValidBlockScaledInstruction(fields) && "invalid MMA");
    Value step = k.i64(getWgmmaAddressStep(s * stepBytes));
    auto scales = [&](ArrayRef<int64_t> columns, int64_t tileRows) {
      return getTensorMemoryAddress(
          k.i32(0), stageColumn(columns, kChunkColumns * chunk * tileRows /
                                             kScaleChunkRows));
    };
    Value scalesA = scales(tmem.aScales, plan.tileM);
    Value scalesB = scales(tmem.bScales, plan.tileN);
    NVVM::Tcgen05MMABlockScaleOp::create(
        b, getBlockScaleKind(plan.mmaKind), NVVM::CTAGroupKind::CTA_1,
        nvfp4 ? NVVM::Tcgen05MMABlockScale::BLOCK16
              : NVVM::Tcgen05MMABlockScale::BLOCK32,
        NVVM::Tcgen05MMACollectorOp::DISCARD, accumulator,
        arith::AddIOp::create(b, descA, step),
        arith::AddIOp::create(b, descB, step),
        k.i32(encodeBlockScaledInstruction(fields)),
        s == 0 ? accumulateFirst : arith::ConstantIntOp::create(b, 1, 1),
        scalesA, scalesB);
  }
}

void Sm100MainLoop::buildProducerRoles() {
  k.ifElectedInWarp(kMmaWarp, [&] { buildMmaIssuer(); });
}

void Sm100MainLoop::buildMmaIssuer() {
  Value full = accumulatorFull(), empty = accumulatorEmpty();
  k.forEachTile([&](TileOrigin, Value iteration) -> Value {
    // Every tile takes kBlocks ring iterations, so the tiles done so far
    // give the accumulator's phase; like the producer's first pass through
    // the ring, the first tile does not wait.
    Value tilesDone = arith::DivUIOp::create(b, iteration, k.i32(plan.kBlocks()));
    k.waitBarrier(empty,
                arith::XOrIOp::create(
                    b, arith::AndIOp::create(b, tilesDone, k.i32(1)), k.i32(1)));
    NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
    Value next = k.forEachStage(
        iteration, /*producer=*/false, [&](Value kBlock, RingSlot slot) {
          NVVM::Tcgen05FenceOp::create(
              b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
          issueStageMmas(slot,
                         arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                               kBlock, k.i32(0)));
          NVVM::Tcgen05CommitOp::create(b, k.emptyBarrier(slot.stage), Value());
        });
    NVVM::Tcgen05CommitOp::create(b, full, Value());
    return next;
  });
}

Value Sm100MainLoop::buildTile(const ConsumerThread &thread,
                                TileOrigin origin, Value tilesDone) {
  k.waitBarrier(accumulatorFull(),
              arith::AndIOp::create(b, tilesDone, k.i32(1)));
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  Value warpLanes = arith::MulIOp::create(b, thread.warp, k.i32(32));
  int64_t outBytes = plan.outputType.getIntOrFloatBitWidth() / 8;
  auto rawType = VectorType::get({kLoadColumns}, b.getI32Type());
  auto valueType = VectorType::get({kLoadColumns}, b.getF32Type());
  // NVFP4: the product of the two f32 tensor scales, once per tile.
  Value tensorScale;
  if (plan.hasTensorScales()) {
    const KernelArguments &args = k.getArguments();
    Value a = k.loadGlobalF32(args.aTensorScale, k.i32(0));
    Value bScale = k.loadGlobalF32(args.bTensorScale, k.i32(0));
    tensorScale = arith::MulFOp::create(b, a, bScale);
  }
  int64_t loads = plan.tileN / kLoadColumns;
  for (int64_t load = 0; load < loads; ++load) {
    int64_t firstColumn = load * kLoadColumns;
    Value raw = NVVM::Tcgen05LdOp::create(
        b, rawType, /*pack=*/false, NVVM::Tcgen05LdStShape::SHAPE_32X32B,
        getTensorMemoryAddress(
            warpLanes, k.i32(plan.tensorMemory.accumulator + firstColumn)),
        Value());
    NVVM::Tcgen05WaitOp::create(b, NVVM::Tcgen05WaitKind::LOAD);
    if (load == loads - 1) {
      // The accumulator is in registers: the MMA thread may overwrite it.
      NVVM::Tcgen05FenceOp::create(b,
                                   NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
      NVVM::MBarrierArriveOp::create(
          b, Type(), accumulatorEmpty(),
          Value());
    }
    Value row = vector::BitCastOp::create(b, valueType, raw);
    SmallVector<Value> values;
    for (int64_t column = 0; column < kLoadColumns; ++column) {
      Value value = vector::ExtractOp::create(b, row, column);
      values.push_back(tensorScale ? arith::MulFOp::create(b, value, tensorScale)
                                   : value);
    }
    Value amax =
        k.storeFragment(origin, values, kStoreBytes / outBytes, [&](int64_t e) {
          return std::make_pair(thread.threadInGroup, k.i32(firstColumn + e));
        });
    if (plan.castType)
      k.recordAmax(amax);
  }
  return arith::AddIOp::create(b, tilesDone, k.i32(1));
}

std::unique_ptr<GemmMainLoop> gemm::createSm100MainLoop(GemmKernelBuilder &k) {
  return std::make_unique<Sm100MainLoop>(k);
}
