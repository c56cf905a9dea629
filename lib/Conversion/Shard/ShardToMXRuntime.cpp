//===- ShardToMXRuntime.cpp - shard collectives to NCCL calls -------------===//
//
// In a GPU program every tensor is device memory, so each collective of a
// partitioned program becomes one call of the runtime on device buffers
// (the result from `gpu.alloc`), which runs it on NCCL on the call stream
// (MXRuntime.h); convert-shard-to-mxrt in Passes.td lists what is lowered.
// NCCL sees bytes and element counts of whole buffers: a gather or scatter
// must concatenate the outermost dimension that is not 1. Its float max is
// fmaxf, which drops NaN where the spec wants a NaN amax on any device to
// reach every device, so a max is taken over order-preserving u32 keys of
// the floats (NaN above everything), with a kernel before the call and one
// after; an amax's magnitudes are their own keys (kMagnitudeBitsAttr), the
// 4-byte all-reduce of current scaling without either kernel. The partitioner's
// rounding of reduced f32 partial sums, `arith.truncf` on a tensor, is a kernel
// too.
//
// Independent collectives that are one call each (the data and scales of a
// quantized all-gather) run as one NCCL group (mxrtGroupStart/End): NCCL
// then moves all their bytes in one launch, where separate calls would each
// pay a launch and run the small parts at small-message bandwidth. A later
// collective whose operands are all defined before an earlier one moves up
// next to it; every rank runs the same program, so every rank still calls
// the collectives in the same order. The members' result buffers are
// allocated before the group starts, so that the group holds only the
// calls and an allocation that fails is known before it opens.
//
// A gathered part whose producer allocated it in the same block (a
// quantize's result) is produced in its own slot of the gathered buffer
// instead, at this process's rank, so that NCCL gathers in place and copies
// no local part (findOwnSlotAllocation; docs/distributed.md). What a gather
// writes is allocated for the runtime's memory registered with NCCL, into
// which the peers write without NCCL's staging copies (kCollectiveBufferAttr;
// convert-collective-buffers-to-mxrt lowers it).
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/Passes.h"
#include "mx/Conversion/Shard/Collectives.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTSHARDTOMXRUNTIME
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

//===----------------------------------------------------------------------===//
// Runtime functions
//===----------------------------------------------------------------------===//

constexpr StringLiteral kAllGather = "mxrtAllGather";
constexpr StringLiteral kAllReduce = "mxrtAllReduce";
constexpr StringLiteral kReduceScatter = "mxrtReduceScatter";
constexpr StringLiteral kGroupStart = "mxrtGroupStart";
constexpr StringLiteral kGroupEnd = "mxrtGroupEnd";
constexpr StringLiteral kCommRank = "mxrtCommRank";

/// The LLVM types of the collectives of MXRuntime.h, called as C symbols.
LLVM::LLVMFunctionType getRuntimeFnType(MLIRContext *context, StringRef name) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32), i64 = IntegerType::get(context, 64);
  if (name == kGroupStart || name == kGroupEnd)
    return LLVM::LLVMFunctionType::get(i32, {});
  if (name == kAllGather)
    return LLVM::LLVMFunctionType::get(i32, {ptr, ptr, i64, i32, ptr});
  if (name == kAllGatherPlacedFn)
    return LLVM::LLVMFunctionType::get(i32, {ptr, ptr, i64, i64, i64, i32, ptr});
  if (name == kCollectivesJoinFn)
    return LLVM::LLVMFunctionType::get(i32, {ptr});
  if (name == kCommRank)
    return LLVM::LLVMFunctionType::get(i32, {ptr, ptr});
  return LLVM::LLVMFunctionType::get(i32, {ptr, ptr, i64, i32, i32, i32, ptr});
}

//===----------------------------------------------------------------------===//
// Device buffers and kernels
//===----------------------------------------------------------------------===//

constexpr int64_t kThreads = 256;

/// A device buffer for a tensor of `type`; sub-byte elements (packed FP4)
/// get a byte buffer viewed as `type`, as the FP4 kernels do. A `gathered`
/// one (what a gather writes) is marked for the runtime's registered memory
/// (kCollectiveBufferAttr).
Value allocResult(ImplicitLocOpBuilder &b, RankedTensorType type,
                  bool gathered = false) {
  auto allocate = [&](RankedTensorType bufferType) {
    Value buffer = allocDevice(b, b.getLoc(), bufferType);
    if (gathered)
      buffer.getDefiningOp()->setAttr(kCollectiveBufferAttr, b.getUnitAttr());
    return buffer;
  };
  unsigned bits = type.getElementTypeBitWidth();
  if (bits >= 8)
    return allocate(type);
  Value bytes = allocate(
      RankedTensorType::get({type.getNumElements() * bits / 8}, b.getI8Type()));
  return memref::ViewOp::create(
      b, MemRefType::get(type.getShape(), type.getElementType()), bytes,
      arith::ConstantIndexOp::create(b, 0), ValueRange{});
}

