//===- GemmPlan.cpp - Per-chip plan of a generated GEMM kernel ------------===//
//
// Classifies an `mx.scaled_matmul` into a recipe, decides how each operand's
// scales reach the threads, and sizes its kernel for the chip. On SM90 every
// recipe reads 128 FP8 bytes of K per stage (one 128B-swizzled TMA box row,
// so one E8M0 scale chunk of the 128x4 layout or one f32 scale of a 128-K
// block per row), with one TMA producer warpgroup and consumer warpgroups of
// 64-row waves.
//
// * The FP8 recipes keep a fresh wgmma accumulator beside the promoted one.
//   Their default tile is 256x128: two consumers of two waves each, the
//   waves sharing one partial accumulator (192 of the 232 registers), which
//   reads a third fewer operand bytes per FLOP than a 128x128 tile. Where N
//   has an even number of tiles, clusters of two CTAs on neighbouring tiles
//   share A and load half of it each with a TMA multicast, which takes
//   another third off the L2 traffic; otherwise a pair along M shares B.
//   1x128 scales come as GEMM-ready `[KB, R']` rows by TMA with each stage
//   (the consumers read them from shared memory), 128x128 scales are copied
//   once per tile.
// * MX on SM90 is dequantized to bf16 (exactly) and multiplied by bf16
//   wgmma, on the widest wgmma (128x256, two consumers), in one of two
//   forms. Staged: a staging kernel converts each operand once into a bf16
//   copy in global memory, and the GEMM streams those by TMA; fused
//   (mxExact): the main loop converts A in registers and B into two bf16
//   buffers in every stage of every tile, each operand once per tile of the
//   other, and is bounded by that conversion. Staged is the default where
//   converting once pays for the copies, on large M and N (chooseMXForm).
//
// On SM100 the generator covers MX, scaled by the tensor core: a 128x256
// tile (the widest one-CTA tcgen05.mma), its f32 accumulator in 256 columns
// of tensor memory and each stage's scales in 12 more, which leaves no room
// for a second accumulator; the same K stages of 128 elements as on SM90
// (128-byte rows; 64 for kind::mxf4's packed E2M1).
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"
#include "ScaleProducts.h"

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Conversion/MXToGPU/Gemm/WgmmaDescriptors.h"
#include "mx/Dialect/MX/IR/ElementFormat.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

#include <array>

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr int64_t kBaseAlignment = 1024; // 128B swizzle repeats every 1 KiB
/// One 128B-swizzled stage row of bf16 (64 elements of K).
constexpr int64_t kBf16RowBytes = 128;
/// The MX tile width on both chips: two consumers of m64 x 256 (SM90), one
/// 128x256 tcgen05.mma (SM100).
constexpr int64_t kMXTileN = 256;
constexpr int64_t kMaxStages = 8;
/// Registers a consumer keeps for addresses, indices and loop state beside
/// its accumulators.
constexpr int64_t kConsumerRegisterReserve = 24;

/// Whether `block` is `rows` x `columns`.
bool isBlock(ArrayRef<int64_t> block, int64_t rows, int64_t columns) {
  return block.size() == 2 && block[0] == rows && block[1] == columns;
}

/// How `operand`'s f32 scales of `block` reach the kernel, if they can.
FailureOr<ScaleStaging> getFP8ScaleStaging(ArrayRef<int64_t> block,
                                           OperandPlan &operand,
                                           RankedTensorType scales) {
  if (isBlock(block, 1, kFP8ScaleBlock)) {
    // GEMM-ready [KB, R'/4, 4], or compact [R, KB] that swizzleGemmScales
    // turns into the GEMM-ready layout before the kernel is built.
    operand.scaleRowPitch = scales.getRank() == 3
                                ? scales.getDimSize(1) * scales.getDimSize(2)
                                : llvm::alignTo(operand.rows, 4);
    return ScaleStaging::stageRows;
  }
  if (isBlock(block, kFP8ScaleBlock, kFP8ScaleBlock))
    return ScaleStaging::tileBlocks;
  return failure();
}

/// SM90's form of MX (see the file comment): `config`'s, else staged where
/// converting once pays for the bf16 copies. Staging costs a fixed amount of
/// memory traffic per code of A and B, (M + N) K; the fused loop runs the
/// bf16 GEMM (2 M N K) at about two thirds of its speed; so staging wins
/// where 1/M + 1/N is below a constant, measured on an H100
/// (bench/RESULTS.md): staged 1.27x faster at 2048^3, 1.04x at
/// 1024x8192x8192, 1.38x at 8192^3, 0.81x at 512x8192x8192.
GemmRecipe chooseMXForm(const GemmPlan &plan, const GemmConfig &config) {
  constexpr int64_t kStagingBreakEven = 640;
  bool staged = config.mxStaged.value_or(plan.m * plan.n >
                                         kStagingBreakEven * (plan.m + plan.n));
  return staged ? GemmRecipe::mxStaged : GemmRecipe::mxExact;
}

