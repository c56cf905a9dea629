//===- Sm90PromotedMainLoop.cpp - FP8 wgmma main loop with promotion ------===//
//
// The main loop of the SM90 FP8 recipes (blockwise, per-tensor). Hopper's
// FP8 tensor cores keep only ~14 significant bits inside one wgmma chain, so
// a chain never spans more than one 128-K scale block: per stage and per
// 64-row wave, four k32 wgmma from 128B-swizzled shared memory (descriptors
// stepping 32 bytes along K, WgmmaDescriptors.h) run into a fresh partial
// accumulator, and after the wait each element is promoted into the wave's
// f32 accumulator with one FMA times sa[row] x sb[column] (blockwise) or one
// add (per-tensor, whose two scalar scales multiply the result once, in the
// epilogue). The waves reuse one partial accumulator, so a consumer holds
// (waves + 1) fragments.
//
// Scales come from shared memory: 1x128 rows of the stage (TMA-loaded with
// the operand tiles; read before the stage is released, since the producer
// overwrites it afterwards), 128x128 blocks of the tile (copied in by the
// consumers when the tile starts).
//
// With GemmPlan::scaleProducts (1x128 scales on both operands, the wgrad
// form), the products sa[row] x sb[column] come from the tensor cores
// instead of an FMUL per element: the stage's scale rows are the tf32
// operand rows of ScaleProducts.h, and each wave issues one tf32 wgmma
// m64 x tileN x k8 of them after its chain, into a fragment of its own;
// the promotion is then one FFMA an element. Measured on an H100 at
// 8192^3 (bench/RESULTS.md): operands written in the kernel, by producer
// warps or by the consumers themselves, cost more in their waits and
// fences than the FMUL they save; loaded by TMA with the stage, nothing.
//
// With GemmPlan::overlap, an iteration of the main loop takes two K-blocks:
// both chains are issued, each into its own partial accumulator and wgmma
// group, and the first block's promotion runs while the second's chain is
// on the tensor cores. Both groups complete inside the iteration (ptxas
// serializes every wgmma (C7514) where a chain stays in flight across the
// loop's back edge while another accumulator is read). Otherwise the
// consumer warpgroups interleave on the tensor cores, each promoting while
// the others' chains run.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

/// B's scales of one K-block as the promotion reads them.
struct ColumnScales {
  Value tile;         // f32: one for the whole tile
  Value stageColumns; // i32 shared address of the stage's [tileN] f32
};

/// K of a tf32 wgmma.
constexpr int64_t kTf32MmaK = 8;

class Sm90PromotedMainLoop : public GemmMainLoop {
public:
  using GemmMainLoop::GemmMainLoop;

  void beforeSync() override;
  Value buildTile(const ConsumerThread &thread, TileOrigin origin,
                  Value iteration) override;

private:
  /// The tf32 wgmma m64 x tileN x k8 of the scale products of `thread`'s
  /// wave `wave` over stage `slot`, into `products` (overwritten).
  Value buildProductsWgmma(const ConsumerThread &thread, RingSlot slot,
                           int64_t wave, Value products);
  Type getAccumulatorType();
  /// The main loop's body for K-blocks [kBlock, kBlock + blocks) from ring
  /// iteration `iteration`: every wave's chains, each block's into its own
  /// partial of `partials`, promoted into the wave's accumulator of
  /// `accumulators` block by block as the chains complete. Updates both.
  void runBlocks(const ConsumerThread &thread, Value iteration, Value kBlock,
                 int64_t blocks, MutableArrayRef<Value> partials,
                 MutableArrayRef<Value> accumulators);
  void copyTileScales(const ConsumerThread &thread, TileOrigin origin);
  /// sa of the thread's two rows of `wave` for this K-block.
  SmallVector<Value> loadRowScales(const ConsumerThread &thread, RingSlot slot,
                                   Value kBlock, int64_t wave);
  /// sb of this K-block: the tile's one value (128x128 blocks), or the
  /// stage's per-column scales (1x128), which `promote` reads where it
  /// uses them rather than holding 32 of them in registers.
  ColumnScales getColumnScales(RingSlot slot, Value kBlock);
  /// `accumulator` + `partial` x the scales: `products` (the scale
  /// products' fragment), else sa x sb of `rowScales` and `columnScales`.
  Value promote(const ConsumerThread &thread, Value accumulator, Value partial,
                ArrayRef<Value> rowScales, const ColumnScales &columnScales,
                Value products);
  /// The promoted `accumulator` through an empty volatile asm that ties
  /// every element: its FMAs then happen before the next chain is issued.
  /// Otherwise LLVM sinks them below it, keeping two partial accumulators
  /// live (64 more registers) and spilling.
  Value pin(Value accumulator);
  /// The shared address of f32 number `index` of the buffer at
  /// `bufferAddress`.
  Value scaleAddress(Value bufferAddress, Value index) {
    return k.sharedAddress(bufferAddress,
                           arith::MulIOp::create(b, index, k.i32(4)));
  }

