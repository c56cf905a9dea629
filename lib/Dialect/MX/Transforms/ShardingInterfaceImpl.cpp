//===- ShardingInterfaceImpl.cpp - mx ops on a device grid ----------------===//
//
// Upstream's sharding interface for the mx ops, as external models. Each op
// describes itself the way linalg ops do, by loops: its iterator types and
// one indexing map per operand and result, from which upstream's default
// propagation derives shardings. What upstream cannot express, this file
// adds around those defaults (docs/distributed.md says why):
//
// * A rule per loop (LoopRule): a block-scaled tensor splits only on block
//   boundaries, and its scales follow its data only then; a swizzled layout
//   splits only on whole tiles; the amax history is never split. Propagation
//   drops a split that breaks a swizzle's tile rule, so that the compact
//   scales are gathered before the swizzle (the spec's "swizzle after the
//   gather"); any other broken rule is a diagnostic naming the op, the
//   dimension, the split and the boundary, from propagation and from
//   partitioning alike.
// * Partitioning rules that are not "clone the op on the shards": the amax
//   of per-tensor current scaling and of NVFP4's computed tensor scale is
//   all-reduced (max) before the cast, which takes it as `amax`; a K-split
//   scaled_matmul computes an f32 partial product, all-reduces it (sum) and
//   rounds it to its result type; the amax history of delayed scaling is
//   all-reduced (max) at the update, once for every cast that recorded a
//   per-device amax in it since, unless a cast's history escapes elsewhere
//   (then that cast reduces it); a column sum over split rows sums its
//   shard's rows, then all-reduces (sum) the partial sums.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/Transforms/ShardingInterfaceImpl.h"
#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

using namespace mlir;
using namespace mx;
using shard::GridAxis;
using shard::ReductionKind;
using shard::Sharding;
using shard::ShardingArray;
using shard::ShardingArrayRef;
using shard::ShardingOption;

namespace {

//===----------------------------------------------------------------------===//
// Loops and their rules
//===----------------------------------------------------------------------===//

/// What a split of one loop must respect for each device to compute its
/// part of the op alone.
struct LoopRule {
  /// How diagnostics name the loop ("dimension 1 of its input", "K").
  std::string name;
  int64_t extent = 1;
  /// A shard must be a multiple of `multiple` elements: `boundary` ("its
  /// blocks of 32 elements") must not straddle two devices.
  int64_t multiple = 1;
  std::string boundary;
  /// The loop is never split, because of `boundary`.
  bool replicated = false;
  /// A split that breaks the rule is dropped (the op computes the whole loop
  /// from gathered operands) rather than rejected.
  bool gatherInstead = false;
};

/// How an mx op's tensors follow its loops: the iterator types, the
/// indexing maps of its operands and results (in that order), a rule per
/// loop, and the kind of each reduction loop. A tensor dimension that
/// follows no shared loop gets a loop of its own that is never split (the
/// inside of a scale tile, the one scale of a per-tensor quantize), so that
/// every map is a projected permutation.
class LoopModel {
public:
  static constexpr int64_t kOwn = -1;

  explicit LoopModel(MLIRContext *context) : context(context) {}

  int64_t addLoop(LoopRule rule,
                  utils::IteratorType type = utils::IteratorType::parallel) {
    rules.push_back(std::move(rule));
    iterators.push_back(type);
    if (type == utils::IteratorType::reduction)
      reductions.push_back(ReductionKind::Sum);
    return rules.size() - 1;
  }

  /// Shards of `loop` must be multiples of `multiple` (`boundary`); several
  /// requirements combine to their least common multiple, named after the
  /// largest.
  void requireMultiple(int64_t loop, int64_t multiple, StringRef boundary) {
    LoopRule &rule = rules[loop];
    if (multiple > rule.multiple)
      rule.boundary = boundary.str();
    rule.multiple = std::lcm(rule.multiple, multiple);
  }

  /// The next operand or result, `name`d for diagnostics, whose dimension d
  /// follows `loops[d]` (kOwn: a loop of its own, never split because of
  /// `own`). A 0-D tensor follows no loop.
  void addTensor(StringRef name, Type type, ArrayRef<int64_t> loops,
                 StringRef own = "") {
    auto shape = cast<RankedTensorType>(type).getShape();
    SmallVector<int64_t> dims;
    for (auto [d, size, loop] : llvm::enumerate(shape, loops)) {
      if (loop != kOwn) {
        dims.push_back(loop);
        continue;
      }
      LoopRule rule;
      rule.name = llvm::formatv("dimension {0} of its {1}", d, name).str();
      rule.extent = size;
      rule.replicated = true;
      rule.boundary = own.str();
      dims.push_back(addLoop(std::move(rule)));
    }
    tensors.push_back(std::move(dims));
  }

