//===- GemmStaging.cpp - MX operands to bf16 copies for staged MX ---------===//
//
// The staging kernel (GemmStaging.h): one thread per unit of 16 codes of a
// row, so that a warp reads 32 consecutive units (512 bytes of FP8) and
// writes 1 KiB of bf16, both coalesced; the unit's scale byte comes from
// the 128x4 tile layout (SwizzleTiles, the one map of it), shared by the
// two units of a block and the rows of a tile through L1. Each unit is
// decoded by decodeMXUnit, the fused main loop's decoder, so both forms of
// MX compute the same bf16 values.
//
//===----------------------------------------------------------------------===//

#include "GemmStaging.h"

#include "../Quantize/KernelBuilder.h"
#include "MXDecode.h"

#include "mx/Dialect/MX/IR/ElementFormat.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr int64_t kStagingThreads = 256;
constexpr int64_t kBf16Bytes = 2;
/// bf16 pairs (i32 words) of one 16-byte store.
constexpr int64_t kWordsPerStore = 4;

/// The staging kernel's shape: [rows, k] codes of `elementType`.
struct StagingShape {
  Type elementType;
  int64_t rows, k;

  int64_t unitsPerRow() const { return k / kDecodeUnitK; }
  int64_t units() const { return rows * unitsPerRow(); }
};

/// Builds the body of the kernel of `shape` at `b`'s insertion point, on
/// its three pointer arguments (codes, swizzled scales, bf16 copy).
void buildStagingBody(ImplicitLocOpBuilder &b, const StagingShape &shape,
                      ValueRange arguments) {
  auto globalPtr = LLVM::LLVMPointerType::get(
      b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
  auto global = [&](Value pointer) {
    return LLVM::AddrSpaceCastOp::create(b, globalPtr, pointer).getResult();
  };
  Value data = global(arguments[0]), scales = global(arguments[1]),
        out = global(arguments[2]);
  auto index = [&](Value v) {
    return arith::IndexCastUIOp::create(b, b.getIndexType(), v).getResult();
  };
  auto c = [&](int64_t v) { return gpu_kernels::cIndex(b, b.getLoc(), v); };
  gpu_kernels::IndexArith arith{b, b.getLoc()};
  Value unitIndex = arith.fma(
      index(NVVM::BlockIdXOp::create(b, b.getI32Type())), kStagingThreads,
      index(NVVM::ThreadIdXOp::create(b, b.getI32Type())));
  auto inRange = scf::IfOp::create(
      b, gpu_kernels::cmpLT(b, b.getLoc(), unitIndex, c(shape.units())),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&inRange.getThenRegion().front());
  Value row = arith.div(unitIndex, shape.unitsPerRow());
  Value unit = arith.rem(unitIndex, shape.unitsPerRow());
  auto byteAddress = [&](Value base, Value offset) {
    return LLVM::GEPOp::create(
        b, globalPtr, b.getI8Type(), base,
        ArrayRef<LLVM::GEPArg>{
            arith::IndexCastUIOp::create(b, b.getI64Type(), offset)
                .getResult()});
  };

  ElementFormat format = getVerifiedElementFormat(shape.elementType);
  int64_t unitBytes = format.getStoredBytes(kDecodeUnitK);
  // Rows are whole 16-byte multiples (the GEMM's TMA rows), so a unit is
  // aligned to its size's largest power of two.
  Value words = LLVM::LoadOp::create(
      b, VectorType::get({unitBytes / 4}, b.getI32Type()),
      byteAddress(data, arith.fma(row, format.getStoredBytes(shape.k),
                                  arith::MulIOp::create(b, unit, c(unitBytes)))),
      /*alignment=*/unitBytes & -unitBytes);
  LoadedUnit loaded;
  for (int64_t i = 0; i < unitBytes / 4; ++i)
    loaded.words.push_back(vector::ExtractOp::create(b, words, i));

  // Scale (row, block) of the swizzled [R'/128, C'/4, 32, 4, 4].
  SmallVector<int64_t> swizzled = getSwizzledShape(
      shape.rows, llvm::divideCeil(shape.k, kMXBlock));
  std::array<Value, 5> tiled = SwizzleTiles::getTiledIndex(
      row, arith.div(unit, kMXBlock / kDecodeUnitK), arith);
  Value scaleOffset = tiled[0];
  for (int64_t d = 1; d < 5; ++d)
    scaleOffset = arith.fma(scaleOffset, swizzled[d], tiled[d]);
  loaded.scaleByte =
      LLVM::LoadOp::create(b, b.getI8Type(), byteAddress(scales, scaleOffset));

  UnitPairs pairs = decodeMXUnit(b, shape.elementType, loaded);
  Value first = arith.fma(
      arith.fma(row, shape.k, arith::MulIOp::create(b, unit, c(kDecodeUnitK))),
      kBf16Bytes, c(0));
  auto storeType = VectorType::get({kWordsPerStore}, b.getI32Type());
  for (int64_t s = 0; s < int64_t(pairs.size()) / kWordsPerStore; ++s) {
    Value stored = vector::FromElementsOp::create(
        b, storeType,
        ArrayRef<Value>(pairs).slice(s * kWordsPerStore, kWordsPerStore));
    LLVM::StoreOp::create(
        b, stored,
        byteAddress(out, arith::AddIOp::create(b, first, c(16 * s))),
        /*alignment=*/16);
  }
}

/// The staging kernel of `shape`: built in a gpu.module of its own on first
/// use, found by its symbol afterwards.
gpu::GPUFuncOp getStagingKernel(OpBuilder &builder, Location loc,
                                ModuleOp module, const StagingShape &shape) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "mx_stage_bf16_" << shape.elementType << "_" << shape.rows << "x"
     << shape.k;
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(name))
    return existing.lookupSymbol<gpu::GPUFuncOp>("kernel");
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  auto kernelModule = gpu::GPUModuleOp::create(builder, loc, name);
  SymbolTable(module).insert(kernelModule);
  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(kernelModule.getBody());
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto kernel = gpu::GPUFuncOp::create(
      b, "kernel", b.getFunctionType(SmallVector<Type>(3, ptr), {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel->setAttr("nvvm.maxntid",
                  b.getDenseI32ArrayAttr({int32_t(kStagingThreads), 1, 1}));
  b.setInsertionPointToStart(&kernel.getBody().front());
  buildStagingBody(b, shape, kernel.getArguments());
  gpu::ReturnOp::create(b);
  return kernel;
}

} // namespace

void gemm::launchStagingKernel(ImplicitLocOpBuilder &b, ModuleOp module,
                               Type elementType, int64_t rows, int64_t k,
                               Value data, Value swizzledScales, Value out) {
  assert(k % kDecodeUnitK == 0 && "the GEMM's rows are 16-byte multiples");
  StagingShape shape{elementType, rows, k};
  gpu::GPUFuncOp kernel = getStagingKernel(b, b.getLoc(), module, shape);
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, v).getResult();
  };
  gpu::LaunchFuncOp::create(
      b, kernel,
      gpu::KernelDim3{index(llvm::divideCeil(shape.units(), kStagingThreads)),
                      index(1), index(1)},
      gpu::KernelDim3{index(kStagingThreads), index(1), index(1)},
      /*dynamicSharedMemorySize=*/Value(), ValueRange{data, swizzledScales, out});
}
