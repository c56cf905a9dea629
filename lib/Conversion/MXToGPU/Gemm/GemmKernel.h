//===- GemmKernel.h - Builders of the generated GEMM kernels ----*- C++ -*-===//
//
// Private to the GEMM generator. A kernel is emitted from its `GemmPlan` by
// three kinds of builders, split the way CUTLASS splits a kernel into its
// skeleton, collective main loop and epilogue:
//
// * `GemmKernelBuilder`, the chip-neutral skeleton (GemmSkeleton.cpp): the
//   shared-memory carve-up, the ring of full/empty mbarriers with phase
//   parity (cluster-wide when the CTAs of a cluster share operand loads),
//   the persistent grid with its grouped order of cluster tiles, the TMA
//   producer warpgroup (one elected thread issues the operand tiles, their
//   multicast halves and the stage's scales; registers given back with
//   setmaxnreg), the consumer warpgroups, and the helpers every builder
//   shares;
// * one `GemmMainLoop` per (scaling recipe x MMA family), behind the narrow
//   interface below: SM90 promoted FP8 (Sm90PromotedMainLoop.cpp), SM90
//   dequantized MX (Sm90DequantizedMainLoop.cpp), SM90 staged MX on bf16
//   copies (Sm90StagedMainLoop.cpp), SM100 block-scaled
//   (Sm100MainLoop.cpp). The skeleton calls its hooks and nothing else;
// * the epilogue (GemmEpilogue.cpp): an accumulator fragment rounded to the
//   output type and stored from registers with partial tiles masked, or
//   through shared memory and TMA stores.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMKERNEL_H
#define MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMKERNEL_H

#include "GemmPlan.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <memory>

namespace mx::gemm {

/// The kernel's parameters (all `!llvm.ptr`, generic), in the order of
/// `getKernelParameters`. The tensor maps are 128-byte `__grid_constant__`
/// parameters (`isTensorMap`): their pointers address the parameter space.
enum class KernelParameter {
  tensorMapA,       // CUtensorMap of A
  tensorMapB,       // CUtensorMap of B
  aScales,          // swizzled E8M0 or f32
  bScales,          //
  out,              // row-major [M, N] of the output type (the cast's codes)
  tensorMapAScales, // stageRows: CUtensorMap of A's GEMM-ready [KB, M'] f32;
                    // chunks: of A's swizzled E8M0 as rows of 128 bytes
  tensorMapBScales, // the same of B's
  tensorMapOut,     // tmaStore epilogue: CUtensorMap of the output
  bias,             // [N] of the plan's bias type, added to every row
  accumulator,      // row-major [M, N] of the output type, added (C += A B^T)
  aTensorScale,     // NVFP4: A's f32 tensor scale (0-D)
  bTensorScale,     // NVFP4: B's
  castScales,       // fused output cast: its f32 scales (column castIndex)
  amaxPartials,     // fused output cast: f32 [castSlots], the CTAs' amaxes
};

/// The parameters the kernel of `plan` takes, in order: the one list the
/// kernel's signature and its launch are built from.
llvm::SmallVector<KernelParameter> getKernelParameters(const GemmPlan &plan);

/// Whether `parameter` is a tensor map (passed by value).
bool isTensorMap(KernelParameter parameter);

/// The kernel's arguments by role; null where the plan takes none.
struct KernelArguments {
  mlir::Value tensorMapA, tensorMapB;
  mlir::Value aScales, bScales;
  mlir::Value out;
  mlir::Value tensorMapAScales, tensorMapBScales, tensorMapOut;
  mlir::Value bias, accumulator;
  mlir::Value aTensorScale, bTensorScale;
  mlir::Value castScales, amaxPartials;

  /// The field of `parameter`.
  mlir::Value &get(KernelParameter parameter);
};

/// Where a run of output elements goes: whether it lies inside the matrix,
/// its first element's index in the output (i64) and its column (i32).
struct OutputRun {
  mlir::Value valid, index, column;
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

/// The ring position of pipeline iteration `it`: stage it % S and the
/// parity of the phase it belongs to.
struct RingSlot {
  mlir::Value stage, parity;
};

class GemmKernelBuilder;

/// What one (scaling recipe x MMA family) adds to the skeleton. The
/// skeleton calls the hooks in this order: `initBarriers` (thread 0, before
/// the CTA or cluster barrier), `beforeSync` and `afterSync` (every thread,
/// around that barrier), `buildProducerRoles` (the producer warpgroup,
/// beside its TMA thread), `buildTile` (the consumers, once per tile), and
/// `tearDown` (every thread, when every role is done).
class GemmMainLoop {
public:
  explicit GemmMainLoop(GemmKernelBuilder &kernel);
  virtual ~GemmMainLoop();

