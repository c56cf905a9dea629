//===- GemmEpilogue.cpp - Output stores of the GEMM kernels ---------------===//
//
// How a tile's f32 accumulators, already scaled, become the output (plus
// mx.scaled_matmul's `bias` operand and, from registers only, its
// `accumulate` operand, loaded 16 vectors ahead of their stores and added in
// f32 before the rounding):
//
// * from registers (`GemmEpilogue::registers`, every recipe and output
//   type): each thread rounds its fragment to the output type and stores
//   runs of adjacent columns as aligned vectors, masked at the matrix edge;
// * through shared memory (`GemmEpilogue::tmaStore`, bf16 and f16 outputs of
//   the SM90 FP8 recipes, with or without a bias): the consumers add the
//   bias of each column pair, round pairs to 32-bit words and
//   write the tile with `stmatrix` into 64-column panels of [tileM rows, 128
//   bytes] with the 128-byte swizzle (a warp's 8x8 matrices then fall in
//   distinct banks), and one thread issues one TMA store per panel, which
//   clips the tile at the matrix edge. The stores run while the consumers
//   start the next tile; only the next epilogue waits until they have read
//   the panels.
//
//===----------------------------------------------------------------------===//

#include "../Quantize/ElementConversion.h"
#include "GemmKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

/// Accumulator elements (2i, 2i + 1) of a wgmma fragment are adjacent
/// columns of one row.
constexpr int64_t kFragmentRun = 2;
/// A 16-byte chunk: the unit the panels' swizzles permute.
constexpr int64_t kChunkBytes = 16;
/// stmatrix .x4 stores four 8x8 matrices: 16 rows x 16 columns of a warp's
/// fragment.
constexpr int64_t kMatrixColumns = 16;
/// Vectors of the accumulate operand D loaded ahead of their stores: 16
/// (32 f32 registers for pairs) keep the loads in flight together without
/// holding a whole fragment's D.
constexpr int64_t kPreloadedVectors = 16;

} // namespace

OutputRun GemmKernelBuilder::locateRun(TileOrigin origin,
                                       std::pair<Value, Value> coordinates) {
  auto [row, col] = coordinates;
  Value globalRow = arith::AddIOp::create(b, origin.m, row);
  Value globalCol = arith::AddIOp::create(b, origin.n, col);
  Value valid =
      arith::AndIOp::create(b,
                            arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                  globalRow, i32(plan.m)),
                            arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                  globalCol, i32(plan.n)));
  Value index = arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b, arith::ExtUIOp::create(b, b.getI64Type(), globalRow), i64(plan.n)),
      arith::ExtUIOp::create(b, b.getI64Type(), globalCol));
  return OutputRun{valid, index, globalCol};
}