/// `buffer` (identity layout) as a 1-D memref of its elements.
Value flatten(ImplicitLocOpBuilder &b, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() == 0)
    return memref::ExpandShapeOp::create(
        b, MemRefType::get({1}, type.getElementType()), buffer,
        ArrayRef<ReassociationIndices>{});
  if (type.getRank() == 1)
    return buffer;
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return memref::CollapseShapeOp::create(b, buffer,
                                         ArrayRef<ReassociationIndices>{all});
}

/// A kernel with one thread per element of the 1-D buffers it reads and
/// writes: `body(builder, index)` for every index below `count`.
void buildElementwiseKernel(
    ImplicitLocOpBuilder &b, int64_t count,
    function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value blocks =
      arith::ConstantIndexOp::create(b, llvm::divideCeil(count, kThreads));
  Value threads = arith::ConstantIndexOp::create(b, kThreads);
  auto launch = gpu::LaunchOp::create(b, blocks, one, one, threads, one, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value index = arith::AddIOp::create(
      b, arith::MulIOp::create(b, launch.getBlockIds().x, threads),
      launch.getThreadIds().x);
  Value inBounds =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, index,
                            arith::ConstantIndexOp::create(b, count));
  auto ifOp = scf::IfOp::create(b, inBounds, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  body(b, index);
  b.setInsertionPointAfter(ifOp);
  gpu::TerminatorOp::create(b);
}

Value constantI32(ImplicitLocOpBuilder &b, uint32_t value) {
  return arith::ConstantIntOp::create(b, static_cast<int32_t>(value), 32);
}

/// The u32 key of a float: unsigned order of keys is the order of the
/// values (-0 below +0), every NaN is all ones, above +Inf (0xFF800000).
Value buildOrderKey(ImplicitLocOpBuilder &b, Value value) {
  Value f32 = value.getType().isF32()
                  ? value
                  : arith::ExtFOp::create(b, b.getF32Type(), value).getResult();
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), f32);
  Value negative = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, bits,
                                         constantI32(b, 0));
  Value key = arith::SelectOp::create(
      b, negative, arith::XOrIOp::create(b, bits, constantI32(b, ~0u)),
      arith::XOrIOp::create(b, bits, constantI32(b, 0x80000000u)));
  Value isNaN = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, f32, f32);
  return arith::SelectOp::create(b, isNaN, constantI32(b, ~0u), key);
}

/// Whether `tensor` is a buffer of f32 magnitudes whose bits are their own
/// order keys (kMagnitudeBitsAttr): an amax.
bool holdsMagnitudeBits(Value tensor) {
  auto view = tensor.getDefiningOp<bufferization::ToTensorOp>();
  auto alloc = view ? view.getBuffer().getDefiningOp<gpu::AllocOp>() : nullptr;
  return alloc && alloc->hasAttr(kMagnitudeBitsAttr) &&
         alloc.getType().getElementType().isF32();
}

/// The float of type `type` whose key is `key`; the key of a NaN gives the
/// quiet NaN 0x7FC00000 that the amax kernels write.
Value buildKeyValue(ImplicitLocOpBuilder &b, Value key, Type type) {
  Value wasPositive = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, key,
                                            constantI32(b, 0));
  Value bits = arith::SelectOp::create(
      b, wasPositive,
      arith::XOrIOp::create(b, key, constantI32(b, 0x80000000u)),
      arith::XOrIOp::create(b, key, constantI32(b, ~0u)));
  Value isNaN = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, key,
                                      constantI32(b, ~0u));
  bits = arith::SelectOp::create(b, isNaN, constantI32(b, 0x7FC00000u), bits);
  Value f32 = arith::BitcastOp::create(b, b.getF32Type(), bits);
  return type.isF32() ? f32 : arith::TruncFOp::create(b, type, f32).getResult();
}

//===----------------------------------------------------------------------===//
// Lowering
//===----------------------------------------------------------------------===//

/// The runtime's code of a reduction, or a reason why there is none.
FailureOr<mxrtReduceOp> getReduceOp(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return MXRT_REDUCE_SUM;
  case shard::ReductionKind::Max:
    return MXRT_REDUCE_MAX;
  default:
    return failure();
  }
}

