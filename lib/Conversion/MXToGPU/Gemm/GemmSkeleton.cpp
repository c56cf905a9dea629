//===- GemmSkeleton.cpp - Chip-neutral skeleton of the GEMM kernels -------===//
//
// Everything of a generated GEMM kernel that does not depend on the tensor
// core: shared memory, the stage ring, the persistent tile loop, the TMA
// producer and the synchronization around them. The ring is the usual pair
// of mbarriers per stage: the producer waits on `empty[s]` (parity flipped,
// so the first pass through the ring does not wait), posts the stage's byte
// count on `full[s]` and issues the copies that complete it; consumers wait
// on `full[s]` and arrive on `empty[s]` once per warp when they no longer
// read the stage (SM90), or the MMA thread's tcgen05.commit arrives there
// once the tensor core has read it (SM100). The ring iteration is carried
// across tiles, so the producer runs ahead into the next tile while the
// consumers store the current one.
//
// In a cluster of two CTAs on neighbouring tiles that share an operand tile,
// each producer loads half of it with a TMA multicast into both CTAs, so
// every stage of a CTA is written by both producers: each consumer warp
// releases the stage on the empty barrier of both CTAs (a remote arrive
// through `mapa`), each full barrier expects the whole stage's bytes, and
// the CTAs pass cluster barriers after the ring is initialized (before any
// remote arrive or multicast can reach it) and before they exit. Both CTAs
// take the same number of tiles, so their rings stay in step.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"
#include "ScaleProducts.h"

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

/// Named barrier 0 is __syncthreads; the consumers' own is 1.
constexpr int64_t kConsumerBarrierId = 1;

} // namespace

SmallVector<KernelParameter> gemm::getKernelParameters(const GemmPlan &plan) {
  SmallVector<KernelParameter> parameters = {
      KernelParameter::tensorMapA, KernelParameter::tensorMapB,
      KernelParameter::aScales, KernelParameter::bScales, KernelParameter::out};
  auto byTma = [](const OperandPlan &operand) {
    return operand.scales == ScaleStaging::stageRows ||
           operand.scales == ScaleStaging::chunks;
  };
  if (byTma(plan.a))
    parameters.push_back(KernelParameter::tensorMapAScales);
  if (byTma(plan.b))
    parameters.push_back(KernelParameter::tensorMapBScales);
  if (plan.epilogue == GemmEpilogue::tmaStore)
    parameters.push_back(KernelParameter::tensorMapOut);
  if (plan.biasType)
    parameters.push_back(KernelParameter::bias);
  if (plan.accumulate)
    parameters.push_back(KernelParameter::accumulator);
  if (plan.hasTensorScales())
    parameters.append(
        {KernelParameter::aTensorScale, KernelParameter::bTensorScale});
  if (plan.castType)
    parameters.append(
        {KernelParameter::castScales, KernelParameter::amaxPartials});
  return parameters;
}

Value &KernelArguments::get(KernelParameter parameter) {
  switch (parameter) {
  case KernelParameter::tensorMapA:
    return tensorMapA;
  case KernelParameter::tensorMapB:
    return tensorMapB;
  case KernelParameter::aScales:
    return aScales;
  case KernelParameter::bScales:
    return bScales;
  case KernelParameter::out:
    return out;
  case KernelParameter::tensorMapAScales:
    return tensorMapAScales;
  case KernelParameter::tensorMapBScales:
    return tensorMapBScales;
  case KernelParameter::tensorMapOut:
    return tensorMapOut;
  case KernelParameter::bias:
    return bias;
  case KernelParameter::accumulator:
    return accumulator;
  case KernelParameter::aTensorScale:
    return aTensorScale;
  case KernelParameter::bTensorScale:
    return bTensorScale;
  case KernelParameter::castScales:
    return castScales;
  case KernelParameter::amaxPartials:
    return amaxPartials;
  }
  llvm_unreachable("every kernel parameter has a field");
}

