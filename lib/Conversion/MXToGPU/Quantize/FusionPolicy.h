//===- FusionPolicy.h - Which quantize kernel computes which op -*- C++ -*-===//
//
// Private to the quantize kernels of the MXToGPU conversion: the policy
// side of them, as opposed to the building blocks of KernelBuilder.h. It
// holds the shapes of the kernels that the fusion plan (FusionPlan.h) checks
// an op against, the pattern base that lowers exactly the ops the plan gives
// a kernel, how a kernel's results replace its quantize (and the swizzle it
// absorbed), and the entry point of each kernel file.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_FUSIONPOLICY_H
#define MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_FUSIONPOLICY_H

#include "ElementConversion.h"

#include "mx/Conversion/MXToGPU/Quantize/FusionPlan.h"
#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/PatternMatch.h"

#include <string>

namespace mx::gpu_kernels {

/// Elements a lane of the row-vector kernels (rowwise, 2-D blockwise,
/// per-tensor) loads and converts at once: one 16-byte FP8 store, so rows
/// must be multiples of it.
constexpr int64_t kElementsPerLane = 16;
/// The extent of FP8 blockwise blocks: the `[128, 128]` blocks of the 2-D
/// kernel (BlockwiseQuantize.cpp, one CTA per block) and the 128-row column
/// blocks of the strip kernel (a transposed `[1, 128]` quantize), with the
/// 128-column rowwise blocks of a `[1, 128]` quantize fused with it.
constexpr int64_t kBlockwiseExtent = 128;
/// The strip quantize kernel (QuantizeStrips.cpp): columns of a lane's strip,
/// so K must be a multiple of kStripCols.
constexpr int64_t kStripCols = 4;

/// The multiple of K that the strip kernel needs for `format`: kStripCols,
/// or for a packed format the columns of the lanes whose codes fill whole
/// 32-bit words together (16 for FP6).
int64_t getStripColumnMultiple(const ElementFormat &format);

/// The rows of the column blocks that the strip kernel quantizes for `op`, a
/// columnwise or transposed quantize: its block `[r, 1]`, or `[1, r]` of the
/// transposed data.
int64_t getStripBlockRows(QuantizeOp op);

/// Lanes of a strip-kernel warp side by side along the input's rows, one
/// strip each, for column blocks of `blockRows` rows, which the warp stacks
/// over kWarpSize / lanes lane groups; 0 where the kernel has no such block
/// (it covers kMXBlock, MX, and kBlockwiseExtent, FP8 blockwise).
int64_t getStripLanesAcross(int64_t blockRows);

/// Lanes of the rowwise kernel that share a `[1, width]` block, or 0 where
/// it has no kernel for that width: the lanes of a block must be a power of
/// two within one warp, for the xor-shuffles that combine their amax.
int64_t getRowwiseLanesPerBlock(int64_t width);

/// Replaces a quantize op with its kernel's data and scales tensors; when a
/// swizzle consumed the scales, the tiled tensor replaces that swizzle.
void replaceQuantize(mlir::RewriterBase &rewriter, QuantizeOp op,
                     SwizzleOp swizzle, mlir::Value data, mlir::Value scales);

/// The quantize whose kernel also computes the 64-row tile sums of the
/// column sum `op` (ColumnSums.h), or null: of the quantizes of the same
/// input in the same block whose kernel can (a transposed per-tensor cast's
/// cast+transpose kernel, FP8 blockwise's strip kernel), the one whose
/// kernel comes first, if `op` is the first column sum of that input there,
/// its matrix has rows and columns in multiples of 16, and every use of `op`
/// comes after that kernel (which defines its result). PerTensorScaling.cpp.
mlir::Operation *getColumnSumHost(ColumnSumOp op,
                                  const QuantizeFusionPlan &plan);

/// The column sum whose tile sums the kernel of `host` (a quantize of
/// `input`) computes, or null (getColumnSumHost).
ColumnSumOp getFusedColumnSum(mlir::Operation *host, mlir::Value input,
                              const QuantizeFusionPlan &plan);

/// Where the strip kernel anchored at `op` is built (before `op` or its
/// fused sibling, whichever comes first) if that kernel can compute the tile
/// sums of a column sum of its input: FP8 blockwise's, whose 128-row column
/// blocks hold whole 64-row tiles in each warp, of a matrix (rank 2); null
/// otherwise. QuantizeStrips.cpp.
mlir::Operation *getStripColumnSumStart(QuantizeOp op,
                                        const QuantizeFusionPlan &plan);

/// Why the per-tensor kernels cannot compute `op` (mx.amax,
/// mx.quantize_delayed or mx.column_sum), or an empty string.
std::string getPerTensorUnsupportedReason(mlir::Operation *op);

/// A pattern for the quantize ops that the fusion plan gives one kernel: it
/// matches exactly those and hands their plan to `rewritePlanned`, which
/// builds the kernel for `chip`.
struct PlannedQuantizePattern : mlir::OpRewritePattern<QuantizeOp> {
  PlannedQuantizePattern(mlir::MLIRContext *context,
                         const QuantizeFusionPlan &plan, QuantizeKernel kernel,
                         Chip chip)
      : OpRewritePattern(context), chip(chip), plan(plan), kernel(kernel) {}

