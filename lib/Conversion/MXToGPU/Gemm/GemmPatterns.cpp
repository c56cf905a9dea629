//===- GemmPatterns.cpp - mx.scaled_matmul to generated GEMM kernels ------===//
//
// The rewrite that gives `mx.scaled_matmul` a generated kernel: it plans the
// kernel (GemmPlan.cpp), emits it as a kernel `llvm.func` in a `gpu.module`
// of its own (the skeleton, main loop and epilogue of GemmKernel.h), and
// replaces the op with host code on device buffers: the output from
// `gpu.alloc`, the TMA tensor maps the plan needs, encoded by
// `mxrtEncodeTensorMap` and passed by value (MLIR 22.1's
// `nvgpu.tma.create.descriptor` encodes FP8 as BF16), and a
// `gpu.launch_func` of the persistent grid, in clusters where the plan has
// them, with the plan's dynamic shared memory. Scales the kernel copies in a
// GEMM-ready layout (MX 128x4 tiles, FP8 1x128 `[KB, R']` rows) are first
// laid out by an `mx.swizzle` that `swizzleGemmScales` inserts before any
// rewrite, so that the quantize fusion plan sees it and a quantize kernel
// can write the layout directly.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"
#include "GemmStaging.h"
#include "ScaleProducts.h"

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/GemmLowering.h"
#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Dialect/MX/IR/ElementFormat.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr StringLiteral kSharedGlobal = "mx_gemm_shared";

/// The kernel of `plan` in a new gpu.module of `module`. It is an `llvm.func`
/// (`gpu.kernel`, `nvvm.kernel`) rather than a `gpu.func` for its tensor
/// maps: each is a `__grid_constant__` parameter, an `llvm.byval` pointer
/// into the parameter space that TMA reads, while the launch passes the 128
/// bytes as a value (the host's `mxrtEncodeTensorMap`). A `gpu.func`'s
/// lowering drops `llvm.byval`, and `gpu.launch_func` would require its
/// operands to have the `gpu.func`'s argument types.
LLVM::LLVMFuncOp buildKernel(OpBuilder &builder, Location loc,
                             ModuleOp module, const GemmPlan &plan) {
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
  SmallVector<KernelParameter> parameters = getKernelParameters(plan);
  auto kernel = LLVM::LLVMFuncOp::create(
      b, "kernel",
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(b.getContext()),
                                  SmallVector<Type>(parameters.size(), ptr)));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(),
                  b.getUnitAttr());
  for (auto [index, parameter] : llvm::enumerate(parameters)) {
    if (!isTensorMap(parameter))
      continue;
    kernel.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(),
                      TypeAttr::get(getTensorMapType(b.getContext())));
    kernel.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                      b.getI64IntegerAttr(kTensorMapAlignment));
    kernel.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                      b.getUnitAttr());
  }
  // A register cap at entry (the CUDA __launch_bounds__(threads, 1)) is
  // what lets setmaxnreg move registers between the roles.
  int32_t threads = plan.threads();
  kernel->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({threads, 1, 1}));
  kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  if (plan.clusterSize() > 1)
    kernel->setAttr("nvvm.cluster_dim",
                    b.getDenseI32ArrayAttr(
                        {int32_t(plan.clusterSize()), int32_t(1), int32_t(1)}));
  std::string printed;
  llvm::raw_string_ostream os(printed);
  plan.print(os);
  kernel->setAttr("mx.gemm_plan", b.getStringAttr(printed));

  b.setInsertionPointToStart(kernel.addEntryBlock(b));
  KernelArguments args;
  for (auto [parameter, argument] :
       llvm::zip_equal(parameters, kernel.getArguments())) {
    args.get(parameter) = argument;
  }
  GemmKernelBuilder(b, plan, args).build(kSharedGlobal);
  LLVM::ReturnOp::create(b, ValueRange());
  return kernel;
}

/// One 2-D tensor map the kernel reads or writes: `rows` rows of
/// `rowElements` elements, moved in boxes of `boxRows` x `boxElements`.
struct TensorMapRequest {
  Value data;
  Type elementType;
  int64_t rows, rowElements, boxRows, boxElements;
  int32_t swizzle;
};

