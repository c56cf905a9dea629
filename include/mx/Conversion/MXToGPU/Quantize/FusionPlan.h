//===- FusionPlan.h - Which GPU kernel computes each quantize ---*- C++ -*-===//
//
// The quantize kernels of convert-mx-to-gpu share work: the rowwise and the
// columnwise quantize of one input run as one strip kernel that reads the
// input once (MX's [1, 32] with [32, 1] or its transposed [1, 32]; FP8
// blockwise's [1, 128] with its transposed [1, 128], the 1x128 blocks along
// the other dimension), and a swizzle that alone consumes a quantize's scales
// is written by that quantize's kernel, in the tiled layout, instead of by a
// kernel of its own. These decisions depend on one another (a rowwise
// quantize whose K is not a multiple of 16 has a kernel only when it is
// fused; a swizzle is fused only into a quantize that has a kernel), so they
// are made here, once, before any rewrite, and the patterns only read them.
// The plan also picks the kernel of the quantizations that share nothing:
// FP8 blockwise `[1, 128]` (the rowwise kernel; transposed, the strip
// kernel), `[128, 128]` and per-tensor (one block per matrix). Blocks span the
// last two dimensions; leading (batch) dimensions are more rows, or a grid
// dimension.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_QUANTIZE_FUSIONPLAN_H
#define MX_CONVERSION_MXTOGPU_QUANTIZE_FUSIONPLAN_H

#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "llvm/ADT/DenseMap.h"

#include <string>

namespace mx {

/// The kernel that computes a quantize op.
enum class QuantizeKernel {
  /// A `[1, w]` quantize alone, w a power-of-two multiple of 16 up to 512:
  /// MX (32) and FP8 blockwise 1-D (128) (RowwiseQuantize.cpp).
  rowwise,
  /// A `[32, 1]` quantize alone, by the strip kernel (QuantizeStrips.cpp);
  /// or its transposed form (`transposed`, `[1, 32]` blocks of the data), or
  /// FP8 blockwise's (`[1, 128]` blocks of the transposed data).
  stripColumnwise,
  /// The `[1, 32]` and the `[32, 1]` (or transposed) quantize of one input,
  /// or the `[1, 128]` and the transposed `[1, 128]` one, together by the
  /// strip kernel (QuantizeStrips.cpp; staged in StagedQuantize.cpp for
  /// packed formats).
  stripFused,
  /// A `[128, 128]` quantize: one CTA per block (BlockwiseQuantize.cpp).
  blockwise2D,
  /// One block per matrix (current per-tensor scaling): an amax kernel,
  /// then the cast (PerTensorScaling.cpp); a transposed one, and the plain
  /// one of the same input with it, by the cast+transpose kernel.
  perTensor,
  /// An MXFP4 or NVFP4 quantize, rowwise or columnwise (Fp4Kernels.cpp).
  fp4,
};

/// How one quantize op is computed.
struct QuantizePlan {
  QuantizeKernel kernel;
  /// The other quantize of a `stripFused` kernel or of a `perTensor`
  /// cast+transpose kernel; null for the others.
  QuantizeOp sibling;
  /// The swizzle of this op's scales that the kernel writes directly, if any.
  SwizzleOp swizzle;
  /// Whether the kernel visits its tiles (CTAs) last to first. A `perTensor`
  /// cast without an `amax` operand follows its own amax pass in the same
  /// program, which reads the input first to last; read backwards, the
  /// input's tail, the last of it that pass read, is read again while it is
  /// still in L2 (H100: 50 MB; 4-6 us faster there, docs/gpu.md). The bytes
  /// written do not depend on it.
  bool reversedTiles = false;
};

/// The kernel of every quantize op under a root and the swizzles those kernels
/// write. Built before the patterns run and read by them; it refers to ops by
/// address, which is sound because the patterns create no mx ops and the pass
/// folds and erases dead ops before building it (so the pattern driver has
/// none left to fold or erase).
class QuantizeFusionPlan {
public:
  /// Plans every quantize op under `root` for the kernels of `chip`. A
  /// rowwise quantize is fused with the first columnwise quantize of the same
  /// input in the same block (in program order) whose column blocks are as
  /// tall as its blocks are wide and that has the same element type, scale
  /// type and rounding and no other partner; a transposed
  /// per-tensor cast likewise with the first plain per-tensor cast of the
  /// same input (with the same amax operand, if any); a swizzle is fused
  /// when it is the only user of the scales and tiles them along the
  /// quantize's unscaled dimension.
  QuantizeFusionPlan(mlir::Operation *root, Chip chip);

  /// How `op` is computed, or null if no GPU kernel computes it.
  const QuantizePlan *lookup(QuantizeOp op) const;

  /// Why no GPU kernel computes `op` (for an op whose lookup is null).
  llvm::StringRef getUnsupportedReason(QuantizeOp op) const;

  /// The quantize whose kernel writes `op`'s tiles, or null when a swizzle
  /// kernel of its own computes them.
  QuantizeOp getFusedInto(SwizzleOp op) const;

private:
  void plan(QuantizeOp op, QuantizeKernel kernel, QuantizeOp sibling);

  llvm::DenseMap<mlir::Operation *, QuantizePlan> quantizes;
  llvm::DenseMap<mlir::Operation *, std::string> unsupported;
  llvm::DenseMap<mlir::Operation *, QuantizeOp> fusedSwizzles;
};

} // namespace mx

#endif // MX_CONVERSION_MXTOGPU_QUANTIZE_FUSIONPLAN_H