/// Whether `op` lowers to one runtime call and nothing after it -- an
/// all-gather, or a sum over more than one device -- and so can join a group.
bool isSingleCall(Operation *op, SymbolTableCollection &symbols) {
  shard::GridOp grid;
  if (!isa<shard::AllGatherOp, shard::AllReduceOp, shard::ReduceScatterOp>(op))
    return false;
  int64_t devices = getGroupSize(op, symbols, grid);
  if (ShapedType::isDynamic(devices) || devices <= 1)
    return false;
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<shard::AllReduceOp, shard::ReduceScatterOp>([](auto reduce) {
        return reduce.getReduction() == shard::ReductionKind::Sum;
      })
      .Default(true);
}

/// Whether `op` takes whole rows of a static tensor, which are contiguous.
bool isRowSlice(Operation *op) {
  auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
  if (!slice || !slice.hasUnitStride() || !slice.getSourceType().hasStaticShape() ||
      slice.getType().getRank() != slice.getSourceType().getRank() ||
      ShapedType::isDynamicShape(slice.getStaticOffsets()) ||
      ShapedType::isDynamicShape(slice.getStaticSizes()))
    return false;
  return llvm::all_of(llvm::drop_begin(slice.getStaticOffsets()),
                      [](int64_t offset) { return offset == 0; }) &&
         slice.getStaticSizes().drop_front() ==
             slice.getSourceType().getShape().drop_front();
}

/// The device allocation that the producer of a gathered `chunk` made for
/// it: the chunk is the tensor (reshaped or not) of a `gpu.alloc` of its
/// bytes (or of a memref.view at 0 of a byte allocation, as sub-byte types
/// have), in `gather`'s block, that nothing uses after `gather`, which is
/// the tensor's only reader. The gather can then give the producer the chunk's
/// own slot of the gathered buffer instead, and NCCL exchanges it in place: an
/// out-of-place all-gather or broadcast also copies the local chunk, which
/// measured slower than the exchange of the bytes themselves.
gpu::AllocOp findOwnSlotAllocation(Value chunk, Operation *gather) {
  Value value = chunk;
  while (isa_and_present<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
      value.getDefiningOp())) {
    if (!value.hasOneUse())
      return nullptr;
    value = value.getDefiningOp()->getOperand(0);
  }
  auto tensor = value.getDefiningOp<bufferization::ToTensorOp>();
  if (!tensor || !value.hasOneUse() || tensor->getBlock() != gather->getBlock())
    return nullptr;
  Value buffer = tensor.getBuffer();
  auto bufferType = cast<MemRefType>(buffer.getType());
  auto chunkType = cast<RankedTensorType>(chunk.getType());
  if (!bufferType.hasStaticShape() || !bufferType.getLayout().isIdentity() ||
      bufferType.getElementType() != chunkType.getElementType() ||
      bufferType.getNumElements() != chunkType.getNumElements())
    return nullptr;
  SmallVector<Value> values = {buffer};
  auto alloc = buffer.getDefiningOp<gpu::AllocOp>();
  if (auto view = buffer.getDefiningOp<memref::ViewOp>()) {
    if (!view.getSizes().empty() || !isConstantIntValue(view.getByteShift(), 0))
      return nullptr;
    alloc = view.getSource().getDefiningOp<gpu::AllocOp>();
    values.push_back(view.getSource());
  }
  if (!alloc || alloc->getBlock() != gather->getBlock() ||
      alloc.getAsyncToken() || !alloc.getAsyncDependencies().empty() ||
      !alloc.getDynamicSizes().empty() || !alloc.getSymbolOperands().empty() ||
      alloc.getHostShared() || !alloc.getType().getLayout().isIdentity())
    return nullptr;
  // Every use of the buffer, and of the views and casts made of it, comes
  // before the gather: nothing writes the slot once it is exchanged.
  Block *block = gather->getBlock();
  while (!values.empty()) {
    Value value = values.pop_back_val();
    for (Operation *user : value.getUsers()) {
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (!inBlock || !inBlock->isBeforeInBlock(gather))
        return nullptr;
      if (isa<ViewLikeOpInterface, CastOpInterface>(user))
        llvm::append_range(values, user->getResults());
    }
  }
  return alloc;
}

