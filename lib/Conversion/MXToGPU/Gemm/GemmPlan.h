//===- GemmPlan.h - Per-chip plan of a generated GEMM kernel ----*- C++ -*-===//
//
// Private to the GEMM generator. A `GemmPlan` holds every decision about one
// generated `mx.scaled_matmul` kernel: which recipe its main loop runs, the
// CTA tile (consumer warpgroups x row waves x tile width) and pipeline depth,
// the thread-block cluster and which operand its TMA loads multicast, how
// each operand's scales reach the threads that apply them, the epilogue, the
// warp roles and their register budgets, the shared-memory carve-up and, on
// SM100, the tensor-memory columns. It is computed once from the op, the
// chip and an optional `GemmConfig` override (`planGemm`), printed as the
// kernel's `mx.gemm_plan` attribute for lit tests, and passed to the
// skeleton, the main loops and the epilogue, which take these decisions from
// it rather than making them (they only work out the per-thread indexing
// that follows).
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMPLAN_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMPLAN_H

#include "mx/Conversion/MXToGPU/Gemm/GemmGenerator.h"
#include "mx/Conversion/MXToGPU/Gemm/Tcgen05Descriptors.h"
#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

namespace mx::gemm {

/// Threads of a warpgroup: the unit that issues one wgmma and that each
/// warp role (producer, consumer) is made of.
constexpr int64_t kWarpgroupThreads = 128;
/// Rows of one wgmma (m64) and so of one consumer's row wave.
constexpr int64_t kWaveRows = 64;

/// One chunk of swizzled E8M0 scales: the 128x4 tile of `mx.swizzle`, i.e.
/// 128 rows x 4 blocks (MX: one stage's 128 K; NVFP4: half a stage's),
/// 512 contiguous bytes.
constexpr int64_t kScaleChunkRows = 128;
constexpr int64_t kScaleChunkBytes = 512;
/// The chunks' tensor map reads them as rows of this many bytes.
constexpr int64_t kScaleChunkLine = 128;
/// FP8 blockwise scales cover 128 K (and 128 rows for [128, 128] blocks).
constexpr int64_t kFP8ScaleBlock = 128;
/// The fused output cast's amax partials come in whole chunks of this many
/// slots: the element count the delayed cast's flat kernel takes.
constexpr int64_t kCastSlotChunk = 16;

/// The numerical recipe, which picks the main loop.
enum class GemmRecipe {
  /// E8M0 per 1x32 on both operands: FP8 x 2^(b-127) dequantized to bf16 in
  /// shared memory (exact), bf16 wgmma with f32 accumulation.
  mxExact,
  /// f32 scales per 1x128 or 128x128 block: FP8 wgmma per 128-K block into a
  /// fresh accumulator, promoted into f32 registers times sa x sb.
  blockwise,
  /// One f32 scale per operand: FP8 wgmma promoted every 128 K, the scalar
  /// scales applied in the epilogue.
  perTensor,
  /// E8M0 per 1x32 on both operands on SM90, staged: each operand is
  /// dequantized once (exactly, MXDecode.h) into a bf16 copy in global
  /// memory by a staging kernel, then multiplied by bf16 wgmma from TMA
  /// stages into one f32 accumulator per wave, chained across K.
  mxStaged,
  /// E8M0 per 1x32 on both operands, applied by the tensor core: SM100's
  /// tcgen05.mma.block_scale on FP8 from shared memory, with the scale
  /// chunks copied to tensor memory and the accumulator in tensor memory.
  mxBlockScaled,
};

llvm::StringRef stringifyGemmRecipe(GemmRecipe recipe);

/// How the kernel brings one operand's scales to the threads that apply
/// them.
enum class ScaleStaging {
  /// One f32 for the whole operand, read in the epilogue (per-tensor).
  scalar,
  /// E8M0 per 1x32: the stage's 128x4 chunks of the swizzled layout, one
  /// bulk copy of 512 bytes per 128 rows, with the operand tile.
  chunks,
  /// f32 per 1x128: the stage's K-block of the GEMM-ready `[KB, R']` scales,
  /// one f32 per tile row, loaded by TMA with the operand tile.
  stageRows,
  /// f32 per 128x128: the `[R/128, KB]` scales of the tile's row blocks,
  /// copied into shared memory by the consumers when a tile starts.
  tileBlocks,
  /// E8M0 per 1x32 applied by the staging kernel before the GEMM (mxStaged),
  /// which reads them from global memory as they come, compact or swizzled
  /// (no swizzle kernel is inserted); the GEMM kernel reads no scales.
  staged,
};

/// How the consumers' accumulators reach the output.
enum class GemmEpilogue {
  /// Each thread stores its fragment to global memory, partial tiles masked.
  registers,
  /// The tile is written to shared memory with stmatrix (128-byte swizzled
  /// panels of 64 columns) and stored by TMA, which clips partial tiles;
  /// the store overlaps the next tile's main loop.
  tmaStore,
};

/// One operand (A: [M, K], B: [N, K], K contiguous) as the kernel sees it.
struct OperandPlan {
  /// FP8 for every recipe; MX exact on SM90 also FP6, FP4 and INT8;
  /// mxStaged: bf16, the staging kernel's output.
  mlir::Type elementType;
  /// mxStaged: the MX element type of the operand that the staging kernel
  /// converts to bf16 (null otherwise).
  mlir::Type stagedType;
  int64_t rows = 0; // M or N
  /// Bytes of one tile row in a stage, and the TMA swizzle span of the
  /// stage's rows. SM90: tileK elements as stored (128 for FP8 and INT8, 96
  /// for FP6, 64 for FP4), swizzled where the row is 128 or 64 bytes wide
  /// (FP6's 96-byte rows lie densely). SM100: 128 for kind::mxf8f6f4's
  /// formats, TMA spreading each 16 packed FP6 or FP4 elements to 16 bytes,
  /// as it reads them; 64 (swizzled 64) for kind::mxf4's packed E2M1.
  int64_t rowBytes = 0, swizzleBytes = 0;
  /// How the operand's tensor map counts K: in bytes (a map of bytes, which
  /// SM90 uses for packed operands) or in elements (of a type the runtime
  /// maps, FP4 and FP6 as the unpacking 16U4/16U6_ALIGN16B types).
  bool mapsBytes = false;
  /// K of one stage in the map's units: its box width.
  int64_t mapBoxK = 0;
  ScaleStaging scales = ScaleStaging::scalar;
  /// stageRows: the padded row count R' of the GEMM-ready scales.
  int64_t scaleRowPitch = 0;
};

/// Byte offsets of one pipeline stage's buffers from the aligned base.
struct StageLayout {
  int64_t a = 0, b = 0;             // operand tiles (OperandPlan::rowBytes)
  int64_t aScales = 0, bScales = 0; // chunks or stage rows
};

/// Columns of SM100 tensor memory (128 lanes of 32 bits each): the f32
/// accumulator (lane = tile row, column = tile column), then per stage the
/// E8M0 scales that tcgen05.cp brings from the stage's chunks, 4 columns per
/// 128-row chunk. The MMAs of iteration i read stage i % S's columns, so a
/// copy never overwrites scales that an MMA still reads (tcgen05.cp after
/// tcgen05.mma is not ordered by the hardware).
struct TensorMemoryPlan {
  int64_t columns = 0; // allocated: a power of two in [32, 512]; 0 if none
  int64_t accumulator = 0;
  llvm::SmallVector<int64_t> aScales, bScales; // per stage
};

struct GemmPlan {
  Chip chip;
  GemmRecipe recipe;
  OperandPlan a, b;
  mlir::Type outputType;
  int64_t m = 0, n = 0, k = 0;
  // The epilogue's operands (mx.scaled_matmul `bias` and `accumulate`): the
  // bias element type (null without a bias), and whether an existing output
  // D of the output type is added. Both are added from registers.
  mlir::Type biasType;
  bool accumulate = false;
  // The fused output cast (getFusedOutputCast): the FP8 type the epilogue
  // writes (null: the output is the product, of outputType) and the column
  // of the cast's scales. The product is first rounded to outputType, as the
  // unfused cast reads it; each CTA keeps the amax of what it wrote in its
  // slot of the amax partials (castSlots()).
  mlir::Type castType;
  int64_t castIndex = 0;