  /// A tensor whose dimensions all have loops of their own.
  void addOwnTensor(StringRef name, Type type, StringRef own) {
    auto rank = cast<RankedTensorType>(type).getRank();
    addTensor(name, type, SmallVector<int64_t>(rank, kOwn), own);
  }

  SmallVector<AffineMap> getIndexingMaps() const {
    return llvm::map_to_vector(tensors, [&](ArrayRef<int64_t> dims) {
      SmallVector<AffineExpr> exprs = llvm::map_to_vector(
          dims, [&](int64_t d) { return getAffineDimExpr(d, context); });
      return AffineMap::get(iterators.size(), 0, exprs, context);
    });
  }

  SmallVector<utils::IteratorType> iterators;
  SmallVector<LoopRule> rules;
  SmallVector<ReductionKind> reductions;

private:
  MLIRContext *context;
  SmallVector<SmallVector<int64_t>> tensors;
};

std::string dimensionName(int64_t d, StringRef tensor) {
  return llvm::formatv("dimension {0} of its {1}", d, tensor).str();
}

std::string blocksBoundary(int64_t extent) {
  return llvm::formatv("its blocks of {0} elements", extent).str();
}

LoopRule makeRule(std::string name, int64_t extent) {
  LoopRule rule;
  rule.name = std::move(name);
  rule.extent = extent;
  return rule;
}

/// Loops over the dimensions of a block-scaled tensor `type` with `block`,
/// tied to its scales where there is more than one block along them. A
/// quantize (`blockLocal`) needs every block on one device; a dequantize
/// reads one scale per block and may split a block that spans a dimension.
SmallVector<int64_t> addBlockedLoops(LoopModel &model, StringRef tensor,
                                     RankedTensorType type,
                                     ArrayRef<int64_t> block,
                                     ArrayRef<int64_t> scalesShape,
                                     bool blockLocal) {
  SmallVector<int64_t> loops;
  for (auto [d, size, extent, scales] :
       llvm::enumerate(type.getShape(), block, scalesShape)) {
    loops.push_back(model.addLoop(makeRule(dimensionName(d, tensor), size)));
    if (extent != 1 && (blockLocal || scales > 1))
      model.requireMultiple(loops.back(), extent, blocksBoundary(extent));
  }
  return loops;
}

/// Whether a quantize uses one scale for its whole input (per-tensor
/// current scaling), whose amax then spans every split.
bool isPerTensor(QuantizeOp op) {
  return op.getScales().getType().getNumElements() == 1;
}

/// Whether a quantize derives NVFP4's tensor scale from its input's amax.
bool computesTensorScale(QuantizeOp op) {
  return static_cast<bool>(op.getComputedTensorScale());
}

constexpr StringLiteral kSingleScale =
    "a per-tensor scale, which every element shares";

/// The loops of a (possibly transposed) quantize's input: the data's loops,
/// with the last two swapped where the data is the input's transpose.
SmallVector<int64_t> getInputLoops(ArrayRef<int64_t> dataLoops,
                                   bool transposed) {
  return transposed ? getTransposedShape(dataLoops)
                    : SmallVector<int64_t>(dataLoops);
}

LoopModel buildModel(QuantizeOp op) {
  LoopModel model(op.getContext());
  RankedTensorType scales = op.getScales().getType();
  bool perTensor = isPerTensor(op);
  // One amax over the whole tensor: any split works, the amax is reduced.
  SmallVector<int64_t> block(op.getBlock());
  if (perTensor)
    block.assign(block.size(), 1);
  // Blocks are the data's; a transposed input is read along swapped loops
  // (the loops are then named by the data's dimensions).
  SmallVector<int64_t> loops = addBlockedLoops(
      model, op.getTransposed() ? "data" : "input", op.getData().getType(), block,
                      scales.getShape(), /*blockLocal=*/true);
  model.addTensor("input", op.getInput().getType(),
                  getInputLoops(loops, op.getTransposed()));
  for (Value scalar : {op.getTensorScale(), op.getAmax()})
    if (scalar)
      model.addTensor("tensor scale", scalar.getType(), {});
  model.addTensor("data", op.getData().getType(), loops);
  if (perTensor)
    model.addOwnTensor("scales", scales, kSingleScale);
  else
    model.addTensor("scales", scales, loops);
  if (op.getComputedTensorScale())
    model.addTensor("tensor scale", op.getComputedTensorScale().getType(), {});
  return model;
}

LoopModel buildModel(DequantizeOp op) {
  LoopModel model(op.getContext());
  RankedTensorType data = op.getData().getType();
  RankedTensorType scales = op.getScales().getType();
  SmallVector<int64_t> loops =
      addBlockedLoops(model, "data", data, op.getBlock(), scales.getShape(),
                      /*blockLocal=*/false);
  SmallVector<int64_t> scaleLoops;
  for (auto [loop, size] : llvm::zip_equal(loops, scales.getShape()))
    scaleLoops.push_back(size > 1 ? loop : LoopModel::kOwn);
  model.addTensor("data", data, loops);
  model.addTensor("scales", scales, scaleLoops,
                  "a scale that every element along it shares");
  if (op.getTensorScale())
    model.addTensor("tensor scale", op.getTensorScale().getType(), {});
  model.addTensor("result", op.getResult().getType(), loops);
  return model;
}

constexpr StringLiteral kTileInside =
    "it indexes inside the tiles of the swizzled layout";

/// A swizzle (`toSwizzled`) or unswizzle between `compact` scales and their
/// `layout` form: rows split on whole tiles (128 rows) or groups of 4
/// (blockwise), columns on whole tiles (4 columns); other splits gather the
/// operand first.
LoopModel buildSwizzleModel(MLIRContext *context, RankedTensorType compact,
                            RankedTensorType swizzled, int64_t unscaledDim,
                            SwizzleLayout layout, bool toSwizzled) {
  LoopModel model(context);
  int64_t rank = compact.getRank();
  int64_t rowsDim = unscaledDim;
  int64_t colsDim = unscaledDim == rank - 1 ? rank - 2 : rank - 1;
  bool tiles = layout == SwizzleLayout::tiles;
  SmallVector<int64_t> loops;
  for (auto [d, size] : llvm::enumerate(compact.getShape())) {
    LoopRule rule = makeRule(dimensionName(d, "compact scales"), size);
    rule.gatherInstead = true;
    loops.push_back(model.addLoop(std::move(rule)));
  }
  if (tiles) {
    model.requireMultiple(loops[rowsDim], SwizzleTiles::kRows,
                          "the 128-row tiles of the swizzled layout");
    model.requireMultiple(loops[colsDim], SwizzleTiles::kCols,
                          "the 4-column tiles of the swizzled layout");
  } else {
    model.requireMultiple(loops[rowsDim], kBlockwisePadding,
                          "the groups of 4 rows of the blockwise layout");
  }
  SmallVector<int64_t> swizzledLoops(loops.begin(), loops.end() - 2);
  if (tiles)
    swizzledLoops.append({loops[rowsDim], loops[colsDim], LoopModel::kOwn,
                          LoopModel::kOwn, LoopModel::kOwn});
  else
    swizzledLoops.append({loops[colsDim], loops[rowsDim], LoopModel::kOwn});
  auto addCompact = [&] { model.addTensor("compact scales", compact, loops); };
  auto addSwizzled = [&] {
    model.addTensor("swizzled scales", swizzled, swizzledLoops, kTileInside);
  };
  if (toSwizzled) {
    addCompact();
    addSwizzled();
  } else {
    addSwizzled();
    addCompact();
  }
  return model;
}

LoopModel buildModel(SwizzleOp op) {
  return buildSwizzleModel(op.getContext(), op.getInput().getType(),
                           op.getResult().getType(), op.getUnscaledDim(),
                           op.getLayout(), /*toSwizzled=*/true);
}

LoopModel buildModel(UnswizzleOp op) {
  return buildSwizzleModel(op.getContext(), op.getResult().getType(),
                           op.getInput().getType(), op.getUnscaledDim(),
                           op.getLayout(), /*toSwizzled=*/false);
}

/// One GEMM operand (data and scales) on the batch loops, its rows loop (M
/// or N) and K, with the multiples its blocks and scale layout need.
void addMatmulOperand(LoopModel &model, StringRef name, Value data,
                      Value scales, OperandLayout layout,
                      ArrayRef<int64_t> block, ArrayRef<int64_t> batchLoops,
                      int64_t rowsLoop, int64_t kLoop) {
  auto dataType = cast<RankedTensorType>(data.getType());
  auto scalesType = cast<RankedTensorType>(scales.getType());
  int64_t rank = dataType.getRank();
  MatmulOperandShape view = getMatmulOperandShape(dataType.getShape(), layout);
  int64_t blockRows = block[view.rowsDim], blockK = block[view.kDim];
  SmallVector<int64_t> dataLoops(batchLoops);
  dataLoops.append(2, 0);
  dataLoops[view.rowsDim] = rowsLoop;
  dataLoops[view.kDim] = kLoop;
  model.addTensor(name, dataType, dataLoops);

  std::string scalesName = (name + " scales").str();
  SmallVector<int64_t> scaleLoops(batchLoops);
  if (scalesType.getRank() == rank + 3) {
    scaleLoops.append(
        {rowsLoop, kLoop, LoopModel::kOwn, LoopModel::kOwn, LoopModel::kOwn});
    model.requireMultiple(rowsLoop, SwizzleTiles::kRows,
                          "the 128-row tiles of its " + scalesName);
    model.requireMultiple(kLoop, SwizzleTiles::kCols * blockK,
                          "the 4-column tiles of its " + scalesName);
    model.addTensor(scalesName, scalesType, scaleLoops, kTileInside);
    return;
  }
  if (scalesType.getRank() == rank + 1) {
    scaleLoops.append({kLoop, rowsLoop, LoopModel::kOwn});
    model.requireMultiple(rowsLoop, kBlockwisePadding,
                          "the groups of 4 rows of its " + scalesName);
    model.requireMultiple(kLoop, blockK, "the K blocks of its " + name.str());
    model.addTensor(scalesName, scalesType, scaleLoops, kTileInside);
    return;
  }
  // Linear scales follow the data where there is more than one block.
  scaleLoops.append(2, LoopModel::kOwn);
  for (auto [d, loop, extent] : {std::tuple(view.rowsDim, rowsLoop, blockRows),
                                 std::tuple(view.kDim, kLoop, blockK)}) {
    if (scalesType.getDimSize(d) == 1)
      continue;
    scaleLoops[d] = loop;
    if (extent != 1)
      model.requireMultiple(loop, extent,
                            "the blocks of its " + name.str() + ", " +
                                std::to_string(extent) + " elements");
  }
  model.addTensor(scalesName, scalesType, scaleLoops,
                  "a scale that every element along it shares");
}

LoopModel buildModel(ScaledMatmulOp op) {
  LoopModel model(op.getContext());
  MatmulOperandShape lhs = op.getLhsShape(), rhs = op.getRhsShape();
  SmallVector<int64_t> batchLoops;
  for (auto [d, size] : llvm::enumerate(lhs.batch))
    batchLoops.push_back(model.addLoop(
        makeRule(llvm::formatv("batch dimension {0}", d).str(), size)));
  int64_t m = model.addLoop(makeRule("M", lhs.rows));
  int64_t n = model.addLoop(makeRule("N", rhs.rows));
  int64_t k =
      model.addLoop(makeRule("K", lhs.k), utils::IteratorType::reduction);
  addMatmulOperand(model, "lhs", op.getLhs(), op.getLhsScales(),
                   op.getLhsLayout(), op.getLhsBlock(), batchLoops, m, k);
  addMatmulOperand(model, "rhs", op.getRhs(), op.getRhsScales(),
                   op.getRhsLayout(), op.getRhsBlock(), batchLoops, n, k);
  for (Value scale : op.getTensorScales())
    model.addTensor("tensor scale", scale.getType(), {});
  SmallVector<int64_t> resultLoops(batchLoops);
  resultLoops.append({m, n});
  if (Value bias = op.getBias())
    model.addTensor("bias", bias.getType(), {n});
  if (Value accumulator = op.getAccumulator())
    model.addTensor("accumulator", accumulator.getType(), resultLoops);
  model.addTensor("result", op.getResult().getType(), resultLoops);
  return model;
}

LoopModel buildModel(AmaxOp op) {
  LoopModel model(op.getContext());
  RankedTensorType input = op.getInput().getType();
  SmallVector<int64_t> loops;
  for (auto [d, size] : llvm::enumerate(input.getShape()))
    loops.push_back(model.addLoop(makeRule(dimensionName(d, "input"), size),
                                  utils::IteratorType::reduction));
  model.reductions.assign(loops.size(), ReductionKind::Max);
  model.addTensor("input", input, loops);
  model.addTensor("result", op.getType(), {});
  return model;
}

/// Rows are a reduction (sum), columns are parallel.
LoopModel buildModel(ColumnSumOp op) {
  LoopModel model(op.getContext());
  RankedTensorType input = op.getInput().getType();
  int64_t rows = model.addLoop(makeRule(dimensionName(0, "input"),
                                        input.getDimSize(0)),
                               utils::IteratorType::reduction);
  int64_t cols =
      model.addLoop(makeRule(dimensionName(1, "input"), input.getDimSize(1)));
  model.addTensor("input", input, {rows, cols});
  model.addTensor("result", op.getType(), {cols});
  return model;
}

constexpr StringLiteral kWholeHistory =
    "every device keeps the whole amax history and scales";

/// The loops of an amax history `[L, N]`, which is never split.
std::pair<int64_t, int64_t> addHistoryLoops(LoopModel &model,
                                            RankedTensorType history) {
  auto rule = [&](int64_t d) {
    LoopRule r = makeRule(dimensionName(d, "history"), history.getDimSize(d));
    r.replicated = true;
    r.boundary = kWholeHistory.str();
    return r;
  };
  return {model.addLoop(rule(0)), model.addLoop(rule(1))};
}

LoopModel buildModel(QuantizeDelayedOp op) {
  LoopModel model(op.getContext());
  RankedTensorType data = op.getData().getType();
  SmallVector<int64_t> loops;
  for (auto [d, size] : llvm::enumerate(data.getShape()))
    loops.push_back(model.addLoop(makeRule(
        dimensionName(d, op.getTransposed() ? "data" : "input"), size)));
  auto [rows, cols] = addHistoryLoops(model, op.getHistory().getType());
  model.addTensor("input", op.getInput().getType(),
                  getInputLoops(loops, op.getTransposed()));
  model.addTensor("scales", op.getScales().getType(), {cols});
  model.addTensor("history", op.getHistory().getType(), {rows, cols});
  model.addTensor("data", op.getData().getType(), loops);
  model.addOwnTensor("scale_inv", op.getScaleInv().getType(), kSingleScale);
  model.addTensor("new history", op.getNewHistory().getType(), {rows, cols});
  return model;
}

LoopModel buildModel(UpdateAmaxHistoryOp op) {
  LoopModel model(op.getContext());
  auto [rows, cols] = addHistoryLoops(model, op.getHistory().getType());
  model.addTensor("history", op.getHistory().getType(), {rows, cols});
  model.addTensor("scales", op.getScales().getType(), {cols});
  model.addTensor("new history", op.getNewHistory().getType(), {rows, cols});
  model.addTensor("new scales", op.getNewScales().getType(), {cols});
  return model;
}

LoopModel buildLoopModel(Operation *op) {
  return llvm::TypeSwitch<Operation *, LoopModel>(op)
      .Case<QuantizeOp, DequantizeOp, SwizzleOp, UnswizzleOp, ScaledMatmulOp,
            AmaxOp, QuantizeDelayedOp, UpdateAmaxHistoryOp, ColumnSumOp>(
          [](auto op) { return buildModel(op); });
}

//===----------------------------------------------------------------------===//
// Checking splits
//===----------------------------------------------------------------------===//

enum class SplitCheck { ok, gather, error };

/// Checks a split of the loop of `rule` over `axes` of `grid`; explains a
/// broken rule in `message`.
SplitCheck checkSplit(const LoopRule &rule, shard::GridOp grid,
                      ArrayRef<GridAxis> axes, std::string &message) {
  if (axes.empty())
    return SplitCheck::ok;
  llvm::raw_string_ostream os(message);
  os << "splits " << rule.name << " (" << rule.extent
     << " elements) over grid axes [";
  llvm::interleaveComma(axes, os);
  os << "] of @" << grid.getSymName();
  // The shard dialect does not bound a sharding's axes by its grid's rank;
  // the group size of an axis past it would read outside the grid's shape.
  int64_t rank = grid.getRank();
  if (llvm::any_of(axes, [&](GridAxis axis) { return axis >= rank; })) {
    os << ", which has " << rank << (rank == 1 ? " axis" : " axes");
    return SplitCheck::error;
  }
  int64_t devices = shard::collectiveProcessGroupSize(axes, grid);
  if (ShapedType::isDynamic(devices)) {
    os << ", whose size is dynamic: mx ops partition over static grids";
    return SplitCheck::error;
  }
  // The shard dialect takes grid axes of size 0; their shards are undefined.
  if (devices < 1) {
    os << ", which hold no device (an axis of size 0)";
    return SplitCheck::error;
  }
  os << " (" << devices << " devices)";
  if (rule.replicated) {
    os << ", which must not be split: " << rule.boundary;
    return SplitCheck::error;
  }
  SplitCheck broken =
      rule.gatherInstead ? SplitCheck::gather : SplitCheck::error;
  if (rule.extent % devices != 0) {
    os << ", which does not divide it";
    return broken;
  }
  int64_t shard = rule.extent / devices;
  if (shard % rule.multiple == 0)
    return SplitCheck::ok;
  os << " into shards of " << shard << " elements, which do not fall on "
     << rule.boundary << ": a shard must be a multiple of " << rule.multiple
     << " elements";
  return broken;
}

/// Reports on `op` the first loop of `model` whose split in `loopAxes`
/// breaks its rule (including the rules that propagation would have met by
/// gathering).
LogicalResult verifySplits(Operation *op, const LoopModel &model,
                           shard::GridOp grid, ShardingArrayRef loopAxes) {
  for (auto [rule, axes] : llvm::zip(model.rules, loopAxes)) {
    std::string message;
    if (checkSplit(rule, grid, axes, message) != SplitCheck::ok)
      return op->emitOpError(message);
  }
  return success();
}

shard::GridOp lookupGrid(Operation *op, FlatSymbolRefAttr symbol) {
  return symbol
             ? SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, symbol)
             : shard::GridOp();
}

