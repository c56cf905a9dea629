//===- GemmPatterns.cpp - mx.scaled_matmul to generated GEMM kernels ------===//
//
// The rewrite that gives `mx.scaled_matmul` a generated kernel: it plans the
// kernel (GemmPlan.cpp), emits it as a `gpu.func` in a `gpu.module` of its
// own (the skeleton and main loops of GemmKernel.h), and replaces the op
// with host code on device buffers: the output from `gpu.alloc`, the TMA
// tensor maps of A and B from `mxrtTensorMap` (MLIR 22.1's
// `nvgpu.tma.create.descriptor` encodes FP8 as BF16), and a `gpu.launch_func`
// of the persistent grid with the plan's dynamic shared memory. Linear MX
// scales are first swizzled by an `mx.swizzle` that `swizzleGemmScales`
// inserts before any rewrite (the kernel copies whole 128x4 chunks), so that
// the quantize fusion plan sees it and a quantize kernel can write the tiles
// directly.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr StringLiteral kTensorMapFn = "mxrtTensorMap";
constexpr StringLiteral kSharedGlobal = "mx_gemm_shared";
constexpr int64_t kSwizzleBytes = 128;

/// The kernel of `plan` in a new gpu.module of `module`.
gpu::GPUFuncOp buildKernel(OpBuilder &builder, Location loc, ModuleOp module,
                           const GemmPlan &plan) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  std::string name;
  llvm::raw_string_ostream(name)
      << "mx_gemm_" << stringifyGemmRecipe(plan.recipe) << "_" << plan.m << "x"
      << plan.n << "x" << plan.k;
  auto kernelModule = gpu::GPUModuleOp::create(builder, loc, name);
  SymbolTable(module).insert(kernelModule);
  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(kernelModule.getBody());
  LLVM::GlobalOp::create(b, LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                         /*isConstant=*/false, LLVM::Linkage::External,
                         kSharedGlobal, Attribute(), /*alignment=*/1024,
                         /*addrSpace=*/unsigned(NVVM::NVVMMemorySpace::Shared));
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto kernel = gpu::GPUFuncOp::create(
      b, "kernel", b.getFunctionType(SmallVector<Type>(5, ptr), {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  // A register cap at entry (the CUDA __launch_bounds__(threads, 1)) is
  // what lets setmaxnreg move registers between the roles.
  int32_t threads = plan.threads();
  kernel->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({threads, 1, 1}));
  kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  std::string printed;
  llvm::raw_string_ostream os(printed);
  plan.print(os);
  kernel->setAttr("mx.gemm_plan", b.getStringAttr(printed));

  b.setInsertionPointToStart(&kernel.getBody().front());
  KernelArguments args;
  args.tensorMapA = kernel.getArgument(0);
  args.tensorMapB = kernel.getArgument(1);
  args.aScales = kernel.getArgument(2);
  args.bScales = kernel.getArgument(3);
  args.out = kernel.getArgument(4);
  GemmKernelBuilder(b, plan, args).build(kSharedGlobal);
  gpu::ReturnOp::create(b);
  return kernel;
}

/// The LLVM type of `mxrtTensorMap` (MXRuntime.h).
LLVM::LLVMFunctionType getTensorMapFnType(MLIRContext *context) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32);
  return LLVM::LLVMFunctionType::get(ptr, {ptr, i32, i32, ptr, ptr, i32});
}

