//===- ReadOnlyArguments.cpp - Compiled functions keep their inputs -------===//
//
// One-shot bufferization with function boundaries treats arguments as
// writable by default, so a public function may update a caller's buffer in
// place (an elementwise op over an argument, the amax history of
// mx.quantize_delayed). The CPU pipeline marks public arguments read-only
// first, so that bufferization copies instead: a compiled function then has
// the value semantics of its tensor signature, but for the arguments that
// the source marks `mx.updated`, which stay writable: the function updates
// them in place (mx-drop-in-place-results). Unranked tensors are left writable: they are
// no Kernel argument, and print helpers pass them to
// bufferization.to_buffer, which counts as a write.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/ExportSignatures.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mx {
#define GEN_PASS_DEF_READONLYARGUMENTS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

struct ReadOnlyArgumentsPass
    : mx::impl::ReadOnlyArgumentsBase<ReadOnlyArgumentsPass> {
  void runOnOperation() override {
    auto readOnly = BoolAttr::get(&getContext(), false);
    auto writable = BoolAttr::get(&getContext(), true);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func.isPublic() || func.isDeclaration())
        continue;
      for (auto [index, type] : llvm::enumerate(func.getArgumentTypes()))
        if (isa<RankedTensorType>(type))
          func.setArgAttr(
              index, bufferization::BufferizationDialect::kWritableAttrName,
              func.getArgAttr(index, mx::kUpdatedAttrName) ? writable
                                                           : readOnly);
    }
  }
};

} // namespace