/// The grid axes of every split loop of `loopAxes` that `select` accepts,
/// sorted and unique.
template <typename Select>
SmallVector<GridAxis> collectAxes(ShardingArrayRef loopAxes, Select select) {
  SmallVector<GridAxis> axes;
  for (auto [loop, loopSplit] : llvm::enumerate(loopAxes))
    if (select(loop))
      llvm::append_range(axes, loopSplit);
  llvm::sort(axes);
  axes.erase(llvm::unique(axes), axes.end());
  return axes;
}

SmallVector<GridAxis> collectAllAxes(ShardingArrayRef loopAxes) {
  return collectAxes(loopAxes, [](size_t) { return true; });
}

/// The sharding on `grid` of a tensor indexed by `map` when the loops are
/// split as `loopAxes` says.
Sharding getLoopSharding(FlatSymbolRefAttr grid, ShardingArrayRef loopAxes,
                         AffineMap map) {
  SmallVector<shard::GridAxesAttr> splitAxes;
  for (AffineExpr result : map.getResults()) {
    unsigned loop = cast<AffineDimExpr>(result).getPosition();
    splitAxes.push_back(shard::GridAxesAttr::get(
        map.getContext(), loop < loopAxes.size()
                              ? ArrayRef<GridAxis>(loopAxes[loop])
                              : ArrayRef<GridAxis>()));
  }
  return Sharding::get(grid, splitAxes);
}