/// The recipe of `op`, with each operand's scale staging.
FailureOr<GemmRecipe> classify(ScaledMatmulOp op, GemmPlan &plan,
                               const GemmConfig &config, std::string &reason) {
  RankedTensorType aScales = op.getLhsScales().getType();
  RankedTensorType bScales = op.getRhsScales().getType();
  Type aScale = aScales.getElementType(), bScale = bScales.getElementType();
  ArrayRef<int64_t> aBlock = op.getLhsBlock(), bBlock = op.getRhsBlock();
  bool mx = isa<Float8E8M0FNUType>(aScale) && isa<Float8E8M0FNUType>(bScale);
  if (config.mxStaged && (!mx || hasBlockScaledTensorCores(plan.chip))) {
    reason = "gemm-config: mx=staged|fused chooses how SM90 runs MX operands "
             "(E8M0 scales of [1, 32] blocks); this op has none there";
    return failure();
  }
  if (mx) {
    if (!isBlock(aBlock, 1, kMXBlock) || !isBlock(bBlock, 1, kMXBlock)) {
      reason = "E8M0 scales need [1, 32] blocks on both operands";
      return failure();
    }
    if (hasBlockScaledTensorCores(plan.chip)) {
      plan.a.scales = plan.b.scales = ScaleStaging::chunks;
      return GemmRecipe::mxBlockScaled;
    }
    GemmRecipe form = chooseMXForm(plan, config);
    plan.a.scales = plan.b.scales = form == GemmRecipe::mxStaged
                                        ? ScaleStaging::staged
                                        : ScaleStaging::chunks;
    return form;
  }
  if (isNVFP4Scale(aScale) || isNVFP4Scale(bScale)) {
    if (!hasBlockScaledTensorCores(plan.chip)) {
      reason = ("the " + getChipName(plan.chip) +
                " kernels have no NVFP4 main loop (tcgen05 kind::mxf4nvf4 "
                "needs SM100)")
                   .str();
      return failure();
    }
    if (!isNVFP4Scale(aScale) || !isNVFP4Scale(bScale) ||
        !isBlock(aBlock, 1, kNVFP4Block) || !isBlock(bBlock, 1, kNVFP4Block)) {
      reason = "NVFP4 needs E4M3 scales of [1, 16] blocks on both operands";
      return failure();
    }
    plan.a.scales = plan.b.scales = ScaleStaging::chunks;
    plan.scaleBlockK = kNVFP4Block;
    return GemmRecipe::mxBlockScaled;
  }
  if (!aScale.isF32() || !bScale.isF32()) {
    reason = "scales must be E8M0 on both operands or f32 on both";
    return failure();
  }
  // The block-scaled kernel has no FP8 main loop with f32 scales yet.
  if (hasBlockScaledTensorCores(plan.chip)) {
    reason = ("the " + getChipName(plan.chip) +
              " kernel takes MX or NVFP4 operands only (E8M0 scales of [1, 32] "
              "blocks, E4M3 of [1, 16])")
                 .str();
    return failure();
  }
  if (aBlock == op.getLhs().getType().getShape() &&
      bBlock == op.getRhs().getType().getShape())
    return GemmRecipe::perTensor;
  FailureOr<ScaleStaging> a = getFP8ScaleStaging(aBlock, plan.a, aScales);
  FailureOr<ScaleStaging> b = getFP8ScaleStaging(bBlock, plan.b, bScales);
  if (failed(a) || failed(b)) {
    reason = "f32 scales need [1, 128] or [128, 128] blocks on both operands, "
             "or one scale per operand";
    return failure();
  }
  plan.a.scales = *a;
  plan.b.scales = *b;
  return GemmRecipe::blockwise;
}

/// A tile of the SM90 FP8 main loop: consumers x waves of 64 rows, tileN
/// wide, and its measured time per tile element relative to the fastest
/// (bench/gemm.py on an H100, 2026-11-26, bench/RESULTS.md: per-tensor at
/// 8192^3, whose tile counts fill the grid alike for all of them, 128x192
/// ran in 736 us per 21 rounds of tiles, 192x128 in 749, 256x128 in 772
/// per 16).
struct FP8Tile {
  int64_t consumers, waves, tileN;
  double relativeCost;
  /// GemmPlan::overlap.
  bool overlap = false;
  /// GemmPlan::scaleProducts.
  bool scaleProducts = false;
};

constexpr FP8Tile kFP8Tiles[] = {
    {2, 1, 192, 1.0}, {3, 1, 128, 1.02}, {2, 2, 128, 1.035}, {2, 1, 128, 1.06}};
/// The same where B has one scale per column (1x128, the wgrad form) and
/// the promotion multiplies sa x sb itself (`products=off`): an FMUL and an
/// FFMA per element. There 192x128 ran 2% faster than 128x192 at 8192^3
/// (1047 us against 1068), and 128x128 only with overlap (its registers
/// allow two partials: 1079-1092 us per 32 rounds at 8192^3, against 1141
/// without; bench/RESULTS.md, 2026-11-27), where it wins at shapes that
/// 192-row tiles fill poorly.
constexpr FP8Tile kFP8ColumnScaledTiles[] = {
    {3, 1, 128, 1.0}, {2, 1, 192, 1.02}, {2, 1, 128, 1.02, /*overlap=*/true}};
/// The wgrad form's tile with the products from a tf32 wgmma: only 128x128
/// leaves registers for the products' fragment beside the accumulator and
/// the partial (on an H100 at 8192^3 it ran 1.13-1.14x as fast as the
/// 192x128 tile of the FMUL form; bench/RESULTS.md, 2026-11-27).
constexpr FP8Tile kScaleProductTile = {2,
                                       1,
                                       128,
                                       1.0,
                                       /*overlap=*/false,
                                       /*scaleProducts=*/true};

