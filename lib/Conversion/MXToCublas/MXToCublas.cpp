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
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mx {
#define GEN_PASS_DEF_CONVERTMXTOCUBLAS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

constexpr StringLiteral kScaledMatmulFn = "mxrtScaledMatmul";

/// The cuBLASLt scale mode of one operand, or a reason why none. Batch
/// dimensions are left to the caller's loop: only the matrix part counts.
FailureOr<mxrtScaleMode> getScaleMode(RankedTensorType operand,
                                      OperandLayout layout,
                                      ArrayRef<int64_t> block,
                                      RankedTensorType scales,
                                      std::string &reason) {
  Type scaleType = scales.getElementType();
  int64_t rank = operand.getRank();
  MatmulOperandShape view = getMatmulOperandShape(operand.getShape(), layout);
  ArrayRef<int64_t> matrixBlock = block.take_back(2);
  int64_t blockK = block[view.kDim];
  bool alongK = block[view.rowsDim] == 1;
  bool tiles = scales.getRank() == rank + 3;
  if (tiles && alongK && blockK == kMXBlock &&
      isa<Float8E8M0FNUType>(scaleType))
    return MXRT_SCALE_VEC32_UE8M0;
  if (tiles && alongK && blockK == kNVFP4Block && isNVFP4Scale(scaleType))
    return MXRT_SCALE_VEC16_UE4M3;
  if (scaleType.isF32()) {
    bool kOuter = layout == OperandLayout::k_outer;
    if (alongK && blockK == 128) {
      // cuBLASLt's own [KB, rows]: GEMM-ready, or linear K-outer scales.
      if (scales.getRank() == rank + 1 || (scales.getRank() == rank && kOuter))
        return MXRT_SCALE_VEC128_F32_KB_ROWS;
      if (scales.getRank() == rank)
        return MXRT_SCALE_VEC128_F32;
    }
    if (matrixBlock == ArrayRef<int64_t>{128, 128} &&
        scales.getRank() == rank) {
      if (!kOuter)
        return MXRT_SCALE_BLK128X128_F32;
      reason = "cuBLASLt's 128x128 scales are laid out for K-contiguous "
               "operands; this operand is K-outer";
      return failure();
    }
    if (matrixBlock == operand.getShape().take_back(2) &&
        scales.getRank() == rank)
      return MXRT_SCALE_TENSOR_F32;
  }
  reason = "cuBLASLt takes swizzled E8M0 scales of 32-element blocks, "
           "swizzled E4M3 scales of 16-element blocks (NVFP4), f32 scales "
           "of 128-element or 128x128 blocks, or one f32 scale per operand";
  return failure();
}

/// The scale modes of both operands of `op`, or why cuBLASLt cannot run it on
/// `chip`.
FailureOr<std::pair<mxrtScaleMode, mxrtScaleMode>>
getScaleModes(ScaledMatmulOp op, Chip chip, std::string &reason) {
  for (Value operand : {op.getLhs(), op.getRhs()})
    if (failed(checkCublasElementType(getElementTypeOrSelf(operand.getType()),
                                      reason)))
      return failure();
  FailureOr<mxrtScaleMode> lhs =
      getScaleMode(op.getLhs().getType(), op.getLhsLayout(), op.getLhsBlock(),
                   op.getLhsScales().getType(), reason);
  FailureOr<mxrtScaleMode> rhs =
      getScaleMode(op.getRhs().getType(), op.getRhsLayout(), op.getRhsBlock(),
                   op.getRhsScales().getType(), reason);
  if (failed(lhs) || failed(rhs))
    return failure();
  for (mxrtScaleMode mode : {*lhs, *rhs})
    if (failed(checkCublasScaleMode(chip, mode, reason)))
      return failure();
  for (OperandLayout layout : {op.getLhsLayout(), op.getRhsLayout()})
    if (failed(
            checkCublasOperandLayout(chip, getRuntimeLayout(layout), reason)))
      return failure();
  bool blockScaled =
      *lhs == MXRT_SCALE_VEC32_UE8M0 || *lhs == MXRT_SCALE_VEC16_UE4M3 ||
      *rhs == MXRT_SCALE_VEC32_UE8M0 || *rhs == MXRT_SCALE_VEC16_UE4M3;
  if (blockScaled && *lhs != *rhs) {
    reason = "cuBLASLt takes MX (E8M0) or NVFP4 (E4M3) scales on both "
             "operands, not one of each";
    return failure();
  }
  return std::make_pair(*lhs, *rhs);
}

/// The LLVM type of `mxrtScaledMatmul` (MXRuntime.h): a C symbol called as
/// is, with no MLIR memref calling convention or C-interface wrapper.
LLVM::LLVMFunctionType getScaledMatmulFnType(MLIRContext *context) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32), i64 = IntegerType::get(context, 64);
  return LLVM::LLVMFunctionType::get(i32, {i64, i64, i64, ptr, i32, i32, ptr,
                                           i32, ptr, i32, i32, ptr, i32, ptr,
                                           ptr, i32, ptr});
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

/// Bytes of one batch slice of a tensor with `batchRank` batch dimensions
/// (FP4 packed two elements to a byte).
int64_t getSliceBytes(Value value, int64_t batchRank) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t elements = 1;
  for (int64_t size : type.getShape().drop_front(batchRank))
    elements *= size;
  return elements * type.getElementTypeBitWidth() / 8;
}

