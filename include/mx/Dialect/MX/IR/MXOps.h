//===- MXOps.h - Operations of the mx dialect -------------------*- C++ -*-===//
//
// Declares the mx operations and the shape arithmetic that their verifiers
// and every lowering share: the scale shape of a block quantization, the
// shapes of the GEMM-ready scale layouts, and how a GEMM operand's layout
// places M (or N) and K.
//
//===----------------------------------------------------------------------===//

#ifndef MX_DIALECT_MX_IR_MXOPS_H
#define MX_DIALECT_MX_IR_MXOPS_H

#include "mx/Dialect/MX/IR/ElementFormat.h"
#include "mx/Dialect/MX/IR/MXDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mx {

/// Rows and columns of one scale tile of the swizzled layout.
constexpr int64_t kSwizzleTileRows = 128;
constexpr int64_t kSwizzleTileCols = 4;

/// `ceil(shape / block)` per dimension: the shape of a quantization's scales.
llvm::SmallVector<int64_t> getScalesShape(llvm::ArrayRef<int64_t> shape,
                                          llvm::ArrayRef<int64_t> block);

/// Entries of the innermost dimension of blockwise GEMM-ready scales: the
/// unscaled dimension is padded to a multiple of it.
constexpr int64_t kBlockwisePadding = 4;

/// The swizzled shape `[R'/128, C'/4, 32, 4, 4]` of an `[rows, cols]` scale
/// matrix whose rows are its unscaled dimension.
llvm::SmallVector<int64_t> getSwizzledShape(int64_t rows, int64_t cols);

/// The shape that `mx.swizzle` in `layout` gives compact scales of `shape`
/// (rank >= 2) whose unscaled dimension is `unscaledDim` (one of the last
/// two): the batch dimensions, then `[R'/128, C'/4, 32, 4, 4]` (tiles) or
/// `[C, R'/4, 4]` (blockwise).
llvm::SmallVector<int64_t> getSwizzledScalesShape(llvm::ArrayRef<int64_t> shape,
                                                  int64_t unscaledDim,
                                                  SwizzleLayout layout);

/// A GEMM operand read as `[batch..., rows, K]` (rows = M or N), whatever
/// its layout: the dimension indices of rows and K in the stored tensor.
struct MatmulOperandShape {
  llvm::SmallVector<int64_t> batch;
  int64_t rows, k;
  int64_t rowsDim, kDim;
};

/// Reads `shape` (rank >= 2) stored in `layout`.
MatmulOperandShape getMatmulOperandShape(llvm::ArrayRef<int64_t> shape,
                                         OperandLayout layout);

/// Block extents along their scaled dimension: MX (E8M0 scales, every element
/// format) and NVFP4 (E4M3 scales, E2M1 data).
constexpr int64_t kMXBlock = 32;
constexpr int64_t kNVFP4Block = 16;

/// Whether scales of `scaleType` are NVFP4's (f8E4M3FN, with an f32 tensor
/// scale beside them).
bool isNVFP4Scale(mlir::Type scaleType);

} // namespace mx

#define GET_OP_CLASSES
#include "mx/Dialect/MX/IR/MXOps.h.inc"

#endif // MX_DIALECT_MX_IR_MXOPS_H
