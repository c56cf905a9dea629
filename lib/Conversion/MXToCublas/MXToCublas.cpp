//===- MXToCublas.cpp - Lower mx.scaled_matmul to cuBLASLt ----------------===//
//
// mx.scaled_matmul becomes one call of `mxrtScaledMatmul` on device buffers.
// The operands' blocks and scale types decide the cuBLASLt scale mode:
// swizzled E8M0 scales of [1, 32] blocks are MX (VEC32_UE8M0), f32 scales of
// [1, 128] / [128, 128] blocks the FP8 blockwise recipe, one f32 scale of a
// whole-operand block the per-tensor mode. The enum values come from
// MXRuntime.h, the header the runtime implements, so the two cannot drift.
// What no cuBLASLt mode expresses, and what cuBLASLt does not run on the
// chip the pass compiles for (MX before SM100, Target.h), is rejected here
// rather than left to fail at run time. With `skip-generated`, the ops the
// GEMM generator has a kernel for are left to convert-mx-to-gpu.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToCublas/MXToCublas.h"
#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Conversion/Passes.h"
#include "mx/Dialect/MX/IR/MXOps.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTMXTOCUBLAS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

constexpr StringLiteral kScaledMatmulFn = "mxrtScaledMatmul";

/// The cuBLASLt scale mode of one `[rows, K]` operand, or a reason why none.
FailureOr<mxrtScaleMode> getScaleMode(RankedTensorType operand,
                                      ArrayRef<int64_t> block,
                                      RankedTensorType scales,
                                      std::string &reason) {
  Type scaleType = scales.getElementType();
  if (scales.getRank() == 5 && isa<Float8E8M0FNUType>(scaleType) &&
      block == ArrayRef<int64_t>{1, 32})
    return MXRT_SCALE_VEC32_UE8M0;
  if (scales.getRank() == 2 && scaleType.isF32()) {
    if (block == ArrayRef<int64_t>{1, 128})
      return MXRT_SCALE_VEC128_F32;
    if (block == ArrayRef<int64_t>{128, 128})
      return MXRT_SCALE_BLK128X128_F32;
    if (block == operand.getShape())
      return MXRT_SCALE_TENSOR_F32;
  }
  reason = "cuBLASLt takes swizzled E8M0 scales of [1, 32] blocks, f32 "
           "scales of [1, 128] or [128, 128] blocks, or one f32 scale per "
           "tensor";
  return failure();
}

/// The scale modes of both operands of `op`, or why cuBLASLt cannot run it on
/// `chip`.
FailureOr<std::pair<mxrtScaleMode, mxrtScaleMode>>
getScaleModes(ScaledMatmulOp op, Chip chip, std::string &reason) {
  if (op.getResult().getType().getRank() != 2) {
    reason = "the cuBLASLt call takes 2-D operands (no batch dimensions)";
    return failure();
  }
  if (op.getLhsLayout() != OperandLayout::k_contiguous ||
      op.getRhsLayout() != OperandLayout::k_contiguous) {
    reason = "the cuBLASLt call takes K-contiguous operands ([M, K] and "
             "[N, K]) only";
    return failure();
  }
  FailureOr<mxrtScaleMode> lhs =
      getScaleMode(op.getLhs().getType(), op.getLhsBlock(),
                   op.getLhsScales().getType(), reason);
  FailureOr<mxrtScaleMode> rhs =
      getScaleMode(op.getRhs().getType(), op.getRhsBlock(),
                   op.getRhsScales().getType(), reason);
  if (failed(lhs) || failed(rhs))
    return failure();
  for (mxrtScaleMode mode : {*lhs, *rhs})
    if (failed(checkCublasScaleMode(chip, mode, reason)))
      return failure();
  return std::make_pair(*lhs, *rhs);
}

/// The LLVM type of `mxrtScaledMatmul` (MXRuntime.h): a C symbol called as
/// is, with no MLIR memref calling convention or C-interface wrapper.
LLVM::LLVMFunctionType getScaledMatmulFnType(MLIRContext *context) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32), i64 = IntegerType::get(context, 64);
  return LLVM::LLVMFunctionType::get(i32, {i64, i64, i64, ptr, i32, ptr, i32,
                                           ptr, i32, ptr, i32, ptr, i32, ptr});
}

/// The scale modes of `op`'s cuBLASLt call, or why it can have none: no
/// mode for its scales on `chip`, or a module symbol in the way of the call.
FailureOr<std::pair<mxrtScaleMode, mxrtScaleMode>>
getCublasCall(ScaledMatmulOp op, Chip chip, std::string &reason) {
  auto modes = getScaleModes(op, chip, reason);
  if (failed(modes) ||
      failed(checkRuntimeFunction(op->getParentOfType<ModuleOp>(),
                                  kScaledMatmulFn,
                                  getScaledMatmulFnType(op.getContext()),
                                  reason)))
    return failure();
  return modes;
}