/// Whether `plan`'s operands take the scale products of a tf32 wgmma: both
/// have 1x128 scales (the wgrad form).
bool takesScaleProducts(const GemmPlan &plan) {
  return plan.a.scales == ScaleStaging::stageRows &&
         plan.b.scales == ScaleStaging::stageRows;
}

/// The accumulator registers a consumer thread of `tile` holds: the
/// promoted accumulator of every wave, a partial accumulator per K-block of
/// an iteration, and the scale products' fragment.
int64_t getAccumulatorRegisters(const FP8Tile &tile) {
  int64_t fragment = kWaveRows * tile.tileN / kWarpgroupThreads;
  return (tile.waves + (tile.overlap ? 2 : 1) + (tile.scaleProducts ? 1 : 0)) *
         fragment;
}

/// The setmaxnreg budget of each of `consumers` FP8 consumer warpgroups:
/// steps of 8 that fill the register file beside the producer's 40.
int64_t getFP8ConsumerRegisters(int64_t consumers) {
  return consumers == 2 ? 232 : 152;
}

/// The consumers' accumulator budget of `tile`.
int64_t getAccumulatorBudget(const FP8Tile &tile) {
  return getFP8ConsumerRegisters(tile.consumers) - kConsumerRegisterReserve;
}

/// Whether the FP8 main loop can run `tile`, or why not.
LogicalResult checkFP8Tile(const GemmPlan &plan, const FP8Tile &tile,
                           std::string &reason) {
  if (tile.consumers != 2 && tile.consumers != 3) {
    reason = "gemm-config: consumers must be 2 or 3";
    return failure();
  }
  if (tile.tileN % 8 != 0 || tile.tileN > 256) {
    reason = "gemm-config: tile_n must be a multiple of 8 up to 256 (wgmma N)";
    return failure();
  }
  if (tile.scaleProducts && tile.overlap) {
    reason = "gemm-config: overlap=on promotes with an FMUL per element; it "
             "takes products=off";
    return failure();
  }
  int64_t tileM = kWaveRows * tile.consumers * tile.waves;
  if (tile.scaleProducts && !fitsScaleProductRows(plan, tileM, tile.tileN)) {
    reason = "gemm-config: products=on needs fewer than 2^31 values of scale "
             "product rows (K-blocks x rows x 4 per operand); use products=off";
    return failure();
  }
  int64_t registers = getAccumulatorRegisters(tile);
  int64_t budget = getAccumulatorBudget(tile);
  if (registers > budget) {
    reason =
        ("a " + Twine(tileM) + "x" + Twine(tile.tileN) + " tile needs " +
         Twine(registers) + " accumulator registers per consumer thread" +
         (tile.overlap ? " with overlap" : "") +
         (tile.scaleProducts ? " with scale products" : "") +
         ", more than the " + Twine(budget) + " that " + Twine(tile.consumers) +
         " consumers leave; use fewer waves or a narrower tile" +
         (tile.scaleProducts ? ", or products=off" : ""))
            .str();
    return failure();
  }
  // B's per-column scales are read as the promotion uses them; with two
  // waves ptxas then spills (measured), so they take one.
  if (plan.b.scales == ScaleStaging::stageRows && tile.waves > 1) {
    reason = "gemm-config: B's 1x128 scales (one per column) take one wave";
    return failure();
  }
  auto coversBlocks = [](int64_t rows) {
    return rows % kFP8ScaleBlock == 0 || kFP8ScaleBlock % rows == 0;
  };
  if ((plan.a.scales == ScaleStaging::tileBlocks && !coversBlocks(tileM)) ||
      (plan.b.scales == ScaleStaging::tileBlocks &&
       !coversBlocks(tile.tileN))) {
    reason = "[128, 128] scale blocks need tiles that are a multiple or a "
             "divisor of 128 rows";
    return failure();
  }
  return success();
}