/// NVFP4's alpha: the product of the operands' tensor scales, computed on the
/// device by a one-thread kernel into a fresh f32 (cuBLASLt reads it through
/// a device pointer, so no host synchronization is needed).
Value buildTensorScaleProduct(OpBuilder &b, Location loc, ValueRange scales) {
  auto scalarType = MemRefType::get({}, b.getF32Type());
  Value product = gpu::AllocOp::create(b, loc, scalarType, Type(), ValueRange(),
                                       ValueRange(), ValueRange())
                      .getResult(0);
  Value lhs = toBuffer(b, loc, scales[0]), rhs = toBuffer(b, loc, scales[1]);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value lhsValue = memref::LoadOp::create(b, loc, lhs);
  Value rhsValue = memref::LoadOp::create(b, loc, rhs);
  Value value = arith::MulFOp::create(b, loc, lhsValue, rhsValue);
  memref::StoreOp::create(b, loc, value, product);
  gpu::TerminatorOp::create(b, loc);
  return product;
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

    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto module = op->getParentOfType<ModuleOp>();
    // getCublasCall checked that the module has no other @mxrtScaledMatmul.
    LLVM::LLVMFunctionType fnType = getScaledMatmulFnType(ctx);
    FailureOr<LLVM::LLVMFuncOp> callee =
        LLVM::lookupOrCreateFn(rewriter, module, kScaledMatmulFn,
                               fnType.getParams(), fnType.getReturnType());

    RankedTensorType resultType = op.getResult().getType();
    Value out = allocDevice(rewriter, loc, resultType);
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    Value product =
        op.getTensorScales().empty()
            ? Value()
            : buildTensorScaleProduct(rewriter, loc, op.getTensorScales());
    Value alpha =
        product ? getDevicePointer(rewriter, loc, product)
                : LLVM::ZeroOp::create(rewriter, loc, ptrType).getResult();

    SmallVector<Value> buffers = {op.getLhs(), op.getLhsScales(), op.getRhs(),
                                  op.getRhsScales(), out};
    SmallVector<Value> bases = llvm::map_to_vector(
        buffers, [&](Value v) { return getDevicePointer(rewriter, loc, v); });
    int64_t batchRank = resultType.getRank() - 2;
    int64_t slices = 1;
    for (int64_t size : resultType.getShape().drop_back(2))
      slices *= size;
    if (slices == 1) {
      emitCall(rewriter, loc, *callee, op, *modes, bases, alpha);
    } else {
      // One call per batch slice, each pointer advanced by its slice.
      Value count = arith::ConstantIndexOp::create(rewriter, loc, slices);
      Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      auto loop = scf::ForOp::create(rewriter, loc, zero, count, one);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(loop.getBody());
      Value slice = arith::IndexCastOp::create(
          rewriter, loc, rewriter.getI64Type(), loop.getInductionVar());
      SmallVector<Value> pointers;
      for (auto [buffer, base] : llvm::zip_equal(buffers, bases)) {
        Value offset = arith::MulIOp::create(
            rewriter, loc, slice,
            arith::ConstantIntOp::create(rewriter, loc,
                                         getSliceBytes(buffer, batchRank), 64));
        pointers.push_back(LLVM::GEPOp::create(rewriter, loc, ptrType,
                                               rewriter.getI8Type(), base,
                                               ValueRange{offset}));
      }
      emitCall(rewriter, loc, *callee, op, *modes, pointers, alpha);
    }
    // cuMemFree waits for the calls that read alpha.
    if (product)
      gpu::DeallocOp::create(rewriter, loc, Type(), ValueRange(), product);
    rewriter.replaceOp(op, toTensor(rewriter, loc, out));
    return success();
  }

private:
  /// One `mxrtScaledMatmul` on the 2-D slices at `pointers` (lhs, its
  /// scales, rhs, its scales, out).
  static void emitCall(OpBuilder &b, Location loc, LLVM::LLVMFuncOp callee,
                       ScaledMatmulOp op,
                       std::pair<mxrtScaleMode, mxrtScaleMode> modes,
                       ArrayRef<Value> pointers, Value alpha) {
    auto i64 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, v, 64).getResult();
    };
    auto i32 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, v, 32).getResult();
    };
    auto code = [&](Value v) {
      return i32(*getRuntimeElementType(getElementTypeOrSelf(v.getType())));
    };
    MatmulOperandShape lhs = op.getLhsShape(), rhs = op.getRhsShape();
    SmallVector<Value> args = {
        i64(lhs.rows), i64(rhs.rows), i64(lhs.k), pointers[0],
        code(op.getLhs()), i32(getRuntimeLayout(op.getLhsLayout())),
        pointers[1], i32(modes.first), pointers[2], code(op.getRhs()),
        i32(getRuntimeLayout(op.getRhsLayout())), pointers[3],
        i32(modes.second), alpha, pointers[4], code(op.getResult()),
        // The legacy default stream: ordered with the caller's copies.
        LLVM::ZeroOp::create(b, loc,
                             LLVM::LLVMPointerType::get(b.getContext()))};
    // The status is also kept by the runtime (mxrtGetLastError), which is
    // where a caller of compiled code reads it.
    LLVM::CallOp::create(b, loc, callee, args);
  }

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
