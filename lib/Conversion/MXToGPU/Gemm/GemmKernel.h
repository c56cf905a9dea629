//===- GemmKernel.h - Builders of the generated GEMM kernels ----*- C++ -*-===//
//
// Private to the GEMM generator. `GemmKernelBuilder` emits the body of one
// kernel from its `GemmPlan` in two layers:
//
// * the chip-neutral skeleton (GemmSkeleton.cpp): the shared-memory carve-up,
//   the ring of full/empty mbarriers with phase parity, the persistent grid
//   with its grouped tile order, the TMA producer warpgroup (one elected
//   thread, registers given back with setmaxnreg) and the consumer
//   warpgroups, and the epilogue that rounds an accumulator fragment to the
//   output type and stores it with partial tiles masked;
// * the per-recipe main loops: on SM90 (Sm90MainLoops.cpp) what the consumers
//   do with one stage (wgmma on FP8 with promotion, or dequantization to bf16
//   and wgmma on bf16) and the fragment layout their accumulators have; on
//   SM100 (Sm100MainLoop.cpp) the tensor memory, the MMA thread that copies
//   scales and issues tcgen05.mma.block_scale, and the epilogue warpgroup
//   that reads the accumulator with tcgen05.ld.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMKERNEL_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMKERNEL_H

#include "GemmPlan.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mx::gemm {

/// The kernel's arguments, in this order (all `!llvm.ptr`, generic).
struct KernelArguments {
  mlir::Value tensorMapA, tensorMapB; // CUtensorMap in global memory
  mlir::Value aScales, bScales;       // swizzled E8M0 or row-major f32
  mlir::Value out;                    // row-major [M, N] of the output type
};

/// The origin of one output tile, in elements (i32).
struct TileOrigin {
  mlir::Value m, n;
};

/// A consumer's place in the CTA (all i32).
struct ConsumerThread {
  mlir::Value consumer;      // 0 .. consumerWarpgroups - 1
  mlir::Value warp, lane;    // warp within its warpgroup, lane within warp
  mlir::Value threadInGroup; // 0 .. 127
};

/// The f32 scales of one 128-K block that a consumer thread's accumulator
/// elements need: sa of its two rows, sb of its columns (one value when it
/// is the same for the whole tile).
struct BlockScales {
  llvm::SmallVector<mlir::Value> rows, columns;
};

/// One 16-byte chunk of FP8 operand data loaded for dequantization: its
/// bytes, its E8M0 scale byte, and where its row sits in a 128B-swizzled tile.
struct FP8Chunk {
  mlir::Value data, scaleByte;
  mlir::Value rowBase, rowPhase; // row * 128 and row % 8
  mlir::Value chunkInHalf;       // 0..3 within the 64-K half
};

/// The ring position of pipeline iteration `it`: stage it % S and the
/// parity of the phase it belongs to.
struct RingSlot {
  mlir::Value stage, parity;
};

class GemmKernelBuilder {
public:
  GemmKernelBuilder(mlir::ImplicitLocOpBuilder &b, const GemmPlan &plan,
                    const KernelArguments &args)
      : b(b), plan(plan), args(args) {}

  /// Emits the whole kernel body at the builder's insertion point (the
  /// start of the gpu.func, whose shared-memory global is `sharedGlobal`).
  void build(llvm::StringRef sharedGlobal);

  // --- Skeleton pieces the main loops use ---------------------------------
  mlir::Value i32(int64_t v);
  mlir::Value i64(int64_t v);
  /// i32 shared::cta address of `offset` bytes past the aligned base.
  mlir::Value sharedAddress(int64_t offset);
  mlir::Value sharedAddress(mlir::Value base, mlir::Value offset);
  mlir::Value sharedPointer(mlir::Value address); // !llvm.ptr<3>
  /// A 64-bit shared-memory matrix descriptor (wgmma or tcgen05): the
  /// encoded `fixedFields` with the start address of shared `address`.
  mlir::Value withStartAddress(uint64_t fixedFields, mlir::Value address);
  /// Address of one of `stage`'s buffers (stages are uniformly strided).
  mlir::Value stageAddress(int64_t StageLayout::*buffer, mlir::Value stage);
  mlir::Value fullBarrier(mlir::Value stage);
  mlir::Value emptyBarrier(mlir::Value stage);
  RingSlot getRingSlot(mlir::Value iteration, bool producer);
  void waitBarrier(mlir::Value barrier, mlir::Value parity);
  /// One arrival per consumer warp on the stage's empty barrier.
  void releaseStage(const ConsumerThread &thread, mlir::Value stage);
  /// Runs `body` when `condition` holds.
  void ifThen(mlir::Value condition, llvm::function_ref<void()> body);
  /// Whether this thread is in warp `warp` of the CTA (i1).
  mlir::Value isInWarp(int64_t warp);
  /// Runs `body` on one elected thread of warp `warp` of the CTA.
  void ifElectedInWarp(int64_t warp, llvm::function_ref<void()> body);
  /// Loads an f32 from `base[index]` (global).
  mlir::Value loadGlobalF32(mlir::Value base, mlir::Value index);