/// The FP8 recipes' tile: `config`'s choices, else of the tiles the main
/// loop runs, the one with the least estimated time: rounds of the
/// persistent grid times the tile's elements times its relative cost.
LogicalResult chooseFP8Tile(GemmPlan &plan, const GemmConfig &config,
                            std::string &reason) {
  if (config.scaleProducts.value_or(false) && !takesScaleProducts(plan)) {
    reason = "gemm-config: products=on needs 1x128 scales on both operands "
             "(the wgrad form)";
    return failure();
  }
  // The wgrad form takes the products unless the config turns them off (or
  // turns on overlap, which promotes with an FMUL), the problem's product
  // rows pass i32 indexing, or the config chooses a tile whose registers
  // do not hold them without asking for them.
  bool products =
      takesScaleProducts(plan) &&
      config.scaleProducts.value_or(
          !config.overlap.value_or(false) &&
          fitsScaleProductRows(plan, kScaleProductTile.consumers * kWaveRows,
                               kScaleProductTile.tileN));
  std::optional<FP8Tile> chosen;
  double best = 0;
  if (config.consumers || config.waves || config.tileN) {
    chosen = FP8Tile{config.consumers.value_or(2),   config.waves.value_or(1),
                     config.tileN.value_or(128),     1.0,
                     config.overlap.value_or(false), products};
    if (products && !config.scaleProducts &&
        getAccumulatorRegisters(*chosen) > getAccumulatorBudget(*chosen))
      chosen->scaleProducts = false;
    if (failed(checkFP8Tile(plan, *chosen, reason)))
      return failure();
  } else {
    ArrayRef<FP8Tile> tiles = products ? ArrayRef<FP8Tile>(kScaleProductTile)
                              : plan.b.scales == ScaleStaging::stageRows
                                  ? ArrayRef<FP8Tile>(kFP8ColumnScaledTiles)
                                  : ArrayRef<FP8Tile>(kFP8Tiles);
    for (FP8Tile tile : tiles) {
      tile.overlap = config.overlap.value_or(tile.overlap);
      std::string why;
      if (failed(checkFP8Tile(plan, tile, why))) {
        // The reason if no tile is left.
        reason = why;
        continue;
      }
      int64_t tileM = kWaveRows * tile.consumers * tile.waves;
      int64_t count = llvm::divideCeil(plan.m, tileM) *
                      llvm::divideCeil(plan.n, tile.tileN);
      double cost = double(llvm::divideCeil(count, plan.maxCtas)) * tileM *
                    tile.tileN * tile.relativeCost;
      if (!chosen || cost < best) {
        chosen = tile;
        best = cost;
      }
    }
    if (!chosen)
      return failure();
  }
  plan.consumerWarpgroups = chosen->consumers;
  plan.wavesM = chosen->waves;
  plan.tileN = chosen->tileN;
  plan.overlap = chosen->overlap;
  plan.scaleProducts = chosen->scaleProducts;
  plan.tileM = kWaveRows * plan.consumerWarpgroups * plan.wavesM;
  plan.consumerRegisters = getFP8ConsumerRegisters(plan.consumerWarpgroups);
  return success();
}

/// The cluster: `config`'s, else a pair sharing A for the 192x128 FP8 tile
/// where the tile columns pair up. Measured on an H100 with the TMA-store
/// epilogue (bench/RESULTS.md): pairs sharing A gained up to 5% on 192x128
/// tiles (the tile that reads the most operand bytes per FLOP) and lost
/// 1-2% on 256x128 ones.
LogicalResult chooseCluster(GemmPlan &plan, const GemmConfig &config,
                            int64_t multiprocessors, std::string &reason) {
  if (config.clusterM) {
    plan.clusterM = *config.clusterM;
    plan.clusterN = *config.clusterN;
  } else if ((plan.recipe == GemmRecipe::blockwise ||
              plan.recipe == GemmRecipe::perTensor) &&
             plan.consumerWarpgroups == 3 && plan.tilesN() % 2 == 0) {
    plan.clusterN = 2;
  }
  if (plan.clusterSize() == 1)
    return success();
  // Each CTA loads 1/size of the shared tile: whole 8-row swizzle groups.
  int64_t sharedRows = plan.clusterN > 1 ? plan.tileM : plan.tileN;
  if (plan.clusterSize() != 2 || plan.tilesM() % plan.clusterM != 0 ||
      plan.tilesN() % plan.clusterN != 0 || multiprocessors % 2 != 0 ||
      sharedRows % 16 != 0 || plan.usesTensorMemory()) {
    reason = ("gemm-config: a " + Twine(plan.clusterM) + "x" +
              Twine(plan.clusterN) + " cluster does not fit " +
              Twine(plan.tilesM()) + "x" + Twine(plan.tilesN()) +
              " tiles (expected 1x1, 2x1 with an even number of tile rows or "
              "1x2 with an even number of tile columns; SM90 only)")
                 .str();
    return failure();
  }
  return success();
}

/// The epilogue: `config`'s, else TMA stores where the output allows.
LogicalResult chooseEpilogue(GemmPlan &plan, const GemmConfig &config,
                             std::string &reason) {
  int64_t outBytes = plan.storedBytes();
  // The accumulate epilogue adds D to the registers' values before their
  // stores; a bias goes either way (the TMA-store epilogue adds it per
  // column pair before the rounding), and so does a fused cast's codes.
  // MX exact needs its shared memory for the bf16 buffers of B.
  bool fits = !plan.usesTensorMemory() && plan.recipe != GemmRecipe::mxExact &&
              !plan.accumulate && (plan.n * outBytes) % 16 == 0 &&
              (plan.tileN * outBytes) % plan.panelRowBytes() == 0 &&
              (outBytes == 2 || plan.castType);
  if (config.tmaStore && *config.tmaStore && !fits) {
    reason = "gemm-config: the TMA-store epilogue needs a bf16 or f16 output "
             "(or a fused cast's FP8 codes) whose rows are multiples of 16 "
             "bytes, a tile of whole panels (128 bytes; 64 of codes), an FP8 "
             "recipe or staged "
             "MX, and no accumulate operand";
    return failure();
  }
  // Measured on an H100 (bench/RESULTS.md): 5-30% faster than stores from
  // registers, the most where K is short and epilogues many.
  bool tma = config.tmaStore.value_or(true) && fits;
  plan.epilogue = tma ? GemmEpilogue::tmaStore : GemmEpilogue::registers;
  return success();
}

