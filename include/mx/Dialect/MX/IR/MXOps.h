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
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <array>
#include <utility>

namespace mx {

/// The 128x4 tiles of swizzled scales (spec section 4), the one definition of
/// their index map: scale (r, c) of a compact `[R, C]` matrix whose rows are
/// its unscaled dimension sits at `[r/128, c/4, r%32, (r%128)/32, c%4]` of the
/// swizzled `[R'/128, C'/4, 32, 4, 4]` (R' and C' padded to whole tiles): a
/// tile is 32 rows of 16 elements, tile row i holding rows i, i + 32, i + 64,
/// i + 96 of the tile, 4 columns each. The maps take the index arithmetic
/// `Arith` of their caller (IR values in the kernels, integers in tests):
/// `div(x, d)`, `rem(x, d)` and `fma(x, m, y)` = x * m + y, for non-negative
/// x, y and positive constants d, m.
struct SwizzleTiles {
  /// Rows and columns of one tile.
  static constexpr int64_t kRows = 128, kCols = 4;
  /// The rows of a tile that one tile row interleaves are kRowStride apart.
  static constexpr int64_t kRowStride = 32, kRowGroups = kRows / kRowStride;

  /// The index in the swizzled tensor of compact scale (r, c).
  template <typename T, typename Arith>
  static std::array<T, 5> getTiledIndex(T r, T c, Arith &&arith) {
    return {arith.div(r, kRows), arith.div(c, kCols), arith.rem(r, kRowStride),
            arith.div(arith.rem(r, kRows), kRowStride), arith.rem(c, kCols)};
  }

  /// The compact (r, c) of swizzled index `tiled` (the inverse map).
  template <typename T, typename Arith>
  static std::pair<T, T> getCompactIndex(llvm::ArrayRef<T> tiled,
                                         Arith &&arith) {
    return {arith.fma(arith.fma(tiled[0], kRowGroups, tiled[3]), kRowStride,
                      tiled[2]),
            arith.fma(tiled[1], kCols, tiled[4])};
  }
};

/// `ceil(shape / block)` per dimension: the shape of a quantization's scales.
llvm::SmallVector<int64_t> getScalesShape(llvm::ArrayRef<int64_t> shape,
                                          llvm::ArrayRef<int64_t> block);

/// `shape` (rank >= 2) with its last two dimensions swapped: the data shape
/// of a `transposed` quantize of an input of `shape`.
llvm::SmallVector<int64_t> getTransposedShape(llvm::ArrayRef<int64_t> shape);

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
