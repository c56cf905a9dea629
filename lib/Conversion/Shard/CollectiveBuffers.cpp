//===- CollectiveBuffers.cpp - Gathered buffers in registered memory ------===//
//
// convert-shard-to-mxrt marks the gpu.alloc of every buffer that a gather
// writes (kCollectiveBufferAttr); this pass, run once the frees are placed,
// makes such a buffer the runtime's memory registered with NCCL
// (mxrtCollectiveAlloc) and its frees mxrtCollectiveFree. The marking and
// the lowering are apart so that every pass in between -- the in-place
// placement of a gather's parts, bufferization, the placement of frees --
// sees an ordinary gpu.alloc, and a pipeline without this pass still runs
// the program, with unregistered buffers.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTCOLLECTIVEBUFFERSTOMXRUNTIME
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

/// Whether the marked `alloc` is one the runtime's allocation can replace: a
/// synchronous allocation of static shape and identity layout, in whole
/// bytes.
bool isConvertible(gpu::AllocOp alloc) {
  MemRefType type = alloc.getType();
  return !alloc.getAsyncToken() && alloc.getAsyncDependencies().empty() &&
         alloc.getDynamicSizes().empty() && alloc.getSymbolOperands().empty() &&
         !alloc.getHostShared() && type.hasStaticShape() &&
         type.getLayout().isIdentity() && type.getMemorySpace() == nullptr &&
         type.getNumElements() * type.getElementTypeBitWidth() % 8 == 0;
}

/// Whether `module` can call the runtime function `name` of LLVM type
/// `type` (it has nothing else so named); reported on `user` if not.
LogicalResult checkCallee(ModuleOp module, Operation *user, StringRef name,
                          LLVM::LLVMFunctionType type) {
  std::string reason;
  if (failed(checkRuntimeFunction(module, name, type, reason)))
    return user->emitOpError("is marked ")
           << kCollectiveBufferAttr << ", but " << reason;
  return success();
}

/// Replaces `alloc` with the runtime's allocation of its bytes and its
/// gpu.dealloc ops with the runtime's free.
void convert(gpu::AllocOp alloc, LLVM::LLVMFuncOp allocFn,
             LLVM::LLVMFuncOp freeFn) {
  MemRefType type = alloc.getType();
  auto ptr = LLVM::LLVMPointerType::get(alloc.getContext());
  ImplicitLocOpBuilder b(alloc.getLoc(), alloc);
  int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  // NULL: the call stream (MXRuntime.h), which the call's work is on.
  Value pointer = LLVM::CallOp::create(
                      b, allocFn,
                      ValueRange{arith::ConstantIntOp::create(b, bytes, 64),
                                 LLVM::ZeroOp::create(b, ptr)})
                      .getResult();
  Value buffer = wrapDevicePointer(b, b.getLoc(), pointer, type);
  for (Operation *user : llvm::make_early_inc_range(alloc->getUsers())) {
    auto dealloc = dyn_cast<gpu::DeallocOp>(user);
    if (!dealloc || dealloc.getAsyncToken())
      continue;
    b.setInsertionPoint(dealloc);
    b.setLoc(dealloc.getLoc());
    LLVM::CallOp::create(b, freeFn,
                         ValueRange{pointer, LLVM::ZeroOp::create(b, ptr)});
    dealloc.erase();
  }
  alloc.getMemref().replaceAllUsesWith(buffer);
  alloc.erase();
}

struct ConvertCollectiveBuffersPass
    : mx::impl::ConvertCollectiveBuffersToMXRuntimeBase<
          ConvertCollectiveBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::AllocOp> allocs;
    module.walk([&](gpu::AllocOp alloc) {
      if (alloc->hasAttr(kCollectiveBufferAttr) && isConvertible(alloc))
        allocs.push_back(alloc);
    });
    if (allocs.empty())
      return;
    MLIRContext *context = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(context);
    auto allocType =
        LLVM::LLVMFunctionType::get(ptr, {IntegerType::get(context, 64), ptr});
    auto freeType = LLVM::LLVMFunctionType::get(
        LLVM::LLVMVoidType::get(context), {ptr, ptr});
    // Both checked before anything changes.
    if (failed(checkCallee(module, allocs.front(), kCollectiveAllocFn,
                           allocType)) ||
        failed(
            checkCallee(module, allocs.front(), kCollectiveFreeFn, freeType)))
      return signalPassFailure();
    OpBuilder b(context);
    auto declare = [&](StringRef name, LLVM::LLVMFunctionType type) {
      return *LLVM::lookupOrCreateFn(b, module, name, type.getParams(),
                                     type.getReturnType());
    };
    LLVM::LLVMFuncOp allocFn = declare(kCollectiveAllocFn, allocType);
    LLVM::LLVMFuncOp freeFn = declare(kCollectiveFreeFn, freeType);
    for (gpu::AllocOp alloc : allocs)
      convert(alloc, allocFn, freeFn);
  }
};

} // namespace
