//===- Target.h - The chips the mx GPU lowerings compile for ----*- C++ -*-===//
//
// The one home of every per-chip decision of the GPU lowerings: which chips
// they target and which one they take when not told, how `mx.scaled_matmul`
// is lowered on each chip when the user leaves the choice to the compiler,
// which cuBLASLt scale modes each chip's tensor cores run, and which element
// conversions each chip has as instructions. Pass and pipeline options,
// patterns and diagnostics read these rather than spelling chips or rules
// themselves.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_TARGET_H
#define MX_CONVERSION_TARGET_H

#include "mx/Runtime/MXRuntime.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/LogicalResult.h"

#include <string>

namespace mx {

/// The NVIDIA chips the GPU lowerings compile for. The `a` variants unlock the
/// architecture-specific tensor-core instructions: wgmma on sm_90a (Hopper),
/// tcgen05 on sm_100a (Blackwell).
enum class Chip { sm_90a, sm_100a };

/// The chip of every mx pass and pipeline that is not given one.
inline constexpr Chip kDefaultChip = Chip::sm_90a;

/// The chip's name as NVVM targets and ptxas spell it ("sm_90a").
llvm::StringRef getChipName(Chip chip);

/// The values of a `chip` option, every chip by its name, so that the option
/// parser rejects any other chip before a pass runs.
llvm::cl::ValuesClass getChipOptionValues();

/// The PTX ISA the chip's kernels are emitted for, as an NVPTX feature:
/// 8.6 on sm_90a (the oldest CUDA 13 takes), 8.8 on sm_100a (the oldest with
/// the block-scaled `tcgen05.mma`).
llvm::StringRef getPtxFeatures(Chip chip);

/// Whether the chip's tensor cores apply block scales themselves
/// (`tcgen05.mma.block_scale`, SM100): what MX GEMMs need to run natively,
/// in cuBLASLt (`VEC32_UE8M0`) or in a generated kernel.
bool hasBlockScaledTensorCores(Chip chip);

/// Whether the chip converts between f32 and the element type `elementType`
/// with `cvt` (round to nearest even, saturating, two elements at a time),
/// rather than in software: the FP8 formats on every chip, FP6 and FP4 on
/// sm_100a. Kernels ask this instead of comparing chips.
bool hasHardwareConversion(Chip chip, mlir::Type elementType);

/// What the GEMM kernel generator sizes its kernels by on a chip.
struct GemmKernelResources {
  int64_t multiprocessors;     // CTAs of the persistent grid (one per SM)
  int64_t sharedBytesPerBlock; // the opt-in dynamic shared memory limit
  int64_t tensorMemoryColumns; // 32-bit columns of 128 lanes; 0 if none
};

/// The resources of `chip` the generated GEMM kernels are sized by: H100 /
/// H200 on sm_90a (wgmma kernels), B200 on sm_100a (tcgen05 kernel).
GemmKernelResources getGemmKernelResources(Chip chip);

/// How `mx.scaled_matmul` reaches the GPU: a generated kernel
/// (convert-mx-to-gpu), a cuBLASLt call (convert-mx-to-cublas), or
/// `automatic`: for each op, the one that runs its recipe faster on the chip
/// (`getFasterGemmLowering`), or the other where that one cannot run the op
/// (mx/Conversion/GemmLowering.h decides).
enum class GemmLowering { automatic, kernel, cublas };

/// The values of a `gemm` option, every lowering by its name (auto, kernel,
/// cublas).
llvm::cl::ValuesClass getGemmLoweringOptionValues();

/// The scaling recipes of `mx.scaled_matmul` whose lowering `gemm=auto`
/// chooses by measurement.
enum class ScaledMatmulRecipe {
  perTensor,       // one f32 scale per operand
  blockwise,       // f32 scales, 1x128 (A) x 128x128 (B)
  blockwiseColumns, // f32 scales, 1x128 x 1x128: the weight-gradient form
  mx,              // E8M0 scales per 1x32 on both operands
  nvfp4,           // E4M3 scales per 1x16 and f32 tensor scales
};

/// Which lowering runs `recipe` faster on `chip`, and the measurement (or
/// the fact) that says so.
struct GemmLoweringFact {
  GemmLowering faster; // kernel or cublas
  llvm::StringLiteral evidence;
};
GemmLoweringFact getFasterGemmLowering(Chip chip, ScaledMatmulRecipe recipe);

/// Whether cuBLASLt runs operands with scale mode `mode` on `chip`, and if not,
/// why and what to use instead. MX and NVFP4 (VEC32_UE8M0, VEC16_UE4M3:
/// swizzled E8M0 / E4M3 scales of [1, 32] / [1, 16] blocks) need the
/// block-scaled tensor cores of SM100; per-tensor and the FP8 blockwise modes
/// run on both chips.
llvm::LogicalResult checkCublasScaleMode(Chip chip, mxrtScaleMode mode,
                                         std::string &reason);

/// Whether cuBLASLt's scaled GEMMs take operands of the mx element type
/// `elementType` on any chip, and if not, why: the FP8 formats and E2M1
/// (CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_4F_E2M1); it has no MXFP6 or
/// MXINT8 GEMM.
llvm::LogicalResult checkCublasElementType(mlir::Type elementType,
                                           std::string &reason);

/// Whether cuBLASLt takes an operand stored in `layout` on `chip`, and if
/// not, why: before SM100 only K-contiguous FP8 operands.
llvm::LogicalResult checkCublasOperandLayout(Chip chip,
                                             mxrtOperandLayout layout,
                                             std::string &reason);

/// One cuBLASLt GEMM of an `mx.scaled_matmul` (one batch slice): the problem
/// size, the operands' element types (mxrtElemType) and how they are stored,
/// their scale modes, and the output type.
struct CublasGemm {
  int64_t m, n, k;
  mxrtElemType aType, bType, outType;
  mxrtOperandLayout aLayout, bLayout;
  mxrtScaleMode aMode, bMode;
  /// One call per batch slice, every pointer advanced by its slice's bytes.
  bool batched;
};

/// Whether cuBLASLt takes `gemm`'s shapes, and if not, why: what
/// `mxrtScaledMatmul` would refuse at run time (MXRuntime.h), decided here
/// when compiling since the shapes are static. Stored operand rows and
/// output rows of MXRT_CUBLAS_ROW_BYTES multiples, MXRT_CUBLAS_VEC128_ROWS
/// multiples of rows for VEC128 scales, no E5M2 x E5M2, not 128x128 scales
/// on both operands, and in a batched GEMM 16-byte aligned 128x128 scales
/// for every slice. Chip-independent: checkCublasScaleMode and
/// checkCublasOperandLayout say what each chip runs.
llvm::LogicalResult checkCublasGemm(const CublasGemm &gemm,
                                    std::string &reason);

} // namespace mx

#endif // MX_CONVERSION_TARGET_H