  /// Stores the f32 `values` (already scaled) of an accumulator fragment in
  /// the output type, partial tiles masked: `coords(e)` gives element e's
  /// row and column inside the tile, and each run of `runLength` elements
  /// (a power of two) from a multiple of it are adjacent columns of a row.
  void storeFragment(
      TileOrigin origin, llvm::ArrayRef<mlir::Value> values, int64_t runLength,
      llvm::function_ref<std::pair<mlir::Value, mlir::Value>(int64_t)> coords);

private:
  void initBarriers();
  TileOrigin getTileOrigin(mlir::Value tile);
  /// for tile = blockIdx.x; tile < tiles; tile += gridDim.x, carrying one
  /// counter across tiles (the ring iteration, or the tiles done); returns
  /// its final value.
  mlir::Value
  forEachTile(llvm::function_ref<mlir::Value(TileOrigin, mlir::Value)> body);
  /// for kBlock in [0, kBlocks): waits for the slot of ring iteration
  /// `iteration` + kBlock, as the producer (on its empty barrier) or as a
  /// consumer (on its full barrier), then runs `body`. Returns the iteration
  /// after the tile's last stage.
  mlir::Value forEachStage(
      mlir::Value iteration, bool producer,
      llvm::function_ref<void(mlir::Value kBlock, RingSlot slot)> body);
  void buildProducer();
  void buildConsumers();
  void issueStageLoads(TileOrigin origin, mlir::Value kBlock, RingSlot slot);

  // --- Main loops (Sm90MainLoops.cpp) --------------------------------------
  /// Runs the K loop of one tile from ring iteration `iteration`, stores the
  /// tile, and returns the next iteration.
  mlir::Value buildSm90Tile(const ConsumerThread &thread, TileOrigin origin,
                            mlir::Value iteration);
  mlir::Value buildPromotedTile(const ConsumerThread &thread, TileOrigin origin,
                                mlir::Value iteration);
  mlir::Value buildDequantizedTile(const ConsumerThread &thread,
                                   TileOrigin origin, mlir::Value iteration);
  /// The descriptor of a 128B-swizzled K-major tile at shared `address`.
  mlir::Value buildWgmmaDescriptor(mlir::Value address);
  mlir::Type getAccumulatorType();
  /// wgmma over `kBytes` of K of the consumer's A rows at `aTile` and the B
  /// tile at `bTile`, accumulating into `accumulator` (ignored by the first
  /// step when `freshAccumulator`).
  mlir::Value buildWgmmaChain(mlir::Value accumulator, mlir::Value aTile,
                              mlir::Value bTile, mlir::Type operandA,
                              mlir::Type operandB, int64_t kBytes,
                              bool freshAccumulator);
  /// Row and column inside the tile of accumulator element `element`.
  std::pair<mlir::Value, mlir::Value>
  getFragmentCoordinates(const ConsumerThread &thread, int64_t element);
  llvm::SmallVector<mlir::Value> unpackAccumulator(mlir::Value accumulator);
  BlockScales loadBlockScales(const ConsumerThread &thread, TileOrigin origin,
                              mlir::Value kBlock, int64_t count);
  llvm::SmallVector<mlir::Value> multiplyBlockScales(const BlockScales &scales,
                                                     int64_t count);
  /// Converts 16 FP8 values (vector<4xi32>) of one E8M0 block to bf16.
  llvm::SmallVector<mlir::Value> dequantizeChunk(mlir::Value data,
                                                 mlir::Value scaleByte,
                                                 mlir::Type elementType);
  /// Loads this consumer's `rows` rows of one half (64 K) of an FP8 stage
  /// tile, 16 bytes per chunk, with each chunk's E8M0 scale byte.
  llvm::SmallVector<FP8Chunk> loadChunks(const ConsumerThread &thread,
                                         mlir::Value fp8Tile,
                                         mlir::Value scaleChunk, int64_t half,
                                         int64_t rows);
  /// Dequantizes loaded chunks into the bf16 tile (same rows, 128B swizzle).
  void storeDequantized(llvm::ArrayRef<FP8Chunk> chunks, mlir::Value bf16Tile,
                        mlir::Type elementType);
  /// The address of 16-byte chunk `chunkIndex` of `chunk`'s row in a
  /// 128B-swizzled tile.
  mlir::Value getSwizzledChunk(mlir::Value tile, const FP8Chunk &chunk,
                               mlir::Value chunkIndex);

  // --- SM100 main loop (Sm100MainLoop.cpp) --------------------------------
  /// Warp 1 allocates the plan's tensor memory and writes its address to
  /// the shared slot; after the CTA barrier every thread reads it.
  void allocateTensorMemory();
  /// After every role has finished: warp 1 frees the tensor memory.
  void freeTensorMemory();
  /// The tensor-memory address of (`lane`, base column + `column`).
  mlir::Value getTensorMemoryAddress(mlir::Value lane, mlir::Value column);
  /// The MMA thread: per stage, tcgen05.cp of the scale chunks and four
  /// block-scaled MMAs; tcgen05.commit frees the stage and, after a tile's
  /// last stage, hands the accumulator to the epilogue.
  void buildMmaIssuer();
  void issueStageMmas(RingSlot slot, mlir::Value accumulateFirst);
  /// The epilogue of tile number `tilesDone` of this CTA: tcgen05.ld of the
  /// accumulator 32 columns at a time, stored in the output type. Returns
  /// tilesDone + 1.
  mlir::Value buildTensorMemoryEpilogue(const ConsumerThread &thread,
                                        TileOrigin origin,
                                        mlir::Value tilesDone);

  mlir::ImplicitLocOpBuilder &b;
  const GemmPlan &plan;
  KernelArguments args;
  mlir::Value base;             // i32 aligned shared base
  mlir::Value threadIdx;        // i32
  mlir::Value tensorMemoryBase; // i32 tcgen05.alloc result (SM100)
};

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMKERNEL_H