/// Tensor memory of an SM100 tile: the accumulator, then each stage's scale
/// columns.
LogicalResult layOutTensorMemory(GemmPlan &plan,
                                 const GemmKernelResources &limits,
                                 std::string &reason) {
  constexpr int64_t kColumnsPerChunk = 4; // 16 bytes of one tcgen05.cp row
  TensorMemoryPlan &tmem = plan.tensorMemory;
  int64_t column = plan.tileN; // f32 accumulator: one column per tile column
  for (int64_t s = 0; s < plan.stages; ++s) {
    tmem.aScales.push_back(column);
    column += kColumnsPerChunk * plan.scaleChunks(plan.tileM);
    tmem.bScales.push_back(column);
    column += kColumnsPerChunk * plan.scaleChunks(plan.tileN);
  }
  tmem.columns = std::max<int64_t>(32, llvm::PowerOf2Ceil(column));
  if (tmem.columns > limits.tensorMemoryColumns) {
    reason = "the accumulator and scales need more tensor memory than the "
             "chip has";
    return failure();
  }
  return success();
}

/// f32 scales a tile of `tileRows` rows keeps for the whole tile.
int64_t getTileScaleBytes(const GemmPlan &plan, const OperandPlan &operand,
                          int64_t tileRows) {
  if (operand.scales != ScaleStaging::tileBlocks)
    return 0;
  int64_t blocks = std::max<int64_t>(1, tileRows / kFP8ScaleBlock);
  return llvm::alignTo(4 * blocks * plan.kBlocks(), 16);
}

/// Lays out stages, scales, bf16 buffers, the output tile and barriers in
/// `limits`.
LogicalResult layOutSharedMemory(GemmPlan &plan, const GemmConfig &config,
                                 const GemmKernelResources &limits,
                                 std::string &reason) {
  bool mx = plan.recipe == GemmRecipe::mxExact;
  int64_t aTile = plan.tileM * plan.a.rowBytes;
  int64_t bTile = plan.tileN * plan.b.rowBytes;
  int64_t aScaleBytes = plan.stageScaleBytes(plan.a, plan.tileM);
  int64_t bScaleBytes = plan.stageScaleBytes(plan.b, plan.tileN);
  // TMA writes the stage's scale rows at 128-byte aligned addresses.
  int64_t scaleBytes = llvm::alignTo(aScaleBytes, 128) + bScaleBytes;
  int64_t scaleStride = llvm::alignTo(scaleBytes, 128);
  if (mx) {
    plan.dequantK = 64; // bf16 elements in one 128-byte swizzled row
    plan.dequantBuffers = 2;
  }
  // MX exact converts B into bf16 buffers (A goes to registers).
  int64_t dequantBytes = plan.dequantBuffers * 2 * plan.dequantK * plan.tileN;
  int64_t outputBytes = plan.epilogue == GemmEpilogue::tmaStore
                            ? plan.tileM * plan.tileN *
                                  plan.storedType().getIntOrFloatBitWidth() / 8
                            : 0;
  int64_t tileScaleA = getTileScaleBytes(plan, plan.a, plan.tileM);
  int64_t tileScaleB = getTileScaleBytes(plan, plan.b, plan.tileN);
  // Slack for aligning the dynamic base, and on SM100 the accumulator's two
  // barriers and the tensor-memory address.
  int64_t accumulatorBytes = plan.usesTensorMemory() ? 24 : 0;
  int64_t fixed = kBaseAlignment + dequantBytes + outputBytes + tileScaleA +
                  tileScaleB + accumulatorBytes;
  // Scale products: the tf32 operands' second K chunk, zeros for all
  // stages.
  int64_t zeroBytes = plan.scaleProducts ? std::max(plan.tileM, plan.tileN) *
                                               kInterleavedRowBytes
                                         : 0;
  fixed += zeroBytes;
  int64_t perStage = aTile + bTile + scaleStride + 16;
  int64_t fitting = (limits.sharedBytesPerBlock - fixed) / perStage;
  plan.stages = config.stages.value_or(std::min(kMaxStages, fitting));
  if (plan.stages < 2 || plan.stages > fitting) {
    reason = ("the tile needs " + Twine(perStage) + " bytes of shared memory "
              "per stage and " + Twine(fixed) + " more; " +
              Twine(plan.stages) + " stages do not fit in " +
              Twine(limits.sharedBytesPerBlock) + " (at least 2 must)")
                 .str();
    return failure();
  }
  int64_t offset = 0;
  plan.stageLayout.resize(plan.stages);
  for (StageLayout &stage : plan.stageLayout) {
    stage.a = offset;
    stage.b = offset + aTile;
    offset += aTile + bTile;
  }
  for (int64_t i = 0; i < plan.dequantBuffers; ++i) {
    plan.dequantB.push_back(offset);
    offset += 2 * plan.dequantK * plan.tileN;
  }
  plan.outputTile = offset; // 1024-aligned: tiles are whole swizzle repeats
  offset += outputBytes;
  if (scaleBytes) {
    for (StageLayout &stage : plan.stageLayout) {
      stage.aScales = offset;
      stage.bScales = offset + llvm::alignTo(aScaleBytes, 128);
      offset += scaleStride;
    }
  }
  if (plan.scaleProducts) {
    // Above every stage's scale rows: a descriptor's LBO (unsigned) reaches
    // the zeros from each of them.
    plan.productZeros = offset;
    offset += zeroBytes;
  }
  plan.tileScalesA = offset;
  plan.tileScalesB = offset + tileScaleA;
  offset += tileScaleA + tileScaleB;
  plan.fullBarriers = offset;
  plan.emptyBarriers = offset + 8 * plan.stages;
  offset = plan.emptyBarriers + 8 * plan.stages;
  if (plan.usesTensorMemory()) {
    plan.accumulatorFull = offset;
    plan.accumulatorEmpty = offset + 8;
    plan.tensorMemorySlot = offset + 16;
    offset += accumulatorBytes;
  }
  plan.sharedBytes = offset + kBaseAlignment;
  return success();
}

