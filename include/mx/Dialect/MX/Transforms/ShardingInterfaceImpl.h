//===- ShardingInterfaceImpl.h - mx ops on a device grid --------*- C++ -*-===//
//
// Attaches upstream's `shard::ShardingInterface` to every mx op, so that
// `--sharding-propagation` and `--shard-partition` partition functions of mx
// ops whose values carry `shard.sharding` annotations, following section 12
// of the spec (docs/distributed.md says how each rule is expressed).
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_TRANSFORMS_SHARDINGINTERFACEIMPL_H
#define MX_DIALECT_MX_TRANSFORMS_SHARDINGINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mx {

/// Registers the sharding interface models of the mx ops.
void registerShardingInterfaceExternalModels(mlir::DialectRegistry &registry);

} // namespace mx

#endif // MX_DIALECT_MX_TRANSFORMS_SHARDINGINTERFACEIMPL_H
