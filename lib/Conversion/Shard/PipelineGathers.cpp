//===- PipelineGathers.cpp - Overlap a quantize with its all-gather -------===//
//
// A partitioned program quantizes its shard and then all-gathers the compact
// results (the spec's section 12): on the GPU the gather waits for the whole
// quantize. Quantizing the shard in N chunks of rows instead, each chunk's
// results exchanged (mx.gather_chunk, at its final rows of the gathered
// tensors) while the next chunk is quantized, hides all but one chunk's
// quantize behind the exchange. One chunk keeps the quantize whole and only
// moves the exchange to the placed gather (one ncclBroadcast per root),
// which measured faster than ncclAllGather of the same bytes from 256 MiB on
// 2 H200s (docs/distributed.md). The chunks are block-aligned, and a quantize
// whose scales come from the whole tensor does so through the all-reduced
// `amax` operand that mx-partition gives it, so every chunk computes the
// bytes that the whole quantize computes at those rows. The gathered values
// are read only after mx.gather_join, placed before their first reader.
// Scales that mx-swizzle-before-gather swizzles before their gather are
// swizzled per chunk, each chunk's tiles gathered at their tile rows.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/Passes.h"
#include "mx/Conversion/Shard/Collectives.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mx {
#define GEN_PASS_DEF_PIPELINEGATHERS
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;
using namespace mx;