/// The M, N, K and operand types of `op`, if the kernels take them.
LogicalResult readShape(ScaledMatmulOp op, GemmPlan &plan,
                        std::string &reason) {
  RankedTensorType lhs = op.getLhs().getType(), rhs = op.getRhs().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2) {
    reason = "the generated kernels take 2-D operands";
    return failure();
  }
  if (op.getLhsLayout() != OperandLayout::k_contiguous ||
      op.getRhsLayout() != OperandLayout::k_contiguous) {
    reason = "the generated kernels take K-contiguous operands ([M, K] and "
             "[N, K]); K-outer operands are not supported yet";
    return failure();
  }
  plan.m = lhs.getDimSize(0);
  plan.n = rhs.getDimSize(0);
  plan.k = lhs.getDimSize(1);
  plan.a.elementType = lhs.getElementType();
  plan.b.elementType = rhs.getElementType();
  plan.a.rows = plan.m;
  plan.b.rows = plan.n;
  plan.outputType = op.getResult().getType().getElementType();
  if (Value bias = op.getBias())
    plan.biasType = getElementTypeOrSelf(bias.getType());
  plan.accumulate = bool(op.getAccumulator());
  // Tile and scale indices are i32 in the kernel; a TMA box needs a row.
  for (int64_t extent : {plan.m, plan.n, plan.k}) {
    if (extent < 1 || extent >= (int64_t(1) << 31)) {
      reason = "M, N and K must be in [1, 2^31)";
      return failure();
    }
  }
  for (OperandPlan *operand : {&plan.a, &plan.b}) {
    ElementFormat format = getVerifiedElementFormat(operand->elementType);
    if (plan.k % format.packedElements != 0 ||
        format.getStoredBytes(plan.k) % 16 != 0) {
      reason = ("K = " + Twine(plan.k) + " of " +
                Twine(format.bitWidth) +
                "-bit elements is not a multiple of 16 bytes (TMA row "
                "strides are 16-byte multiples)")
                   .str();
      return failure();
    }
  }
  return success();
}

/// SM100's block-scaled kind of the operands: kind::mxf4nvf4 for NVFP4
/// (E4M3 scales per 16), kind::mxf4 reads two E2M1 operands packed,
/// kind::mxf8f6f4 any mix of FP8, FP6 and FP4 unpacked.
Tcgen05BlockScaledKind getBlockScaledKind(const GemmPlan &plan) {
  if (plan.hasTensorScales())
    return Tcgen05BlockScaledKind::mxf4nvf4;
  bool fp4 = llvm::all_of(std::array{plan.a.elementType, plan.b.elementType},
                          [](Type type) {
                            return getVerifiedElementFormat(type)
                                .takesNVFP4Scales();
                          });
  return fp4 ? Tcgen05BlockScaledKind::mxf4
             : Tcgen05BlockScaledKind::mxf8f6f4;
}

/// Checks the operand types of `plan.recipe` and sizes each operand's stage
/// rows. The FP8 recipes read FP8 with FP8 tensor cores; SM90's MX exact
/// main loop converts any MX element type to bf16; SM100's kind::mxf8f6f4
/// takes FP8, FP6 and FP4 (not INT8), packed ones spread by TMA, and its
/// kind::mxf4 two packed E2M1 operands, which TMA copies as bytes (a map of
/// bytes writes what 16U4_ALIGN8B writes: 16 elements in 8 bytes, no gaps).
LogicalResult planOperands(GemmPlan &plan, std::string &reason) {
  if (plan.recipe == GemmRecipe::mxBlockScaled)
    plan.mmaKind = getBlockScaledKind(plan);
  bool packedKind = plan.mmaKind != Tcgen05BlockScaledKind::mxf8f6f4;
  // NVFP4: a stage takes two whole scale chunks along K; a partial last
  // stage would read the next row tile's first chunk.
  if (plan.hasTensorScales() && plan.k % plan.tileK != 0) {
    reason = ("K = " + Twine(plan.k) + " of NVFP4 is not a multiple of " +
              Twine(plan.tileK) + " (the " + getChipName(plan.chip) +
              " kernel reads two 128x4 scale chunks of 64 K per stage)")
                 .str();
    return failure();
  }
  for (OperandPlan *operand : {&plan.a, &plan.b}) {
    ElementFormat format = getVerifiedElementFormat(operand->elementType);
    switch (plan.recipe) {
    case GemmRecipe::blockwise:
    case GemmRecipe::perTensor:
      if (!format.takesFP8Recipes()) {
        reason = ("the " + stringifyGemmRecipe(plan.recipe) +
                  " kernel takes f8E4M3FN or f8E5M2 operands")
                     .str();
        return failure();
      }
      break;
    case GemmRecipe::mxBlockScaled:
      if (format.isInteger) {
        reason = ("the " + getChipName(plan.chip) +
                  " kernel (tcgen05 kind::mxf8f6f4) takes FP8, FP6 and FP4 "
                  "operands, not MXINT8")
                     .str();
        return failure();
      }
      if (packedKind)
        break; // Packed rows, mapped and swizzled as on SM90 (below).
      // The unpacking tensor maps take rows of whole 128-element boxes.
      if (format.isPacked() && plan.k % plan.tileK != 0) {
        reason = ("K = " + Twine(plan.k) + " of " + Twine(format.bitWidth) +
                  "-bit elements is not a multiple of " + Twine(plan.tileK) +
                  " (the " + getChipName(plan.chip) +
                  " kernel's tensor maps spread packed rows in boxes of " +
                  Twine(plan.tileK) + ")")
                     .str();
        return failure();
      }
      operand->rowBytes = plan.tileK;
      operand->swizzleBytes = plan.tileK;
      operand->mapBoxK = plan.tileK;
      continue;
    case GemmRecipe::mxExact:
      break;
    case GemmRecipe::mxStaged:
      // The staging kernel's bf16 copy: 64 K per 128-byte swizzled row.
      operand->stagedType = operand->elementType;
      operand->elementType = BFloat16Type::get(operand->elementType.getContext());
      operand->rowBytes = operand->swizzleBytes = kBf16RowBytes;
      operand->mapBoxK = plan.tileK;
      continue;
    }
    operand->rowBytes = format.getStoredBytes(plan.tileK);
    // TMA swizzles rows as wide as its span; FP6's rows are not.
    operand->swizzleBytes =
        llvm::is_contained({128, 64}, operand->rowBytes) ? operand->rowBytes
                                                         : 0;
    operand->mapsBytes = format.isPacked();
    operand->mapBoxK = operand->mapsBytes ? operand->rowBytes : plan.tileK;
  }
  return success();
}

} // namespace

