//===- KernelBuilder.h - Helpers for the mx GPU kernels ---------*- C++ -*-===//
//
// Private to the MXToGPU conversion: the pieces every mx kernel is built
// from (a 1-D launch on device buffers, predicated stores, the swizzled
// index map, FP8 conversion through the hardware cvt), the shapes of the
// quantize kernels that the fusion plan checks, and the entry points of the
// pattern files.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_KERNELBUILDER_H
#define MX_LIB_CONVERSION_MXTOGPU_KERNELBUILDER_H

#include "mx/Conversion/MXToGPU/FusionPlan.h"
#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mx::gpu_kernels {

constexpr int64_t kThreadsPerBlock = 256;

/// The rowwise quantize kernel (MXToGPU.cpp): lanes per 32-element block and
/// elements per lane, so K must be a multiple of kElementsPerLane.
constexpr int64_t kLanesPerBlock = 2;
constexpr int64_t kElementsPerLane = kMXBlock / kLanesPerBlock;
/// The strip quantize kernel (QuantizeStrips.cpp): columns of a lane's strip,
/// so K must be a multiple of kStripCols.
constexpr int64_t kStripCols = 4;

mlir::Value cIndex(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value cmpLT(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                  mlir::Value y);
mlir::Value andI(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);

/// Emits a 1-D `gpu.launch` of `numThreads` threads (rounded up to whole
/// blocks) and builds its body with the global thread index.
void buildLaunch(
    mlir::OpBuilder &b, mlir::Location loc, int64_t numThreads,
    llvm::function_ref<void(mlir::OpBuilder &, mlir::Location, mlir::Value)>
        body);

/// The row-major multi-index of linear element `index` of `shape`.
llvm::SmallVector<mlir::Value> delinearize(mlir::OpBuilder &b,
                                           mlir::Location loc,
                                           mlir::Value index,
                                           llvm::ArrayRef<int64_t> shape);

/// Runs `then` under `condition` inside a kernel.
void buildIf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value condition,
             llvm::function_ref<void(mlir::OpBuilder &, mlir::Location)> then);

/// Indices of scale (r, c) in the 5-D swizzled layout
/// [r/128, c/4, r%32, (r%128)/32, c%4].
llvm::SmallVector<mlir::Value> swizzledIndices(mlir::OpBuilder &b,
                                               mlir::Location loc,
                                               mlir::Value r, mlir::Value c);

/// Loads `type` (a vector) at [row, col] of a 2-D buffer, aligned to its size.
mlir::Value loadVector(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::VectorType type, mlir::Value buffer,
                       mlir::Value row, mlir::Value col);
/// The f32 values of a loaded vector and their magnitudes (sign bit cleared,
/// which is exact, keeps NaN, and needs no libdevice call).
mlir::Value extendToF32(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value vector);
mlir::Value magnitude(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value f32Vector);

/// The NaN-propagating max of `value` over groups of `lanes` (a power of two)
/// adjacent lanes, by xor-shuffles; every lane of the warp must take part.
mlir::Value buildGroupMax(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value value, int64_t lanes);

/// Converts an even-length f32 vector (already multiplied by its factor) to
/// FP8 with the hardware `cvt.rn.satfinite`, two elements per instruction.
/// Elements whose `nanMask` bit (i1 vector of the same length) is set become
/// 0x7F, the NaN byte of every NaN block (docs/numerics.md).
mlir::Value convertToElements(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value scaled, mlir::Type elementType,
                              mlir::Value nanMask);

/// Whether an exponent is the NaN byte 255.
mlir::Value isNaNExponent(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value exponent);

/// Replaces a quantize op with its kernel's data and scales tensors; when a
/// swizzle consumed the scales, the tiled tensor replaces that swizzle.
void replaceQuantize(mlir::RewriterBase &rewriter, QuantizeOp op,
                     SwizzleOp swizzle, mlir::Value data, mlir::Value scales);

/// Whether the FP4 quantize kernel (Fp4Kernels.cpp) covers `op`, whose data
/// is f4E2M1FN; if not, `reason` says why.
mlir::LogicalResult checkFP4Quantize(QuantizeOp op, std::string &reason);

/// The pattern files; the quantize and swizzle patterns follow `plan`, which
/// must outlive them.
void populateRowwiseQuantizePatterns(mlir::RewritePatternSet &patterns,
                                     const QuantizeFusionPlan &plan);
void populateColumnwiseQuantizePatterns(mlir::RewritePatternSet &patterns,
                                        const QuantizeFusionPlan &plan);
void populateElementwisePatterns(mlir::RewritePatternSet &patterns,
                                 const QuantizeFusionPlan &plan);
/// `chip` picks the E2M1 conversion: the hardware's on sm_100a.
void populateFP4Patterns(mlir::RewritePatternSet &patterns, Chip chip,
                         const QuantizeFusionPlan &plan);

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_KERNELBUILDER_H