/// Runs of two or more mx.gather_chunk ops, next to each other in their
/// block: the chunks of one pipelined quantize's results, one NCCL group.
SmallVector<SmallVector<Operation *>> groupChunks(ModuleOp module) {
  SmallVector<SmallVector<Operation *>> runs;
  module.walk([&](Block *block) {
    SmallVector<Operation *> run;
    for (Operation &op : *block) {
      if (isa<GatherChunkOp>(op)) {
        run.push_back(&op);
        continue;
      }
      if (run.size() > 1)
        runs.push_back(run);
      run.clear();
    }
  });
  return runs;
}

/// The groups of two or more single-call collectives of each block, each
/// moved together: a head and the later collectives of its block whose
/// operands are all defined before it (none reads another's result), moved
/// up right after it in their order.
SmallVector<SmallVector<Operation *>>
groupCollectives(ModuleOp module, SymbolTableCollection &symbols) {
  DominanceInfo dominance(module);
  SmallVector<SmallVector<Operation *>> groups;
  DenseSet<Operation *> grouped;
  module.walk([&](Block *block) {
    for (Operation &head : *block) {
      if (grouped.contains(&head) || !isSingleCall(&head, symbols))
        continue;
      SmallVector<Operation *> members = {&head};
      for (Operation &later :
           llvm::make_range(std::next(head.getIterator()), block->end()))
        if (!grouped.contains(&later) && isSingleCall(&later, symbols) &&
            llvm::all_of(later.getOperands(), [&](Value operand) {
              return dominance.properlyDominates(operand, &head);
            }))
          members.push_back(&later);
      if (members.size() < 2)
        continue;
      for (auto [previous, member] :
           llvm::zip(members, llvm::drop_begin(members)))
        member->moveAfter(previous);
      grouped.insert(members.begin(), members.end());
      groups.push_back(std::move(members));
    }
  });
  return groups;
}

class CollectiveLowering {
public:
  CollectiveLowering(ModuleOp module, SymbolTableCollection &symbols)
      : module(module), symbols(symbols), rewriter(module.getContext()) {}

  /// Lowers one op of the shard dialect, or an arith.truncf on a tensor;
  /// reports what it cannot lower.
  LogicalResult lower(Operation *op) {
    rewriter.setInsertionPoint(op);
    if (isa<arith::TruncFOp>(op))
      return lowerTruncF(cast<arith::TruncFOp>(op));
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
      return lowerRowSlice(slice);
    if (auto chunk = dyn_cast<GatherChunkOp>(op))
      return lowerGatherChunk(chunk);
    if (auto join = dyn_cast<GatherJoinOp>(op))
      return lowerGatherJoin(join);
    if (isa<shard::GridOp>(op))
      return success();
    if (!isLoweredCollective(op) || isa<shard::AllSliceOp>(op))
      return op->emitOpError(
          "is not lowered to the mx runtime, which runs all_gather, "
          "all_reduce (sum, max) and reduce_scatter (sum, max) of "
          "partitioned programs (mx-partition)");
    shard::GridOp grid;
    int64_t devices = getGroupSize(op, symbols, grid);
    if (devices == 1) {
      if (getElementTypeOrSelf(op->getOperand(0).getType()) !=
          getElementTypeOrSelf(op->getResult(0).getType()))
        return op->emitOpError("converts its element type, which the mx "
                               "runtime does not");
      replaceByLocalValue(rewriter, op);
      return success();
    }
    if (ShapedType::isDynamic(devices) ||
        devices != shard::collectiveProcessGroupSize(
                       llvm::seq<shard::GridAxis>(0, grid.getRank()), grid))
      return op->emitOpError("runs over a group that is not the whole static "
                             "grid @")
             << grid.getSymName()
             << ": the mx runtime has one communicator per process, over "
                "all devices";
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](shard::AllGatherOp gather) {
          return lowerAllGather(gather, devices);
        })
        .Case([&](shard::AllReduceOp reduce) {
          return lowerReduction(reduce, reduce.getReduction(), devices,
                                /*scatterAxis=*/std::nullopt);
        })
        .Case([&](shard::ReduceScatterOp scatter) {
          return lowerReduction(scatter, scatter.getReduction(), devices,
                                scatter.getScatterAxis().getZExtValue());
        });
  }

  /// Brackets the collectives of `members` (consecutive, in order) with
  /// mxrtGroupStart and mxrtGroupEnd, before they are lowered.
  LogicalResult bracketGroup(ArrayRef<Operation *> members) {
    FailureOr<LLVM::LLVMFuncOp> start = getCallee(members.front(), kGroupStart);
    FailureOr<LLVM::LLVMFuncOp> end = getCallee(members.back(), kGroupEnd);
    if (failed(start) || failed(end))
      return failure();
    rewriter.setInsertionPoint(members.front());
    auto startCall = LLVM::CallOp::create(
        rewriter, members.front()->getLoc(), *start, ValueRange());
    for (Operation *member : members)
      groupStarts[member] = startCall;
    rewriter.setInsertionPointAfter(members.back());
    LLVM::CallOp::create(rewriter, members.back()->getLoc(), *end,
                         ValueRange());
    return success();
  }