  virtual void initBarriers() {}
  virtual void beforeSync() {}
  virtual void afterSync() {}
  virtual void buildProducerRoles() {}
  /// The consumers' work on the tile at `origin`, carrying `counter` across
  /// tiles (the ring iteration, or the tiles done); returns its next value.
  virtual mlir::Value buildTile(const ConsumerThread &thread,
                                TileOrigin origin, mlir::Value counter) = 0;
  virtual void tearDown() {}

protected:
  GemmKernelBuilder &k;
  mlir::ImplicitLocOpBuilder &b;
  const GemmPlan &plan;
};

std::unique_ptr<GemmMainLoop> createSm90PromotedMainLoop(GemmKernelBuilder &k);
std::unique_ptr<GemmMainLoop>
createSm90DequantizedMainLoop(GemmKernelBuilder &k);
std::unique_ptr<GemmMainLoop> createSm90StagedMainLoop(GemmKernelBuilder &k);
std::unique_ptr<GemmMainLoop> createSm100MainLoop(GemmKernelBuilder &k);

class GemmKernelBuilder {
public:
  GemmKernelBuilder(mlir::ImplicitLocOpBuilder &b, const GemmPlan &plan,
                    const KernelArguments &args)
      : b(b), plan(plan), args(args) {}

  /// Emits the whole kernel body at the builder's insertion point (the
  /// start of the kernel function, whose shared-memory global is
  /// `sharedGlobal`).
  void build(llvm::StringRef sharedGlobal);

  mlir::ImplicitLocOpBuilder &getBuilder() { return b; }
  const GemmPlan &getPlan() const { return plan; }
  const KernelArguments &getArguments() const { return args; }
  mlir::Value getThreadIdx() const { return threadIdx; }

  // --- Values and shared memory -------------------------------------------
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
  /// Loads an f32 from `base[index]` (global).
  mlir::Value loadGlobalF32(mlir::Value base, mlir::Value index);
  /// Loads an f32 from shared `address`.
  mlir::Value loadSharedF32(mlir::Value address);

  // --- The ring and synchronization ---------------------------------------
  mlir::Value fullBarrier(mlir::Value stage);
  mlir::Value emptyBarrier(mlir::Value stage);
  RingSlot getRingSlot(mlir::Value iteration, bool producer);
  void waitBarrier(mlir::Value barrier, mlir::Value parity);
  /// The consumers' release of `stage`: one arrival per consumer warp on
  /// the stage's empty barrier of every CTA of the cluster, whose producers
  /// all write into this CTA's copy of the stage.
  void releaseStage(const ConsumerThread &thread, mlir::Value stage);
  /// A barrier of every consumer thread of the CTA (not the producer).
  void syncConsumers();
  /// for kBlock in [0, kBlocks): waits for the slot of ring iteration
  /// `iteration` + kBlock, as the producer (on its empty barrier) or as a
  /// consumer (on its full barrier), then runs `body`. Returns the iteration
  /// after the tile's last stage.
  mlir::Value forEachStage(
      mlir::Value iteration, bool producer,
      llvm::function_ref<void(mlir::Value kBlock, RingSlot slot)> body);
  /// for each tile of this CTA, carrying one counter across tiles; returns
  /// its final value.
  mlir::Value forEachTile(
      llvm::function_ref<mlir::Value(TileOrigin, mlir::Value)> body);

  // --- Control flow -------------------------------------------------------
  /// Runs `body` when `condition` holds.
  void ifThen(mlir::Value condition, llvm::function_ref<void()> body);
  /// Whether this thread is in warp `warp` of the CTA (i1).
  mlir::Value isInWarp(int64_t warp);
  /// Runs `body` on one elected thread of warp `warp` of the CTA.
  void ifElectedInWarp(int64_t warp, llvm::function_ref<void()> body);

  // --- wgmma accumulator fragments (SM90) ---------------------------------
  /// Row and column inside the tile of element `element` of the m64 x tileN
  /// accumulator of `thread`'s wave `wave`: element e of thread (warp w,
  /// lane l) is at row 16w + l/4 + 8((e/2)%2) of the wave's 64 rows, column
  /// 8(e/4) + 2(l%4) + e%2.
  std::pair<mlir::Value, mlir::Value>
  getFragmentCoordinates(const ConsumerThread &thread, int64_t wave,
                         int64_t element);
  /// The first tile row of `thread`'s wave `wave` (i32).
  mlir::Value getWaveRow(const ConsumerThread &thread, int64_t wave);
  /// The wgmma chain of `thread`'s wave `wave` over stage `slot`: one
  /// m64 x tileN x mmaK wgmma per mmaK of the stage, A and B read from the
  /// stage's 128B-swizzled K-major tiles (FP8 or bf16, as the plan's
  /// operands are), accumulating into `accumulator`; where
  /// `overwriteFirst`, the first step ignores the accumulator's values.
  /// Returns the accumulator after the chain (issued, not waited for).
  mlir::Value buildStageWgmmaChain(const ConsumerThread &thread, RingSlot slot,
                                   int64_t wave, mlir::Value accumulator,
                                   bool overwriteFirst);

