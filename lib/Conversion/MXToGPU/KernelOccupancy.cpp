//===- KernelOccupancy.cpp - CTAs per SM a kernel's registers must allow --===//
//
// ptxas picks a kernel's register count for its own schedule; a count above
// 65536 / (threads x CTAs) costs a kernel whose speed rests on that many CTAs
// an SM its occupancy, without a spill or any other sign. A quantize kernel
// says how many CTAs it needs by an `mx.min_ctas_per_sm` attribute on an op of
// its `gpu.launch` body (the launch's own attributes do not survive
// gpu-kernel-outlining; its body's ops do), and this pass turns it into the
// outlined function's `nvvm.minctasm`, PTX's `.minnctapersm`, by which ptxas
// keeps the registers within that occupancy.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mx {
#define GEN_PASS_DEF_KERNELOCCUPANCY
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

struct KernelOccupancyPass
    : mx::impl::KernelOccupancyBase<KernelOccupancyPass> {
  void runOnOperation() override {
    constexpr StringLiteral kRequest = "mx.min_ctas_per_sm";
    for (auto func : getOperation().getOps<gpu::GPUFuncOp>()) {
      int64_t ctas = 0;
      func.walk([&](Operation *op) {
        if (auto request = op->getAttrOfType<IntegerAttr>(kRequest)) {
          ctas = std::max(ctas, request.getInt());
          op->removeAttr(kRequest);
        }
      });
      if (ctas > 0)
        func->setAttr("nvvm.minctasm",
                      IntegerAttr::get(IntegerType::get(&getContext(), 32),
                                       ctas));
    }
  }
};

} // namespace
