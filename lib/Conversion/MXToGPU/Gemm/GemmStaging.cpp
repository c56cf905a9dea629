//===- GemmStaging.cpp - MX operands to bf16 copies for staged MX ---------===//
//
// The staging kernel (GemmStaging.h): one thread per unit of 16 codes, the
// units of the operand taken in order (rows are contiguous in the codes and
// in the copy, so unit u's codes and results are at u times their size
// whatever the row), so that a warp reads 32 consecutive units (512 bytes
// of FP8) and writes 1 KiB of bf16. The unit's scale byte comes from the
// compact scales or the 128x4 tile layout (SwizzleTiles, the one map of
// it), shared by the two units of a block through L1. Each unit is decoded
// by decodeMXUnit, the fused main loop's decoder, so both forms of MX
// compute the same bf16 values. A unit's 32 bytes of results are two
// 16-byte stores; lane pairs trade halves through shuffles so that each
// store instruction of a warp writes 512 contiguous bytes (whole sectors),
// rather than every other 16 bytes.
//
//===----------------------------------------------------------------------===//

#include "GemmStaging.h"

#include "../Quantize/KernelBuilder.h"
#include "MXDecode.h"
#include "PointerKernels.h"

#include "mx/Dialect/MX/IR/ElementFormat.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

using gpu_kernels::kWarpSize;

constexpr int64_t kStagingThreads = 256;
constexpr int64_t kBf16Bytes = 2;
/// bf16 pairs (i32 words) of one 16-byte store.
constexpr int64_t kWordsPerStore = 4;

/// The staging kernel's shape: [rows, k] codes of `elementType`, scales
/// compact or in the swizzled 128x4 tiles.
struct StagingShape {
  Type elementType;
  int64_t rows, k;
  bool tiledScales;

  int64_t unitsPerRow() const { return k / kDecodeUnitK; }
  int64_t units() const { return rows * unitsPerRow(); }
};

Value i32(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}

/// Stores the results of the warp `warp` (index type), whose lane `lane`
/// (i32) holds `pairs`, the 8 words of unit 32 warp + lane: store s of
/// lane l writes half l % 2 of unit 16 s + l / 2 of the warp, taken from
/// that unit's lane by shuffles, unless the unit is past `units`.
/// `address(offset)` is the global pointer of byte `offset` of the copy.
void storeWarpResults(ImplicitLocOpBuilder &b, ArrayRef<Value> pairs,
                      Value lane, Value warp, int64_t units,
                      function_ref<Value(Value)> address) {
  constexpr int64_t kHalves = 2;
  auto c = [&](int64_t v) { return gpu_kernels::cIndex(b, b.getLoc(), v); };
  gpu_kernels::IndexArith arith{b, b.getLoc()};
  Value half = arith::AndIOp::create(b, lane, i32(b, 1));
  Value odd =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ne, half, i32(b, 0));
  // Byte (half * 8) * 2 of a unit's results: this lane's half of each store.
  Value halfElement = arith::MulIOp::create(
      b, arith::IndexCastUIOp::create(b, b.getIndexType(), half),
      c(kDecodeUnitK / kHalves));
  Value halfUnit = arith::DivUIOp::create(b, lane, i32(b, kHalves));
  auto storeType = VectorType::get({kWordsPerStore}, b.getI32Type());
  int64_t unitsPerStore = kWarpSize / kHalves;
  for (int64_t s = 0; s < kHalves; ++s) {
    Value source = arith::AddIOp::create(b, halfUnit, i32(b, unitsPerStore * s));
    SmallVector<Value> words;
    for (int64_t j = 0; j < kWordsPerStore; ++j) {
      auto shuffle = [&](Value value) {
        return NVVM::ShflOp::create(b, b.getI32Type(), i32(b, -1), value,
                                    source, i32(b, kWarpSize - 1),
                                    NVVM::ShflKind::idx, UnitAttr())
            .getResult();
      };
      Value low = shuffle(pairs[j]), high = shuffle(pairs[kWordsPerStore + j]);
      words.push_back(arith::SelectOp::create(b, odd, high, low));
    }
    Value unit = arith.fma(warp, kWarpSize,
                           arith::IndexCastUIOp::create(b, b.getIndexType(),
                                                        source));
    auto valid = scf::IfOp::create(
        b, gpu_kernels::cmpLT(b, b.getLoc(), unit, c(units)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&valid.getThenRegion().front());
    // Byte (unit * 16 + half * 8) * 2 of the copy.
    Value element = arith.fma(unit, kDecodeUnitK, halfElement);
    LLVM::StoreOp::create(
        b, vector::FromElementsOp::create(b, storeType, words),
        address(arith.fma(element, kBf16Bytes, c(0))), /*alignment=*/16);
  }
}

/// Builds the body of the kernel of `shape` at `b`'s insertion point, on
/// its three pointer arguments (codes, scales, bf16 copy).
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
  Value thread = NVVM::ThreadIdXOp::create(b, b.getI32Type());
  Value lane = arith::RemUIOp::create(b, thread, i32(b, kWarpSize));
  Value threadIndex = arith.fma(
      index(NVVM::BlockIdXOp::create(b, b.getI32Type())), kStagingThreads,
      index(thread));
  // Every lane converts (the last warp's lanes past the end convert the
  // last unit again), since all of them take part in the shuffles; only
  // the stores are guarded.
  Value unitIndex = arith::MinUIOp::create(b, threadIndex, c(shape.units() - 1));
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

  // Scale (row, block) of the compact [R, C] or the swizzled
  // [R'/128, C'/4, 32, 4, 4].
  int64_t blocks = llvm::divideCeil(shape.k, kMXBlock);
  Value block = arith.div(unit, kMXBlock / kDecodeUnitK);
  Value scaleOffset = arith.fma(row, blocks, block);
  if (shape.tiledScales) {
    SmallVector<int64_t> swizzled = getSwizzledShape(shape.rows, blocks);
    std::array<Value, 5> tiled = SwizzleTiles::getTiledIndex(row, block, arith);
    scaleOffset = tiled[0];
    for (int64_t d = 1; d < 5; ++d)
      scaleOffset = arith.fma(scaleOffset, swizzled[d], tiled[d]);
  }
  loaded.scaleByte =
      LLVM::LoadOp::create(b, b.getI8Type(), byteAddress(scales, scaleOffset));

  storeWarpResults(b, decodeMXUnit(b, shape.elementType, loaded), lane,
                   arith.div(threadIndex, kWarpSize), shape.units(),
                   [&](Value offset) { return byteAddress(out, offset); });
}

} // namespace

void gemm::launchStagingKernel(ImplicitLocOpBuilder &b, ModuleOp module,
                               Type elementType, int64_t rows, int64_t k,
                               bool tiledScales, Value data, Value scales,
                               Value out) {
  assert(k % kDecodeUnitK == 0 && "the GEMM's rows are 16-byte multiples");
  StagingShape shape{elementType, rows, k, tiledScales};
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "mx_stage_bf16_" << shape.elementType << "_" << shape.rows << "x"
     << shape.k << (shape.tiledScales ? "_tiled" : "");
  gpu::GPUFuncOp kernel = getPointerKernel(
      b, b.getLoc(), module, name, /*arguments=*/3, kStagingThreads,
      [&](ImplicitLocOpBuilder &kb, ValueRange arguments) {
        buildStagingBody(kb, shape, arguments);
      });
  launchPointerKernel(b, kernel, shape.units(), kStagingThreads,
                      ValueRange{data, scales, out});
}
