//===- FreeDeviceTemporaries.cpp - Free a call's own device buffers -------===//
//
// The GPU lowerings allocate every device buffer with `gpu.alloc`, and the
// NVVM pipeline runs no deallocation after bufferization: a result of a
// public function belongs to its caller, but a buffer that only later ops of
// the same function read (scales an inserted mx.swizzle lays out for a GEMM,
// a quantize feeding a scaled_matmul, a gathered shard) would outlive the
// call and leak device memory on every call. This pass frees each such
// buffer with `gpu.dealloc` right after the last op of its block that uses
// it; gpu-async-region later puts the free on the call's stream after that
// op's work.
//
// A buffer is freed only when every use of it and of every value derived
// from it is understood: views and casts of it, its device address and what
// is computed from it, kernel launches, copies, and the runtime calls that
// use buffers in stream order (DeviceBuffers.h); a buffer that the placed
// all-gather uses on the side stream is in use until the next
// mxrtCollectivesJoin, which orders the call stream -- and the free -- after
// that stream. Anything else -- a return, a
// call, a store of its address, a region yield, an op this pass does not
// know -- may keep the buffer alive past the call, and freeing it then would
// be a use after free; leaving it is at worst the leak this pass removes
// elsewhere. A buffer some lowering already frees is left alone.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mx {
#define GEN_PASS_DEF_FREEDEVICETEMPORARIES
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

/// What one use of a value that refers to a buffer does with it.
enum class Use {
  /// Reads or writes it in the call's work; the user's results do not
  /// refer to it.
  access,
  /// The user's results refer to the buffer too (a view, its address, a
  /// tensor map of it): their uses are the buffer's uses.
  derive,
  /// Reads or writes it on the communicator's side stream
  /// (mxrtAllGatherPlaced): in use until the next mxrtCollectivesJoin of the
  /// block, after which a free on the call stream waits for that stream.
  untilJoin,
  /// Frees it.
  free,
  /// May keep it alive past the call.
  escape,
};

Use classify(OpOperand &operand) {
  Operation *user = operand.getOwner();
  // A kernel body reads captured buffers on the device only.
  if (user->getParentOfType<gpu::LaunchOp>())
    return Use::access;
  return TypeSwitch<Operation *, Use>(user)
      .Case<gpu::DeallocOp>([](auto) { return Use::free; })
      .Case<gpu::LaunchFuncOp, gpu::MemcpyOp, gpu::MemsetOp>(
          [](auto) { return Use::access; })
      .Case<ViewLikeOpInterface>([&](ViewLikeOpInterface view) {
        return operand.get() == view.getViewSource() ? Use::derive
                                                     : Use::access;
      })
      .Case<memref::CastOp, memref::ExtractAlignedPointerAsIndexOp,
            bufferization::ToTensorOp, bufferization::ToBufferOp,
            arith::IndexCastOp, arith::IndexCastUIOp, LLVM::IntToPtrOp,
            LLVM::PtrToIntOp, UnrealizedConversionCastOp>(
          [](auto) { return Use::derive; })
      .Case<LLVM::GEPOp>([&](LLVM::GEPOp gep) {
        return operand.get() == gep.getBase() ? Use::derive : Use::escape;
      })
      // The host loads no device memory: a load through a value that refers
      // to the buffer reads host memory holding a reference to it (a tensor
      // map passed to a kernel by value).
      .Case<LLVM::LoadOp>([](auto) { return Use::derive; })
      .Case<LLVM::CallOp>([](LLVM::CallOp call) {
        std::optional<StringRef> callee = call.getCallee();
        if (callee == mx::kAllGatherPlacedFn)
          return Use::untilJoin;
        return callee && mx::usesBuffersInStreamOrder(*callee) ? Use::derive
                                                               : Use::escape;
      })
      // A memref descriptor built around its address (mx::viewRows).
      .Case<LLVM::InsertValueOp>([&](LLVM::InsertValueOp insert) {
        return operand.get() == insert.getValue() ||
                       operand.get() == insert.getContainer()
                   ? Use::derive
                   : Use::escape;
      })
      .Default([](Operation *) { return Use::escape; });
}

/// The first op of the block after `op` that is or holds an
/// mxrtCollectivesJoin call, or null.
Operation *findNextJoin(Operation *op) {
  for (Operation &later :
       llvm::make_range(std::next(op->getIterator()), op->getBlock()->end())) {
    WalkResult found = later.walk([](LLVM::CallOp call) {
      return call.getCallee() == mx::kCollectivesJoinFn ? WalkResult::interrupt()
                                                        : WalkResult::advance();
    });
    if (found.wasInterrupted())
      return &later;
  }
  return nullptr;
}

/// The op of `alloc`'s block after which its buffer is no longer used, or
/// null where the buffer must not be freed here: a use escapes, or something
/// frees it already. An unused buffer is freed right after its allocation.
Operation *findLastUse(gpu::AllocOp alloc) {
  Block *block = alloc->getBlock();
  Operation *last = alloc;
  SmallVector<Value> worklist = {alloc.getMemref()};
  DenseSet<Value> seen(worklist.begin(), worklist.end());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &operand : value.getUses()) {
      Use use = classify(operand);
      if (use == Use::escape || use == Use::free)
        return nullptr;
      // A use nested in a region (a guarded or looped launch) ends with the
      // op that holds the region, on every path through it.
      Operation *user = block->findAncestorOpInBlock(*operand.getOwner());
      if (user && use == Use::untilJoin)
        user = findNextJoin(user);
      if (!user)
        return nullptr;
      if (last->isBeforeInBlock(user))
        last = user;
      if (use == Use::derive)
        for (Value result : operand.getOwner()->getResults())
          if (seen.insert(result).second)
            worklist.push_back(result);
    }
  }
  // A terminator using the buffer hands it on; nothing can follow it.
  if (last->hasTrait<OpTrait::IsTerminator>())
    return nullptr;
  return last;
}

struct FreeDeviceTemporariesPass
    : mx::impl::FreeDeviceTemporariesBase<FreeDeviceTemporariesPass> {
  void runOnOperation() override {
    // Collected first: the frees inserted are uses of the buffers.
    SmallVector<std::pair<gpu::AllocOp, Operation *>> frees;
    getOperation().walk([&](gpu::AllocOp alloc) {
      // An asynchronous allocation is ordered by tokens its producer
      // threads; a free here would not be.
      if (alloc.getAsyncToken())
        return;
      if (Operation *last = findLastUse(alloc))
        frees.emplace_back(alloc, last);
    });
    // In reverse, so that frees after one op come in allocation order.
    for (auto [alloc, last] : llvm::reverse(frees)) {
      OpBuilder b(last->getContext());
      b.setInsertionPointAfter(last);
      gpu::DeallocOp::create(b, alloc.getLoc(), Type(), ValueRange(),
                             alloc.getMemref());
    }
  }
};

} // namespace
