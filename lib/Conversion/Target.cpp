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
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mx;
using mlir::TypeID;

namespace {

/// Every fact of one chip, in one row.
struct ChipFacts {
  llvm::StringLiteral name, ptxFeatures;
  bool blockScaledTensorCores;
  GemmKernelResources gemm;
  /// The element types that `cvt` converts from f32 (`.rn.satfinite`, two at
  /// a time) and back.
  llvm::SmallVector<TypeID> convertedElementTypes;
};

const ChipFacts &getChipFacts(Chip chip) {
  // H100 SXM / H200: 132 SMs, 227 KiB of shared memory per block. B200: 148
  // SMs, 227 KiB of shared memory per block, 512 columns of tensor memory per
  // SM. PTX 8.6 is the oldest ISA CUDA 13 takes for sm_90a; 8.8 the first
  // with `tcgen05.mma ... block_scale.block32`. `cvt` takes the FP8 formats
  // from sm_89 on, and FP6 and FP4 on sm_100a only.
  static const ChipFacts sm90a{
      "sm_90a",
      "+ptx86",
      false,
      {132, 232448, 0},
      {TypeID::get<mlir::Float8E4M3FNType>(),
       TypeID::get<mlir::Float8E5M2Type>()}};
  static const ChipFacts sm100a{
      "sm_100a",
      "+ptx88",
      true,
      {148, 232448, 512},
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