  mlir::LogicalResult
  matchAndRewrite(QuantizeOp op, mlir::PatternRewriter &rewriter) const final {
    const QuantizePlan *planned = plan.lookup(op);
    if (!planned || planned->kernel != kernel)
      return rewriter.notifyMatchFailure(op, "planned for another kernel");
    return rewritePlanned(op, *planned, rewriter);
  }

  virtual mlir::LogicalResult
  rewritePlanned(QuantizeOp op, const QuantizePlan &planned,
                 mlir::PatternRewriter &rewriter) const = 0;

protected:
  /// How `op`'s kernel converts its elements on `chip` (the plan gives these
  /// kernels only formats the chip converts).
  ElementConversion getConversion(QuantizeOp op) const;

  Chip chip;
  const QuantizeFusionPlan &plan;

private:
  QuantizeKernel kernel;
};

/// Whether the FP4 quantize kernel (Fp4Kernels.cpp) covers `op`, whose data
/// is f4E2M1FN; if not, `reason` says why.
mlir::LogicalResult checkFP4Quantize(QuantizeOp op, std::string &reason);

/// The pattern files, building kernels for `chip`; the quantize and swizzle
/// patterns follow `plan`, which must outlive them.
void populateRowwiseQuantizePatterns(mlir::RewritePatternSet &patterns,
                                     Chip chip, const QuantizeFusionPlan &plan);
void populateColumnwiseQuantizePatterns(mlir::RewritePatternSet &patterns,
                                        Chip chip,
                                        const QuantizeFusionPlan &plan);
void populateBlockwiseQuantizePatterns(mlir::RewritePatternSet &patterns,
                                       Chip chip,
                                       const QuantizeFusionPlan &plan);
void populatePerTensorScalingPatterns(mlir::RewritePatternSet &patterns,
                                      Chip chip,
                                      const QuantizeFusionPlan &plan);
/// Delayed scaling's `mx.update_amax_history`, a step's updates in one launch.
void populateAmaxHistoryUpdatePatterns(mlir::RewritePatternSet &patterns);
void populateElementwisePatterns(mlir::RewritePatternSet &patterns, Chip chip,
                                 const QuantizeFusionPlan &plan);
void populateFP4Patterns(mlir::RewritePatternSet &patterns, Chip chip,
                         const QuantizeFusionPlan &plan);

} // namespace mx::gpu_kernels

#endif // MX_LIB_CONVERSION_MXTOGPU_QUANTIZE_FUSIONPOLICY_H