bool gemm::isTensorMap(KernelParameter parameter) {
  switch (parameter) {
  case KernelParameter::tensorMapA:
  case KernelParameter::tensorMapB:
  case KernelParameter::tensorMapAScales:
  case KernelParameter::tensorMapBScales:
  case KernelParameter::tensorMapOut:
    return true;
  default:
    return false;
  }
}

GemmMainLoop::GemmMainLoop(GemmKernelBuilder &kernel)
    : k(kernel), b(kernel.getBuilder()), plan(kernel.getPlan()) {}

GemmMainLoop::~GemmMainLoop() = default;

Value GemmKernelBuilder::i32(int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}

Value GemmKernelBuilder::i64(int64_t v) {
  return arith::ConstantIntOp::create(b, v, 64);
}

Value GemmKernelBuilder::sharedAddress(int64_t offset) {
  return arith::AddIOp::create(b, base, i32(offset));
}

Value GemmKernelBuilder::sharedAddress(Value from, Value offset) {
  return arith::AddIOp::create(b, from, offset);
}

Value GemmKernelBuilder::sharedPointer(Value address) {
  return LLVM::IntToPtrOp::create(
      b,
      LLVM::LLVMPointerType::get(b.getContext(),
                                 unsigned(NVVM::NVVMMemorySpace::Shared)),
      address);
}

Value GemmKernelBuilder::withStartAddress(uint64_t fixedFields, Value address) {
  // wgmma's and tcgen05's descriptors hold the start address alike: bytes
  // >> 4 in bits 0-13.
  Value field = arith::AndIOp::create(
      b,
      arith::ShRUIOp::create(b,
                             arith::ExtUIOp::create(b, b.getI64Type(), address),
                             i64(kWgmmaFieldShift)),
      i64(kWgmmaFieldMask));
  return arith::OrIOp::create(b, field, i64(fixedFields));
}

Value GemmKernelBuilder::stageAddress(int64_t StageLayout::*buffer,
                                      Value stage) {
  const StageLayout &first = plan.stageLayout[0], &second = plan.stageLayout[1];
  return sharedAddress(
      sharedAddress(first.*buffer),
      arith::MulIOp::create(b, stage, i32(second.*buffer - first.*buffer)));
}

Value GemmKernelBuilder::loadGlobalF32(Value pointer, Value index) {
  Value element = LLVM::GEPOp::create(
      b, pointer.getType(), b.getF32Type(), pointer,
      ArrayRef<LLVM::GEPArg>{
          Value(arith::ExtUIOp::create(b, b.getI64Type(), index))});
  return LLVM::LoadOp::create(b, b.getF32Type(), element, /*alignment=*/4);
}

Value GemmKernelBuilder::loadSharedF32(Value address) {
  return LLVM::LoadOp::create(b, b.getF32Type(), sharedPointer(address),
                              /*alignment=*/4);
}

Value GemmKernelBuilder::fullBarrier(Value stage) {
  return sharedPointer(sharedAddress(sharedAddress(plan.fullBarriers),
                                     arith::MulIOp::create(b, stage, i32(8))));
}

Value GemmKernelBuilder::emptyBarrier(Value stage) {
  return sharedPointer(sharedAddress(sharedAddress(plan.emptyBarriers),
                                     arith::MulIOp::create(b, stage, i32(8))));
}

RingSlot GemmKernelBuilder::getRingSlot(Value iteration, bool producer) {
  Value stages = i32(plan.stages);
  Value parity = arith::AndIOp::create(
      b, arith::DivUIOp::create(b, iteration, stages), i32(1));
  // A fresh empty barrier counts as released: the producer's first pass
  // waits on the parity of the phase before it.
  if (producer)
    parity = arith::XOrIOp::create(b, parity, i32(1));
  return {arith::RemUIOp::create(b, iteration, stages), parity};
}

