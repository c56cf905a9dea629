//===- SingleDevice.cpp - Partitioned programs on one device --------------===//
//
// The CPU pipeline runs one process on one device. A partitioned program
// runs there when its grid is one device: every collective is then its own
// input, and the process index is 0. Anything that would need a second
// device is reported rather than compiled into a program that computes
// something else (mx-shard-single-device, Passes.td).
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"
#include "mx/Conversion/Shard/Collectives.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

namespace mx {
#define GEN_PASS_DEF_SHARDSINGLEDEVICE
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

/// Whether the only device of a process index's grid is the one this runs on.
FailureOr<int64_t> getGridSize(Operation *op, FlatSymbolRefAttr symbol,
                               SymbolTableCollection &symbols) {
  shard::GridOp grid = shard::getGridOrNull(op, symbol, symbols);
  if (!grid)
    return failure();
  return shard::collectiveProcessGroupSize(
      llvm::seq<shard::GridAxis>(0, grid.getRank()), grid);
}

/// Rewrites one shard op for a one-device run, or reports why it cannot.
LogicalResult runOnOneDevice(Operation *op, SymbolTableCollection &symbols,
                             IRRewriter &rewriter) {
  rewriter.setInsertionPoint(op);
  if (mx::isLoweredCollective(op)) {
    shard::GridOp grid;
    int64_t devices = mx::getGroupSize(op, symbols, grid);
    if (devices != 1)
      return op->emitOpError("runs over ")
             << (ShapedType::isDynamic(devices)
                     ? std::string("a dynamic number of")
                     : std::to_string(devices))
             << " devices: mx-lower-to-cpu runs one process on one device "
                "(partition for a grid of one device, or compile with "
                "mx-lower-to-nvvm and run one process per GPU)";
    Type from = getElementTypeOrSelf(op->getOperand(0).getType());
    Type to = getElementTypeOrSelf(op->getResult(0).getType());
    if (from != to && (!isa<FloatType>(from) || !isa<FloatType>(to)))
      return op->emitOpError("converts ")
             << from << " to " << to << ", which only floats do here";
    mx::replaceByLocalValue(rewriter, op);
    return success();
  }
  if (isa<shard::ProcessLinearIndexOp, shard::ProcessMultiIndexOp>(op)) {
    FailureOr<int64_t> devices =
        getGridSize(op, op->getAttrOfType<FlatSymbolRefAttr>("grid"), symbols);
    if (failed(devices) || *devices != 1)
      return op->emitOpError("needs the process index of a grid of more "
                             "than one device; mx-lower-to-cpu runs one");
    Value zero = arith::ConstantIndexOp::create(rewriter, op->getLoc(), 0);
    rewriter.replaceOp(op, SmallVector<Value>(op->getNumResults(), zero));
    return success();
  }
  if (isa<shard::GridOp>(op))
    return success();
  if (auto chunk = dyn_cast<mx::GatherChunkOp>(op))
    return op->emitOpError("gathers over ")
           << chunk.getDevices()
           << " devices: mx-lower-to-cpu runs one process on one device "
              "(mx-pipeline-gathers is for mx-lower-to-nvvm)";
  return op->emitOpError("is left in the program: mx-lower-to-cpu takes "
                         "partitioned programs (mx-partition), whose only "
                         "shard ops are collectives");
}

struct ShardSingleDevicePass
    : mx::impl::ShardSingleDeviceBase<ShardSingleDevicePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> shardOps;
    module.walk([&](Operation *op) {
      if (isa<shard::ShardDialect>(op->getDialect()) ||
          isa<mx::GatherChunkOp>(op))
        shardOps.push_back(op);
    });
    for (Operation *op : shardOps)
      if (failed(runOnOneDevice(op, symbols, rewriter)))
        return signalPassFailure();
    for (Operation *op : shardOps)
      if (auto grid = dyn_cast<shard::GridOp>(op))
        rewriter.eraseOp(grid);
  }
};

} // namespace
