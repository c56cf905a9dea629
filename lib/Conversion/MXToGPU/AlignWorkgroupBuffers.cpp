//===- AlignWorkgroupBuffers.cpp - Shared buffers for vector accesses ---===//
//
// The quantize kernels stage data in workgroup buffers and move it in
// 16-byte vectors. gpu-kernel-outlining turns their gpu.launch ops into
// gpu.func ops without attribution attributes, and the NVVM lowering then
// aligns each `.shared` variable to its element type only (2 bytes for a
// bf16 tile), which a vector access to it may not assume. This pass sets the
// alignment the accesses need on the outlined functions.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mx {
#define GEN_PASS_DEF_ALIGNWORKGROUPBUFFERS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

struct AlignWorkgroupBuffersPass
    : mx::impl::AlignWorkgroupBuffersBase<AlignWorkgroupBuffersPass> {
  using AlignWorkgroupBuffersBase::AlignWorkgroupBuffersBase;

  void runOnOperation() override {
    int64_t bytes = alignment;
    if (bytes <= 0 || !llvm::isPowerOf2_64(bytes)) {
      getOperation().emitError()
          << "mx-align-workgroup-buffers: alignment must be a positive power "
             "of two, got "
          << bytes;
      return signalPassFailure();
    }
    StringRef name = LLVM::LLVMDialect::getAlignAttrName();
    auto attr = IntegerAttr::get(IntegerType::get(&getContext(), 64), bytes);
    for (auto func : getOperation().getOps<gpu::GPUFuncOp>())
      for (unsigned i = 0, e = func.getNumWorkgroupAttributions(); i < e; ++i) {
        auto given = dyn_cast_or_null<IntegerAttr>(
            func.getWorkgroupAttributionAttr(i, name));
        if (!given || given.getInt() < bytes)
          func.setWorkgroupAttributionAttr(i, name, attr);
      }
  }
};

} // namespace
