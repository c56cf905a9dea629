//===- GemmSkeleton.cpp - Chip-neutral skeleton of the GEMM kernels -------===//
//
// Everything of a generated GEMM kernel that does not depend on the tensor
// core: shared memory, the stage ring, the persistent tile loop, the TMA
// producer and the epilogue store. The ring is the usual pair of mbarriers
// per stage: the producer waits on `empty[s]` (parity flipped, so the first
// pass through the ring does not wait), posts the stage's byte count on
// `full[s]` and issues the copies that complete it; consumers wait on
// `full[s]` and arrive on `empty[s]` once per warp when they no longer read
// the stage (SM90), or the MMA thread's tcgen05.commit arrives there once
// the tensor core has read it (SM100). The ring iteration is carried across
// tiles, so the producer runs ahead into the next tile while the consumers
// store the current one. The SM90 and SM100 kernels run this same code for
// the tile order, the TMA coordinates and bounds, the ring and the epilogue
// addressing; only the main loops (Sm90MainLoops.cpp, Sm100MainLoop.cpp)
// differ.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

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
  Value firstLane =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, thread.lane, i32(0));
  ifThen(firstLane, [&] {
    NVVM::MBarrierArriveOp::create(b, Type(), emptyBarrier(stage), Value());
  });
}

Value GemmKernelBuilder::loadGlobalF32(Value pointer, Value index) {
  Value element = LLVM::GEPOp::create(
      b, pointer.getType(), b.getF32Type(), pointer,
      ArrayRef<LLVM::GEPArg>{
          Value(arith::ExtUIOp::create(b, b.getI64Type(), index))});
  return LLVM::LoadOp::create(b, b.getF32Type(), element, /*alignment=*/4);
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
    if (plan.usesTensorMemory()) {
      NVVM::MBarrierInitOp::create(
          b, sharedPointer(sharedAddress(plan.accumulatorFull)), i32(1),
          Value());
      NVVM::MBarrierInitOp::create(
          b, sharedPointer(sharedAddress(plan.accumulatorEmpty)),
          i32(kWarpgroupThreads), Value());
    }
    NVVM::FenceMbarrierInitOp::create(b);
  });
  if (plan.usesTensorMemory())
    allocateTensorMemory();
  else
    NVVM::Barrier0Op::create(b);
}

TileOrigin GemmKernelBuilder::getTileOrigin(Value tile) {
  // Grouped order: `groupRows` tile rows advance together along N, so the
  // CTAs running at one time share A rows and B columns in L2.
  int64_t perGroup = plan.groupRows * plan.tilesN();
  Value group = arith::DivUIOp::create(b, tile, i32(perGroup));
  Value firstRow = arith::MulIOp::create(b, group, i32(plan.groupRows));
  Value rows = arith::MinUIOp::create(
      b, arith::SubIOp::create(b, i32(plan.tilesM()), firstRow),
      i32(plan.groupRows));
  Value local = arith::RemUIOp::create(b, tile, i32(perGroup));
  Value tileRow = arith::AddIOp::create(b, firstRow,
                                        arith::RemUIOp::create(b, local, rows));
  Value tileCol = arith::DivUIOp::create(b, local, rows);
  return {arith::MulIOp::create(b, tileRow, i32(plan.tileM)),
          arith::MulIOp::create(b, tileCol, i32(plan.tileN))};
}

