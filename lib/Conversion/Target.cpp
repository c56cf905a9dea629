//===- Target.cpp - The chips the mx GPU lowerings compile for ------------===//
//
// The per-chip decisions declared in Target.h, read from one row of facts
// per chip.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Target.h"
#include "mx/Dialect/MX/IR/ElementFormat.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <array>

using namespace mx;
using mlir::TypeID;

namespace {

/// Which lowering `gemm=auto` takes for each recipe, ScaledMatmulRecipe's
/// order.
using GemmLoweringFacts = std::array<GemmLoweringFact, 5>;

/// Every fact of one chip, in one row.
struct ChipFacts {
  llvm::StringLiteral name, ptxFeatures;
  bool blockScaledTensorCores;
  GemmKernelResources gemm;
  GemmLoweringFacts fasterGemm;
  /// The element types that `cvt` converts from f32 (`.rn.satfinite`, two at
  /// a time) and back.
  llvm::SmallVector<TypeID> convertedElementTypes;
};

const ChipFacts &getChipFacts(Chip chip) {
  // H100 SXM / H200: 132 SMs, 227 KiB of shared memory per block. B200: 148
  // SMs, 227 KiB of shared memory per block, 512 columns of tensor memory per
  // SM. PTX 8.6 is the oldest ISA CUDA 13 takes for sm_90a; 8.8 the first
  // with `tcgen05.mma ... block_scale.block32`. `cvt` takes the FP8 formats
  // from sm_89 on, and FP6 and FP4 on sm_100a only. The GEMM figures are
  // bench/gemm.py's (bench/RESULTS.md), generated kernel against cuBLASLt
  // in the same run, over its six shapes.
  static const ChipFacts sm90a{
      "sm_90a",
      "+ptx86",
      false,
      {132, 232448, 0},
      {{{GemmLowering::kernel, "the generated kernel ran at 1.01-1.03x "
                               "cuBLASLt at 5 of 6 shapes, 0.98x at 4096^3, "
                               "on an H100 (2026-11-26)"},
        {GemmLowering::kernel, "the generated kernel ran at 1.04-1.08x "
                               "cuBLASLt on an H100 (2026-11-26)"},
        {GemmLowering::kernel, "the generated kernel (its scale products "
                               "from a tf32 wgmma) ran at 1.10-1.17x "
                               "cuBLASLt at all 6 shapes on an H100 "
                               "(2026-11-27)"},
        {GemmLowering::kernel, "cuBLASLt has no MX GEMM before SM100"},
        {GemmLowering::cublas, "the generator has no NVFP4 kernel"}}},
      {TypeID::get<mlir::Float8E4M3FNType>(),
       TypeID::get<mlir::Float8E5M2Type>()}};
  static const ChipFacts sm100a{
      "sm_100a",
      "+ptx88",
      true,
      {148, 232448, 512},
      {{{GemmLowering::cublas,
         "the generator's sm_100a kernel takes MX and NVFP4 only"},
        {GemmLowering::cublas,
         "the generator's sm_100a kernel takes MX and NVFP4 only"},
        {GemmLowering::cublas,
         "the generator's sm_100a kernel takes MX and NVFP4 only"},
        {GemmLowering::kernel, "not measured (no SM100 GPU has run it): the "
                               "generated tcgen05 kernel is the project's "
                               "MX path"},
        {GemmLowering::kernel, "not measured (no SM100 GPU has run it): the "
                               "generated tcgen05 kernel (kind::mxf4nvf4) is "
                               "the project's NVFP4 path"}}},
      {TypeID::get<mlir::Float8E4M3FNType>(),
       TypeID::get<mlir::Float8E5M2Type>(),
       TypeID::get<mlir::Float6E3M2FNType>(),
       TypeID::get<mlir::Float6E2M3FNType>(),
       TypeID::get<mlir::Float4E2M1FNType>()}};
  switch (chip) {
  case Chip::sm_90a:
    return sm90a;
  case Chip::sm_100a:
    return sm100a;
  }
  llvm_unreachable("unknown chip");
}

} // namespace

