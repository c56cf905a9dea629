//===- Collectives.cpp - What the mx lowerings know of shard ops ----------===//
//
// See Collectives.h.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Shard/Collectives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

bool mx::isLoweredCollective(Operation *op) {
  return isa<shard::AllGatherOp, shard::AllReduceOp, shard::ReduceScatterOp,
             shard::AllSliceOp>(op);
}

int64_t mx::getGroupSize(Operation *collective, SymbolTableCollection &symbols,
                         shard::GridOp &grid) {
  return llvm::TypeSwitch<Operation *, int64_t>(collective)
      .Case<shard::AllGatherOp, shard::AllReduceOp, shard::ReduceScatterOp,
            shard::AllSliceOp>([&](auto op) -> int64_t {
        grid = shard::getGridOrNull(op, op.getGridAttr(), symbols);
        if (!grid)
          return ShapedType::kDynamic;
        return shard::collectiveProcessGroupSize(op.getGridAxes(), grid);
      });
}

void mx::replaceByLocalValue(RewriterBase &rewriter, Operation *collective) {
  Value input = collective->getOperand(0);
  auto resultType = cast<RankedTensorType>(collective->getResult(0).getType());
  auto inputType = cast<RankedTensorType>(input.getType());
  Location loc = collective->getLoc();
  Type element = resultType.getElementType();
  if (inputType.getElementType() != element) {
    auto converted = inputType.clone(element);
    input =
        element.getIntOrFloatBitWidth() >
                inputType.getElementType().getIntOrFloatBitWidth()
            ? arith::ExtFOp::create(rewriter, loc, converted, input).getResult()
            : arith::TruncFOp::create(rewriter, loc, converted, input)
                  .getResult();
  }
  if (input.getType() != resultType)
    input = tensor::CastOp::create(rewriter, loc, resultType, input);
  rewriter.replaceOp(collective, input);
}