namespace {

/// A quantize to pipeline: for each result, the all-gather that is its only
/// user (null for a result that every device holds whole, taken from the
/// first chunk) and the swizzle between them (null for none), and the
/// devices of the gathers.
struct Candidate {
  QuantizeOp quantize;
  SmallVector<shard::AllGatherOp> gathers;
  SmallVector<SwizzleOp> swizzles;
  int64_t devices = 0;
};

/// The all-gather along dimension 0 over more than one device that is the
/// only user of `value`, or of the swizzle into 128x4 tiles of rows that is
/// its only user (mx-swizzle-before-gather's, returned in `swizzle`), or
/// null.
shard::AllGatherOp getOnlyGather(Value value, SymbolTableCollection &symbols,
                                 int64_t &devices, SwizzleOp &swizzle) {
  if (!value.hasOneUse())
    return nullptr;
  swizzle = dyn_cast<SwizzleOp>(*value.getUsers().begin());
  if (swizzle) {
    if (swizzle.getLayout() != SwizzleLayout::tiles ||
        swizzle.getUnscaledDim() != 0 || !swizzle->hasOneUse())
      return nullptr;
    value = swizzle.getResult();
  }
  auto gather = dyn_cast<shard::AllGatherOp>(*value.getUsers().begin());
  if (!gather || gather.getGatherAxis() != 0)
    return nullptr;
  shard::GridOp grid;
  devices = getGroupSize(gather, symbols, grid);
  return ShapedType::isDynamic(devices) || devices < 2 ? nullptr : gather;
}

/// The candidate that `quantize` is, or nullopt: at least one result is
/// all-gathered along the rows, every row-shaped result is, the others are
/// the same in every chunk (a per-tensor scale, a tensor scale), and the
/// gathers agree on their devices.
std::optional<Candidate> match(QuantizeOp quantize,
                               SymbolTableCollection &symbols) {
  if (quantize.getTransposed())
    return std::nullopt;
  int64_t rows = quantize.getInput().getType().getDimSize(0);
  Candidate candidate{quantize, {}, {}, 0};
  for (Value result : quantize->getResults()) {
    int64_t devices = 0;
    SwizzleOp swizzle;
    shard::AllGatherOp gather =
        getOnlyGather(result, symbols, devices, swizzle);
    auto type = cast<RankedTensorType>(result.getType());
    bool rowShaped = type.getRank() >= 2 && type.getNumElements() > 1;
    if (rowShaped != bool(gather))
      return std::nullopt;
    if (gather && candidate.devices && devices != candidate.devices)
      return std::nullopt;
    if (gather && rows % type.getDimSize(0))
      return std::nullopt;
    if (gather)
      candidate.devices = devices;
    candidate.gathers.push_back(gather);
    candidate.swizzles.push_back(gather ? swizzle : SwizzleOp());
  }
  if (!candidate.devices)
    return std::nullopt;
  return candidate;
}

/// The bytes that the gathers of `candidate` produce (every device's part).
int64_t getGatheredBytes(const Candidate &candidate) {
  int64_t bits = 0;
  for (shard::AllGatherOp gather : candidate.gathers)
    if (gather) {
      auto type = cast<RankedTensorType>(gather.getResult().getType());
      bits += type.getNumElements() * type.getElementTypeBitWidth();
    }
  return bits / 8;
}

/// Checks that chunks of `rows` rows of the input of `quantize` compute the
/// bytes of its whole quantize: its blocks do not straddle chunks, nor do
/// the 128x4 tiles of scales swizzled before their gather, and what spans
/// the whole input (one block over it, NVFP4's computed tensor scale) comes
/// from the given amax. One chunk is the whole quantize.
LogicalResult checkChunks(const Candidate &candidate, int64_t chunks) {
  QuantizeOp quantize = candidate.quantize;
  if (chunks == 1)
    return success();
  for (SwizzleOp swizzle : candidate.swizzles) {
    if (!swizzle)
      continue;
    int64_t scaleRows = swizzle.getInput().getType().getDimSize(0);
    if (scaleRows % (chunks * SwizzleTiles::kRows))
      return quantize.emitOpError("cannot be pipelined in ")
             << chunks << " chunks: its " << scaleRows
             << " rows of scales, swizzled before their gather, do not "
                "split into chunks of whole "
             << SwizzleTiles::kRows << "-row tiles (mx-pipeline-gathers)";
  }
  int64_t total = quantize.getInput().getType().getDimSize(0);
  int64_t rows = total / chunks;
  int64_t blockRows = quantize.getBlock().front();
  bool whole = blockRows >= total;
  if (total % chunks || (!whole && rows % blockRows))
    return quantize.emitOpError("cannot be pipelined in ")
           << chunks << " chunks: its " << total
           << " rows do not split into chunks of whole blocks of "
           << blockRows << " rows (mx-pipeline-gathers)";
  if ((whole || quantize.getComputedTensorScale()) && !quantize.getAmax())
    return quantize.emitOpError("cannot be pipelined: its ")
           << (whole ? "block spans" : "tensor scale is computed from")
           << " the whole input, and it has no amax operand that chunks "
              "could share (mx-pipeline-gathers)";
  return success();
}

/// The first op of the block of `after` that uses a result of `gathers`
/// (an ancestor of the user in that block), or null.
Operation *findFirstReader(ArrayRef<shard::AllGatherOp> gathers,
                           Operation *after) {
  Block *block = after->getBlock();
  Operation *first = nullptr;
  for (shard::AllGatherOp gather : gathers) {
    if (!gather)
      continue;
    for (Operation *user : gather->getUsers()) {
      Operation *reader = block->findAncestorOpInBlock(*user);
      if (reader && (!first || reader->isBeforeInBlock(first)))
        first = reader;
    }
  }
  return first;
}

/// `type` with a `chunks`-th of its rows (dimension 0).
RankedTensorType getChunkType(Type type, int64_t chunks) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[0] /= chunks;
  return ranked.clone(shape);
}