Value GemmKernelBuilder::storeFragment(
    TileOrigin origin, ArrayRef<Value> values, int64_t runLength,
    function_ref<std::pair<Value, Value>(int64_t)> coords) {
  Type outType = plan.outputType, storedType = plan.storedType();
  auto globalPtr = LLVM::LLVMPointerType::get(
      b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
  Value out = LLVM::AddrSpaceCastOp::create(b, globalPtr, args.out);
  // The fused output cast's scale, and its running amax (f32 bits).
  Value castScale, amax;
  if (plan.castType) {
    castScale = loadGlobalF32(args.castScales, i32(plan.castIndex));
    amax = i32(0);
  }
  // A run is stored as vectors of `width` columns, the widest power of two
  // that divides N: each vector is then aligned to its size and lies wholly
  // inside or wholly outside the matrix.
  int64_t width = runLength;
  while (plan.n % width != 0)
    width /= 2;
  auto locate = [&](int64_t e) { return locateRun(origin, coords(e)); };
  int64_t vectors = llvm::divideCeil(int64_t(values.size()), width);
  for (int64_t group = 0; group < vectors; group += kPreloadedVectors) {
    int64_t groupEnd = std::min(vectors, group + kPreloadedVectors);
    // D's vectors of the group are loaded before any of them is stored, and
    // unconditionally (a vector outside the matrix reads D[0]): one load
    // latency per group, where a load inside each store's bounds check
    // waited once per vector.
    SmallVector<OutputRun> located;
    SmallVector<Value> accumulated;
    for (int64_t v = group; v < groupEnd; ++v) {
      const OutputRun &at = located.emplace_back(locate(v * width));
      if (args.accumulator)
        accumulated.push_back(loadEpilogueOperand(
            args.accumulator, outType,
            arith::SelectOp::create(b, at.valid, at.index, i64(0)), width));
    }
    for (int64_t v = group; v < groupEnd; ++v) {
      const OutputRun &at = located[v - group];
      Value address = LLVM::GEPOp::create(b, globalPtr, storedType, out,
                                          ArrayRef<LLVM::GEPArg>{at.index});
      Value vector = vector::FromElementsOp::create(
          b, VectorType::get({width}, b.getF32Type()),
          values.slice(v * width, width));
      // The product as the output type holds it, in f32: + bias[col], then
      // + D[row, col], then rounded.
      auto finalValues = [&] {
        if (args.bias)
          vector = arith::AddFOp::create(
              b, vector,
              loadEpilogueOperand(args.bias, plan.biasType, at.column, width));
        if (args.accumulator)
          vector =
              arith::AddFOp::create(b, vector, accumulated[v - group]);
        return outType.isF32()
                   ? vector
                   : arith::TruncFOp::create(
                         b, VectorType::get({width}, outType), vector)
                         .getResult();
      };
      if (!plan.castType) {
        ifThen(at.valid, [&] { storeVector(finalValues(), address); });
        continue;
      }
      auto stored = scf::IfOp::create(b, TypeRange{b.getI32Type()}, at.valid,
                                      /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&stored.getThenRegion().front());
        auto [codes, values] = castCodes(finalValues(), castScale);
        storeVector(codes, address);
        scf::YieldOp::create(b, getMagnitudeBits(values));
        b.setInsertionPointToStart(&stored.getElseRegion().front());
        scf::YieldOp::create(b, i32(0));
      }
      amax = arith::MaxUIOp::create(b, amax, stored.getResult(0));
    }
  }
  return amax;
}

void GemmKernelBuilder::storeVector(Value vector, Value address) {
  auto type = cast<VectorType>(vector.getType());
  int64_t bytes =
      type.getNumElements() * type.getElementType().getIntOrFloatBitWidth() / 8;
  Value stored = type.getNumElements() == 1
                     ? Value(vector::ExtractOp::create(b, vector, 0))
                     : vector;
  LLVM::StoreOp::create(b, stored, address, bytes);
}

std::pair<Value, Value> GemmKernelBuilder::castCodes(Value rounded,
                                                     Value scale) {
  // The delayed cast reads the product as stored (rounded to the output
  // type), widened exactly to f32.
  auto type = cast<VectorType>(rounded.getType());
  auto f32Type = VectorType::get(type.getShape(), b.getF32Type());
  Value values = type.getElementType().isF32()
                     ? rounded
                     : arith::ExtFOp::create(b, f32Type, rounded).getResult();
  std::optional<gpu_kernels::ElementConversion> conversion =
      gpu_kernels::ElementConversion::get(plan.castType, plan.chip);
  assert(conversion && "FP8 casts have a cvt on every chip");
  return {gpu_kernels::castWithScale(b, b.getLoc(), values, scale, *conversion),
          values};
}

Value GemmKernelBuilder::getMagnitudeBits(Value values) {
  // |x| as the bits of an f32 orders as unsigned integers, NaN above +Inf:
  // the max of the bits is the NaN-propagating amax.
  auto type = cast<VectorType>(values.getType());
  auto bitsType = VectorType::get(type.getShape(), b.getI32Type());
  Value magnitudes = arith::AndIOp::create(
      b, arith::BitcastOp::create(b, bitsType, values),
      arith::ConstantOp::create(
          b,
          DenseElementsAttr::get(bitsType, b.getI32IntegerAttr(0x7fffffff))));
  Value amax = vector::ExtractOp::create(b, magnitudes, 0);
  for (int64_t e = 1; e < type.getNumElements(); ++e)
    amax = arith::MaxUIOp::create(b, amax,
                                  vector::ExtractOp::create(b, magnitudes, e));
  return amax;
}

