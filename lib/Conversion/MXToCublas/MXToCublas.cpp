//===- MXToCublas.cpp - Lower mx.scaled_matmul to cuBLASLt ----------------===//
//
// mx.scaled_matmul becomes one call of `mxrtScaledMatmul` on device buffers
// (one per batch slice), with the cuBLASLt scale modes its blocks and scales
// imply (getCublasGemm, GemmLowering.h). Which ops this pass takes is
// `chooseGemmLowering`'s answer under the `gemm` option, the same function
// convert-mx-to-gpu asks, so the two passes split the ops without overlap;
// what neither lowering runs on the chip is rejected here, with both
// reasons, rather than left to fail at run time. Each call records why
// cuBLASLt runs it.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToCublas/MXToCublas.h"
#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/GemmLowering.h"
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

/// Bytes of one batch slice of a tensor or device buffer with `batchRank`
/// batch dimensions (FP4 packed two elements to a byte).
int64_t getSliceBytes(Value value, int64_t batchRank) {
  auto type = cast<ShapedType>(value.getType());
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
  ScaledMatmulToCublas(MLIRContext *context, Chip chip, GemmLowering lowering,
                       const gemm::GemmConfig &config)
      : OpRewritePattern(context), chip(chip), lowering(lowering),
        config(config) {}

  LogicalResult matchAndRewrite(ScaledMatmulOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<GemmLoweringChoice> choice = matchGemmLowering(
        op, rewriter, chip, lowering, config, GemmLowering::cublas);
    if (failed(choice))
      return failure();
    std::string reason;
    FailureOr<CublasGemm> gemm = getCublasGemm(op, chip, reason);
    if (failed(gemm))
      return rewriter.notifyMatchFailure(op, reason);

    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto module = op->getParentOfType<ModuleOp>();
    // getCublasGemm checked that the module has no other
    // @mxrtScaledMatmul.
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
      emitCall(rewriter, loc, *callee, *gemm, bases, alpha,
               choice->reason);
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
      emitCall(rewriter, loc, *callee, *gemm, pointers, alpha,
               choice->reason);
    }
    // cuMemFree waits for the calls that read alpha.
    if (product)
      gpu::DeallocOp::create(rewriter, loc, Type(), ValueRange(), product);
    rewriter.replaceOp(op, toTensor(rewriter, loc, out));
    return success();
  }

private:
  /// One `mxrtScaledMatmul` on the 2-D slices at `pointers` (lhs, its
  /// scales, rhs, its scales, out), marked with why cuBLASLt runs it.
  static void emitCall(OpBuilder &b, Location loc, LLVM::LLVMFuncOp callee,
                       const CublasGemm &gemm,
                       ArrayRef<Value> pointers, Value alpha,
                       StringRef why) {
    auto i64 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, v, 64).getResult();
    };
    auto i32 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, v, 32).getResult();
    };
    SmallVector<Value> args = {
        i64(gemm.m), i64(gemm.n), i64(gemm.k), pointers[0],
        i32(gemm.aType), i32(gemm.aLayout), pointers[1], i32(gemm.aMode),
        pointers[2], i32(gemm.bType), i32(gemm.bLayout), pointers[3],
        i32(gemm.bMode), alpha, pointers[4], i32(gemm.outType),
        // The legacy default stream: ordered with the caller's copies.
        LLVM::ZeroOp::create(b, loc,
                             LLVM::LLVMPointerType::get(b.getContext()))};
    // The status is also kept by the runtime (mxrtGetLastError), which is
    // where a caller of compiled code reads it.
    auto call = LLVM::CallOp::create(b, loc, callee, args);
    call->setAttr(kGemmLoweringAttrName, b.getStringAttr(why));
  }

  Chip chip;
  GemmLowering lowering;
  gemm::GemmConfig config;
};

struct ConvertMXToCublasPass
    : mx::impl::ConvertMXToCublasBase<ConvertMXToCublasPass> {
  using ConvertMXToCublasBase::ConvertMXToCublasBase;

  void runOnOperation() override {
    std::string error;
    FailureOr<gemm::GemmConfig> config =
        gemm::parseGemmConfig(gemmConfig, error);
    if (failed(config)) {
      getOperation()->emitError(error);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateMXToCublasConversionPatterns(patterns, chip, gemm, *config);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // What is left is the generated kernels' (gemm=auto), or runs nowhere.
    WalkResult result = getOperation()->walk([&](ScaledMatmulOp op) {
      std::string reason;
      if (succeeded(chooseGemmLowering(op, chip, gemm, *config, reason)))
        return WalkResult::advance();
      op.emitOpError(reason);
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mx::populateMXToCublasConversionPatterns(
    RewritePatternSet &patterns, Chip chip, GemmLowering gemm,
    const gemm::GemmConfig &config) {
  patterns.add<ScaledMatmulToCublas>(patterns.getContext(), chip, gemm,
                                     config);
}
