//===- GemmPlan.cpp - Per-chip plan of a generated GEMM kernel ------------===//
//
// Classifies an `mx.scaled_matmul` into a recipe and sizes its kernel for the
// chip. On SM90 every recipe reads 128 FP8 bytes of K per stage (one
// 128B-swizzled TMA box row, so one E8M0 scale chunk of the 128x4 layout or
// one f32 scale of a 128-K block per row), with one TMA producer warpgroup
// and consumer warpgroups of 64 rows each. The FP8 recipes keep a fresh
// wgmma accumulator beside the promoted one, which keeps their tile 128
// wide; they take three consumers (192x128) where the registers allow.
// MX exact, bounded by its dequantization, takes two consumers and the
// widest wgmma (128x256). Stages are as many as fit in the chip's shared
// memory after the MX recipe's two dequantized bf16 buffers.
//
// On SM100 the generator covers MX, scaled by the tensor core: a 128x256
// tile (the widest one-CTA tcgen05.mma), its f32 accumulator in 256 columns
// of tensor memory and each stage's scales in 12 more, which leaves no room
// for a second accumulator; the same 128-byte K stages as on SM90.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr int64_t kBaseAlignment = 1024; // 128B swizzle repeats every 1 KiB
constexpr int64_t kMaxStages = 8;
constexpr int64_t kFP8Block = 128;

bool isFP8(Type type) { return isa<Float8E4M3FNType, Float8E5M2Type>(type); }