  int64_t fragment() const { return kWaveRows * plan.tileN / kWarpgroupThreads; }
};

} // namespace

void Sm90PromotedMainLoop::beforeSync() {
  if (!plan.scaleProducts)
    return;
  // The products' second K chunk: zeros, read by the tensor cores (the
  // async proxy) after the CTA barrier.
  int64_t rows = std::max(plan.tileM, plan.tileN);
  auto chunkType = VectorType::get({4}, b.getI32Type());
  for (int64_t first = 0; first < rows; first += plan.threads()) {
    Value row = arith::AddIOp::create(b, k.getThreadIdx(), k.i32(first));
    k.ifThen(
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, k.i32(rows)),
        [&] {
          Value zero = arith::ConstantOp::create(
              b, DenseElementsAttr::get(chunkType, b.getI32IntegerAttr(0)));
          LLVM::StoreOp::create(
              b, zero,
              k.sharedPointer(k.sharedAddress(
                  k.sharedAddress(plan.productZeros),
                  arith::MulIOp::create(b, row, k.i32(kInterleavedRowBytes)))),
              /*alignment=*/16);
        });
  }
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

Value Sm90PromotedMainLoop::buildProductsWgmma(const ConsumerThread &thread,
                                               RingSlot slot, int64_t wave,
                                               Value products) {
  constexpr uint64_t fixedFields =
      encodeWgmmaDescriptor(getKMajorInterleavedTile(0, 0));
  Value zeros = k.sharedAddress(plan.productZeros);
  // Each operand's second K chunk is the zeros: LBO = zeros - the operand's
  // first row, which the zeros (above every stage) cover.
  auto descriptor = [&](Value first, Value start) {
    Value chunkStride = arith::ExtUIOp::create(
        b, b.getI64Type(), arith::SubIOp::create(b, zeros, first));
    return arith::OrIOp::create(
        b, k.withStartAddress(fixedFields, start),
        arith::ShLIOp::create(
            b, arith::ShRUIOp::create(b, chunkStride, k.i64(kWgmmaFieldShift)),
            k.i64(16)));
  };
  Value aRows = k.stageAddress(&StageLayout::aScales, slot.stage);
  Value bRows = k.stageAddress(&StageLayout::bScales, slot.stage);
  Value waveRows = k.sharedAddress(
      aRows, arith::MulIOp::create(b, k.getWaveRow(thread, wave),
                                   k.i32(kInterleavedRowBytes)));
  return NVVM::WgmmaMmaAsyncOp::create(
      b, products.getType(), products, descriptor(aRows, waveRows),
      descriptor(bRows, bRows),
      NVVM::MMAShapeAttr::get(b.getContext(), 64, plan.tileN, kTf32MmaK),
      NVVM::WGMMATypes::tf32, NVVM::WGMMATypes::tf32, NVVM::WGMMATypes::f32,
      NVVM::WGMMAScaleOut::zero, NVVM::WGMMAScaleIn::one,
      NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, NVVM::MMALayout::col,
      NVVM::MMAIntOverflowAttr());
}

Type Sm90PromotedMainLoop::getAccumulatorType() {
  return LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(fragment(), b.getF32Type()));
}