  // CTA tile: tileM rows of A, tileN rows of B, tileK elements of K per
  // pipeline stage (one TMA box row of each operand's rowBytes). SM90: each of the
  // consumer warpgroups owns `wavesM` blocks of 64 rows, consumer c's wave w
  // being rows (w * consumers + c) * 64, and runs one m64 x tileN wgmma
  // chain per wave and stage (the FP8 recipes reuse one partial accumulator
  // for the waves, so a second wave costs half the registers of the first).
  int64_t tileM = 128, tileN = 128, tileK = 128;
  int64_t wavesM = 1;
  // SM90 FP8: an iteration of the main loop takes two K-blocks, the first
  // one's promotion overlapping the second one's chain (a second partial
  // accumulator).
  bool overlap = false;
  // SM90 FP8 with 1x128 scales on both operands (the wgrad form): the
  // products sa[row] x sb[column] of a K-block come from one tf32 wgmma
  // m64 x tileN x k8 issued with the block's chain into a fragment of their
  // own, so that the promotion is one FFMA an element. Its operands are the
  // stage's scale rows, written as tf32 rows before the GEMM
  // (ScaleProducts.h): 16 bytes a row instead of one f32.
  bool scaleProducts = false;
  int64_t stages = 0;
  // Thread-block cluster of clusterM x clusterN CTAs on neighbouring tiles
  // (one of them 1). The CTAs of a cluster share A (clusterN > 1: same tile
  // rows) or B (clusterM > 1) and each loads 1/size of the shared tile with
  // a TMA multicast to all of them.
  int64_t clusterM = 1, clusterN = 1;
  GemmEpilogue epilogue = GemmEpilogue::registers;
  // Warp roles: warpgroup 0 is the TMA producer (one elected thread of warp
  // 0 issues), warpgroups 1..consumerWarpgroups the consumers. SM90: the
  // consumers run the main loop and the epilogue, with registers moved to
  // them by setmaxnreg. SM100: one elected thread of warp 1 issues the MMAs,
  // and one consumer warpgroup is the epilogue, thread t reading
  // tensor-memory lane t (no setmaxnreg: registers are 0).
  int64_t consumerWarpgroups = 2;
  int64_t producerRegisters = 40, consumerRegisters = 232;
  // MMA instruction: wgmma m64 x tileN x mmaK (SM90) or tcgen05.mma
  // tileM x tileN x mmaK (SM100), operands from shared memory.
  int64_t mmaK = 32;
  /// SM100: the block-scaled kind. kind::mxf4 where both operands are E2M1,
  /// which it reads packed (K = 64 per MMA, half the shared memory and TMA
  /// bytes of kind::mxf8f6f4's unpacked FP4); kind::mxf8f6f4 otherwise.
  Tcgen05BlockScaledKind mmaKind = Tcgen05BlockScaledKind::mxf8f6f4;
  /// K extent of a scale block: 32 (MX, E8M0) or 16 (NVFP4, E4M3, on SM100
  /// only, with the two f32 tensor scales applied in the epilogue).
  int64_t scaleBlockK = kMXBlock;
  // MX exact only: K elements of one bf16 buffer of B (one 128-byte row)
  // and how many such buffers rotate.
  int64_t dequantK = 0, dequantBuffers = 0;
  // Persistent grid: at most this many CTAs (the chip's SM count); clusters
  // are visited in groups of `groupRows` tile rows for L2 reuse.
  int64_t maxCtas = 0, groupRows = 8;

