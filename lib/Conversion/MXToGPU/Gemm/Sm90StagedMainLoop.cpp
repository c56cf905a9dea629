//===- Sm90StagedMainLoop.cpp - bf16 wgmma main loop of staged MX ---------===//
//
// The main loop of staged MX on SM90 (GemmRecipe::mxStaged): the operands
// are the staging kernel's exact bf16 copies (GemmStaging.h), so the loop
// only multiplies. Per stage (64 K: one 128B-swizzled row of bf16 per tile
// row) each consumer issues four m64 x 256 x k16 wgmma from shared memory
// into its f32 accumulator, commits them, and waits for the previous
// stage's group only: one group stays in flight while the next stage is
// awaited and issued, and the previous stage is released as soon as its
// group is done. bf16 products accumulate in f32 inside the tensor core
// (unlike FP8's ~14 bits), so the accumulator is chained across all of K
// with no promotion.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

class Sm90StagedMainLoop : public GemmMainLoop {
public:
  using GemmMainLoop::GemmMainLoop;

  Value buildTile(const ConsumerThread &thread, TileOrigin origin,
                  Value iteration) override;

private:
  /// Releases the stage of ring iteration `iteration`.
  void releaseIteration(const ConsumerThread &thread, Value iteration) {
    k.releaseStage(thread, k.getRingSlot(iteration, /*producer=*/false).stage);
  }

  int64_t fragment() const { return kWaveRows * plan.tileN / kWarpgroupThreads; }
};

} // namespace

Value Sm90StagedMainLoop::buildTile(const ConsumerThread &thread,
                                    TileOrigin origin, Value iteration) {
  assert(plan.wavesM == 1 && "staged MX runs one wave per consumer");
  // The accumulator starts at zero for each tile: wgmma's scale-d is an
  // attribute, so the first chain of a tile cannot skip it at run time.
  auto accumulatorType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(fragment(), b.getF32Type()));
  auto loop = scf::ForOp::create(
      b, k.i32(0), k.i32(plan.kBlocks()), k.i32(1),
      ValueRange{iteration, LLVM::ZeroOp::create(b, accumulatorType)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getRegionIterArg(0), kBlock = loop.getInductionVar();
    RingSlot slot = k.getRingSlot(it, /*producer=*/false);
    k.waitBarrier(k.fullBarrier(slot.stage), slot.parity);
    NVVM::WgmmaFenceAlignedOp::create(b);
    Value acc = k.buildStageWgmmaChain(thread, slot, /*wave=*/0,
                                       loop.getRegionIterArg(1),
                                       /*overwriteFirst=*/false);
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    // The previous stage's chain is done once at most this one is pending.
    NVVM::WgmmaWaitGroupSyncOp::create(b, 1);
    k.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, kBlock,
                                   k.i32(0)),
             [&] {
               releaseIteration(thread,
                                arith::SubIOp::create(b, it, k.i32(1)));
             });
    scf::YieldOp::create(
        b, ValueRange{arith::AddIOp::create(b, it, k.i32(1)), acc});
  }
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  Value next = loop.getResult(0);
  releaseIteration(thread, arith::SubIOp::create(b, next, k.i32(1)));
  Value accumulator = loop.getResult(1);
  SmallVector<Value> values;
  for (int64_t e = 0; e < fragment(); ++e)
    values.push_back(LLVM::ExtractValueOp::create(b, accumulator, e));
  k.storeWaves(thread, origin, {values});
  return next;
}

std::unique_ptr<GemmMainLoop>
gemm::createSm90StagedMainLoop(GemmKernelBuilder &k) {
  return std::make_unique<Sm90StagedMainLoop>(k);
}