Value GemmKernelBuilder::forEachTile(
    function_ref<Value(TileOrigin, Value)> body) {
  Value first = NVVM::BlockIdXOp::create(b, b.getI32Type());
  Value step = NVVM::GridDimXOp::create(b, b.getI32Type());
  auto loop = scf::ForOp::create(b, first, i32(plan.tilesM() * plan.tilesN()),
                                 step, ValueRange{i32(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value next =
        body(getTileOrigin(loop.getInductionVar()), loop.getRegionIterArg(0));
    scf::YieldOp::create(b, next);
  }
  return loop.getResult(0);
}

void GemmKernelBuilder::issueStageLoads(TileOrigin origin, Value kBlock,
                                        RingSlot slot) {
  Value full = fullBarrier(slot.stage);
  NVVM::MBarrierArriveExpectTxOp::create(
      b, Type(), full, i32(plan.stageTransactionBytes()),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
  Value k = arith::MulIOp::create(b, kBlock, i32(plan.tileK));
  auto load = [&](Value map, int64_t StageLayout::*buffer, Value row) {
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        b, sharedPointer(stageAddress(buffer, slot.stage)), map,
        ValueRange{k, row}, full, ValueRange(), Value(), Value(),
        NVVM::TMALoadModeAttr::get(b.getContext(), NVVM::TMALoadMode::TILE),
        b.getBoolAttr(true), NVVM::CTAGroupKindAttr(), Value());
  };
  load(args.tensorMapA, &StageLayout::a, origin.m);
  load(args.tensorMapB, &StageLayout::b, origin.n);
  // The 128x4 chunk of (row tile, K tile) is 512 contiguous bytes of the
  // swizzled scales: one bulk copy per 128 rows. A tile reaching past the
  // last chunk row (N = 72 with 256-row tiles) re-reads the last chunk: the
  // rows it would scale are TMA's zero fill and are never stored.
  auto copyChunks = [&](Value scales, int64_t StageLayout::*buffer,
                        Value rowOrigin, int64_t tileRows, int64_t rows) {
    auto globalPtr = LLVM::LLVMPointerType::get(
        b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
    Value global = LLVM::AddrSpaceCastOp::create(b, globalPtr, scales);
    int64_t lastChunkRow = llvm::divideCeil(rows, kScaleChunkRows) - 1;
    for (int64_t chunk = 0; chunk < plan.scaleChunks(tileRows); ++chunk) {
      Value rowTile = arith::MinUIOp::create(
          b,
          arith::AddIOp::create(
              b, arith::DivUIOp::create(b, rowOrigin, i32(kScaleChunkRows)),
              i32(chunk)),
          i32(lastChunkRow));
      Value index = arith::AddIOp::create(
          b, arith::MulIOp::create(b, rowTile, i32(plan.kBlocks())), kBlock);
      Value source = LLVM::GEPOp::create(
          b, globalPtr, b.getI8Type(), global,
          ArrayRef<LLVM::GEPArg>{Value(arith::MulIOp::create(
              b, arith::ExtUIOp::create(b, b.getI64Type(), index),
              i64(kScaleChunkBytes)))});
      Value destination = sharedAddress(stageAddress(buffer, slot.stage),
                                        i32(kScaleChunkBytes * chunk));
      NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
          b, sharedPointer(destination), source, full, i32(kScaleChunkBytes),
          Value(), Value());
    }
  };
  copyChunks(args.aScales, &StageLayout::aScales, origin.m, plan.tileM, plan.m);
  copyChunks(args.bScales, &StageLayout::bScales, origin.n, plan.tileN, plan.n);
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

void GemmKernelBuilder::buildProducer() {
  if (plan.producerRegisters)
    NVVM::SetMaxRegisterOp::create(b, plan.producerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
  if (plan.usesTensorMemory())
    ifElectedInWarp(1, [&] { buildMmaIssuer(); });
  ifElectedInWarp(0, [&] {
    Value iterations = forEachTile([&](TileOrigin origin, Value iteration) {
      return forEachStage(iteration, /*producer=*/true,
                          [&](Value kBlock, RingSlot slot) {
                            issueStageLoads(origin, kBlock, slot);
                          });
    });
    // Wait, as if to load S more stages, until every stage is released: a
    // release may arrive asynchronously (tcgen05.commit) and must not land
    // in the shared memory of a CTA that has exited.
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
  thread.consumer =
      arith::DivUIOp::create(b, consumerIndex, i32(kWarpgroupThreads));
  thread.threadInGroup =
      arith::RemUIOp::create(b, consumerIndex, i32(kWarpgroupThreads));
  thread.warp = arith::DivUIOp::create(b, thread.threadInGroup, i32(32));
  thread.lane = arith::RemUIOp::create(b, thread.threadInGroup, i32(32));
  forEachTile([&](TileOrigin origin, Value counter) {
    if (plan.usesTensorMemory())
      return buildTensorMemoryEpilogue(thread, origin, counter);
    return buildSm90Tile(thread, origin, counter);
  });
}

void GemmKernelBuilder::storeFragment(
    TileOrigin origin, ArrayRef<Value> values, int64_t runLength,
    function_ref<std::pair<Value, Value>(int64_t)> coords) {
  Type outType = plan.outputType;
  int64_t outBytes = outType.getIntOrFloatBitWidth() / 8;
  auto globalPtr = LLVM::LLVMPointerType::get(
      b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
  Value out = LLVM::AddrSpaceCastOp::create(b, globalPtr, args.out);
  // A run is stored as vectors of `width` columns, the widest power of two
  // that divides N: each vector is then aligned to its size and lies wholly
  // inside or wholly outside the matrix.
  int64_t width = runLength;
  while (plan.n % width != 0)
    width /= 2;
  for (size_t e = 0; e < values.size(); e += width) {
    auto [row, col] = coords(e);
    Value globalRow = arith::AddIOp::create(b, origin.m, row);
    Value globalCol = arith::AddIOp::create(b, origin.n, col);
    Value valid = arith::AndIOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, globalRow,
                              i32(plan.m)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, globalCol,
                              i32(plan.n)));
    Value index = arith::AddIOp::create(
        b,
        arith::MulIOp::create(
            b, arith::ExtUIOp::create(b, b.getI64Type(), globalRow),
            i64(plan.n)),
        arith::ExtUIOp::create(b, b.getI64Type(), globalCol));
    Value address = LLVM::GEPOp::create(b, globalPtr, outType, out,
                                        ArrayRef<LLVM::GEPArg>{Value(index)});
    Value vector = vector::FromElementsOp::create(
        b, VectorType::get({width}, b.getF32Type()), values.slice(e, width));
    if (!outType.isF32())
      vector =
          arith::TruncFOp::create(b, VectorType::get({width}, outType), vector);
    Value stored =
        width == 1 ? Value(vector::ExtractOp::create(b, vector, 0)) : vector;
    ifThen(valid, [&] {
      LLVM::StoreOp::create(b, stored, address, width * outBytes);
    });
  }
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
  initBarriers();
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
  if (plan.usesTensorMemory())
    freeTensorMemory();
}
