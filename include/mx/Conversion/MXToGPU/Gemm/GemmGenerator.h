//===- GemmGenerator.h - What the GEMM generator takes ----------*- C++ -*-===//
//
// The public face of the GEMM kernel generator (lib/Conversion/MXToGPU/Gemm):
// whether it plans a kernel for an `mx.scaled_matmul` on a chip, which the
// lowering choice (GemmLowering.h) asks, and the choices of a generated GEMM
// kernel that a user or an autotuner may make
// instead of the generator: the `gemm-config` option of `convert-mx-to-gpu`
// and `mx-lower-to-nvvm`, written `key=value` separated by commas, e.g.
// `consumers=2,waves=2,tile_n=128,cluster=1x2,epilogue=tma,stages=3,mx=staged,
// overlap=on,products=off`. A key
// left out is the generator's to choose; a choice the kernel cannot make
// (too many registers, too little shared memory, a cluster that does not
// divide the tiles) fails the op's lowering with the reason.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOGPU_GEMM_GEMMGENERATOR_H
#define MX_CONVERSION_MXTOGPU_GEMM_GEMMGENERATOR_H

#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mx::gemm {

struct GemmConfig {
  /// Consumer warpgroups (SM90: 2 or 3).
  std::optional<int64_t> consumers;
  /// Blocks of 64 rows each consumer runs per stage (SM90 FP8: 1 or 2).
  std::optional<int64_t> waves;
  /// Tile width: rows of B per tile.
  std::optional<int64_t> tileN;
  /// Pipeline stages.
  std::optional<int64_t> stages;
  /// Cluster shape along M and N: 1x1, 2x1 (shares B) or 1x2 (shares A).
  std::optional<int64_t> clusterM, clusterN;
  /// Whether the epilogue stores through shared memory and TMA.
  std::optional<bool> tmaStore;
  /// MX on SM90: whether each operand is dequantized once to bf16 by a
  /// staging kernel before a bf16 GEMM (`mx=staged`), or in every stage of
  /// the GEMM's main loop (`mx=fused`).
  std::optional<bool> mxStaged;
  /// SM90 FP8: whether the promotion of one K-block overlaps the next
  /// block's wgmma chain (two partial accumulators).
  std::optional<bool> overlap;
  /// SM90 FP8 with 1x128 scales on both operands (the wgrad form): whether
  /// the products sa x sb of a K-block come from a tf32 wgmma beside its
  /// chain (`products=on`), or from an FMUL per element in the promotion.
  std::optional<bool> scaleProducts;

  bool empty() const {
    return !consumers && !waves && !tileN && !stages && !clusterM &&
           !tmaStore && !mxStaged && !overlap && !scaleProducts;
  }
};

/// Parses the `gemm-config` text (empty: no choices), or says in `error`
/// which key or value is wrong and what is expected. Integers are positive
/// and at most 65535: what a kernel can take is the planner's to say, and
/// the bound keeps its arithmetic on them inside int64.
llvm::FailureOr<GemmConfig> parseGemmConfig(llvm::StringRef text,
                                            std::string &error);

/// Whether the generator plans a kernel for `op` on `chip` with the choices
/// of `config` (and the module lets the host code call the runtime), or why
/// not.
llvm::LogicalResult checkKernelSupport(ScaledMatmulOp op, Chip chip,
                                       const GemmConfig &config,
                                       std::string &reason);

} // namespace mx::gemm

#endif // MX_CONVERSION_MXTOGPU_GEMM_GEMMGENERATOR_H