/// The recipe of `op`, with each operand's f32 scale block rows.
FailureOr<GemmRecipe> classify(ScaledMatmulOp op, GemmPlan &plan,
                               std::string &reason) {
  Type aScale = getElementTypeOrSelf(op.getLhsScales().getType());
  Type bScale = getElementTypeOrSelf(op.getRhsScales().getType());
  ArrayRef<int64_t> aBlock = op.getLhsBlock(), bBlock = op.getRhsBlock();
  auto isRowBlock = [](ArrayRef<int64_t> block, int64_t k) {
    return block == ArrayRef<int64_t>{1, k};
  };
  if (isa<Float8E8M0FNUType>(aScale) && isa<Float8E8M0FNUType>(bScale)) {
    if (isRowBlock(aBlock, kMXBlock) && isRowBlock(bBlock, kMXBlock))
      return hasBlockScaledTensorCores(plan.chip) ? GemmRecipe::mxBlockScaled
                                                  : GemmRecipe::mxExact;
    reason = "E8M0 scales need [1, 32] blocks on both operands";
    return failure();
  }
  if (!aScale.isF32() || !bScale.isF32()) {
    reason = "scales must be E8M0 on both operands or f32 on both";
    return failure();
  }
  // The block-scaled kernel has no FP8 main loop with f32 scales yet.
  if (hasBlockScaledTensorCores(plan.chip)) {
    reason = ("the " + getChipName(plan.chip) +
              " kernel takes MX operands only (E8M0 scales of [1, 32] blocks)")
                 .str();
    return failure();
  }
  if (aBlock == op.getLhs().getType().getShape() &&
      bBlock == op.getRhs().getType().getShape())
    return GemmRecipe::perTensor;
  auto blockRows = [&](ArrayRef<int64_t> block) -> int64_t {
    if (isRowBlock(block, kFP8Block))
      return 1;
    if (block == ArrayRef<int64_t>{kFP8Block, kFP8Block})
      return kFP8Block;
    return 0;
  };
  plan.a.scaleBlockRows = blockRows(aBlock);
  plan.b.scaleBlockRows = blockRows(bBlock);
  // GEMM-ready scales [KB, R'/4, 4] (only 1x128 blocks have them).
  auto rowPitch = [](Value scales) -> int64_t {
    auto type = cast<RankedTensorType>(scales.getType());
    return type.getRank() == 3 ? type.getDimSize(1) * type.getDimSize(2) : 0;
  };
  plan.a.scaleRowPitch = rowPitch(op.getLhsScales());
  plan.b.scaleRowPitch = rowPitch(op.getRhsScales());
  if (plan.a.scaleBlockRows && plan.b.scaleBlockRows)
    return GemmRecipe::blockwise;
  reason = "f32 scales need [1, 128] or [128, 128] blocks on both operands, "
           "or one scale per operand";
  return failure();
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

/// Lays out stages, scale chunks, bf16 buffers and barriers in `limits`.
LogicalResult layOutSharedMemory(GemmPlan &plan,
                                 const GemmKernelResources &limits,
                                 std::string &reason) {
  bool mx = plan.recipe == GemmRecipe::mxExact;
  int64_t aTile = plan.tileM * plan.tileK, bTile = plan.tileN * plan.tileK;
  int64_t scaleBytes = kScaleChunkBytes * (plan.scaleChunks(plan.tileM) +
                                           plan.scaleChunks(plan.tileN));
  int64_t dequantBytes = 0;
  if (mx) {
    plan.dequantK = 64; // bf16 elements in one 128-byte swizzled row
    plan.dequantBuffers = 2;
    dequantBytes =
        plan.dequantBuffers * 2 * plan.dequantK * (plan.tileM + plan.tileN);
  }
  // Slack for aligning the dynamic base, 2 barriers per stage, and on SM100
  // the accumulator's two barriers and the tensor-memory address.
  int64_t accumulatorBytes = plan.usesTensorMemory() ? 24 : 0;
  int64_t fixed = kBaseAlignment + dequantBytes + accumulatorBytes;
  int64_t perStage = aTile + bTile + scaleBytes + 16;
  plan.stages =
      std::min(kMaxStages, (limits.sharedBytesPerBlock - fixed) / perStage);
  if (plan.stages < 2) {
    reason = "the tile does not fit twice in shared memory";
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
    plan.dequantA.push_back(offset);
    plan.dequantB.push_back(offset + 2 * plan.dequantK * plan.tileM);
    offset += 2 * plan.dequantK * (plan.tileM + plan.tileN);
  }
  if (plan.scaleChunks(plan.tileM)) {
    for (StageLayout &stage : plan.stageLayout) {
      stage.aScales = offset;
      stage.bScales = offset + kScaleChunkBytes * plan.scaleChunks(plan.tileM);
      offset += scaleBytes;
    }
  }
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

} // namespace

StringRef gemm::stringifyGemmRecipe(GemmRecipe recipe) {
  switch (recipe) {
  case GemmRecipe::mxExact:
    return "mx_exact";
  case GemmRecipe::blockwise:
    return "blockwise";
  case GemmRecipe::perTensor:
    return "per_tensor";
  case GemmRecipe::mxBlockScaled:
    return "mx_block_scaled";
  }
  return "";
}

int64_t GemmPlan::stageTransactionBytes() const {
  return (tileM + tileN) * tileK +
         kScaleChunkBytes * (scaleChunks(tileM) + scaleChunks(tileN));
}

void GemmPlan::print(raw_ostream &os) const {
  os << "recipe=" << stringifyGemmRecipe(recipe)
     << " chip=" << getChipName(chip) << " mnk=" << m << "x" << n << "x" << k
     << " tile=" << tileM << "x" << tileN << "x" << tileK
     << " stages=" << stages;
  if (usesTensorMemory())
    os << " roles=tma:w0,mma:w1,epilogue:wg1 tcgen05=m" << tileM << "n" << tileN
       << "k" << mmaK << ".block32";
  else
    os << " roles=tma:1,mma:" << consumerWarpgroups
       << " regs=" << producerRegisters << "/" << consumerRegisters
       << " wgmma=m64n" << tileN << "k" << mmaK;
  os << " ctas=" << ctas() << " group=" << groupRows;
  if (recipe == GemmRecipe::mxExact)
    os << " dequant=" << dequantBuffers << "x" << dequantK;
  if (scaleChunks(tileM))
    os << " scales=128x4";
  if (recipe == GemmRecipe::blockwise) {
    os << " scale_rows=" << a.scaleBlockRows << "," << b.scaleBlockRows;
    if (a.scaleRowPitch || b.scaleRowPitch)
      os << " gemm_ready_pitch=" << a.scaleRowPitch << "," << b.scaleRowPitch;
  }
  os << " smem=" << sharedBytes << " stage0=a:" << stageLayout[0].a
     << ",b:" << stageLayout[0].b;
  if (scaleChunks(tileM))
    os << ",sa:" << stageLayout[0].aScales << ",sb:" << stageLayout[0].bScales;
  if (recipe == GemmRecipe::mxExact)
    os << " bf16=a:" << dequantA[0] << ",b:" << dequantB[0];
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

FailureOr<GemmPlan> gemm::planGemm(ScaledMatmulOp op, Chip chip,
                                   std::string &reason) {
  GemmKernelResources limits = getGemmKernelResources(chip);
  GemmPlan plan;
  plan.chip = chip;
  plan.maxCtas = limits.multiprocessors;
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
  if (!isFP8(plan.a.elementType) || !isFP8(plan.b.elementType)) {
    reason = "the generated kernels take f8E4M3FN or f8E5M2 operands";
    return failure();
  }
  // Tile and scale indices are i32 in the kernel; a TMA box needs a row.
  for (int64_t extent : {plan.m, plan.n, plan.k}) {
    if (extent < 1 || extent >= (int64_t(1) << 31)) {
      reason = "M, N and K must be in [1, 2^31)";
      return failure();
    }
  }
  if (plan.k % 16 != 0) {
    reason = "K must be a multiple of 16 (TMA row strides are 16-byte "
             "multiples)";
    return failure();
  }
  FailureOr<GemmRecipe> recipe = classify(op, plan, reason);
  if (failed(recipe))
    return failure();
  plan.recipe = *recipe;
  // FP8: three consumers share each B tile (a third less L2 and shared
  // memory traffic per FLOP than two, measured +10% on H200) when the
  // promotion fits in their 152 registers, i.e. unless each thread holds
  // one B scale per column.
  bool fp8Recipe = plan.recipe == GemmRecipe::blockwise ||
                   plan.recipe == GemmRecipe::perTensor;
  if (fp8Recipe && plan.b.scaleBlockRows != 1) {
    plan.tileM = 192;
    plan.consumerWarpgroups = 3;
    plan.consumerRegisters = 152;
  }
  if (plan.recipe == GemmRecipe::mxExact) {
    // No second accumulator: the tile is as wide as wgmma goes, which halves
    // the dequantization (and its shared-memory traffic) per FLOP of B.
    plan.mmaK = 16;
    plan.tileN = 256;
  }
  plan.emptyArrivals = 4 * plan.consumerWarpgroups;
  if (plan.recipe == GemmRecipe::mxBlockScaled) {
    plan.tileN = 256;
    plan.consumerWarpgroups = 1;
    plan.producerRegisters = plan.consumerRegisters = 0;
    plan.emptyArrivals = 1;
  }
  if (failed(layOutSharedMemory(plan, limits, reason)))
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