/// Host code encoding the tensor map of `request` (`mxrtEncodeTensorMap`
/// into stack memory of the host function), as the 128-byte value the
/// kernel takes. The module has no other @mxrtEncodeTensorMap
/// (gemm::checkKernelSupport).
Value createTensorMap(ImplicitLocOpBuilder &b, ModuleOp module,
                      const TensorMapRequest &request) {
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  LLVM::LLVMFunctionType fnType = getTensorMapFnType(b.getContext());
  FailureOr<LLVM::LLVMFuncOp> fn =
      LLVM::lookupOrCreateFn(b, module, kEncodeTensorMapFn, fnType.getParams(),
                             fnType.getReturnType());
  auto constant = [&](Type type, int64_t v) {
    return arith::ConstantIntOp::create(b, type, v).getResult();
  };
  auto stackMemory = [&](Type type, int64_t count, unsigned alignment) {
    return LLVM::AllocaOp::create(b, ptr, type, constant(i64, count),
                                  alignment)
        .getResult();
  };
  // Dims and box, innermost first.
  auto array = [&](Type type, ArrayRef<int64_t> values) {
    Value memory = stackMemory(type, values.size(), /*alignment=*/0);
    for (auto [i, v] : llvm::enumerate(values)) {
      Value slot = LLVM::GEPOp::create(b, ptr, type, memory,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(b, constant(type, v), slot);
    }
    return memory;
  };
  Type mapType = getTensorMapType(b.getContext());
  Value memory = stackMemory(mapType, 1, kTensorMapAlignment);
  Value dims = array(i64, {request.rowElements, request.rows});
  Value box = array(i32, {request.boxElements, request.boxRows});
  // The encoded map is read through the call's result, so that what frees
  // the buffer sees the launch as the map's user (mx-free-device-temporaries).
  Value map =
      LLVM::CallOp::create(
          b, *fn,
          ValueRange{memory, request.data,
                     constant(i32, *getRuntimeElementType(request.elementType)),
                     constant(i32, 2), dims, box,
                     constant(i32, request.swizzle)})
          .getResult();
  return LLVM::LoadOp::create(b, mapType, map, kTensorMapAlignment);
}

/// The tensor map of a [rows, K] operand read in boxes of one stage row
/// (OperandPlan::mapBoxK, swizzled as the plan says) and this CTA's share
/// of the tile's rows: a map of bytes or of the element type, as the plan
/// says.
TensorMapRequest getOperandMap(OpBuilder &b, Value data, const GemmPlan &plan,
                               const OperandPlan &operand, int64_t tileRows,
                               bool shared) {
  int64_t boxRows = shared ? tileRows / plan.clusterSize() : tileRows;
  int32_t swizzle = operand.swizzleBytes == 128  ? MXRT_SWIZZLE_128B
                    : operand.swizzleBytes == 64 ? MXRT_SWIZZLE_64B
                                                 : MXRT_SWIZZLE_NONE;
  if (operand.mapsBytes)
    return {data,
            b.getI8Type(),
            operand.rows,
            getVerifiedElementFormat(operand.elementType).getStoredBytes(plan.k),
            boxRows,
            operand.mapBoxK,
            swizzle};
  return {data,    operand.elementType, operand.rows, plan.k,
          boxRows, operand.mapBoxK,     swizzle};
}

/// The tensor map of an operand's scales as its stage loads take them:
/// GEMM-ready 1x128 scales [KB, R'] one K-block row of `tileRows` f32 at a
/// time, or the 128x4 chunks of swizzled E8M0 (E4M3 for NVFP4) scales (512
/// bytes each, R'/128 x KB x scaleChunksAlongK of them) as rows of 128
/// bytes, four rows a chunk.
TensorMapRequest getStageScalesMap(OpBuilder &b, Value data,
                                   const GemmPlan &plan,
                                   const OperandPlan &operand,
                                   Type scaleType, int64_t tileRows) {
  if (operand.scales == ScaleStaging::chunks) {
    int64_t chunks = llvm::divideCeil(operand.rows, kScaleChunkRows) *
                     plan.kBlocks() * plan.scaleChunksAlongK();
    int64_t lines = kScaleChunkBytes / kScaleChunkLine;
    return {data,
            scaleType,
            chunks * lines,
            kScaleChunkLine,
            lines * plan.scaleChunksAlongK(),
            kScaleChunkLine,
            MXRT_SWIZZLE_NONE};
  }
  if (plan.scaleProducts) {
    // The scale products' operand rows as lines of 128 bytes.
    int64_t lineValues = kScaleProductRowValues * kScaleProductLineRows;
    return {data,
            b.getF32Type(),
            plan.kBlocks() * getScaleProductPitch(operand, tileRows) /
                kScaleProductLineRows,
            lineValues,
            tileRows / kScaleProductLineRows,
            lineValues,
            MXRT_SWIZZLE_NONE};
  }
  return {data,     b.getF32Type(), plan.kBlocks(), operand.scaleRowPitch,
          1,        tileRows,       MXRT_SWIZZLE_NONE};
}

/// The wgrad form's scale products: the tf32 operand rows of `operand`'s
/// scales (GEMM-ready or compact: the kernel reads either), written by their
/// kernel into a temporary.
Value writeScaleProductRows(ImplicitLocOpBuilder &b, ModuleOp module,
                            const GemmPlan &plan, const OperandPlan &operand,
                            int64_t tileRows, bool lhs, Value scales) {
  int64_t pitch = getScaleProductPitch(operand, tileRows);
  Value rows = allocDevice(
      b, b.getLoc(),
      RankedTensorType::get({plan.kBlocks() * pitch, kScaleProductRowValues},
                            b.getF32Type()));
  ScalesLayout layout =
      cast<RankedTensorType>(scales.getType()).getRank() == 2
          ? ScalesLayout::compact(operand.rows, plan.kBlocks())
          : ScalesLayout::gemmReady(operand.scaleRowPitch);
  launchScaleProductsKernel(b, module, lhs, plan.kBlocks(), layout, pitch,
                            getDevicePointer(b, b.getLoc(), scales),
                            getDevicePointer(b, b.getLoc(), rows));
  return rows;
}

/// Scales in the GEMM-ready layout the kernel copies: linear MX scales and
/// compact 1x128 ones are laid out by an inserted mx.swizzle.
Value getGemmReadyScales(OpBuilder &b, Location loc, Value scales,
                         ScaleStaging staging) {
  auto type = cast<RankedTensorType>(scales.getType());
  if (staging == ScaleStaging::chunks && type.getRank() == 2) {
    auto tiled = RankedTensorType::get(
        getSwizzledShape(type.getDimSize(0), type.getDimSize(1)),
        type.getElementType());
    return SwizzleOp::create(b, loc, tiled, scales, b.getI64IntegerAttr(0));
  }
  if (staging == ScaleStaging::stageRows && type.getRank() == 2) {
    int64_t rows = type.getDimSize(0), blocks = type.getDimSize(1);
    auto ready = RankedTensorType::get(
        {blocks, llvm::divideCeilSigned(rows, int64_t(4)), 4},
        type.getElementType());
    return SwizzleOp::create(b, loc, ready, scales, /*unscaled_dim=*/uint64_t(0),
                             SwizzleLayout::blockwise);
  }
  return scales;
}

/// Whether `scales` are in a layout `plan`'s kernel takes for `staging`:
/// the one its stages copy, or either 1x128 layout for the scale products'
/// kernel, which reads them in place of the stages.
bool isGemmReady(Value scales, ScaleStaging staging, const GemmPlan &plan) {
  if (plan.scaleProducts)
    return true;
  int64_t rank = cast<RankedTensorType>(scales.getType()).getRank();
  if (staging == ScaleStaging::chunks)
    return rank == 5;
  if (staging == ScaleStaging::stageRows)
    return rank == 3;
  return true;
}

/// Staged MX: a bf16 copy of `data` (the operand `operand` plans), written
/// by its staging kernel from `scales`, compact or swizzled as they come
/// (no swizzle kernel is inserted for it).
Value stageOperand(ImplicitLocOpBuilder &b, ModuleOp module,
                   const GemmPlan &plan, const OperandPlan &operand,
                   Value data, Value scales) {
  Value copy = allocDevice(
      b, b.getLoc(),
      RankedTensorType::get({operand.rows, plan.k}, operand.elementType));
  bool tiled = cast<RankedTensorType>(scales.getType()).getRank() == 5;
  launchStagingKernel(b, module, operand.stagedType, operand.rows, plan.k,
                      tiled, getDevicePointer(b, b.getLoc(), data),
                      getDevicePointer(b, b.getLoc(), scales),
                      getDevicePointer(b, b.getLoc(), copy));
  return copy;
}

/// The device buffers of one kernel launch.
struct LaunchBuffers {
  Value lhs, rhs;                   // the operands (staged MX: bf16 copies)
  Value aScales, bScales;           // GEMM-ready scales
  Value aStageScales, bStageScales; // what the stages load
  Value out, partials;              // the output; the cast's amax partials
};

/// The kernel's arguments, in getKernelParameters' order.
SmallVector<Value> getKernelArguments(ImplicitLocOpBuilder &b, ModuleOp module,
                                      const GemmPlan &plan, ScaledMatmulOp op,
                                      QuantizeDelayedOp cast,
                                      const LaunchBuffers &buffers) {
  auto map = [&](const TensorMapRequest &request) {
    return createTensorMap(b, module, request);
  };
  SmallVector<Value> arguments;
  auto pointer = [&](Value value) {
    return getDevicePointer(b, b.getLoc(), value);
  };
  for (KernelParameter parameter : getKernelParameters(plan)) {
    switch (parameter) {
    case KernelParameter::tensorMapA:
      arguments.push_back(
          map(getOperandMap(b, pointer(buffers.lhs), plan, plan.a, plan.tileM,
                            plan.clusterN > 1)));
      break;
    case KernelParameter::tensorMapB:
      arguments.push_back(
          map(getOperandMap(b, pointer(buffers.rhs), plan, plan.b, plan.tileN,
                            plan.clusterM > 1)));
      break;
    case KernelParameter::aScales:
      arguments.push_back(pointer(buffers.aScales));
      break;
    case KernelParameter::bScales:
      arguments.push_back(pointer(buffers.bScales));
      break;
    case KernelParameter::out:
      arguments.push_back(pointer(buffers.out));
      break;
    case KernelParameter::tensorMapAScales:
      arguments.push_back(map(getStageScalesMap(
          b, pointer(buffers.aStageScales), plan, plan.a,
          getElementTypeOrSelf(buffers.aScales.getType()), plan.tileM)));
      break;
    case KernelParameter::tensorMapBScales:
      arguments.push_back(map(getStageScalesMap(
          b, pointer(buffers.bStageScales), plan, plan.b,
          getElementTypeOrSelf(buffers.bScales.getType()), plan.tileN)));
      break;
    case KernelParameter::tensorMapOut:
      arguments.push_back(
          map({pointer(buffers.out), plan.storedType(), plan.m, plan.n,
               plan.tileM, plan.panelRowBytes() / plan.storedBytes(),
               plan.panelRowBytes() == 128 ? MXRT_SWIZZLE_128B
                                           : MXRT_SWIZZLE_64B}));
      break;
    case KernelParameter::bias:
      arguments.push_back(pointer(op.getBias()));
      break;
    case KernelParameter::accumulator:
      arguments.push_back(pointer(op.getAccumulator()));
      break;
    case KernelParameter::aTensorScale:
      arguments.push_back(pointer(op.getTensorScales()[0]));
      break;
    case KernelParameter::bTensorScale:
      arguments.push_back(pointer(op.getTensorScales()[1]));
      break;
    case KernelParameter::castScales:
      arguments.push_back(pointer(cast.getScales()));
      break;
    case KernelParameter::amaxPartials:
      arguments.push_back(pointer(buffers.partials));
      break;
    }
  }
  return arguments;
}

/// The launch of the persistent grid, in clusters where the plan has them.
void launchKernel(ImplicitLocOpBuilder &b, LLVM::LLVMFuncOp kernel,
                  const GemmPlan &plan, ValueRange arguments) {
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, v).getResult();
  };
  std::optional<gpu::KernelDim3> clusters;
  if (plan.clusterSize() > 1)
    clusters = gpu::KernelDim3{index(plan.clusterSize()), index(1), index(1)};
  auto kernelSymbol = SymbolRefAttr::get(
      kernel->getParentOfType<gpu::GPUModuleOp>().getNameAttr(),
      {SymbolRefAttr::get(kernel.getSymNameAttr())});
  gpu::LaunchFuncOp::create(
      b, kernelSymbol, gpu::KernelDim3{index(plan.ctas()), index(1), index(1)},
      gpu::KernelDim3{index(plan.threads()), index(1), index(1)},
      arith::ConstantIntOp::create(b, b.getI32Type(), plan.sharedBytes),
      arguments, /*asyncTokenType=*/Type(), ValueRange(), clusters);
}