//===----------------------------------------------------------------------===//
// Delayed scaling: where the per-device amaxes are reduced
//===----------------------------------------------------------------------===//

/// `value` without the shard.shard annotations in front of it.
Value skipShardOps(Value value) {
  while (auto shardOp = value.getDefiningOp<shard::ShardOp>())
    value = shardOp.getSrc();
  return value;
}

/// The uses of `value`, looking through shard.shard annotations.
void collectUsesThroughShardOps(Value value,
                                SmallVectorImpl<OpOperand *> &uses) {
  for (OpOperand &use : value.getUses()) {
    if (auto shardOp = dyn_cast<shard::ShardOp>(use.getOwner()))
      collectUsesThroughShardOps(shardOp.getResult(), uses);
    else
      uses.push_back(&use);
  }
}

/// The grid axes that split the input of a delayed-scaling cast.
SmallVector<GridAxis> getInputSplitAxes(QuantizeDelayedOp op) {
  auto shardOp = op.getInput().getDefiningOp<shard::ShardOp>();
  if (!shardOp)
    return {};
  Sharding sharding(shardOp.getSharding());
  ShardingArray splits;
  for (shard::GridAxesAttr axes : sharding.getSplitAxes())
    splits.emplace_back(axes.asArrayRef());
  return collectAllAxes(splits);
}