  // Shared memory, bytes from the 1024-aligned base.
  llvm::SmallVector<StageLayout> stageLayout;
  llvm::SmallVector<int64_t> dequantB; // per bf16 buffer of B
  /// tileBlocks scales of the current tile, [tile rows / 128, KB] f32.
  int64_t tileScalesA = 0, tileScalesB = 0;
  /// tmaStore: the output tile, tileN / 64 panels of [tileM, 128 bytes].
  int64_t outputTile = 0;
  int64_t fullBarriers = 0, emptyBarriers = 0; // 8 bytes per stage each
  /// scaleProducts: the second 16-byte K chunk of the products' tf32
  /// operands, zeros (max(tileM, tileN) rows) above every stage, which
  /// each operand's descriptor reaches by its LBO.
  int64_t productZeros = 0;
  /// Arrivals that release a stage: one per consumer warp of every CTA of
  /// the cluster (SM90), or the one tcgen05.commit of the MMA thread (SM100).
  int64_t emptyArrivals = 0;
  int64_t sharedBytes = 0; // dynamic shared memory asked at launch

  // SM100: the accumulator's barriers (full: the MMA thread's commit after
  // a tile's last MMA; empty: every epilogue thread once it has read the
  // accumulator) and the word tcgen05.alloc writes the tensor-memory
  // address to.
  TensorMemoryPlan tensorMemory;
  int64_t accumulatorFull = 0, accumulatorEmpty = 0, tensorMemorySlot = 0;