StringRef gemm::stringifyGemmRecipe(GemmRecipe recipe) {
  switch (recipe) {
  case GemmRecipe::mxExact:
    return "mx_exact";
  case GemmRecipe::mxStaged:
    return "mx_staged";
  case GemmRecipe::blockwise:
    return "blockwise";
  case GemmRecipe::perTensor:
    return "per_tensor";
  case GemmRecipe::mxBlockScaled:
    return "mx_block_scaled";
  }
  return "";
}

int64_t GemmPlan::stageScaleBytes(const OperandPlan &operand,
                                  int64_t tileRows) const {
  switch (operand.scales) {
  case ScaleStaging::chunks:
    return kScaleChunkBytes * scaleChunks(tileRows);
  case ScaleStaging::stageRows:
    return (scaleProducts ? kInterleavedRowBytes : 4) * tileRows;
  case ScaleStaging::scalar:
  case ScaleStaging::tileBlocks:
  case ScaleStaging::staged:
    return 0;
  }
  return 0;
}

int64_t GemmPlan::stageTransactionBytes() const {
  return tileM * a.rowBytes + tileN * b.rowBytes + stageScaleBytes(a, tileM) +
         stageScaleBytes(b, tileN);
}

void GemmPlan::print(raw_ostream &os) const {
  os << "recipe=" << stringifyGemmRecipe(recipe)
     << " chip=" << getChipName(chip) << " mnk=" << m << "x" << n << "x" << k
     << " tile=" << tileM << "x" << tileN << "x" << tileK
     << " stages=" << stages;
  if (usesTensorMemory())
    os << " roles=tma:w0,mma:w1,epilogue:wg1 tcgen05="
       << stringifyTcgen05BlockScaledKind(mmaKind) << ".m" << tileM << "n"
       << tileN << "k" << mmaK << ".block" << scaleBlockK;
  else
    os << " roles=tma:1,mma:" << consumerWarpgroups << "x" << wavesM
       << " regs=" << producerRegisters << "/" << consumerRegisters
       << " wgmma=m64n" << tileN << "k" << mmaK;
  if (overlap)
    os << " overlap";
  if (scaleProducts)
    os << " products=tf32";
  os << " ctas=" << ctas() << " cluster=" << clusterM << "x" << clusterN
     << " group=" << groupRows << " epilogue="
     << (epilogue == GemmEpilogue::tmaStore ? "tma" : "registers");
  if (biasType)
    os << " bias=" << biasType;
  if (accumulate)
    os << " accumulate";
  if (castType)
    os << " cast=" << castType << ":" << castIndex
       << " amax_slots=" << castSlots();
  if (recipe == GemmRecipe::mxExact)
    os << " dequant=" << dequantBuffers << "x" << dequantK;
  if (recipe == GemmRecipe::mxStaged)
    os << " staged=" << a.stagedType << "," << b.stagedType;
  auto staging = [](ScaleStaging s) {
    switch (s) {
    case ScaleStaging::scalar:
      return "scalar";
    case ScaleStaging::chunks:
      return "128x4";
    case ScaleStaging::stageRows:
      return "rows";
    case ScaleStaging::tileBlocks:
      return "blocks";
    case ScaleStaging::staged:
      return "staged";
    }
    return "";
  };
  os << " scales=" << staging(a.scales) << "," << staging(b.scales);
  // Stage row bytes and their swizzle, where an operand is not FP8 or INT8.
  if (a.rowBytes != 128 || b.rowBytes != 128)
    os << " rows=" << a.rowBytes << "B/sw" << a.swizzleBytes << ","
       << b.rowBytes << "B/sw" << b.swizzleBytes;
  os << " smem=" << sharedBytes << " stage0=a:" << stageLayout[0].a
     << ",b:" << stageLayout[0].b;
  if (stageScaleBytes(a, tileM) || stageScaleBytes(b, tileN))
    os << ",sa:" << stageLayout[0].aScales << ",sb:" << stageLayout[0].bScales;
  if (recipe == GemmRecipe::mxExact)
    os << " bf16_b=" << dequantB[0];
  if (a.scales == ScaleStaging::tileBlocks ||
      b.scales == ScaleStaging::tileBlocks)
    os << " tile_scales=" << tileScalesA << "," << tileScalesB;
  if (scaleProducts)
    os << " zeros=" << productZeros;
  if (epilogue == GemmEpilogue::tmaStore)
    os << " out=" << outputTile;
  os << " barriers=" << fullBarriers << "," << emptyBarriers;
  if (!usesTensorMemory())
    return;
  os << " acc_barriers=" << accumulatorFull << "," << accumulatorEmpty
     << " tmem_slot=" << tensorMemorySlot << " tmem=" << tensorMemory.columns
     << " acc=" << tensorMemory.accumulator << ":" << tileN << " sfa=";
  llvm::interleave(tensorMemory.aScales, os, ",");
  os << " sfb=";
  llvm::interleave(tensorMemory.bScales, os, ",");
}