/// Whether the new history of a cast reaches only later casts (as their
/// history, and these defer too) and updates (as theirs): its per-device
/// amax then waits for the update, which reduces the amaxes of all casts at
/// once (Transformer Engine's reduce_amax, once per step). Otherwise the
/// cast reduces its history itself.
bool defersAmaxReduction(QuantizeDelayedOp op) {
  SmallVector<OpOperand *> uses;
  collectUsesThroughShardOps(op.getNewHistory(), uses);
  return llvm::all_of(uses, [](OpOperand *use) {
    Operation *user = use->getOwner();
    if (auto update = dyn_cast<UpdateAmaxHistoryOp>(user))
      return use == &update.getHistoryMutable();
    auto cast = dyn_cast<QuantizeDelayedOp>(user);
    return cast && use == &cast.getHistoryMutable() &&
           defersAmaxReduction(cast);
  });
}

/// The grid axes over which the (unpartitioned) amax history `history` holds
/// per-device amaxes that no all-reduce has combined yet: those of the
/// casts since the last reduction that quantized split inputs.
SmallVector<GridAxis> getPendingAmaxAxes(Value history) {
  auto cast = skipShardOps(history).getDefiningOp<QuantizeDelayedOp>();
  if (!cast || !defersAmaxReduction(cast))
    return {};
  SmallVector<GridAxis> axes = getInputSplitAxes(cast);
  llvm::append_range(axes, getPendingAmaxAxes(cast.getHistory()));
  llvm::sort(axes);
  axes.erase(llvm::unique(axes), axes.end());
  return axes;
}