  // --- Epilogue (GemmEpilogue.cpp) -----------------------------------------
  /// Stores the f32 `values` (already scaled) of an accumulator fragment in
  /// the output type from registers, partial tiles masked: `coords(e)`
  /// gives element e's row and column inside the tile, and each run of
  /// `runLength` elements (a power of two) from a multiple of it are
  /// adjacent columns of a row. With a fused output cast, stores the
  /// values' codes instead and returns the largest magnitude of the values
  /// it stored, as the i32 bits of an f32 (null without a cast).
  mlir::Value storeFragment(
      TileOrigin origin, llvm::ArrayRef<mlir::Value> values, int64_t runLength,
      llvm::function_ref<std::pair<mlir::Value, mlir::Value>(int64_t)> coords);
  /// `width` elements of an epilogue operand (`bias` or `accumulator`) of
  /// `elementType` from element `index` (i32 or i64), as f32.
  mlir::Value loadEpilogueOperand(mlir::Value pointer, mlir::Type elementType,
                                  mlir::Value index, int64_t width);
  /// bias[origin.n + column, +1] as f32 (the TMA-store epilogue's pairs).
  mlir::Value loadBiasPair(TileOrigin origin, mlir::Value column);
  /// Stores the consumers' wgmma accumulators of one tile, one fragment per
  /// wave (f32, already scaled), as the plan's epilogue says.
  void storeWaves(const ConsumerThread &thread, TileOrigin origin,
                  llvm::ArrayRef<llvm::SmallVector<mlir::Value>> waves);
  /// The fused output cast: records `amaxBits` (storeFragment's, one a
  /// thread) in this CTA's amax partial, the max over the warp first.
  void recordAmax(mlir::Value amaxBits);
  /// The fused output cast: zeroes this CTA's amax partials (kernel entry).
  void clearAmaxPartials();
  /// Before exit: waits until the last TMA stores have read shared memory.
  void finishEpilogue(const ConsumerThread &thread);

private:
  void initBarriers();
  void synchronizeCTAs();
  TileOrigin getTileOrigin(mlir::Value clusterTile);
  void buildProducer();
  void buildConsumers();
  void issueStageLoads(TileOrigin origin, mlir::Value kBlock, RingSlot slot);
  void loadOperandTile(mlir::Value map, int64_t StageLayout::*buffer,
                       mlir::Value k, mlir::Value rowOrigin, int64_t tileRows,
                       int64_t rowBytes, bool shared, mlir::Value full,
                       RingSlot slot);
  void loadStageScales(const OperandPlan &operand, mlir::Value map,
                       int64_t StageLayout::*buffer,
                       mlir::Value kBlock, mlir::Value rowOrigin,
                       int64_t tileRows, mlir::Value full, RingSlot slot);
  /// The run at tile `coordinates` (row, column) of the tile at `origin`.
  OutputRun locateRun(TileOrigin origin,
                      std::pair<mlir::Value, mlir::Value> coordinates);
  /// Stores `vector` at `address` (global), aligned to its size.
  void storeVector(mlir::Value vector, mlir::Value address);
  /// The fused output cast of `rounded` (a vector of the output type)
  /// times `scale`: its codes (an i8 vector) and the values it cast,
  /// `rounded` widened exactly to f32 (whose getMagnitudeBits is the amax).
  std::pair<mlir::Value, mlir::Value> castCodes(mlir::Value rounded,
                                                mlir::Value scale);
  /// The largest of the f32 `values`' magnitudes (a vector), as i32 bits.
  mlir::Value getMagnitudeBits(mlir::Value values);
  /// The TMA-store epilogue: the panel issuer's condition, its wait until
  /// the panels are free, and the panels' stores once the tile is in them.
  mlir::Value isPanelIssuer();
  void waitForPanels();
  void storePanels(TileOrigin origin);
  /// The fused cast's codes through the panels; returns the thread's amax
  /// (f32 bits) over its elements inside the matrix.
  mlir::Value storeCastWavesThroughSharedMemory(
      const ConsumerThread &thread, TileOrigin origin,
      llvm::ArrayRef<llvm::SmallVector<mlir::Value>> waves);
  /// The shared address of the fused cast's code at (row, column) of the
  /// tile.
  mlir::Value getCastPanelAddress(mlir::Value row, mlir::Value column);
  void storeWavesThroughSharedMemory(
      const ConsumerThread &thread, TileOrigin origin,
      llvm::ArrayRef<llvm::SmallVector<mlir::Value>> waves);

  mlir::ImplicitLocOpBuilder &b;
  const GemmPlan &plan;
  KernelArguments args;
  std::unique_ptr<GemmMainLoop> mainLoop;
  mlir::Value base;        // i32 aligned shared base
  mlir::Value threadIdx;   // i32
  mlir::Value clusterRank; // i32 rank in the cluster (0 without one)
};

} // namespace mx::gemm

#endif // MX_LIB_CONVERSION_MXTOGPU_GEMM_GEMMKERNEL_H