void GemmKernelBuilder::waitBarrier(Value barrier, Value parity) {
  NVVM::MBarrierTryWaitParityOp::create(b, barrier, parity, i32(0x989680));
}

void GemmKernelBuilder::ifThen(Value condition, function_ref<void()> body) {
  auto ifOp = scf::IfOp::create(b, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  body();
}

void GemmKernelBuilder::releaseStage(const ConsumerThread &thread,
                                     Value stage) {
  if (plan.clusterSize() == 1) {
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, thread.lane,
                                 i32(0)),
           [&] {
             NVVM::MBarrierArriveOp::create(b, Type(), emptyBarrier(stage),
                                            Value());
           });
    return;
  }
  // Lane r arrives on the barrier of the cluster's CTA r. The arrival
  // releases at CTA scope, as for a local one: what it publishes is that
  // this warp's wgmma reads of the stage are complete (waited for), which
  // needs no cluster-wide ordering of its memory operations, and a
  // cluster-scope release costs a fence per arrival (measured on an H100:
  // clusters 1.5x slower than none with it).
  ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, thread.lane,
                               i32(plan.clusterSize())),
         [&] {
           auto clusterPtr = LLVM::LLVMPointerType::get(
               b.getContext(), unsigned(NVVM::NVVMMemorySpace::SharedCluster));
           Value remote = NVVM::MapaOp::create(b, clusterPtr,
                                               emptyBarrier(stage), thread.lane);
           NVVM::MBarrierArriveOp::create(b, Type(), remote, Value());
         });
}

void GemmKernelBuilder::syncConsumers() {
  NVVM::BarrierOp::create(b, TypeRange(), i32(kConsumerBarrierId),
                          i32(kWarpgroupThreads * plan.consumerWarpgroups),
                          NVVM::BarrierReductionAttr(), Value());
}

Value GemmKernelBuilder::isInWarp(int64_t warp) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                               arith::DivUIOp::create(b, threadIdx, i32(32)),
                               i32(warp));
}

void GemmKernelBuilder::ifElectedInWarp(int64_t warp,
                                        function_ref<void()> body) {
  ifThen(isInWarp(warp), [&] {
    ifThen(NVVM::ElectSyncOp::create(b, b.getI1Type(), Value()), body);
  });
}

Value GemmKernelBuilder::getWaveRow(const ConsumerThread &thread,
                                    int64_t wave) {
  return arith::MulIOp::create(
      b,
      arith::AddIOp::create(b, thread.consumer,
                            i32(wave * plan.consumerWarpgroups)),
      i32(kWaveRows));
}

/// The wgmma operand type of a stage tile's elements.
static NVVM::WGMMATypes getWgmmaType(Type type) {
  if (type.isBF16())
    return NVVM::WGMMATypes::bf16;
  return isa<Float8E5M2Type>(type) ? NVVM::WGMMATypes::e5m2
                                   : NVVM::WGMMATypes::e4m3;
}

Value GemmKernelBuilder::buildStageWgmmaChain(const ConsumerThread &thread,
                                              RingSlot slot, int64_t wave,
                                              Value accumulator,
                                              bool overwriteFirst) {
  constexpr uint64_t fixedFields = encodeWgmmaDescriptor(
      getKMajorSwizzledTile(/*startAddress=*/0, WgmmaSwizzle::bytes128));
  Value aRows = sharedAddress(
      stageAddress(&StageLayout::a, slot.stage),
      arith::MulIOp::create(b, getWaveRow(thread, wave), i32(plan.a.rowBytes)));
  Value descA = withStartAddress(fixedFields, aRows);
  Value descB =
      withStartAddress(fixedFields, stageAddress(&StageLayout::b, slot.stage));
  auto shape =
      NVVM::MMAShapeAttr::get(b.getContext(), 64, plan.tileN, plan.mmaK);
  // K step s starts s x mmaK elements into the rows: 32 bytes of FP8 or bf16.
  int64_t elementBytes = plan.a.elementType.getIntOrFloatBitWidth() / 8;
  for (int64_t step = 0; step < plan.tileK / plan.mmaK; ++step) {
    Value offset = i64(getWgmmaAddressStep(step * plan.mmaK * elementBytes));
    accumulator = NVVM::WgmmaMmaAsyncOp::create(
        b, accumulator.getType(), accumulator,
        arith::AddIOp::create(b, descA, offset),
        arith::AddIOp::create(b, descB, offset), shape,
        getWgmmaType(plan.a.elementType), getWgmmaType(plan.b.elementType),
        NVVM::WGMMATypes::f32,
        step == 0 && overwriteFirst ? NVVM::WGMMAScaleOut::zero
                                    : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
        NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr());
  }
  return accumulator;
}