//===----------------------------------------------------------------------===//
// Partitioning
//===----------------------------------------------------------------------===//

/// What partitioning one op works with: its model and loop splits, the grid,
/// and upstream's arguments to `partition`.
struct Partitioning {
  Operation *op;
  LoopModel model;
  shard::GridOp grid;
  ShardingArray loopAxes;
  ArrayRef<Value> operands;
  ArrayRef<Sharding> operandShardings, resultShardings;
  IRMapping &map;
  SymbolTableCollection &symbols;
  OpBuilder &builder;

  ImplicitLocOpBuilder getBuilder() const {
    return ImplicitLocOpBuilder(op->getLoc(), builder);
  }

  /// The op cloned onto the shards of its operands (`operands`, or other
  /// partitioned values in their place), with sharded result types.
  LogicalResult cloneOnShards(ArrayRef<Value> operands) const {
    IRMapping local;
    local.map(op->getOperands(), operands);
    shard::partitionTriviallyShardableOperation(*op, operands, operandShardings,
                                                resultShardings, local, symbols,
                                                builder);
    map.map(op->getResults(),
            llvm::map_to_vector(op->getResults(),
                                [&](Value r) { return local.lookup(r); }));
    return success();
  }
  LogicalResult cloneOnShards() const { return cloneOnShards(operands); }