llvm::StringRef mx::getChipName(Chip chip) { return getChipFacts(chip).name; }

llvm::cl::ValuesClass mx::getChipOptionValues() {
  return llvm::cl::values(clEnumValN(Chip::sm_90a, getChipName(Chip::sm_90a),
                                     "Hopper (H100, H200)"),
                          clEnumValN(Chip::sm_100a, getChipName(Chip::sm_100a),
                                     "Blackwell (B200, GB200)"));
}

llvm::StringRef mx::getPtxFeatures(Chip chip) {
  return getChipFacts(chip).ptxFeatures;
}

bool mx::hasBlockScaledTensorCores(Chip chip) {
  return getChipFacts(chip).blockScaledTensorCores;
}

bool mx::hasHardwareConversion(Chip chip, mlir::Type elementType) {
  return llvm::is_contained(getChipFacts(chip).convertedElementTypes,
                            elementType.getTypeID());
}

GemmKernelResources mx::getGemmKernelResources(Chip chip) {
  return getChipFacts(chip).gemm;
}

llvm::cl::ValuesClass mx::getGemmLoweringOptionValues() {
  return llvm::cl::values(
      clEnumValN(GemmLowering::automatic, "auto",
                 "for each op, the lowering that runs its recipe faster on "
                 "the chip (or the other where that one cannot run it)"),
      clEnumValN(GemmLowering::kernel, "kernel",
                 "generated GEMM kernels (convert-mx-to-gpu)"),
      clEnumValN(GemmLowering::cublas, "cublas",
                 "cuBLASLt calls through mx_runtime (convert-mx-to-cublas)"));
}

GemmLoweringFact mx::getFasterGemmLowering(Chip chip,
                                           ScaledMatmulRecipe recipe) {
  return getChipFacts(chip).fasterGemm[size_t(recipe)];
}

llvm::LogicalResult mx::checkCublasScaleMode(Chip chip, mxrtScaleMode mode,
                                             std::string &reason) {
  switch (mode) {
  case MXRT_SCALE_VEC32_UE8M0:
  case MXRT_SCALE_VEC16_UE4M3:
    if (hasBlockScaledTensorCores(chip))
      return llvm::success();
    reason = ("cuBLASLt has no block-scaled MX or NVFP4 GEMM (VEC32_UE8M0, "
              "VEC16_UE4M3) before SM100, so none on " +
              getChipName(chip) +
              "; for MXFP8 use the generated kernel instead (mx-lower-to-nvvm "
              "gemm=kernel)")
                 .str();
    return llvm::failure();
  case MXRT_SCALE_TENSOR_F32:
  case MXRT_SCALE_VEC128_F32:
  case MXRT_SCALE_VEC128_F32_KB_ROWS:
  case MXRT_SCALE_BLK128X128_F32:
    return llvm::success();
  }
  llvm_unreachable("unknown scale mode");
}

llvm::LogicalResult mx::checkCublasElementType(mlir::Type elementType,
                                               std::string &reason) {
  ElementFormat format = getVerifiedElementFormat(elementType);
  if (format.takesFP8Recipes() || format.takesNVFP4Scales())
    return llvm::success();
  llvm::raw_string_ostream(reason)
      << "cuBLASLt takes FP8 (f8E4M3FN, f8E5M2) or FP4 (f4E2M1FN) operands, "
         "got "
      << elementType;
  return llvm::failure();
}

llvm::LogicalResult mx::checkCublasOperandLayout(Chip chip,
                                                 mxrtOperandLayout layout,
                                                 std::string &reason) {
  // Hopper's FP8 tensor cores read K-major operands only, and so does
  // cuBLASLt there; Blackwell's take either majorness.
  if (layout == MXRT_LAYOUT_K_CONTIGUOUS || hasBlockScaledTensorCores(chip))
    return llvm::success();
  reason = ("cuBLASLt's FP8 GEMMs on " + getChipName(chip) +
            " take K-contiguous operands only (the TN form); transpose the "
            "data or quantize it rowwise")
               .str();
  return llvm::failure();
}