/// Rewrites `candidate` into `chunks` chunk quantizes, each followed by the
/// mx.gather_chunk of its gathered results, and one mx.gather_join before
/// the first reader of the gathered values.
void pipeline(RewriterBase &rewriter, const Candidate &candidate,
              int64_t chunks) {
  QuantizeOp quantize = candidate.quantize;
  Location loc = quantize.getLoc();
  RankedTensorType input = quantize.getInput().getType();
  int64_t rows = input.getDimSize(0) / chunks;
  rewriter.setInsertionPoint(quantize);
  SmallVector<Value> chains;
  for (shard::AllGatherOp gather : candidate.gathers) {
    auto type = gather ? cast<RankedTensorType>(gather.getResult().getType())
                       : RankedTensorType();
    chains.push_back(type ? tensor::EmptyOp::create(rewriter, loc,
                                                    type.getShape(),
                                                    type.getElementType())
                                .getResult()
                          : Value());
  }
  SmallVector<Value> firstChunk;
  for (int64_t c = 0; c < chunks; ++c) {
    SmallVector<OpFoldResult> offsets(input.getRank(), rewriter.getIndexAttr(0));
    offsets[0] = rewriter.getIndexAttr(c * rows);
    SmallVector<OpFoldResult> sizes, strides(input.getRank(),
                                             rewriter.getIndexAttr(1));
    for (int64_t size : input.getShape())
      sizes.push_back(rewriter.getIndexAttr(size));
    sizes[0] = rewriter.getIndexAttr(rows);
    Value chunkInput = quantize.getInput();
    if (chunks > 1)
      chunkInput = tensor::ExtractSliceOp::create(rewriter, loc, chunkInput,
                                                  offsets, sizes, strides);
    Operation *chunk = rewriter.clone(*quantize);
    chunk->setOperand(0, chunkInput);
    // The parts first, then their gathers next to each other: a swizzle
    // kernel (FP4's, which its quantize does not absorb) between two gathers
    // would split the chunk's NCCL group.
    SmallVector<Value> parts;
    for (auto [result, gather, swizzle] : llvm::zip(
             chunk->getResults(), candidate.gathers, candidate.swizzles)) {
      if (gather)
        result.setType(getChunkType(result.getType(), chunks));
      Value part = gather ? result : Value();
      if (SwizzleOp whole = swizzle)
        part = SwizzleOp::create(rewriter, whole.getLoc(),
                                 getChunkType(whole.getType(), chunks), result,
                                 whole.getUnscaledDim(), whole.getLayout());
      parts.push_back(part);
    }
    for (auto [part, chain] : llvm::zip(parts, chains)) {
      if (!part)
        continue;
      int64_t chunkRows = cast<RankedTensorType>(part.getType()).getDimSize(0);
      chain = GatherChunkOp::create(rewriter, loc, chain.getType(), part, chain,
                                    c * chunkRows, candidate.devices);
    }
    if (c == 0)
      firstChunk = llvm::to_vector_of<Value>(chunk->getResults());
  }
  SmallVector<Value> gathered;
  for (Value chain : chains)
    if (chain)
      gathered.push_back(chain);
  if (Operation *reader = findFirstReader(candidate.gathers, quantize))
    rewriter.setInsertionPoint(reader);
  auto join = GatherJoinOp::create(rewriter, loc, gathered);
  auto joined = join.getResults().begin();
  for (auto [result, gather, swizzle, first] :
       llvm::zip(quantize->getResults(), candidate.gathers, candidate.swizzles,
                 firstChunk)) {
    if (gather)
      rewriter.replaceOp(gather, *joined++);
    else
      rewriter.replaceAllUsesWith(result, first);
    if (swizzle)
      rewriter.eraseOp(swizzle);
  }
  rewriter.eraseOp(quantize);
}

struct PipelineGathersPass
    : mx::impl::PipelineGathersBase<PipelineGathersPass> {
  using PipelineGathersBase::PipelineGathersBase;

  void runOnOperation() override {
    if (chunks < 1 || minBytes < 0) {
      mlir::emitError(getOperation()->getLoc(), "mx-pipeline-gathers: ")
          << (chunks < 1 ? "chunks must be at least 1, got "
                         : "min-bytes must not be negative, got ")
          << static_cast<int64_t>(chunks < 1 ? chunks : minBytes);
      return signalPassFailure();
    }
    SymbolTableCollection symbols;
    SmallVector<Candidate> candidates;
    getOperation()->walk([&](QuantizeOp quantize) {
      std::optional<Candidate> candidate = match(quantize, symbols);
      if (candidate && getGatheredBytes(*candidate) >= minBytes)
        candidates.push_back(std::move(*candidate));
    });
    bool rejected = false;
    for (const Candidate &candidate : candidates)
      rejected |= failed(checkChunks(candidate, chunks));
    if (rejected)
      return signalPassFailure();
    IRRewriter rewriter(&getContext());
    for (const Candidate &candidate : candidates)
      pipeline(rewriter, candidate, chunks);
  }
};

} // namespace