void GemmKernelBuilder::recordAmax(Value amaxBits) {
  for (int64_t offset = 16; offset >= 1; offset /= 2)
    amaxBits = arith::MaxUIOp::create(
        b, amaxBits,
        NVVM::ShflOp::create(b, b.getI32Type(), i32(-1), amaxBits, i32(offset),
                             i32(31), NVVM::ShflKind::bfly, UnitAttr()));
  Value lane = arith::RemUIOp::create(b, threadIdx, i32(32));
  ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, i32(0)), [&] {
    auto globalPtr = LLVM::LLVMPointerType::get(
        b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
    Value partial = LLVM::GEPOp::create(
        b, globalPtr, b.getI32Type(),
        LLVM::AddrSpaceCastOp::create(b, globalPtr, args.amaxPartials),
        ArrayRef<LLVM::GEPArg>{
            Value(NVVM::BlockIdXOp::create(b, b.getI32Type()))});
    LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::umax, partial, amaxBits,
                              LLVM::AtomicOrdering::monotonic);
  });
}

void GemmKernelBuilder::clearAmaxPartials() {
  // CTA c clears slots c, c + ctas, ... (the padding past the CTAs
  // included) before the CTAs' first barrier, which orders it before its
  // consumers' atomics; no other CTA touches slot c.
  ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadIdx, i32(0)),
         [&] {
           Value cta = NVVM::BlockIdXOp::create(b, b.getI32Type());
           for (int64_t first = 0; first < plan.castSlots();
                first += plan.ctas()) {
             Value slot = arith::AddIOp::create(b, cta, i32(first));
             ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, slot,
                                          i32(plan.castSlots())),
                    [&] {
                      LLVM::StoreOp::create(
                          b, i32(0),
                          LLVM::GEPOp::create(b, args.amaxPartials.getType(),
                                              b.getI32Type(), args.amaxPartials,
                                              ArrayRef<LLVM::GEPArg>{slot}),
                          /*alignment=*/4);
                    });
           }
         });
}

Value GemmKernelBuilder::loadEpilogueOperand(Value pointer, Type elementType,
                                             Value index, int64_t width) {
  auto globalPtr = LLVM::LLVMPointerType::get(
      b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
  Value base = LLVM::AddrSpaceCastOp::create(b, globalPtr, pointer);
  Value address = LLVM::GEPOp::create(b, globalPtr, elementType, base,
                                      ArrayRef<LLVM::GEPArg>{index});
  // Runs start at multiples of `width` columns of rows of N, a multiple of
  // `width`: aligned to the vector's size.
  auto type = VectorType::get({width}, elementType);
  Value loaded = LLVM::LoadOp::create(
      b, type, address, width * elementType.getIntOrFloatBitWidth() / 8);
  if (elementType.isF32())
    return loaded;
  return arith::ExtFOp::create(b, VectorType::get({width}, b.getF32Type()),
                               loaded);
}

Value GemmKernelBuilder::loadBiasPair(TileOrigin origin, Value column) {
  // Reloaded per wave rather than kept for the tile: a pair per column of
  // the fragment would hold tileN / 2 more registers in the consumers, and
  // the loads hit L1. Columns past N read bias[0, 1] (in bounds, N being a
  // multiple of 8 here); TMA clips them from the store.
  Value globalCol = arith::AddIOp::create(b, origin.n, column);
  Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, globalCol,
                                       i32(plan.n));
  return loadEpilogueOperand(
      args.bias, plan.biasType,
      arith::SelectOp::create(b, inside, globalCol, i32(0)), 2);
}

void GemmKernelBuilder::storeWaves(const ConsumerThread &thread,
                                   TileOrigin origin,
                                   ArrayRef<SmallVector<Value>> waves) {
  if (plan.epilogue == GemmEpilogue::tmaStore && plan.castType)
    return recordAmax(storeCastWavesThroughSharedMemory(thread, origin, waves));
  if (plan.epilogue == GemmEpilogue::tmaStore)
    return storeWavesThroughSharedMemory(thread, origin, waves);
  Value amax;
  for (auto [wave, values] : llvm::enumerate(waves)) {
    Value waveAmax =
        storeFragment(origin, values, kFragmentRun, [&](int64_t e) {
          return getFragmentCoordinates(thread, wave, e);
        });
    amax = amax ? arith::MaxUIOp::create(b, amax, waveAmax) : waveAmax;
  }
  if (plan.castType)
    recordAmax(amax);
}

