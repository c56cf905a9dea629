//===- Collectives.h - What the mx lowerings know of shard ops --*- C++ -*-===//
//
// The facts about a partitioned program's `shard` collectives that both
// lowerings use: the size of a collective's device group, and the local
// meaning of a collective over one device (mx-shard-single-device runs
// those on the CPU, convert-shard-to-mxrt on the GPU without a call).
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_SHARD_COLLECTIVES_H
#define MX_CONVERSION_SHARD_COLLECTIVES_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Whether `op` is one of the collectives that the mx lowerings run:
/// all_gather, all_reduce, reduce_scatter, all_slice.
bool isLoweredCollective(mlir::Operation *op);

/// The devices in the group of a collective (`isLoweredCollective`): the
/// product of the sizes of its grid axes, ShapedType::kDynamic where one is
/// dynamic. `grid` receives the collective's grid (null if it has none).
int64_t getGroupSize(mlir::Operation *collective,
                     mlir::SymbolTableCollection &symbols,
                     mlir::shard::GridOp &grid);

/// Replaces a collective over a group of one device by its input, converted
/// to the result's element type where an all-reduce asks for it.
void replaceByLocalValue(mlir::RewriterBase &rewriter,
                         mlir::Operation *collective);

} // namespace mx

#endif // MX_CONVERSION_SHARD_COLLECTIVES_H