std::pair<Value, Value>
GemmKernelBuilder::getFragmentCoordinates(const ConsumerThread &thread,
                                          int64_t wave, int64_t element) {
  Value row = arith::AddIOp::create(
      b,
      arith::AddIOp::create(b, getWaveRow(thread, wave),
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

void GemmKernelBuilder::initBarriers() {
  Value first =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadIdx, i32(0));
  ifThen(first, [&] {
    for (int64_t s = 0; s < plan.stages; ++s) {
      NVVM::MBarrierInitOp::create(b, fullBarrier(i32(s)), i32(1), Value());
      NVVM::MBarrierInitOp::create(b, emptyBarrier(i32(s)),
                                   i32(plan.emptyArrivals), Value());
    }
    mainLoop->initBarriers();
    NVVM::FenceMbarrierInitOp::create(b);
  });
}

void GemmKernelBuilder::synchronizeCTAs() {
  if (plan.clusterSize() == 1) {
    NVVM::Barrier0Op::create(b);
    return;
  }
  NVVM::ClusterArriveOp::create(b, UnitAttr());
  NVVM::ClusterWaitOp::create(b, UnitAttr());
}

TileOrigin GemmKernelBuilder::getTileOrigin(Value clusterTile) {
  // Grouped order of cluster tiles: `groupRows` rows of them advance
  // together along N, so the CTAs running at one time share A rows and B
  // columns in L2.
  int64_t rowsOfClusterTiles = plan.tilesM() / plan.clusterM;
  int64_t columnsOfClusterTiles = plan.tilesN() / plan.clusterN;
  int64_t perGroup = plan.groupRows * columnsOfClusterTiles;
  Value group = arith::DivUIOp::create(b, clusterTile, i32(perGroup));
  Value firstRow = arith::MulIOp::create(b, group, i32(plan.groupRows));
  Value rows = arith::MinUIOp::create(
      b, arith::SubIOp::create(b, i32(rowsOfClusterTiles), firstRow),
      i32(plan.groupRows));
  Value local = arith::RemUIOp::create(b, clusterTile, i32(perGroup));
  Value row = arith::AddIOp::create(b, firstRow,
                                    arith::RemUIOp::create(b, local, rows));
  Value col = arith::DivUIOp::create(b, local, rows);
  // The CTA's own tile of the cluster tile.
  Value tileRow = arith::AddIOp::create(
      b, arith::MulIOp::create(b, row, i32(plan.clusterM)),
      plan.clusterM > 1 ? clusterRank : i32(0));
  Value tileCol = arith::AddIOp::create(
      b, arith::MulIOp::create(b, col, i32(plan.clusterN)),
      plan.clusterN > 1 ? clusterRank : i32(0));
  return {arith::MulIOp::create(b, tileRow, i32(plan.tileM)),
          arith::MulIOp::create(b, tileCol, i32(plan.tileN))};
}

Value GemmKernelBuilder::forEachTile(
    function_ref<Value(TileOrigin, Value)> body) {
  Value size = i32(plan.clusterSize());
  Value first = arith::DivUIOp::create(
      b, NVVM::BlockIdXOp::create(b, b.getI32Type()), size);
  Value step = arith::DivUIOp::create(
      b, NVVM::GridDimXOp::create(b, b.getI32Type()), size);
  auto loop = scf::ForOp::create(b, first, i32(plan.clusterTiles()), step,
                                 ValueRange{i32(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value next =
        body(getTileOrigin(loop.getInductionVar()), loop.getRegionIterArg(0));
    scf::YieldOp::create(b, next);
  }
  return loop.getResult(0);
}

Value GemmKernelBuilder::forEachStage(
    Value iteration, bool producer,
    function_ref<void(Value kBlock, RingSlot slot)> body) {
  auto loop = scf::ForOp::create(b, i32(0), i32(plan.kBlocks()), i32(1),
                                 ValueRange{iteration});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0);
    RingSlot slot = getRingSlot(it, producer);
    waitBarrier(producer ? emptyBarrier(slot.stage) : fullBarrier(slot.stage),
                slot.parity);
    body(loop.getInductionVar(), slot);
    scf::YieldOp::create(b, ValueRange{arith::AddIOp::create(b, it, i32(1))});
  }
  return loop.getResult(0);
}

void GemmKernelBuilder::loadOperandTile(Value map,
                                        int64_t StageLayout::*buffer, Value k,
                                        Value rowOrigin, int64_t tileRows,
                                        int64_t rowBytes, bool shared,
                                        Value full,
                                        RingSlot slot) {
  Value destination = stageAddress(buffer, slot.stage);
  Value multicastMask;
  if (shared) {
    // This CTA's part of the shared tile, written into every CTA of the
    // cluster at the same offset.
    int64_t part = tileRows / plan.clusterSize();
    Value partRow = arith::MulIOp::create(b, clusterRank, i32(part));
    rowOrigin = arith::AddIOp::create(b, rowOrigin, partRow);
    destination = sharedAddress(
        destination, arith::MulIOp::create(b, partRow, i32(rowBytes)));
    multicastMask = arith::ConstantIntOp::create(
        b, (int64_t(1) << plan.clusterSize()) - 1, 16);
  }
  // A multicast writes shared::cluster addresses: this CTA's window is
  // part of the cluster's.
  Value target = sharedPointer(destination);
  if (multicastMask)
    target = LLVM::AddrSpaceCastOp::create(
        b,
        LLVM::LLVMPointerType::get(
            b.getContext(), unsigned(NVVM::NVVMMemorySpace::SharedCluster)),
        target);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, target, map, ValueRange{k, rowOrigin}, full,
      ValueRange(), multicastMask, Value(),
      NVVM::TMALoadModeAttr::get(b.getContext(), NVVM::TMALoadMode::TILE),
      b.getBoolAttr(!multicastMask), NVVM::CTAGroupKindAttr(), Value());
}

void GemmKernelBuilder::loadStageScales(const OperandPlan &operand,
                                        Value map,
                                        int64_t StageLayout::*buffer,
                                        Value kBlock, Value rowOrigin,
                                        int64_t tileRows, Value full,
                                        RingSlot slot) {
  Value destination = stageAddress(buffer, slot.stage);
  auto load = [&](Value target, ValueRange coordinates) {
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        b, sharedPointer(target), map, coordinates, full, ValueRange(),
        Value(), Value(),
        NVVM::TMALoadModeAttr::get(b.getContext(), NVVM::TMALoadMode::TILE),
        b.getBoolAttr(true), NVVM::CTAGroupKindAttr(), Value());
  };
  if (operand.scales == ScaleStaging::stageRows && plan.scaleProducts) {
    // The K-block's tileRows rows of the scale products' operand rows
    // [KB, P, 4] (ScaleProducts.h; P whole tiles), from the tile's first
    // row, as lines of 8 rows.
    Value row = arith::AddIOp::create(
        b,
        arith::MulIOp::create(b, kBlock,
                              i32(getScaleProductPitch(operand, tileRows))),
        rowOrigin);
    load(destination,
         ValueRange{i32(0), arith::DivUIOp::create(
                                b, row, i32(kScaleProductLineRows))});
    return;
  }
  if (operand.scales == ScaleStaging::stageRows) {
    // The K-block's row of the GEMM-ready [KB, R'] scales: tileRows f32
    // from the tile's first row (TMA fills rows past R' with zeros).
    load(destination, ValueRange{rowOrigin, kBlock});
    return;
  }
  if (operand.scales != ScaleStaging::chunks)
    return;
  // The 128x4 chunks of (row tile, K tile) are 512 contiguous bytes each of
  // the swizzled scales (one per 128 K for MX, two for NVFP4's blocks of 16,
  // adjacent), which the map reads as rows of 128 bytes: one box per 128
  // tile rows. A tile reaching past the last chunk row (N = 72 with 256-row
  // tiles) re-reads the last chunks: the rows they would scale are TMA's
  // zero fill and are never stored. (TMA rather than a plain bulk copy:
  // compute-sanitizer's racecheck follows the mbarrier of a tensor copy, not
  // of a bulk one.)
  int64_t alongK = plan.scaleChunksAlongK();
  int64_t lastChunkRow = llvm::divideCeil(operand.rows, kScaleChunkRows) - 1;
  for (int64_t chunk = 0; chunk < tileRows / kScaleChunkRows; ++chunk) {
    Value rowTile = arith::MinUIOp::create(
        b,
        arith::AddIOp::create(
            b, arith::DivUIOp::create(b, rowOrigin, i32(kScaleChunkRows)),
            i32(chunk)),
        i32(lastChunkRow));
    Value index = arith::MulIOp::create(
        b,
        arith::AddIOp::create(
            b, arith::MulIOp::create(b, rowTile, i32(plan.kBlocks())), kBlock),
        i32(alongK));
    load(sharedAddress(destination, i32(kScaleChunkBytes * alongK * chunk)),
         ValueRange{i32(0), arith::MulIOp::create(
                                b, index, i32(kScaleChunkBytes /
                                              kScaleChunkLine))});
  }
}