void GemmKernelBuilder::storeWavesThroughSharedMemory(
    const ConsumerThread &thread, TileOrigin origin,
    ArrayRef<SmallVector<Value>> waves) {
  waitForPanels();
  // Panel rows of 128 bytes (GemmPlan::panelRowBytes), eight 16-byte
  // chunks.
  int64_t rowBytes = plan.panelRowBytes();
  int64_t panelColumns = rowBytes / plan.storedBytes();
  int64_t panelBytes = plan.tileM * rowBytes;
  // Lane l addresses row l % 8 of matrix l / 8: rows +8 for odd matrices,
  // columns +8 for the upper two.
  Value matrix = arith::DivUIOp::create(b, thread.lane, i32(8));
  Value laneRow = arith::AddIOp::create(
      b,
      arith::AddIOp::create(b, arith::MulIOp::create(b, thread.warp, i32(16)),
                            arith::RemUIOp::create(b, thread.lane, i32(8))),
      arith::MulIOp::create(b, arith::RemUIOp::create(b, matrix, i32(2)),
                            i32(8)));
  Value laneChunk = arith::DivUIOp::create(b, matrix, i32(2));
  auto pairType = VectorType::get({2}, b.getF32Type());
  auto roundedType = VectorType::get({2}, plan.outputType);
  for (auto [wave, values] : llvm::enumerate(waves)) {
    Value row = arith::AddIOp::create(b, getWaveRow(thread, wave), laneRow);
    Value rowBase = arith::MulIOp::create(b, row, i32(rowBytes));
    Value phase = arith::AndIOp::create(b, row, i32(7));
    for (int64_t column = 0; column < plan.tileN; column += kMatrixColumns) {
      int64_t panel = column / panelColumns;
      int64_t chunk =
          (column % panelColumns) * rowBytes / panelColumns / kChunkBytes;
      Value swizzled = arith::XOrIOp::create(
          b, arith::AddIOp::create(b, laneChunk, i32(chunk)), phase);
      Value address = sharedAddress(
          sharedAddress(plan.outputTile + panel * panelBytes),
          arith::AddIOp::create(
              b, rowBase,
              arith::MulIOp::create(b, swizzled, i32(kChunkBytes))));
      // Elements 8j..8j+7 of the fragment are the four matrices' words.
      SmallVector<Value> words;
      int64_t first = column / 8 * 4;
      for (int64_t e = first; e < first + 8; e += 2) {
        Value pair = vector::FromElementsOp::create(
            b, pairType, ValueRange{values[e], values[e + 1]});
        if (args.bias)
          pair = arith::AddFOp::create(
              b, pair,
              loadBiasPair(origin,
                           getFragmentCoordinates(thread, wave, e).second));
        words.push_back(vector::BitCastOp::create(
            b, VectorType::get({1}, b.getI32Type()),
            arith::TruncFOp::create(b, roundedType, pair)));
        words.back() = vector::ExtractOp::create(b, words.back(), 0);
      }
      NVVM::StMatrixOp::create(
          b, sharedPointer(address), words, NVVM::MMALayout::row,
          NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8),
          NVVM::LdStMatrixEltType::B16);
    }
  }
  storePanels(origin);
}

Value GemmKernelBuilder::isPanelIssuer() {
  // The first consumer thread issues the stores.
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadIdx,
                               i32(kWarpgroupThreads));
}

void GemmKernelBuilder::waitForPanels() {
  // The panels are free once the issuer's previous stores have read them.
  ifThen(isPanelIssuer(),
         [&] { NVVM::CpAsyncBulkWaitGroupOp::create(b, 0, b.getUnitAttr()); });
  syncConsumers();
}