void Sm90PromotedMainLoop::copyTileScales(const ConsumerThread &thread,
                                          TileOrigin origin) {
  // Every consumer is done with the previous tile's scales before they are
  // overwritten, and sees all of this tile's before it reads one.
  k.syncConsumers();
  Value consumerThread = arith::AddIOp::create(
      b, arith::MulIOp::create(b, thread.consumer, k.i32(kWarpgroupThreads)),
      thread.threadInGroup);
  int64_t threads = kWarpgroupThreads * plan.consumerWarpgroups;
  auto copy = [&](const OperandPlan &operand, Value scales, int64_t buffer,
                  Value rowOrigin, int64_t tileRows) {
    if (operand.scales != ScaleStaging::tileBlocks)
      return;
    // Rows [first, first + blocks) of the compact [R/128, KB] scales, the
    // last one clamped into the matrix (its tile rows are never stored).
    int64_t blocks = std::max<int64_t>(1, tileRows / kFP8ScaleBlock);
    int64_t lastBlock = llvm::divideCeil(operand.rows, kFP8ScaleBlock) - 1;
    Value firstBlock =
        arith::DivUIOp::create(b, rowOrigin, k.i32(kFP8ScaleBlock));
    int64_t count = blocks * plan.kBlocks();
    auto loop = scf::ForOp::create(b, consumerThread, k.i32(count),
                                   k.i32(threads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    Value block = arith::MinUIOp::create(
        b,
        arith::AddIOp::create(
            b, firstBlock, arith::DivUIOp::create(b, i, k.i32(plan.kBlocks()))),
        k.i32(lastBlock));
    Value index = arith::AddIOp::create(
        b, arith::MulIOp::create(b, block, k.i32(plan.kBlocks())),
        arith::RemUIOp::create(b, i, k.i32(plan.kBlocks())));
    LLVM::StoreOp::create(
        b, k.loadGlobalF32(scales, index),
        k.sharedPointer(scaleAddress(k.sharedAddress(buffer), i)), 4);
  };
  copy(plan.a, k.getArguments().aScales, plan.tileScalesA, origin.m,
       plan.tileM);
  copy(plan.b, k.getArguments().bScales, plan.tileScalesB, origin.n,
       plan.tileN);
  k.syncConsumers();
}

SmallVector<Value> Sm90PromotedMainLoop::loadRowScales(
    const ConsumerThread &thread, RingSlot slot, Value kBlock, int64_t wave) {
  SmallVector<Value> scales;
  for (int64_t half = 0; half < 2; ++half) {
    Value row = k.getFragmentCoordinates(thread, wave, 2 * half).first;
    if (plan.a.scales == ScaleStaging::stageRows) {
      scales.push_back(k.loadSharedF32(
          scaleAddress(k.stageAddress(&StageLayout::aScales, slot.stage), row)));
      continue;
    }
    Value index = arith::AddIOp::create(
        b,
        arith::MulIOp::create(
            b, arith::DivUIOp::create(b, row, k.i32(kFP8ScaleBlock)),
            k.i32(plan.kBlocks())),
        kBlock);
    scales.push_back(
        k.loadSharedF32(scaleAddress(k.sharedAddress(plan.tileScalesA), index)));
  }
  return scales;
}

ColumnScales Sm90PromotedMainLoop::getColumnScales(RingSlot slot,
                                                  Value kBlock) {
  if (plan.b.scales == ScaleStaging::tileBlocks)
    return {k.loadSharedF32(
                scaleAddress(k.sharedAddress(plan.tileScalesB), kBlock)),
            Value()};
  return {Value(), k.stageAddress(&StageLayout::bScales, slot.stage)};
}

Value Sm90PromotedMainLoop::promote(const ConsumerThread &thread,
                                    Value accumulator, Value partial,
                                    ArrayRef<Value> rowScales,
                                    const ColumnScales &columnScales,
                                    Value products) {
  // sa[row] * sb[column] per element, computed after the wgmma wait so that
  // the loads' latency hides behind the chain.
  SmallVector<Value> rowProducts;
  if (columnScales.tile) {
    for (Value row : rowScales)
      rowProducts.push_back(arith::MulFOp::create(b, row, columnScales.tile));
  }
  auto pairType = VectorType::get({2}, b.getF32Type());
  Value columnPair;
  for (int64_t e = 0; e < fragment(); ++e) {
    Value sum = LLVM::ExtractValueOp::create(b, accumulator, e);
    Value part = LLVM::ExtractValueOp::create(b, partial, e);
    Value scale;
    if (products) {
      scale = LLVM::ExtractValueOp::create(b, products, e);
    } else if (columnScales.tile) {
      scale = rowProducts[(e / 2) % 2];
    } else if (columnScales.stageColumns) {
      // Elements 4j..4j+3 are columns c and c + 1 (of two rows), c even:
      // one 8-byte load of the pair.
      if (e % 4 == 0) {
        Value column = k.getFragmentCoordinates(thread, 0, e).second;
        columnPair = LLVM::LoadOp::create(
            b, pairType,
            k.sharedPointer(scaleAddress(columnScales.stageColumns, column)),
            /*alignment=*/8);
      }
      scale = arith::MulFOp::create(
          b, rowScales[(e / 2) % 2],
          vector::ExtractOp::create(b, columnPair, e % 2));
    }
    sum = scale ? LLVM::FMAOp::create(b, part, scale, sum).getResult()
                : arith::AddFOp::create(b, sum, part).getResult();
    accumulator = LLVM::InsertValueOp::create(b, accumulator, sum, e);
  }
  return accumulator;
}

Value Sm90PromotedMainLoop::pin(Value accumulator) {
  SmallVector<Value> elements;
  std::string constraints;
  for (int64_t e = 0; e < fragment(); ++e) {
    elements.push_back(LLVM::ExtractValueOp::create(b, accumulator, e));
    constraints += "=f,";
  }
  for (int64_t e = 0; e < fragment(); ++e)
    constraints += std::to_string(e) + (e + 1 < fragment() ? "," : "");
  return LLVM::InlineAsmOp::create(
             b, accumulator.getType(), elements, "", constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

void Sm90PromotedMainLoop::runBlocks(const ConsumerThread &thread,
                                     Value iteration, Value kBlock,
                                     int64_t blocks,
                                     MutableArrayRef<Value> partials,
                                     MutableArrayRef<Value> accumulators) {
  bool blockwise = plan.recipe == GemmRecipe::blockwise;
  SmallVector<RingSlot> slots;
  SmallVector<Value> kBlocks;
  SmallVector<ColumnScales> columnScales(blocks);
  for (int64_t block = 0; block < blocks; ++block) {
    kBlocks.push_back(arith::AddIOp::create(b, kBlock, k.i32(block)));
    slots.push_back(k.getRingSlot(
        arith::AddIOp::create(b, iteration, k.i32(block)), /*producer=*/false));
  }
  // A stage is released after the last wave's wait, or after its promotion
  // where that reads the stage's column scales.
  auto releaseAfterPromotion = [&](int64_t block) {
    return bool(columnScales[block].stageColumns);
  };
  // The scale products' fragment (one K-block an iteration).
  assert((!plan.scaleProducts || (blocks == 1 && plan.wavesM == 1)) &&
         "products take one K-block and one wave an iteration");
  Value *products = plan.scaleProducts ? &partials.back() : nullptr;
  for (int64_t wave = 0; wave < plan.wavesM; ++wave) {
    // Each wave's row scales are read just before its chains, so that they
    // are not live across another wave's.
    SmallVector<SmallVector<Value>> rowScales(blocks);
    NVVM::WgmmaFenceAlignedOp::create(b);
    for (int64_t block = 0; block < blocks; ++block) {
      if (wave == 0) {
        k.waitBarrier(k.fullBarrier(slots[block].stage), slots[block].parity);
        if (blockwise && !products)
          columnScales[block] = getColumnScales(slots[block], kBlocks[block]);
      }
      if (blockwise && !products)
        rowScales[block] =
            loadRowScales(thread, slots[block], kBlocks[block], wave);
      // The chain starts a fresh partial accumulator in the registers of the
      // last chain's (whose values its first step ignores): starting from a
      // new zero value instead would make ptxas materialize zeros for the
      // tied wgmma operands while the promoted accumulators are live, and
      // spill.
      partials[block] = k.buildStageWgmmaChain(thread, slots[block], wave,
                                               partials[block],
                                               /*overwriteFirst=*/true);
      if (products)
        *products = buildProductsWgmma(thread, slots[block], wave, *products);
      NVVM::WgmmaGroupSyncAlignedOp::create(b);
    }
    bool lastWave = wave == plan.wavesM - 1;
    for (int64_t block = 0; block < blocks; ++block) {
      // The groups complete in order: this block's is done once at most the
      // later blocks' are pending.
      NVVM::WgmmaWaitGroupSyncOp::create(b, blocks - 1 - block);
      if (lastWave && !releaseAfterPromotion(block))
        k.releaseStage(thread, slots[block].stage);
      accumulators[wave] = pin(
          promote(thread, accumulators[wave], partials[block], rowScales[block],
                  columnScales[block], products ? *products : Value()));
      if (lastWave && releaseAfterPromotion(block))
        k.releaseStage(thread, slots[block].stage);
    }
  }
}

Value Sm90PromotedMainLoop::buildTile(const ConsumerThread &thread,
                                      TileOrigin origin, Value iteration) {
  if (plan.a.scales == ScaleStaging::tileBlocks ||
      plan.b.scales == ScaleStaging::tileBlocks)
    copyTileScales(thread, origin);
  // Loop-carried: the ring iteration, the partial accumulator of each
  // K-block of an iteration, and each wave's promoted accumulator.
  int64_t blocks = plan.overlap ? 2 : 1;
  // The scale products' fragment is carried after the partials.
  int64_t carried = blocks + (plan.scaleProducts ? 1 : 0);
  Value zero = LLVM::ZeroOp::create(b, getAccumulatorType());
  SmallVector<Value> initial{iteration};
  initial.append(carried + plan.wavesM, zero);
  // Whole groups of `blocks` K-blocks in the loop, the rest after it.
  int64_t looped = plan.kBlocks() / blocks * blocks;
  auto loop = scf::ForOp::create(b, k.i32(0), k.i32(looped), k.i32(blocks),
                                 initial);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0);
    SmallVector<Value> values(loop.getRegionIterArgs().drop_front());
    MutableArrayRef<Value> partials(values.data(), carried);
    MutableArrayRef<Value> accumulators(values.data() + carried, plan.wavesM);
    runBlocks(thread, it, loop.getInductionVar(), blocks, partials,
              accumulators);
    SmallVector<Value> results{
        arith::AddIOp::create(b, it, k.i32(blocks))};
    results.append(values);
    scf::YieldOp::create(b, results);
  }
  Value it = loop.getResult(0);
  SmallVector<Value> values(loop.getResults().drop_front());
  MutableArrayRef<Value> partials(values.data(), carried);
  MutableArrayRef<Value> accumulators(values.data() + carried, plan.wavesM);
  if (int64_t rest = plan.kBlocks() - looped) {
    runBlocks(thread, it, k.i32(looped), rest, partials, accumulators);
    it = arith::AddIOp::create(b, it, k.i32(rest));
  }
  SmallVector<SmallVector<Value>> waves;
  Value scale;
  if (plan.recipe == GemmRecipe::perTensor)
    scale = arith::MulFOp::create(
        b, k.loadGlobalF32(k.getArguments().aScales, k.i32(0)),
        k.loadGlobalF32(k.getArguments().bScales, k.i32(0)));
  for (int64_t wave = 0; wave < plan.wavesM; ++wave) {
    SmallVector<Value> &values = waves.emplace_back();
    Value accumulator = accumulators[wave];
    for (int64_t e = 0; e < fragment(); ++e) {
      Value value = LLVM::ExtractValueOp::create(b, accumulator, e);
      values.push_back(scale ? arith::MulFOp::create(b, value, scale).getResult()
                             : value);
    }
  }
  k.storeWaves(thread, origin, waves);
  return it;
}

std::unique_ptr<GemmMainLoop>
gemm::createSm90PromotedMainLoop(GemmKernelBuilder &k) {
  return std::make_unique<Sm90PromotedMainLoop>(k);
}