  /// The type of `op`'s result `index` on one device.
  RankedTensorType getShardType(unsigned index) const {
    return cast<RankedTensorType>(shard::shardType(
        op->getResult(index).getType(), grid, resultShardings[index]));
  }

  Value allReduce(Value value, ArrayRef<GridAxis> axes,
                  ReductionKind kind) const {
    ImplicitLocOpBuilder b = getBuilder();
    return shard::AllReduceOp::create(
               b, value, shard::GridOp(grid).getSymName(), axes, kind)
        .getResult();
  }
};

/// Per-tensor current scaling and NVFP4's computed tensor scale: every
/// device reduces its shard's amax, the amaxes are all-reduced (max, NaN
/// propagating), and each shard is quantized with the whole tensor's amax.
/// Block-local recipes are cloned onto their shards.
LogicalResult partitionOp(QuantizeOp op, const Partitioning &p) {
  // A given amax is already the whole tensor's.
  SmallVector<GridAxis> axes = collectAllAxes(p.loopAxes);
  if (axes.empty() || op.getAmax() ||
      !(isPerTensor(op) || computesTensorScale(op)))
    return p.cloneOnShards();
  ImplicitLocOpBuilder b = p.getBuilder();
  auto scalarType = RankedTensorType::get({}, b.getF32Type());
  Value input = p.operands[0];
  Value local =
      AmaxOp::create(b, scalarType, input, /*finite=*/computesTensorScale(op));
  Value amax = p.allReduce(local, axes, ReductionKind::Max);
  SmallVector<Type> types = llvm::map_to_vector(
      llvm::seq<unsigned>(0, op->getNumResults()),
      [&](unsigned i) -> Type { return p.getShardType(i); });
  auto quantize =
      QuantizeOp::create(b, types, input, /*tensor_scale=*/Value(), amax,
                         op.getBlockAttr(), op.getRoundingAttr(),
                         op.getTransposedAttr());
  p.map.map(op->getResults(), quantize->getResults());
  return success();
}

/// Each device's amax of its shard, all-reduced (max) over the split axes.
LogicalResult partitionOp(AmaxOp op, const Partitioning &p) {
  if (failed(p.cloneOnShards()))
    return failure();
  SmallVector<GridAxis> axes = collectAllAxes(p.loopAxes);
  if (!axes.empty())
    p.map.map(op.getResult(), p.allReduce(p.map.lookup(op.getResult()), axes,
                                          ReductionKind::Max));
  return success();
}

/// Splits of M, N and the batch are local. A split K gives each device an
/// f32 partial product of its K slice; the partial products are summed by an
/// all-reduce (which a reduce-scatter replaces where the sum is then split,
/// see combineCollectives) and rounded to the result type after it.
LogicalResult partitionOp(ScaledMatmulOp op, const Partitioning &p) {
  SmallVector<GridAxis> kAxes =
      shard::getReductionGridAxes(p.model.iterators, p.loopAxes);
  if (kAxes.empty())
    return p.cloneOnShards();
  // Every device's partial product would add them once more.
  if (op.getBias() || op.getAccumulator())
    return op.emitOpError("cannot split K over devices with a bias or "
                          "accumulate operand (each partial product would "
                          "add it)");
  ImplicitLocOpBuilder b = p.getBuilder();
  RankedTensorType resultType = p.getShardType(0);
  IRMapping local;
  local.map(op->getOperands(), p.operands);
  Operation *partial = b.clone(*op, local);
  partial->getResult(0).setType(resultType.clone(b.getF32Type()));
  Value sum = p.allReduce(partial->getResult(0), kAxes, ReductionKind::Sum);
  if (!resultType.getElementType().isF32())
    sum = arith::TruncFOp::create(b, resultType, sum);
  p.map.map(op.getResult(), sum);
  return success();
}

/// Split columns are local. Split rows give each device the f32 sums of its
/// rows, which an all-reduce (sum) adds up, as a K-split scaled_matmul's
/// partial products.
LogicalResult partitionOp(ColumnSumOp op, const Partitioning &p) {
  if (failed(p.cloneOnShards()))
    return failure();
  SmallVector<GridAxis> rowAxes =
      shard::getReductionGridAxes(p.model.iterators, p.loopAxes);
  if (!rowAxes.empty())
    p.map.map(op.getResult(), p.allReduce(p.map.lookup(op.getResult()),
                                          rowAxes, ReductionKind::Sum));
  return success();
}