QuantizeDelayedOp gemm::getFusedOutputCast(ScaledMatmulOp op) {
  Value product = op.getResult();
  auto type = cast<RankedTensorType>(product.getType());
  if (!product.hasOneUse() || type.getRank() != 2 || type.getDimSize(1) % 2)
    return nullptr;
  // In the product's block: the fused kernel runs where the cast is, and
  // in a region (a loop's body) it would run as often as the cast does.
  auto cast = dyn_cast<QuantizeDelayedOp>(*product.user_begin());
  if (!cast || cast.getTransposed() || cast.getInput() != product ||
      cast->getBlock() != op->getBlock())
    return nullptr;
  return cast;
}

FailureOr<GemmPlan> gemm::planGemm(ScaledMatmulOp op, Chip chip,
                                   const GemmConfig &config,
                                   std::string &reason) {
  GemmKernelResources limits = getGemmKernelResources(chip);
  GemmPlan plan;
  plan.chip = chip;
  plan.maxCtas = limits.multiprocessors;
  if (failed(readShape(op, plan, reason)))
    return failure();
  if (QuantizeDelayedOp cast = getFusedOutputCast(op)) {
    plan.castType = cast.getData().getType().getElementType();
    plan.castIndex = cast.getIndex();
  }
  FailureOr<GemmRecipe> recipe = classify(op, plan, config, reason);
  if (failed(recipe))
    return failure();
  plan.recipe = *recipe;
  if (plan.recipe == GemmRecipe::mxStaged)
    plan.tileK = kBf16RowBytes / 2;
  if (failed(planOperands(plan, reason)))
    return failure();
  switch (plan.recipe) {
  case GemmRecipe::blockwise:
  case GemmRecipe::perTensor:
    if (failed(chooseFP8Tile(plan, config, reason)))
      return failure();
    break;
  case GemmRecipe::mxExact:
  case GemmRecipe::mxStaged:
  case GemmRecipe::mxBlockScaled:
    if (config.consumers || config.waves || config.tileN || config.overlap) {
      reason = "gemm-config: the MX kernels have a fixed 128x256 tile and one "
               "wgmma chain per stage";
      return failure();
    }
    // No second accumulator: the tile is as wide as the MMA goes, which
    // halves the dequantization (and its shared-memory traffic) per FLOP of
    // B on SM90.
    plan.tileN = kMXTileN;
    // bf16 wgmma k16; tcgen05 k32, or k64 on packed E2M1 (32 bytes either).
    plan.mmaK = plan.recipe != GemmRecipe::mxBlockScaled ? 16
                : plan.mmaKind == Tcgen05BlockScaledKind::mxf8f6f4 ? 32
                                                                    : 64;
    break;
  }
  if (plan.usesTensorMemory()) {
    plan.consumerWarpgroups = 1;
    plan.producerRegisters = plan.consumerRegisters = 0;
  }
  if (failed(chooseCluster(plan, config, limits.multiprocessors, reason)) ||
      failed(chooseEpilogue(plan, config, reason)))
    return failure();
  plan.emptyArrivals = plan.usesTensorMemory()
                           ? 1
                           : 4 * plan.consumerWarpgroups * plan.clusterSize();
  if (failed(layOutSharedMemory(plan, config, limits, reason)))
    return failure();
  if (plan.usesTensorMemory() &&
      failed(layOutTensorMemory(plan, limits, reason)))
    return failure();
  assert(kWarpgroupThreads *
                 (plan.producerRegisters +
                  plan.consumerRegisters * plan.consumerWarpgroups) <=
             65536 &&
         "setmaxnreg budgets exceed the register file");
  return plan;
}

LogicalResult gemm::checkKernelSupport(ScaledMatmulOp op, Chip chip,
                                       const GemmConfig &config,
                                       std::string &reason) {
  if (failed(planGemm(op, chip, config, reason)))
    return failure();
  // The host code calls mxrtEncodeTensorMap for the kernel's tensor maps.
  return checkRuntimeFunction(op->getParentOfType<ModuleOp>(),
                              kEncodeTensorMapFn,
                              getTensorMapFnType(op.getContext()), reason);
}