/// Replaces `op` and its fused `cast` with the kernel's codes `out`; a
/// delayed cast of the CTAs' amax partials records their max (the product's
/// amax) and writes the scale's inverse, as the cast of the product would.
void replaceWithCastCodes(PatternRewriter &rewriter, ImplicitLocOpBuilder &b,
                          ScaledMatmulOp op, QuantizeDelayedOp cast,
                          const GemmPlan &plan, Value out, Value partials) {
  auto recorded = QuantizeDelayedOp::create(
      b, RankedTensorType::get({1, plan.castSlots()}, plan.castType),
      cast.getScaleInv().getType(), cast.getNewHistory().getType(),
      toTensor(b, b.getLoc(), partials), cast.getScales(), cast.getHistory(),
      cast.getIndexAttr(), /*transposed=*/UnitAttr());
  rewriter.replaceOp(cast, {toTensor(b, b.getLoc(), out),
                            recorded.getScaleInv(), recorded.getNewHistory()});
  rewriter.eraseOp(op);
}

/// Lowers `op` to its generated kernel, with `cast` (getFusedOutputCast's,
/// or null) written by its epilogue: every check before the IR changes.
LogicalResult lowerToKernel(ScaledMatmulOp op, QuantizeDelayedOp cast,
                            PatternRewriter &rewriter, Chip chip,
                            GemmLowering lowering, const GemmConfig &config) {
  // Every check before the IR changes.
  FailureOr<GemmLoweringChoice> choice = matchGemmLowering(
      op, rewriter, chip, lowering, config, GemmLowering::kernel);
  if (failed(choice))
    return failure();
  std::string reason;
  FailureOr<GemmPlan> plan = planGemm(op, chip, config, reason);
  if (failed(plan))
    return rewriter.notifyMatchFailure(op, reason);
  auto module = op->getParentOfType<ModuleOp>();
  Value aScales = op.getLhsScales(), bScales = op.getRhsScales();
  if (!isGemmReady(aScales, plan->a.scales, *plan) ||
      !isGemmReady(bScales, plan->b.scales, *plan))
    return rewriter.notifyMatchFailure(
        op, "scales are not in the GEMM-ready layout (swizzleGemmScales "
            "runs first)");

  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  rewriter.getUnitAttr());
  LLVM::LLVMFuncOp kernel = buildKernel(rewriter, op.getLoc(), module, *plan);
  kernel->setAttr(kGemmLoweringAttrName,
                  rewriter.getStringAttr(choice->reason));
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  // The output: the product, or the fused cast's codes, with the CTAs'
  // amax partials.
  Value out =
      allocDevice(b, b.getLoc(),
                  cast ? cast.getData().getType() : op.getResult().getType());
  Value partials =
      cast ? allocDevice(
                 b, b.getLoc(),
                 RankedTensorType::get({1, plan->castSlots()}, b.getF32Type()))
           : Value();
  // Temporaries that kernels write before the GEMM reads them, freed once
  // it has run (stream order). Staged MX: the bf16 copies of the operands.
  Value lhs = op.getLhs(), rhs = op.getRhs();
  SmallVector<Value, 2> temporaries;
  if (plan->recipe == GemmRecipe::mxStaged) {
    lhs = stageOperand(b, module, *plan, plan->a, lhs, aScales);
    rhs = stageOperand(b, module, *plan, plan->b, rhs, bScales);
    temporaries = {lhs, rhs};
  }
  // The wgrad form's stages load the scale products' operand rows in
  // place of the scales.
  Value aStageScales = aScales, bStageScales = bScales;
  if (plan->scaleProducts) {
    aStageScales = writeScaleProductRows(b, module, *plan, plan->a, plan->tileM,
                                         /*lhs=*/true, aScales);
    bStageScales = writeScaleProductRows(b, module, *plan, plan->b, plan->tileN,
                                         /*lhs=*/false, bScales);
    temporaries.append({aStageScales, bStageScales});
  }
  LaunchBuffers buffers{lhs,          rhs,          aScales, bScales,
                        aStageScales, bStageScales, out,     partials};
  launchKernel(b, kernel, *plan,
               getKernelArguments(b, module, *plan, op, cast, buffers));
  for (Value temporary : temporaries)
    gpu::DeallocOp::create(b, Type(), ValueRange(), temporary);
  if (cast)
    replaceWithCastCodes(rewriter, b, op, cast, *plan, out, partials);
  else
    rewriter.replaceOp(op, toTensor(b, b.getLoc(), out));
  return success();
}