/// The cast of a split input records the shard's amax in its new history;
/// the history is all-reduced (max) here only when it does not wait for the
/// update (defersAmaxReduction).
LogicalResult partitionOp(QuantizeDelayedOp op, const Partitioning &p) {
  if (failed(p.cloneOnShards()))
    return failure();
  if (defersAmaxReduction(op))
    return success();
  // A cast that does not defer has no deferring cast before it, so only its
  // own amax is pending.
  SmallVector<GridAxis> axes = getInputSplitAxes(op);
  if (!axes.empty())
    p.map.map(op.getNewHistory(), p.allReduce(p.map.lookup(op.getNewHistory()),
                                              axes, ReductionKind::Max));
  return success();
}

/// The update all-reduces (max) the history first when casts since the last
/// reduction recorded per-device amaxes in it. Rows other than the amax row
/// are equal on every device, so reducing the whole history reduces that
/// row.
LogicalResult partitionOp(UpdateAmaxHistoryOp op, const Partitioning &p) {
  SmallVector<GridAxis> axes = getPendingAmaxAxes(op.getHistory());
  if (axes.empty())
    return p.cloneOnShards();
  SmallVector<Value> operands(p.operands);
  operands[0] = p.allReduce(operands[0], axes, ReductionKind::Max);
  return p.cloneOnShards(operands);
}

/// Dequantize and the (un)swizzles: every device computes its shard.
LogicalResult partitionOp(Operation *, const Partitioning &p) {
  return p.cloneOnShards();
}

//===----------------------------------------------------------------------===//
// The interface
//===----------------------------------------------------------------------===//

template <typename OpTy>
struct MXShardingModel
    : shard::ShardingInterface::ExternalModel<MXShardingModel<OpTy>, OpTy> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return buildLoopModel(op).iterators;
  }

  SmallVector<ReductionKind>
  getReductionLoopIteratorKinds(Operation *op) const {
    return buildLoopModel(op).reductions;
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    return buildLoopModel(op).getIndexingMaps();
  }

  /// Upstream's option, without the splits that the op computes by
  /// gathering instead (a swizzle's rows off whole tiles). Splits that break
  /// the op's own rules stay: getShardingAnnotations reports them.
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    FailureOr<ShardingOption> option = shard::detail::defaultGetShardingOption(
        op, operandShardings, resultShardings);
    if (failed(option) || option->empty)
      return option;
    shard::GridOp grid = lookupGrid(op, option->grid);
    if (!grid)
      return option;
    LoopModel model = buildLoopModel(op);
    for (auto [rule, axes] : llvm::zip(model.rules, option->shardingArray)) {
      std::string message;
      if (checkSplit(rule, grid, axes, message) == SplitCheck::gather)
        axes.clear();
    }
    shard::removeTrailingEmptySubArray(option->shardingArray);
    return option;
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    if (shard::GridOp grid = lookupGrid(op, option.grid))
      if (failed(
              verifySplits(op, buildLoopModel(op), grid, option.shardingArray)))
        return failure();
    return shard::detail::defaultGetShardingAnnotations(op, option);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    const Sharding *any = nullptr;
    for (ArrayRef<Sharding> shardings : {operandShardings, resultShardings})
      for (const Sharding &sharding : shardings)
        if (!any && sharding)
          any = &sharding;
    if (!any) {
      shard::partitionFullyReplicatedOperation(
          *op, partitionedOperands, operandShardings, resultShardings,
          partitionMap, symbolTable, builder);
      return success();
    }
    LoopModel model = buildLoopModel(op);
    SmallVector<AffineMap> maps = model.getIndexingMaps();
    ShardingArray loopAxes = shard::getGridAxisAssignmentForLoopIterators(
        operandShardings, resultShardings, model.iterators, maps);
    // A result without users has no annotation: it follows the loops.
    std::vector<Sharding> results(resultShardings.begin(),
                                  resultShardings.end());
    for (auto [index, sharding] : llvm::enumerate(results))
      if (!sharding)
        sharding = getLoopSharding(any->getGridAttr(), loopAxes,
                                   maps[op->getNumOperands() + index]);
    Partitioning p{op,
                   model,
                   shard::getGrid(op, any->getGridAttr(), symbolTable),
                   std::move(loopAxes),
                   partitionedOperands,
                   operandShardings,
                   results,
                   partitionMap,
                   symbolTable,
                   builder};
    if (failed(verifySplits(op, p.model, p.grid, p.loopAxes)))
      return failure();
    return partitionOp(cast<OpTy>(op), p);
  }
};

template <typename... OpTys> void attachModels(MLIRContext *context) {
  (OpTys::template attachInterface<MXShardingModel<OpTys>>(*context), ...);
}

} // namespace

void mx::registerShardingInterfaceExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MXDialect *) {
    // Partitioning creates shard collectives and arith casts.
    context->loadDialect<shard::ShardDialect, arith::ArithDialect>();
    attachModels<QuantizeOp, DequantizeOp, SwizzleOp, UnswizzleOp,
                 ScaledMatmulOp, AmaxOp, QuantizeDelayedOp,
                 UpdateAmaxHistoryOp, ColumnSumOp>(context);
  });
}
