//===- GuardDeviceCalls.cpp - Public GPU functions under the call guard ---===//
//
// A kernel launched on an argument it cannot take (a 16-byte vector load from
// a pointer at a 2-byte offset, a TMA map that failed to encode) faults, and
// the fault kills the process's CUDA context: every later CUDA call of every
// library in the process fails. The runtime therefore guards each call of a
// compiled function (MXRuntime.h, mxrtCallBegin): it checks the arguments
// before anything is enqueued, and once anything in the call has failed it
// skips the call's later launches, copies and cuBLASLt matmuls. This pass
// emits the three calls that make a public function a guarded call: it is
// the only place that knows where a call starts and ends. The branching
// itself lives in the runtime's launch entry points, which every launch of
// every lowering goes through.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/Passes.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

namespace mx {
#define GEN_PASS_DEF_GUARDDEVICECALLS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

constexpr StringLiteral kBegin = "mxrtCallBegin", kEnd = "mxrtCallEnd",
                        kCheck = "mxrtCheckArgument";

/// The runtime functions the guard calls, by name, with their LLVM types.
SmallVector<std::pair<StringRef, LLVM::LLVMFunctionType>>
getGuardFunctions(MLIRContext *context) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32), i64 = IntegerType::get(context, 64);
  auto none = LLVM::LLVMVoidType::get(context);
  return {{kBegin, LLVM::LLVMFunctionType::get(none, {ptr})},
          {kEnd, LLVM::LLVMFunctionType::get(i32, {})},
          {kCheck, LLVM::LLVMFunctionType::get(none, {i32, ptr, i64})}};
}

/// The name of the global holding `func`'s name for the runtime's messages.
std::string getNameGlobal(func::FuncOp func) {
  return ("__mx_call_name_" + func.getSymName()).str();
}

struct GuardDeviceCallsPass
    : mx::impl::GuardDeviceCallsBase<GuardDeviceCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isDeclaration())
        functions.push_back(func);
    if (functions.empty())
      return;
    // Everything is checked before the module changes.
    auto guards = getGuardFunctions(&getContext());
    for (auto [name, type] : guards) {
      std::string reason;
      if (failed(mx::checkRuntimeFunction(module, name, type, reason))) {
        module.emitError("mx-guard-device-calls: ") << reason;
        return signalPassFailure();
      }
    }
    for (func::FuncOp func : functions)
      if (Operation *clash = module.lookupSymbol(getNameGlobal(func))) {
        clash->emitError("symbol @")
            << getNameGlobal(func) << " is reserved for the name of @"
            << func.getSymName() << " in the runtime's call guard";
        return signalPassFailure();
      }

    OpBuilder builder(module.getBodyRegion());
    SmallVector<LLVM::LLVMFuncOp> callees;
    for (auto [name, type] : guards)
      callees.push_back(*LLVM::lookupOrCreateFn(
          builder, module, name, type.getParams(), type.getReturnType()));
    for (func::FuncOp func : functions)
      guard(func, callees[0], callees[1], callees[2]);
  }

  /// mxrtCallBegin and one mxrtCheckArgument per memref argument at the
  /// entry of `func`, mxrtCallEnd before each of its returns.
  static void guard(func::FuncOp func, LLVM::LLVMFuncOp begin,
                    LLVM::LLVMFuncOp end, LLVM::LLVMFuncOp check) {
    Location loc = func.getLoc();
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    std::string name = func.getSymName().str();
    name.push_back('\0');
    Value nameAddress = LLVM::createGlobalString(
        loc, b, getNameGlobal(func), name, LLVM::Linkage::Internal);
    LLVM::CallOp::create(b, loc, begin, ValueRange{nameAddress});
    for (BlockArgument argument : func.getArguments()) {
      if (!isa<MemRefType>(argument.getType()))
        continue;
      Value index = LLVM::ConstantOp::create(
          b, loc, b.getI32Type(), b.getI32IntegerAttr(argument.getArgNumber()));
      Value alignment = LLVM::ConstantOp::create(
          b, loc, b.getI64Type(), b.getI64IntegerAttr(MXRT_ARGUMENT_ALIGNMENT));
      Value pointer = mx::getDevicePointer(b, loc, argument);
      LLVM::CallOp::create(b, loc, check,
                           ValueRange{index, pointer, alignment});
    }
    func.walk([&](func::ReturnOp ret) {
      OpBuilder before(ret);
      LLVM::CallOp::create(before, ret.getLoc(), end, ValueRange());
    });
  }
};

} // namespace