struct ScaledMatmulToKernel : OpRewritePattern<ScaledMatmulOp> {
  ScaledMatmulToKernel(MLIRContext *context, Chip chip, GemmLowering lowering,
                       const GemmConfig &config)
      : OpRewritePattern(context), chip(chip), lowering(lowering),
        config(config) {}

  LogicalResult matchAndRewrite(ScaledMatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (getFusedOutputCast(op))
      return rewriter.notifyMatchFailure(
          op, "lowered with the delayed cast of its product");
    return lowerToKernel(op, nullptr, rewriter, chip, lowering, config);
  }

  Chip chip;
  GemmLowering lowering;
  GemmConfig config;
};

/// A product whose only use is a delayed cast: one kernel writes the cast's
/// codes (getFusedOutputCast). Rooted at the cast, ahead of the cast's own
/// lowering, so that it matches whichever op the driver visits first.
struct ScaledMatmulWithCastToKernel : OpRewritePattern<QuantizeDelayedOp> {
  ScaledMatmulWithCastToKernel(MLIRContext *context, Chip chip,
                               GemmLowering lowering, const GemmConfig &config)
      : OpRewritePattern(context, /*benefit=*/2), chip(chip),
        lowering(lowering), config(config) {}

  LogicalResult matchAndRewrite(QuantizeDelayedOp cast,
                                PatternRewriter &rewriter) const override {
    auto op = cast.getInput().getDefiningOp<ScaledMatmulOp>();
    if (!op || getFusedOutputCast(op) != cast)
      return rewriter.notifyMatchFailure(cast, "not the cast of a product");
    return lowerToKernel(op, cast, rewriter, chip, lowering, config);
  }

