//===- PointerKernels.cpp - Small kernels launched beside a GEMM ----------===//
//
// The gpu.module, gpu.func and launch of PointerKernels.h.
//
//===----------------------------------------------------------------------===//

#include "PointerKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

gpu::GPUFuncOp gemm::getPointerKernel(
    OpBuilder &builder, Location loc, ModuleOp module, StringRef name,
    int64_t arguments, int64_t threads,
    function_ref<void(ImplicitLocOpBuilder &, ValueRange)> body) {
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(name))
    return existing.lookupSymbol<gpu::GPUFuncOp>("kernel");
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  auto kernelModule = gpu::GPUModuleOp::create(builder, loc, name);
  SymbolTable(module).insert(kernelModule);
  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(kernelModule.getBody());
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto kernel = gpu::GPUFuncOp::create(
      b, "kernel", b.getFunctionType(SmallVector<Type>(arguments, ptr), {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel->setAttr("nvvm.maxntid",
                  b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  b.setInsertionPointToStart(&kernel.getBody().front());
  body(b, kernel.getArguments());
  gpu::ReturnOp::create(b);
  return kernel;
}

void gemm::launchPointerKernel(ImplicitLocOpBuilder &b, gpu::GPUFuncOp kernel,
                               int64_t threads, int64_t blockThreads,
                               ValueRange arguments) {
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, v).getResult();
  };
  gpu::LaunchFuncOp::create(
      b, kernel,
      gpu::KernelDim3{index(llvm::divideCeil(threads, blockThreads)), index(1),
                      index(1)},
      gpu::KernelDim3{index(blockThreads), index(1), index(1)},
      /*dynamicSharedMemorySize=*/Value(), arguments);
}
