//===- RejectHostCompute.cpp - No tensor math on the host of a GPU program ===//
//
// After convert-mx-to-gpu every tensor of a GPU program is device memory. A
// host op that touches tensor elements would either dereference device
// pointers on the CPU or hand host memory to a kernel; both fail at run time
// (a crash or a CUDA error), long after compilation "succeeded". This pass
// turns them into compile-time errors naming the op. It allows exactly the
// ops that never touch elements: views, bufferization casts, calls, returns
// and control flow, whose bodies it checks in turn.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"

namespace mx {
#define GEN_PASS_DEF_REJECTHOSTCOMPUTE
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

bool hasTensorValues(Operation *op) {
  auto isTensor = [](Type type) { return isa<TensorType>(type); };
  return llvm::any_of(op->getOperandTypes(), isTensor) ||
         llvm::any_of(op->getResultTypes(), isTensor);
}

/// Ops that pass tensors along (or allocate them: what computes on an empty
/// tensor is reported) without reading or writing their elements.
bool keepsElementsInPlace(Operation *op) {
  return isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
             tensor::ExtractSliceOp, tensor::CastOp, tensor::EmptyOp,
             bufferization::ToTensorOp, bufferization::ToBufferOp,
             CallOpInterface, RegionBranchOpInterface,
             RegionBranchTerminatorOpInterface>(op) ||
         op->hasTrait<OpTrait::ReturnLike>();
}

struct RejectHostComputePass
    : mx::impl::RejectHostComputeBase<RejectHostComputePass> {
  void runOnOperation() override {
    WalkResult result =
        getOperation()->walk<WalkOrder::PreOrder>([](Operation *op) {
          // Kernels and device code run where the data is.
          if (isa<gpu::LaunchOp, gpu::GPUModuleOp>(op))
            return WalkResult::skip();
          if (!hasTensorValues(op) || keepsElementsInPlace(op))
            return WalkResult::advance();
          op->emitOpError(
              "would run on the host over device memory: "
              "mx-lower-to-nvvm compiles mx ops into GPU kernels; "
              "express this computation with mx ops, or compile the "
              "program with mx-lower-to-cpu");
          return WalkResult::interrupt();
        });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