  Chip chip;
  GemmLowering lowering;
  GemmConfig config;
};

} // namespace

void mx::swizzleGemmScales(Operation *root, Chip chip, GemmLowering lowering,
                           const GemmConfig &config) {
  root->walk([&](ScaledMatmulOp op) {
    std::string reason;
    FailureOr<GemmLoweringChoice> choice =
        chooseGemmLowering(op, chip, lowering, config, reason);
    if (failed(choice) || choice->lowering != GemmLowering::kernel)
      return;
    FailureOr<GemmPlan> plan = planGemm(op, chip, config, reason);
    // The scale products' kernel reads compact scales itself.
    if (failed(plan) || plan->scaleProducts)
      return;
    OpBuilder b(op);
    op.getLhsScalesMutable().assign(getGemmReadyScales(
        b, op.getLoc(), op.getLhsScales(), plan->a.scales));
    op.getRhsScalesMutable().assign(getGemmReadyScales(
        b, op.getLoc(), op.getRhsScales(), plan->b.scales));
  });
}

void mx::populateMXToGPUGemmPatterns(RewritePatternSet &patterns, Chip chip,
                                     GemmLowering lowering,
                                     const GemmConfig &config) {
  patterns.add<ScaledMatmulToKernel, ScaledMatmulWithCastToKernel>(
      patterns.getContext(), chip, lowering, config);
}