private:
  /// Whether the dimensions of `type` before `axis` are all 1, so that
  /// slices along `axis` are contiguous in memory.
  static bool isOutermost(RankedTensorType type, int64_t axis) {
    return llvm::all_of(type.getShape().take_front(axis),
                        [](int64_t size) { return size == 1; });
  }

  /// The declaration of runtime function `name`, or failure (reported on
  /// `op`) if the module has another symbol of that name.
  FailureOr<LLVM::LLVMFuncOp> getCallee(Operation *op, StringRef name) {
    std::string reason;
    FailureOr<LLVM::LLVMFuncOp> callee = lookupCallee(name, reason);
    if (failed(callee) && !reason.empty())
      return op->emitOpError(reason);
    return callee;
  }

  /// getCallee without the report: `reason` says why where the module has
  /// another symbol `name`.
  FailureOr<LLVM::LLVMFuncOp> lookupCallee(StringRef name,
                                           std::string &reason) {
    LLVM::LLVMFunctionType type = getRuntimeFnType(module.getContext(), name);
    if (failed(checkRuntimeFunction(module, name, type, reason)))
      return failure();
    return LLVM::lookupOrCreateFn(rewriter, module, name, type.getParams(),
                                  type.getReturnType());
  }

  /// The result buffer of collective `op`. A member of a group gets it
  /// before the group's mxrtGroupStart: a failed allocation then fails the
  /// call (the guard, MXRuntime.h) before the group opens, and the group
  /// holds nothing but its collectives.
  Value allocRecv(ImplicitLocOpBuilder &b, Operation *op, RankedTensorType type,
                  bool gathered = false) {
    OpBuilder::InsertionGuard guard(b);
    if (Operation *start = groupStarts.lookup(op))
      b.setInsertionPoint(start);
    return allocResult(b, type, gathered);
  }

  /// The result buffer of a gather of `chunk`, placed in it: allocated
  /// before the chunk's own allocation (unless `recv`, the buffer of an
  /// earlier chunk of the chain, already is), which becomes the bytes at
  /// rank x `strideBytes` + `offsetBytes` of it. Null, with nothing
  /// changed, where findOwnSlotAllocation finds none or `recv` comes later.
  Value placeInOwnSlot(Operation *gather, Value chunk, Value recv,
                       RankedTensorType gathered, int64_t strideBytes,
                       int64_t offsetBytes, int64_t devices) {
    gpu::AllocOp alloc = findOwnSlotAllocation(chunk, gather);
    if (!alloc)
      return nullptr;
    Operation *recvDef = recv ? recv.getDefiningOp() : nullptr;
    if (recv && (!recvDef || recvDef->getBlock() != alloc->getBlock() ||
                 !recvDef->isBeforeInBlock(alloc)))
      return nullptr;
    FailureOr<Value> rank = getRank(gather, devices);
    if (failed(rank))
      return nullptr;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(alloc);
    ImplicitLocOpBuilder b(alloc->getLoc(), rewriter);
    if (!recv)
      recv = allocResult(b, gathered, /*gathered=*/true);
    Value offset = LLVM::AddOp::create(
        b, LLVM::MulOp::create(b, *rank, i64(b, strideBytes)),
        i64(b, offsetBytes));
    rewriter.replaceOp(
        alloc, viewBytesAt(b, b.getLoc(), recv, offset, alloc.getType()));
    return recv;
  }

  /// This process's rank as an i64, read once per function at its entry
  /// (mxrtCommRank), and 0 where the communicator does not have `devices`
  /// ranks: the collectives then fail on that, and the producers of the
  /// chunks placed in their slots still write inside the gathered buffers.
  /// Failure where the module's mxrtCommRank is another function.
  FailureOr<Value> getRank(Operation *op, int64_t devices) {
    auto func = op->getParentOfType<FunctionOpInterface>();
    Value &rank = ranks[{func, devices}];
    if (rank)
      return rank;
    std::string reason; // Not reported: the gather then runs out of place.
    FailureOr<LLVM::LLVMFuncOp> callee = lookupCallee(kCommRank, reason);
    if (failed(callee))
      return failure();
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&func.getFunctionBody().front());
    ImplicitLocOpBuilder b(func.getLoc(), rewriter);
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    Value size = LLVM::AllocaOp::create(b, ptr, b.getI32Type(), i64(b, 1));
    Value index = LLVM::AllocaOp::create(b, ptr, b.getI32Type(), i64(b, 1));
    LLVM::StoreOp::create(b, i32(b, 0), size);
    LLVM::StoreOp::create(b, i32(b, 0), index);
    LLVM::CallOp::create(b, *callee, ValueRange{size, index});
    Value sizeValue = LLVM::LoadOp::create(b, b.getI32Type(), size);
    Value rankValue = LLVM::LoadOp::create(b, b.getI32Type(), index);
    Value fits = arith::AndIOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, sizeValue,
                              i32(b, devices)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, rankValue,
                              i32(b, devices)));
    rank = arith::ExtUIOp::create(
        b, b.getI64Type(),
        arith::SelectOp::create(b, fits, rankValue, i32(b, 0)));
    return rank;
  }

  /// Calls `callee` with `args` and the default stream (NULL: the call
  /// stream in call-stream mode). The status is kept by the runtime
  /// (mxrtGetLastError), where callers of compiled code read it.
  void emitCall(ImplicitLocOpBuilder &b, LLVM::LLVMFuncOp callee,
                SmallVector<Value> args) {
    args.push_back(
        LLVM::ZeroOp::create(b, LLVM::LLVMPointerType::get(b.getContext())));
    LLVM::CallOp::create(b, callee, args);
  }

  Value i32(ImplicitLocOpBuilder &b, int64_t v) {
    return arith::ConstantIntOp::create(b, v, 32);
  }
  Value i64(ImplicitLocOpBuilder &b, int64_t v) {
    return arith::ConstantIntOp::create(b, v, 64);
  }

  LogicalResult lowerAllGather(shard::AllGatherOp op, int64_t devices) {
    auto input = cast<RankedTensorType>(op.getInput().getType());
    auto result = cast<RankedTensorType>(op.getResult().getType());
    int64_t axis = op.getGatherAxis().getZExtValue();
    if (!isOutermost(input, axis))
      return op.emitOpError("gathers along dimension ")
             << axis << " of " << input
             << ", after dimensions that are not 1: NCCL concatenates whole "
                "buffers, so the mx runtime gathers along the outermost "
                "dimension";
    int64_t bits = input.getNumElements() * input.getElementTypeBitWidth();
    if (bits % 8)
      return op.emitOpError("gathers parts of ")
             << input
             << ", which do not end on a byte: NCCL concatenates "
                "whole bytes (packed FP4 parts need an even count)";
    FailureOr<LLVM::LLVMFuncOp> callee = getCallee(op, kAllGather);
    if (failed(callee))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    int64_t bytes = bits / 8;
    Value recv = placeInOwnSlot(op, op.getInput(), nullptr, result, bytes,
                                /*offsetBytes=*/0, devices);
    if (!recv)
      recv = allocRecv(b, op, result, /*gathered=*/true);
    emitCall(b, *callee,
             {getDevicePointer(b, b.getLoc(), op.getInput()),
              getDevicePointer(b, b.getLoc(), recv), i64(b, bytes),
              i32(b, devices)});
    rewriter.replaceOp(op, toTensor(b, b.getLoc(), recv));
    return success();
  }

  /// An all-reduce, or with `scatterAxis` a reduce-scatter.
  LogicalResult lowerReduction(Operation *op, shard::ReductionKind kind,
                               int64_t devices,
                               std::optional<int64_t> scatterAxis) {
    Value input = op->getOperand(0);
    auto inputType = cast<RankedTensorType>(input.getType());
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Type element = inputType.getElementType();
    FailureOr<mxrtReduceOp> reduceOp = getReduceOp(kind);
    if (failed(reduceOp))
      return op->emitOpError("reduces with ")
             << shard::stringifyReductionKind(kind)
             << "; the mx runtime reduces with sum and max";
    if (element != resultType.getElementType() ||
        !(element.isF32() || element.isBF16() || element.isF16()))
      return op->emitOpError("reduces ")
             << inputType << " into " << resultType
             << "; the mx runtime reduces f32, bf16 and f16 in their own type";
    if (scatterAxis && !isOutermost(resultType, *scatterAxis))
      return op->emitOpError("scatters along dimension ")
             << *scatterAxis << " of " << resultType
             << ", after dimensions that are not 1: NCCL scatters whole "
                "buffers, so the mx runtime scatters along the outermost "
                "dimension";
    FailureOr<LLVM::LLVMFuncOp> callee =
        getCallee(op, scatterAxis ? kReduceScatter : kAllReduce);
    if (failed(callee))
      return failure();

    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    int64_t sendCount = inputType.getNumElements();
    int64_t recvCount = resultType.getNumElements();
    Value recv = allocRecv(b, op, resultType);
    auto call = [&](Value send, Value target, int32_t type) {
      emitCall(b, *callee,
               {getDevicePointer(b, b.getLoc(), send),
                getDevicePointer(b, b.getLoc(), target),
                i64(b, scatterAxis ? recvCount : sendCount), i32(b, type),
                i32(b, *reduceOp), i32(b, devices)});
    };
    if (*reduceOp == MXRT_REDUCE_SUM) {
      call(toBuffer(b, b.getLoc(), input), recv,
           *getRuntimeElementType(element));
    } else if (holdsMagnitudeBits(input)) {
      call(toBuffer(b, b.getLoc(), input), recv, MXRT_TYPE_U32);
    } else {
      // max over keys: keys of the input, reduced (in place for an
      // all-reduce; NCCL's in-place reduce-scatter writes at an offset that
      // depends on the rank, so it gets a buffer of its own), turned back
      // into floats.
      auto keysType = [&](int64_t count) {
        return RankedTensorType::get({count}, b.getI32Type());
      };
      Value keys = allocDevice(b, b.getLoc(), keysType(sendCount));
      Value reduced =
          scatterAxis ? allocDevice(b, b.getLoc(), keysType(recvCount)) : keys;
      Value flatInput = flatten(b, toBuffer(b, b.getLoc(), input));
      buildElementwiseKernel(
          b, sendCount, [&](ImplicitLocOpBuilder &kb, Value i) {
            Value value = memref::LoadOp::create(kb, flatInput, i);
            memref::StoreOp::create(kb, buildOrderKey(kb, value), keys, i);
          });
      call(keys, reduced, MXRT_TYPE_U32);
      Value flatRecv = flatten(b, recv);
      buildElementwiseKernel(
          b, recvCount, [&](ImplicitLocOpBuilder &kb, Value i) {
            Value key = memref::LoadOp::create(kb, reduced, i);
            memref::StoreOp::create(kb, buildKeyValue(kb, key, element),
                                    flatRecv, i);
          });
      gpu::DeallocOp::create(b, Type(), ValueRange(), keys);
      if (scatterAxis)
        gpu::DeallocOp::create(b, Type(), ValueRange(), reduced);
    }
    rewriter.replaceOp(op, toTensor(b, b.getLoc(), recv));
    return success();
  }

  /// Rows of a device tensor (a chunk of mx-pipeline-gathers) as a view of
  /// its buffer.
  LogicalResult lowerRowSlice(tensor::ExtractSliceOp op) {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value view =
        viewRows(b, b.getLoc(), toBuffer(b, b.getLoc(), op.getSource()),
                 op.getStaticOffsets().front(), op.getStaticSizes().front());
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        op, op.getType(), view, /*restrict=*/true, /*writable=*/false);
    return success();
  }

  /// Bytes of `rows` rows of `type`, or failure where they are not whole.
  static FailureOr<int64_t> getRowBytes(RankedTensorType type, int64_t rows) {
    int64_t bits = rows * type.getNumElements() / type.getDimSize(0) *
                   type.getElementTypeBitWidth();
    if (bits % 8)
      return failure();
    return bits / 8;
  }

  /// mxrtAllGatherPlaced of the chunk into the buffer of its chain, which
  /// the chain's tensor.empty allocates (before the chunk's group).
  LogicalResult lowerGatherChunk(GatherChunkOp op) {
    auto chunk = cast<RankedTensorType>(op.getChunk().getType());
    auto dest = cast<RankedTensorType>(op.getDest().getType());
    int64_t devices = op.getDevices();
    int64_t part = dest.getDimSize(0) / devices;
    FailureOr<int64_t> chunkBytes = getRowBytes(dest, chunk.getDimSize(0));
    FailureOr<int64_t> strideBytes = getRowBytes(dest, part);
    FailureOr<int64_t> offsetBytes = getRowBytes(dest, op.getRow());
    if (failed(chunkBytes) || failed(strideBytes) || failed(offsetBytes))
      return op.emitOpError("places rows of ")
             << dest << " that do not start on a byte";
    if (!op.getDest().hasOneUse())
      return op.emitOpError("has a destination that is also read elsewhere: "
                            "a gathered value is read after mx.gather_join");
    bool first = op.getDest().getDefiningOp<tensor::EmptyOp>() != nullptr;
    if (!first && !buffers.count(op.getDest()))
      return op.emitOpError("expected a destination that is a tensor.empty "
                            "or an mx.gather_chunk");
    FailureOr<LLVM::LLVMFuncOp> callee = getCallee(op, kAllGatherPlacedFn);
    if (failed(callee))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value recv = first ? nullptr : buffers.lookup(op.getDest());
    if (Value placed = placeInOwnSlot(op, op.getChunk(), recv, dest,
                                      *strideBytes, *offsetBytes, devices))
      recv = placed;
    if (!recv)
      recv = allocRecv(b, op, dest, /*gathered=*/true);
    emitCall(b, *callee,
             {getDevicePointer(b, b.getLoc(), op.getChunk()),
              getDevicePointer(b, b.getLoc(), recv), i64(b, *chunkBytes),
              i64(b, *strideBytes), i64(b, *offsetBytes), i32(b, devices)});
    buffers[op.getResult()] = recv;
    return success();
  }

  /// mxrtCollectivesJoin, after which the chains' buffers are their values;
  /// the chains' ops go.
  LogicalResult lowerGatherJoin(GatherJoinOp op) {
    for (Value gathered : op.getGathered())
      if (!gathered.hasOneUse() || !buffers.count(gathered))
        return op.emitOpError("expected each operand to end a chain of "
                              "mx.gather_chunk read by nothing else");
    FailureOr<LLVM::LLVMFuncOp> callee = getCallee(op, kCollectivesJoinFn);
    if (failed(callee))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    emitCall(b, *callee, {});
    SmallVector<Value> results, chains = llvm::to_vector(op.getGathered());
    for (Value gathered : chains)
      results.push_back(toTensor(b, b.getLoc(), buffers.lookup(gathered)));
    rewriter.replaceOp(op, results);
    for (Value chain : chains) {
      Operation *link = chain.getDefiningOp();
      while (auto chunk = dyn_cast<GatherChunkOp>(link)) {
        link = chunk.getDest().getDefiningOp();
        rewriter.eraseOp(chunk);
      }
      rewriter.eraseOp(link); // The chain's tensor.empty.
    }
    return success();
  }

  LogicalResult lowerTruncF(arith::TruncFOp op) {
    auto resultType = cast<RankedTensorType>(op.getType());
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value result = allocDevice(b, b.getLoc(), resultType);
    Value flatInput = flatten(b, toBuffer(b, b.getLoc(), op.getIn()));
    Value flatResult = flatten(b, result);
    Type element = resultType.getElementType();
    buildElementwiseKernel(
        b, resultType.getNumElements(), [&](ImplicitLocOpBuilder &kb, Value i) {
          Value value = memref::LoadOp::create(kb, flatInput, i);
          memref::StoreOp::create(
              kb, arith::TruncFOp::create(kb, element, value), flatResult, i);
        });
    rewriter.replaceOp(op, toTensor(b, b.getLoc(), result));
    return success();
  }

  ModuleOp module;
  SymbolTableCollection &symbols;
  IRRewriter rewriter;
  /// The mxrtGroupStart call of each grouped collective.
  DenseMap<Operation *, Operation *> groupStarts;
  /// The buffer of each value of a chain of mx.gather_chunk.
  DenseMap<Value, Value> buffers;
  /// getRank's value, by function and group size.
  DenseMap<std::pair<Operation *, int64_t>, Value> ranks;
};

struct ConvertShardToMXRuntimePass
    : mx::impl::ConvertShardToMXRuntimeBase<ConvertShardToMXRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<shard::ShardDialect>(op->getDialect()) ||
          isa<GatherChunkOp, GatherJoinOp>(op) || isRowSlice(op) ||
          (isa<arith::TruncFOp>(op) &&
           isa<RankedTensorType>(op->getResult(0).getType())))
        ops.push_back(op);
    });
    SymbolTableCollection symbols;
    CollectiveLowering lowering(module, symbols);
    for (ArrayRef<Operation *> members : groupCollectives(module, symbols))
      if (failed(lowering.bracketGroup(members)))
        return signalPassFailure();
    for (ArrayRef<Operation *> members : groupChunks(module))
      if (failed(lowering.bracketGroup(members)))
        return signalPassFailure();
    // Lowering a join erases its chains: the grids are found first.
    SmallVector<Operation *> grids = llvm::filter_to_vector(
        ops, [](Operation *op) { return isa<shard::GridOp>(op); });
    for (Operation *op : ops)
      if (failed(lowering.lower(op)))
        return signalPassFailure();
    for (Operation *grid : grids)
      grid->erase();
  }
};

} // namespace