/// Whether convert-mx-to-gpu generates a kernel for `op` on `chip`.
bool hasGeneratedKernel(ScaledMatmulOp op, Chip chip) {
  std::string reason;
  return succeeded(checkGemmKernelSupport(op, chip, reason));
}

struct ScaledMatmulToCublas : OpRewritePattern<ScaledMatmulOp> {
  ScaledMatmulToCublas(MLIRContext *context, Chip chip, bool skipGenerated)
      : OpRewritePattern(context), chip(chip), skipGenerated(skipGenerated) {}

  LogicalResult matchAndRewrite(ScaledMatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (skipGenerated && hasGeneratedKernel(op, chip))
      return rewriter.notifyMatchFailure(op, "left to the generated kernel");
    std::string reason;
    FailureOr<std::pair<mxrtScaleMode, mxrtScaleMode>> modes =
        getCublasCall(op, chip, reason);
    if (failed(modes))
      return rewriter.notifyMatchFailure(op, reason);
    auto [lhsMode, rhsMode] = *modes;

    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    auto module = op->getParentOfType<ModuleOp>();
    // getCublasCall checked that the module has no other @mxrtScaledMatmul.
    LLVM::LLVMFunctionType fnType = getScaledMatmulFnType(ctx);
    FailureOr<LLVM::LLVMFuncOp> callee =
        LLVM::lookupOrCreateFn(rewriter, module, kScaledMatmulFn,
                               fnType.getParams(), fnType.getReturnType());

    RankedTensorType resultType = op.getResult().getType();
    Value out = allocDevice(rewriter, loc, resultType);
    auto i64Const = [&](int64_t v) {
      return arith::ConstantIntOp::create(rewriter, loc, v, 64).getResult();
    };
    auto i32Const = [&](int64_t v) {
      return arith::ConstantIntOp::create(rewriter, loc, v, 32).getResult();
    };
    auto code = [&](Value v) {
      return i32Const(
          *getRuntimeElementType(getElementTypeOrSelf(v.getType())));
    };
    SmallVector<Value> args = {
        i64Const(resultType.getDimSize(0)), i64Const(resultType.getDimSize(1)),
        i64Const(op.getLhs().getType().getDimSize(1)),
        getDevicePointer(rewriter, loc, op.getLhs()), code(op.getLhs()),
        getDevicePointer(rewriter, loc, op.getLhsScales()), i32Const(lhsMode),
        getDevicePointer(rewriter, loc, op.getRhs()), code(op.getRhs()),
        getDevicePointer(rewriter, loc, op.getRhsScales()), i32Const(rhsMode),
        getDevicePointer(rewriter, loc, out), code(op.getResult()),
        // The legacy default stream: ordered with the caller's copies.
        LLVM::ZeroOp::create(rewriter, loc, ptrType)};
    // The status is also kept by the runtime (mxrtGetLastError), which is
    // where a caller of compiled code reads it.
    LLVM::CallOp::create(rewriter, loc, *callee, args);
    rewriter.replaceOp(op, toTensor(rewriter, loc, out));
    return success();
  }

private:
  Chip chip;
  bool skipGenerated;
};

struct ConvertMXToCublasPass
    : mx::impl::ConvertMXToCublasBase<ConvertMXToCublasPass> {
  using ConvertMXToCublasBase::ConvertMXToCublasBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMXToCublasConversionPatterns(patterns, chip, skipGenerated);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult result = getOperation()->walk([&](ScaledMatmulOp op) {
      std::string cublasReason, kernelReason;
      (void)getCublasCall(op, chip, cublasReason);
      if (!skipGenerated) {
        op.emitOpError("has no cuBLASLt lowering: ") << cublasReason;
        return WalkResult::interrupt();
      }
      if (succeeded(checkGemmKernelSupport(op, chip, kernelReason)))
        return WalkResult::advance();
      op.emitOpError("has neither a generated kernel on ")
          << getChipName(chip) << " (" << kernelReason
          << ") nor a cuBLASLt lowering (" << cublasReason << ")";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mx::populateMXToCublasConversionPatterns(RewritePatternSet &patterns,
                                              Chip chip, bool skipGenerated) {
  patterns.add<ScaledMatmulToCublas>(patterns.getContext(), chip,
                                     skipGenerated);
}
