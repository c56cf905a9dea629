//===- KernelBuilder.h - Building blocks of the mx GPU kernels --*- C++ -*-===//
//
// Private to the quantize kernels of the MXToGPU conversion: the chip-neutral
// pieces every one of them is built from (launches on device buffers, batch
// dimensions folded into rows, vector loads and predicated stores, the
// swizzled index map and the scale store, warp- and CTA-wide maxima, the
// atomic amax); ElementConversion.h adds the element codes. Which kernel
// computes which op is FusionPolicy.h's business.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_KERNELBUILDER_H
#define MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_KERNELBUILDER_H

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mx::gpu_kernels {

constexpr int64_t kThreadsPerBlock = 256;
constexpr int64_t kWarpSize = 32;
constexpr int64_t kWarpsPerBlock = kThreadsPerBlock / kWarpSize;
mlir::Value cIndex(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
/// The device-memory pointer (`!llvm.ptr<1>`: `ld.global`, `st.global`) at
/// byte address `address` (an index, e.g. from
/// memref.extract_aligned_pointer_as_index), for the accesses at byte
/// addresses that no memref op expresses.
mlir::Value getGlobalPointer(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value address);
mlir::Value cmpLT(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                  mlir::Value y);
mlir::Value andI(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value isZeroIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
/// Index arithmetic on IR values with constants: unsigned division and
/// remainder, and x * m + y. The arithmetic of the SwizzleTiles maps.
struct IndexArith {
  mlir::OpBuilder &b;
  mlir::Location loc;

  mlir::Value div(mlir::Value x, int64_t d) const;
  mlir::Value rem(mlir::Value x, int64_t d) const;
  mlir::Value fma(mlir::Value x, int64_t m, mlir::Value y) const;
};

/// A splat of `value` shaped like the vector `like`.
mlir::Value splat(mlir::OpBuilder &b, mlir::Location loc, mlir::Value like,
                  mlir::Attribute value);

//===----------------------------------------------------------------------===//
// Launches and device buffers
//===----------------------------------------------------------------------===//

/// What a kernel body builds on: the CTA index, the thread index inside the
/// CTA, the global thread index, and the CTA's workgroup (shared) buffers.
struct KernelIds {
  mlir::Value block, thread, global;
  mlir::ValueRange workgroup;
};

/// Emits a 1-D `gpu.launch` of `numBlocks` CTAs of kThreadsPerBlock threads,
/// with one workgroup buffer of each of `workgroupBuffers`.
void buildBlockLaunch(mlir::OpBuilder &b, mlir::Location loc, int64_t numBlocks,
                      mlir::TypeRange workgroupBuffers,
                      llvm::function_ref<void(mlir::OpBuilder &, mlir::Location,
                                              const KernelIds &)>
                          body);

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

/// Runs `then` under `condition` inside a kernel, and `otherwise` (if any)
/// where it does not hold.
void buildIf(
    mlir::OpBuilder &b, mlir::Location loc, mlir::Value condition,
    llvm::function_ref<void(mlir::OpBuilder &, mlir::Location)> then,
    llvm::function_ref<void(mlir::OpBuilder &, mlir::Location)> otherwise = {});

/// The product of the dimensions of `type` before its last `inner` ones
/// (the batch slices of a matrix, for inner = 2).
int64_t getNumSlices(mlir::RankedTensorType type, int64_t inner);

/// The read-only buffer of `tensor` with every dimension before its last
/// `inner` ones folded into the first of them (`[..., R, C]` -> `[S * R, C]`
/// for inner = 2; everything into one for inner = 1): a collapse_shape, no
/// copy, so the kernels see batches as more rows.
mlir::Value toFoldedBuffer(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value tensor, int64_t inner);

/// A device buffer for a result of `type`, folded like toFoldedBuffer.
mlir::Value allocFolded(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type, int64_t inner);

/// The tensor of `type` that a buffer from allocFolded holds.
mlir::Value toUnfoldedTensor(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value buffer, mlir::RankedTensorType type);

//===----------------------------------------------------------------------===//
// Memory access
//===----------------------------------------------------------------------===//

/// Indices of scale (r, c) in the 5-D swizzled layout (SwizzleTiles).
llvm::SmallVector<mlir::Value> swizzledIndices(mlir::OpBuilder &b,
                                               mlir::Location loc,
                                               mlir::Value r, mlir::Value c);

/// Stores `scale`, the scale of block (row, col), where every `guards` value
/// holds: into linear scales at (row, col) where `valid` holds too; into the
/// 128x4 tiles of an absorbed swizzle (`tiled`) at the tiled address of
/// (row, col), row counted in the tiles' padded rows, with zero bits where
/// `valid` does not hold (the tiles' padding). `row` is built in the branch
/// that stores, where it is used.
void storeBlockScale(
    mlir::OpBuilder &b, mlir::Location loc, mlir::Value scales, bool tiled,
    mlir::Value scale, mlir::Value valid, llvm::ArrayRef<mlir::Value> guards,
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location)> row,
    mlir::Value col);

/// Loads `type` (a vector) at `indices` of a buffer, aligned to its size (up
/// to 16 bytes): callers start vectors at multiples of their length in rows
/// whose length is a multiple of it too.
mlir::Value loadVector(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::VectorType type, mlir::Value buffer,
                       mlir::ValueRange indices);

/// Stores the vector `value` at `indices` of a buffer, aligned to its size
/// (up to 16 bytes) as loadVector.
void storeVector(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                 mlir::Value buffer, mlir::ValueRange indices);

/// Stores the vector `value` at `indices` of a buffer where `condition`
/// holds (always for a null condition), aligned to its size (up to 16 bytes)
/// as loadVector.
void storeVectorIf(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::Value condition, mlir::Value value, mlir::Value buffer,
                   mlir::ValueRange indices);

/// The f32 constant +0.0 (the start of a max of magnitudes).
mlir::Value zeroF32(mlir::OpBuilder &b, mlir::Location loc);

/// The f32 values of a loaded vector, and the magnitudes of a float vector
/// (sign bit cleared, which is exact, keeps NaN, and needs no libdevice call).
/// `feedsMagnitudes` says whether magnitude() is taken of the f32 values:
/// ptxas folds that into the `|x|` operand of the max only after arith.extf;
/// values that are only scaled and converted extend bf16 pairs in one
/// instruction per element instead.
mlir::Value extendToF32(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value vector, bool feedsMagnitudes = true);
mlir::Value magnitude(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value floatVector);

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The max of `value` over groups of `lanes` (a power of two) adjacent
/// lanes, by xor-shuffles; every lane of the warp must take part. MAXIMUMF
/// propagates NaN (a block's amax), MAXNUMF ignores it (the amax history).
mlir::Value buildGroupMax(
    mlir::OpBuilder &b, mlir::Location loc, mlir::Value value, int64_t lanes,
    mlir::vector::CombiningKind kind = mlir::vector::CombiningKind::MAXIMUMF);

/// The workgroup buffer that buildCTAMax needs.
mlir::MemRefType getCTAMaxBufferType(mlir::MLIRContext *context);

/// The max of `value` over the CTA, which every thread must call and
/// receives: xor-shuffles inside each warp, then the warps' maxima through
/// `buffer` (getCTAMaxBufferType) behind a barrier. `thread` is the index
/// in the CTA; `kind` as for buildGroupMax.
mlir::Value buildCTAMax(
    mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
    mlir::Value thread, mlir::Value buffer,
    mlir::vector::CombiningKind kind = mlir::vector::CombiningKind::MAXIMUMF);

/// The bits (i32) of the f32 `amax`, a NaN of any sign or payload made the
/// contract's quiet NaN 0x7FC00000, as the reference writes it.
mlir::Value buildAmaxBits(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value amax);

/// Raises the f32 at `indices` of `buffer`, which must start at +0.0, to
/// `amax` (a magnitude: >= 0 or NaN) by an atomic unsigned max on its bits.
/// For non-negative floats the bit order is the value order; a NaN is first
/// made the quiet NaN 0x7FC00000, which is above +Inf, so the result is the
/// spec's amax, NaN if any contribution was, with the reference's bits.
void buildAtomicMaxMagnitude(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value amax, mlir::Value buffer,
                             mlir::ValueRange indices);

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_KERNELBUILDER_H
