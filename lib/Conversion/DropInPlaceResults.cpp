//===- DropInPlaceResults.cpp - Results written into their arguments ------===//
//
// A public function updates an argument in place when the source marks the
// argument `mx.updated` and returns its new value: after one-shot
// bufferization the result is then the argument's own buffer (nothing read
// the old value after the write), and this pass erases it. The compiled
// function writes the caller's buffer and returns nothing for it: no
// allocation, copy kernel or returned buffer per call (delayed scaling's
// amax history, written by each cast). Where bufferization gave the result a
// buffer of its own, it stays a result, with value semantics, and the
// argument loses the mark, which thus tells callers (mx-export-signatures)
// exactly which arguments they find updated.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/ExportSignatures.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"

namespace mx {
#define GEN_PASS_DEF_DROPINPLACERESULTS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

/// The argument of `func` that every return gives as result `index`, if
/// the source marked it `mx.updated`.
std::optional<unsigned> getUpdatedArgument(func::FuncOp func,
                                           ArrayRef<func::ReturnOp> returns,
                                           unsigned index) {
  std::optional<unsigned> argument;
  for (func::ReturnOp ret : returns) {
    auto bbArg = dyn_cast<BlockArgument>(ret.getOperand(index));
    if (!bbArg || bbArg.getOwner() != &func.getBody().front() ||
        (argument && *argument != bbArg.getArgNumber()))
      return std::nullopt;
    argument = bbArg.getArgNumber();
  }
  if (!argument || !func.getArgAttr(*argument, mx::kUpdatedAttrName))
    return std::nullopt;
  return argument;
}

struct DropInPlaceResultsPass
    : mx::impl::DropInPlaceResultsBase<DropInPlaceResultsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func.isPublic() || func.isDeclaration())
        continue;
      SmallVector<func::ReturnOp> returns;
      func.walk([&](func::ReturnOp ret) { returns.push_back(ret); });
      llvm::BitVector dropped(func.getNumResults());
      llvm::BitVector updated(func.getNumArguments());
      for (unsigned index = 0; index < func.getNumResults(); ++index) {
        if (std::optional<unsigned> argument =
                getUpdatedArgument(func, returns, index)) {
          dropped.set(index);
          updated.set(*argument);
        }
      }
      for (unsigned index = 0; index < func.getNumArguments(); ++index)
        if (!updated.test(index))
          func.removeArgAttr(index, mx::kUpdatedAttrName);
      if (dropped.none())
        continue;
      for (func::ReturnOp ret : returns)
        ret->eraseOperands(dropped);
      if (failed(func.eraseResults(dropped)))
        return signalPassFailure();
    }
  }
};

} // namespace
