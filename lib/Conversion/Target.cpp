//===- Target.cpp - The chips the mx GPU lowerings compile for ------------===//
//
// The per-chip decisions declared in Target.h.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Target.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mx;

llvm::StringRef mx::getChipName(Chip chip) {
  switch (chip) {
  case Chip::sm_90a:
    return "sm_90a";
  case Chip::sm_100a:
    return "sm_100a";
  }
  llvm_unreachable("unknown chip");
}

llvm::cl::ValuesClass mx::getChipOptionValues() {
  return llvm::cl::values(clEnumValN(Chip::sm_90a, getChipName(Chip::sm_90a),
                                     "Hopper (H100, H200)"),
                          clEnumValN(Chip::sm_100a, getChipName(Chip::sm_100a),
                                     "Blackwell (B200, GB200)"));
}

llvm::StringRef mx::getPtxFeatures(Chip chip) {
  switch (chip) {
  case Chip::sm_90a:
    return "+ptx86";
  case Chip::sm_100a:
    return "+ptx88";
  }
  llvm_unreachable("unknown chip");
}

bool mx::hasBlockScaledTensorCores(Chip chip) { return chip == Chip::sm_100a; }

GemmKernelResources mx::getGemmKernelResources(Chip chip) {
  switch (chip) {
  case Chip::sm_90a:
    // H100 SXM / H200: 132 SMs, 227 KiB of shared memory per block.
    return GemmKernelResources{132, 232448, 0};
  case Chip::sm_100a:
    // B200: 148 SMs, 227 KiB of shared memory per block, 512 columns of
    // tensor memory per SM.
    return GemmKernelResources{148, 232448, 512};
  }
  llvm_unreachable("unknown chip");
}

llvm::LogicalResult mx::checkCublasScaleMode(Chip chip, mxrtScaleMode mode,
                                             std::string &reason) {
  switch (mode) {
  case MXRT_SCALE_VEC32_UE8M0:
    if (hasBlockScaledTensorCores(chip))
      return llvm::success();
    reason = ("cuBLASLt has no MX (VEC32_UE8M0) block-scaled GEMM before "
              "SM100, so none on " +
              getChipName(chip) +
              "; use the generated kernel instead (mx-lower-to-nvvm "
              "gemm=kernel)")
                 .str();
    return llvm::failure();
  case MXRT_SCALE_TENSOR_F32:
  case MXRT_SCALE_VEC128_F32:
  case MXRT_SCALE_BLK128X128_F32:
    return llvm::success();
  }
  llvm_unreachable("unknown scale mode");
}