  int64_t threads() const {
    return kWarpgroupThreads * (1 + consumerWarpgroups);
  }
  int64_t tilesM() const { return llvm::divideCeil(m, tileM); }
  int64_t tilesN() const { return llvm::divideCeil(n, tileN); }
  int64_t kBlocks() const { return llvm::divideCeil(k, tileK); }
  int64_t clusterSize() const { return clusterM * clusterN; }
  /// Cluster tiles: the clusterM x clusterN blocks of tiles a cluster takes.
  int64_t clusterTiles() const {
    return tilesM() / clusterM * (tilesN() / clusterN);
  }
  int64_t ctas() const {
    return std::min(clusterTiles(), maxCtas / clusterSize()) * clusterSize();
  }
  int64_t rowsPerConsumer() const { return tileM / consumerWarpgroups; }
  /// The type the kernel stores: the cast's codes (bytes), else the product.
  mlir::Type storedType() const {
    return castType ? mlir::IntegerType::get(castType.getContext(), 8)
                    : outputType;
  }
  int64_t storedBytes() const {
    return storedType().getIntOrFloatBitWidth() / 8;
  }
  /// Bytes of a row of one TMA-store panel: 128 (128-byte swizzle) for
  /// 16-bit outputs, whose tiles are whole 64-column panels; 64 (64-byte
  /// swizzle) for a fused cast's codes, so that 192-column tiles are whole
  /// panels too.
  int64_t panelRowBytes() const { return castType ? 64 : 128; }
  /// Slots of the fused cast's amax partials: one per CTA, padded to whole
  /// 16-element chunks, which the delayed cast that records their max reads.
  int64_t castSlots() const { return llvm::alignTo(ctas(), kCastSlotChunk); }
  bool usesTensorMemory() const { return recipe == GemmRecipe::mxBlockScaled; }
  /// Whether the kernel copies its E8M0 scales as 128x4 chunks of the
  /// swizzled layout (MX recipes).
  bool usesScaleChunks() const { return a.scales == ScaleStaging::chunks; }
  /// NVFP4: the kernel multiplies the output by the two f32 tensor scales.
  bool hasTensorScales() const { return scaleBlockK == kNVFP4Block; }
  /// 128x4 scale chunks along K per stage and 128 rows: a chunk holds 4
  /// scale blocks of each row, 128 K of MX, 64 of NVFP4.
  int64_t scaleChunksAlongK() const { return tileK / (4 * scaleBlockK); }
  /// Scale chunks per stage for a tile of `tileRows` rows (MX and NVFP4),
  /// row tile major: (row tile r, K chunk j) is chunk r * alongK + j.
  int64_t scaleChunks(int64_t tileRows) const {
    return usesScaleChunks()
               ? tileRows / kScaleChunkRows * scaleChunksAlongK()
               : 0;
  }
  /// Bytes one stage's copies deliver to each CTA (the expect-tx count).
  int64_t stageTransactionBytes() const;
  /// Bytes of one stage's scales of an operand of `tileRows` rows.
  int64_t stageScaleBytes(const OperandPlan &operand, int64_t tileRows) const;

  void print(llvm::raw_ostream &os) const;
};

/// The `mx.quantize_delayed` of `op`'s product that the kernel of `op`
/// writes in its epilogue, or null: the product's only use, in its block, a
/// plain (not transposed) cast of a 2-D product whose columns are even,
/// Transformer
/// Engine's FP8 output with D_SCALE and AMAX_D.
/// The kernel then stores the cast's codes instead of the product, and a
/// delayed cast of the CTAs' amax partials records the amax and the scale's
/// inverse, so that every result is the unfused pair's bit for bit.
QuantizeDelayedOp getFusedOutputCast(ScaledMatmulOp op);

/// Plans the kernel of `op` for `chip`, with the choices `config` makes and
/// the generator's own for the rest, or explains in `reason` why the
/// generator has none (unsupported recipe, shape, chip or configuration).
mlir::FailureOr<GemmPlan> planGemm(ScaledMatmulOp op, Chip chip,
                                   const GemmConfig &config,
                                   std::string &reason);

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMPLAN_H