void GemmKernelBuilder::storePanels(TileOrigin origin) {
  int64_t panelColumns = plan.panelRowBytes() / plan.storedBytes();
  int64_t panelBytes = plan.tileM * plan.panelRowBytes();
  // The panels are read by TMA (the async proxy).
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  syncConsumers();
  ifThen(isPanelIssuer(), [&] {
    for (int64_t panel = 0; panel < plan.tileN / panelColumns; ++panel) {
      NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
          b, args.tensorMapOut,
          sharedPointer(sharedAddress(plan.outputTile + panel * panelBytes)),
          ValueRange{
              arith::AddIOp::create(b, origin.n, i32(panel * panelColumns)),
              origin.m},
          Value(), NVVM::TMAStoreMode::TILE, Value());
    }
    NVVM::CpAsyncBulkCommitGroupOp::create(b);
  });
}

Value GemmKernelBuilder::storeCastWavesThroughSharedMemory(
    const ConsumerThread &thread, TileOrigin origin,
    ArrayRef<SmallVector<Value>> waves) {
  waitForPanels();
  Value scale = loadGlobalF32(args.castScales, i32(plan.castIndex));
  auto pairType = VectorType::get({2}, b.getF32Type());
  auto roundedType = VectorType::get({2}, plan.outputType);
  Value amax = i32(0);
  for (auto [wave, values] : llvm::enumerate(waves)) {
    for (int64_t e = 0; e < int64_t(values.size()); e += kFragmentRun) {
      auto [row, column] = getFragmentCoordinates(thread, wave, e);
      Value pair = vector::FromElementsOp::create(
          b, pairType, ValueRange{values[e], values[e + 1]});
      if (args.bias)
        pair = arith::AddFOp::create(b, pair, loadBiasPair(origin, column));
      Value rounded =
          plan.outputType.isF32()
              ? pair
              : arith::TruncFOp::create(b, roundedType, pair).getResult();
      auto [bytes, widened] = castCodes(rounded, scale);
      Value codes = vector::BitCastOp::create(
          b, VectorType::get({1}, b.getI16Type()), bytes);
      LLVM::StoreOp::create(b, vector::ExtractOp::create(b, codes, 0),
                            sharedPointer(getCastPanelAddress(row, column)),
                            /*alignment=*/2);
      // Elements outside the matrix (zeros, plus bias[0] past N) are
      // clipped by the TMA store and left out of the amax.
      Value inside = locateRun(origin, {row, column}).valid;
      amax = arith::MaxUIOp::create(
          b, amax,
          arith::SelectOp::create(b, inside, getMagnitudeBits(widened),
                                  i32(0)));
    }
  }
  storePanels(origin);
  return amax;
}

Value GemmKernelBuilder::getCastPanelAddress(Value row, Value column) {
  // Byte `column` of tile row `row` in its 64-byte panel, the row's 16-byte
  // chunks swizzled as the tensor map's 64B swizzle reads them (chunk c of
  // row r at c ^ (r / 2) % 4: the swizzle XORs address bits 4-5 with 7-8).
  int64_t rowBytes = plan.panelRowBytes();
  Value panel = arith::DivUIOp::create(b, column, i32(rowBytes));
  Value inPanel = arith::RemUIOp::create(b, column, i32(rowBytes));
  Value chunk = arith::XOrIOp::create(
      b, arith::DivUIOp::create(b, inPanel, i32(kChunkBytes)),
      arith::AndIOp::create(b, arith::ShRUIOp::create(b, row, i32(1)), i32(3)));
  Value offset = arith::AddIOp::create(
      b,
      arith::AddIOp::create(
          b, arith::MulIOp::create(b, panel, i32(plan.tileM * rowBytes)),
          arith::MulIOp::create(b, row, i32(rowBytes))),
      arith::AddIOp::create(
          b, arith::MulIOp::create(b, chunk, i32(kChunkBytes)),
          arith::RemUIOp::create(b, inPanel, i32(kChunkBytes))));
  return sharedAddress(sharedAddress(plan.outputTile), offset);
}

void GemmKernelBuilder::finishEpilogue(const ConsumerThread &) {
  if (plan.epilogue != GemmEpilogue::tmaStore)
    return;
  // The CTA's shared memory must outlive the reads of its last stores.
  ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadIdx,
                               i32(kWarpgroupThreads)),
         [&] { NVVM::CpAsyncBulkWaitGroupOp::create(b, 0, UnitAttr()); });
}