void GemmKernelBuilder::issueStageLoads(TileOrigin origin, Value kBlock,
                                        RingSlot slot) {
  Value full = fullBarrier(slot.stage);
  NVVM::MBarrierArriveExpectTxOp::create(
      b, Type(), full, i32(plan.stageTransactionBytes()),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
  // K of the stage in each operand map's units (bytes or elements).
  auto k = [&](const OperandPlan &operand) {
    return arith::MulIOp::create(b, kBlock, i32(operand.mapBoxK)).getResult();
  };
  loadOperandTile(args.tensorMapA, &StageLayout::a, k(plan.a), origin.m,
                  plan.tileM, plan.a.rowBytes, /*shared=*/plan.clusterN > 1,
                  full, slot);
  loadOperandTile(args.tensorMapB, &StageLayout::b, k(plan.b), origin.n,
                  plan.tileN, plan.b.rowBytes, /*shared=*/plan.clusterM > 1,
                  full, slot);
  loadStageScales(plan.a, args.tensorMapAScales, &StageLayout::aScales, kBlock,
                  origin.m, plan.tileM, full, slot);
  loadStageScales(plan.b, args.tensorMapBScales, &StageLayout::bScales, kBlock,
                  origin.n, plan.tileN, full, slot);
}

void GemmKernelBuilder::buildProducer() {
  if (plan.producerRegisters)
    NVVM::SetMaxRegisterOp::create(b, plan.producerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
  mainLoop->buildProducerRoles();
  ifElectedInWarp(0, [&] {
    Value iterations = forEachTile([&](TileOrigin origin, Value iteration) {
      return forEachStage(iteration, /*producer=*/true,
                          [&](Value kBlock, RingSlot slot) {
                            issueStageLoads(origin, kBlock, slot);
                          });
    });
    // Wait, as if to load S more stages, until every stage is released: a
    // release may arrive asynchronously (tcgen05.commit, or a consumer of
    // another CTA of the cluster) and must not land in the shared memory of
    // a CTA that has exited.
    for (int64_t s = 0; s < plan.stages; ++s) {
      RingSlot slot = getRingSlot(arith::AddIOp::create(b, iterations, i32(s)),
                                  /*producer=*/true);
      waitBarrier(emptyBarrier(slot.stage), slot.parity);
    }
  });
}

void GemmKernelBuilder::buildConsumers() {
  if (plan.consumerRegisters)
    NVVM::SetMaxRegisterOp::create(b, plan.consumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
  ConsumerThread thread;
  Value consumerIndex =
      arith::SubIOp::create(b, threadIdx, i32(kWarpgroupThreads));
  thread.threadInGroup =
      arith::RemUIOp::create(b, consumerIndex, i32(kWarpgroupThreads));
  thread.lane = arith::RemUIOp::create(b, thread.threadInGroup, i32(32));
  // The warp index read from lane 0 is one value for the whole warp, which
  // ptxas then keeps, with everything computed from it (stage addresses,
  // wgmma descriptors, the wave's rows), in uniform registers rather than
  // in the consumers' per-thread budget.
  Value warp = NVVM::ShflOp::create(
      b, b.getI32Type(), i32(-1),
      arith::DivUIOp::create(b, consumerIndex, i32(32)), i32(0), i32(31),
      NVVM::ShflKind::idx, UnitAttr());
  thread.consumer = arith::DivUIOp::create(b, warp, i32(4));
  thread.warp = arith::RemUIOp::create(b, warp, i32(4));
  forEachTile([&](TileOrigin origin, Value counter) {
    return mainLoop->buildTile(thread, origin, counter);
  });
  finishEpilogue(thread);
}

void GemmKernelBuilder::build(StringRef sharedGlobal) {
  auto sharedPtrType = LLVM::LLVMPointerType::get(
      b.getContext(), unsigned(NVVM::NVVMMemorySpace::Shared));
  Value dynamicBase = LLVM::PtrToIntOp::create(
      b, b.getI32Type(),
      LLVM::AddressOfOp::create(b, sharedPtrType, sharedGlobal));
  // 128B-swizzled tiles must start on a 1 KiB boundary.
  base = arith::AndIOp::create(
      b, arith::AddIOp::create(b, dynamicBase, i32(1023)), i32(~int64_t(1023)));
  threadIdx = NVVM::ThreadIdXOp::create(b, b.getI32Type());
  clusterRank = plan.clusterSize() > 1
                    ? Value(NVVM::ClusterId::create(b, b.getI32Type()))
                    : i32(0);
  switch (plan.recipe) {
  case GemmRecipe::blockwise:
  case GemmRecipe::perTensor:
    mainLoop = createSm90PromotedMainLoop(*this);
    break;
  case GemmRecipe::mxExact:
    mainLoop = createSm90DequantizedMainLoop(*this);
    break;
  case GemmRecipe::mxStaged:
    mainLoop = createSm90StagedMainLoop(*this);
    break;
  case GemmRecipe::mxBlockScaled:
    mainLoop = createSm100MainLoop(*this);
    break;
  }
  initBarriers();
  if (plan.castType)
    clearAmaxPartials();
  mainLoop->beforeSync();
  synchronizeCTAs();
  mainLoop->afterSync();
  Value producer = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                         threadIdx, i32(kWarpgroupThreads));
  auto roles = scf::IfOp::create(b, producer, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&roles.getThenRegion().front());
    buildProducer();
    b.setInsertionPointToStart(&roles.getElseRegion().front());
    buildConsumers();
  }
  // No CTA of a cluster leaves while another may still reach its shared
  // memory.
  if (plan.clusterSize() > 1)
    synchronizeCTAs();
  mainLoop->tearDown();
}