/// Host code asking the runtime for the tensor map of a [rows, K] FP8
/// operand read in boxes of [boxRows, 128 bytes], 128B-swizzled. The module
/// has no other @mxrtTensorMap (checkGemmKernelSupport).
Value createTensorMap(ImplicitLocOpBuilder &b, ModuleOp module, Value data,
                      Type elementType, int64_t rows, int64_t k,
                      int64_t boxRows) {
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  LLVM::LLVMFunctionType fnType = getTensorMapFnType(b.getContext());
  FailureOr<LLVM::LLVMFuncOp> fn =
      LLVM::lookupOrCreateFn(b, module, kTensorMapFn, fnType.getParams(),
                             fnType.getReturnType());
  auto constant = [&](Type type, int64_t v) {
    return arith::ConstantIntOp::create(b, type, v).getResult();
  };
  // Dims and box, innermost first, in stack memory of the host function.
  auto array = [&](Type type, ArrayRef<int64_t> values) {
    Value memory =
        LLVM::AllocaOp::create(b, ptr, type, constant(i64, values.size()));
    for (auto [i, v] : llvm::enumerate(values)) {
      Value slot = LLVM::GEPOp::create(b, ptr, type, memory,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(b, constant(type, v), slot);
    }
    return memory;
  };
  Value dims = array(i64, {k, rows});
  Value box = array(i32, {kSwizzleBytes, boxRows});
  return LLVM::CallOp::create(
             b, *fn,
             ValueRange{
                 data, constant(i32, *getRuntimeElementType(elementType)),
                 constant(i32, 2), dims, box, constant(i32, MXRT_SWIZZLE_128B)})
      .getResult();
}

/// MX scales in the 128x4 layout the kernel copies: linear ones are
/// swizzled by an inserted mx.swizzle.
Value getSwizzledScales(OpBuilder &b, Location loc, Value scales) {
  auto type = cast<RankedTensorType>(scales.getType());
  if (type.getRank() == 5)
    return scales;
  auto tiled = RankedTensorType::get(
      getSwizzledShape(type.getDimSize(0), type.getDimSize(1)),
      type.getElementType());
  return SwizzleOp::create(b, loc, tiled, scales, b.getI64IntegerAttr(0));
}

struct ScaledMatmulToKernel : OpRewritePattern<ScaledMatmulOp> {
  ScaledMatmulToKernel(MLIRContext *context, Chip chip)
      : OpRewritePattern(context), chip(chip) {}

  LogicalResult matchAndRewrite(ScaledMatmulOp op,
                                PatternRewriter &rewriter) const override {
    std::string reason;
    FailureOr<GemmPlan> plan = planGemm(op, chip, reason);
    auto module = op->getParentOfType<ModuleOp>();
    if (failed(plan) ||
        failed(checkRuntimeFunction(module, kTensorMapFn,
                                    getTensorMapFnType(op.getContext()),
                                    reason)))
      return rewriter.notifyMatchFailure(op, reason);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    rewriter.getUnitAttr());
    gpu::GPUFuncOp kernel = buildKernel(rewriter, op.getLoc(), module, *plan);

    Value aScales = op.getLhsScales(), bScales = op.getRhsScales();
    auto isLinear = [](Value scales) {
      return cast<RankedTensorType>(scales.getType()).getRank() != 5;
    };
    if (plan->usesScaleChunks() && (isLinear(aScales) || isLinear(bScales)))
      return rewriter.notifyMatchFailure(
          op, "MX scales are not swizzled (swizzleGemmScales runs first)");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    RankedTensorType resultType = op.getResult().getType();
    Value out = allocDevice(b, b.getLoc(), resultType);
    Value mapA =
        createTensorMap(b, module, getDevicePointer(b, b.getLoc(), op.getLhs()),
                        plan->a.elementType, plan->m, plan->k, plan->tileM);
    Value mapB =
        createTensorMap(b, module, getDevicePointer(b, b.getLoc(), op.getRhs()),
                        plan->b.elementType, plan->n, plan->k, plan->tileN);
    auto index = [&](int64_t v) {
      return arith::ConstantIndexOp::create(b, v).getResult();
    };
    gpu::LaunchFuncOp::create(
        b, kernel, gpu::KernelDim3{index(plan->ctas()), index(1), index(1)},
        gpu::KernelDim3{index(plan->threads()), index(1), index(1)},
        arith::ConstantIntOp::create(b, b.getI32Type(), plan->sharedBytes),
        ValueRange{mapA, mapB, getDevicePointer(b, b.getLoc(), aScales),
                   getDevicePointer(b, b.getLoc(), bScales),
                   getDevicePointer(b, b.getLoc(), out)});
    rewriter.replaceOp(op, toTensor(b, b.getLoc(), out));
    return success();
  }

  Chip chip;
};

} // namespace

LogicalResult mx::checkGemmKernelSupport(ScaledMatmulOp op, Chip chip,
                                         std::string &reason) {
  if (failed(planGemm(op, chip, reason)))
    return failure();
  return checkRuntimeFunction(op->getParentOfType<ModuleOp>(), kTensorMapFn,
                              getTensorMapFnType(op.getContext()), reason);
}

void mx::swizzleGemmScales(Operation *root, Chip chip) {
  root->walk([&](ScaledMatmulOp op) {
    std::string reason;
    FailureOr<GemmPlan> plan = planGemm(op, chip, reason);
    if (failed(plan) || !plan->usesScaleChunks())
      return;
    OpBuilder b(op);
    op.getLhsScalesMutable().assign(
        getSwizzledScales(b, op.getLoc(), op.getLhsScales()));
    op.getRhsScalesMutable().assign(
        getSwizzledScales(b, op.getLoc(), op.getRhsScales()));
  });
}

void mx::populateMXToGPUGemmPatterns(RewritePatternSet &patterns, Chip chip) {
  patterns.add<ScaledMatmulToKernel>(patterns.getContext(), chip);
}