namespace {

int64_t getElementBits(mxrtElemType type) {
  switch (type) {
  case MXRT_TYPE_F4E2M1:
    return 4;
  case MXRT_TYPE_F6E3M2:
  case MXRT_TYPE_F6E2M3:
    return 6;
  case MXRT_TYPE_BF16:
  case MXRT_TYPE_F16:
    return 16;
  case MXRT_TYPE_F32:
  case MXRT_TYPE_U32:
    return 32;
  default:
    return 8;
  }
}

bool isVec128(mxrtScaleMode mode) {
  return mode == MXRT_SCALE_VEC128_F32 ||
         mode == MXRT_SCALE_VEC128_F32_KB_ROWS;
}

/// Why one operand (rows = M or N) breaks a cuBLASLt shape rule, or "".
std::string checkCublasOperand(const char *name, int64_t rows, int64_t k,
                               mxrtElemType type, mxrtOperandLayout layout,
                               mxrtScaleMode mode, bool batched) {
  int64_t stored = layout == MXRT_LAYOUT_K_OUTER ? rows : k;
  if (stored * getElementBits(type) % (8 * MXRT_CUBLAS_ROW_BYTES))
    return (llvm::Twine(name) + "'s stored rows of " + llvm::Twine(stored) +
            " elements (" +
            (layout == MXRT_LAYOUT_K_OUTER ? "its rows" : "K") +
            ") are not a multiple of " + llvm::Twine(MXRT_CUBLAS_ROW_BYTES) +
            " bytes")
        .str();
  if (isVec128(mode) && rows % MXRT_CUBLAS_VEC128_ROWS)
    return (llvm::Twine(name) + " has " + llvm::Twine(rows) +
            " rows, not a multiple of " +
            llvm::Twine(MXRT_CUBLAS_VEC128_ROWS) +
            ", which cuBLASLt needs for its 1x128 (VEC128_32F) scales")
        .str();
  int64_t blockRows = (rows + 127) / 128, kBlocks = (k + 127) / 128;
  if (batched && mode == MXRT_SCALE_BLK128X128_F32 &&
      blockRows * kBlocks * 4 % 16)
    return (llvm::Twine(name) + "'s 128x128 scales take " +
            llvm::Twine(blockRows * kBlocks * 4) +
            " bytes a batch slice, so the next slice's are not 16-byte "
            "aligned")
        .str();
  return "";
}

} // namespace

llvm::LogicalResult mx::checkCublasGemm(const CublasGemm &gemm,
                                        std::string &reason) {
  if (gemm.aType == MXRT_TYPE_F8E5M2 && gemm.bType == MXRT_TYPE_F8E5M2) {
    reason = "cuBLASLt has no f8E5M2 x f8E5M2 GEMM; quantize one operand to "
             "f8E4M3FN";
    return llvm::failure();
  }
  if (gemm.aMode == MXRT_SCALE_BLK128X128_F32 &&
      gemm.bMode == MXRT_SCALE_BLK128X128_F32) {
    reason = "cuBLASLt takes 128x128 scales on one operand only; quantize "
             "the other with [1, 128] blocks";
    return llvm::failure();
  }
  for (const std::string &why :
       {checkCublasOperand("lhs", gemm.m, gemm.k, gemm.aType, gemm.aLayout,
                           gemm.aMode, gemm.batched),
        checkCublasOperand("rhs", gemm.n, gemm.k, gemm.bType, gemm.bLayout,
                           gemm.bMode, gemm.batched)})
    if (!why.empty()) {
      reason = why;
      return llvm::failure();
    }
  if (gemm.n * getElementBits(gemm.outType) % (8 * MXRT_CUBLAS_ROW_BYTES)) {
    reason = (llvm::Twine("the result's rows of N = ") + llvm::Twine(gemm.n) +
              " elements are not a multiple of " +
              llvm::Twine(MXRT_CUBLAS_ROW_BYTES) + " bytes")
                 .str();
    return llvm::failure();
  }
  return llvm::success();
}
