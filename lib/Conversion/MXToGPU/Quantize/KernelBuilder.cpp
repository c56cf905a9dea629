//===- KernelBuilder.cpp - Building blocks of the mx GPU kernels ----------===//
//
// The chip-neutral building blocks of the quantize kernels; see
// KernelBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mx/Dialect/MX/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gpu_kernels;

Value gpu_kernels::cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value gpu_kernels::getGlobalPointer(OpBuilder &b, Location loc,
                                    Value address) {
  constexpr unsigned kGlobalAddressSpace = 1;
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), kGlobalAddressSpace),
      arith::IndexCastOp::create(b, loc, b.getI64Type(), address).getResult());
}

Value IndexArith::div(Value x, int64_t d) const {
  return arith::DivUIOp::create(b, loc, x, cIndex(b, loc, d));
}

Value IndexArith::rem(Value x, int64_t d) const {
  return arith::RemUIOp::create(b, loc, x, cIndex(b, loc, d));
}

Value IndexArith::fma(Value x, int64_t m, Value y) const {
  Value scaled = arith::MulIOp::create(b, loc, x, cIndex(b, loc, m));
  return arith::AddIOp::create(b, loc, scaled, y);
}

Value gpu_kernels::cmpLT(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
}

Value gpu_kernels::andI(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}

Value gpu_kernels::isZeroIndex(OpBuilder &b, Location loc, Value x) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x,
                               cIndex(b, loc, 0));
}

Value gpu_kernels::splat(OpBuilder &b, Location loc, Value like,
                         Attribute value) {
  auto type =
      cast<VectorType>(like.getType()).clone(cast<TypedAttr>(value).getType());
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, value));
}

//===----------------------------------------------------------------------===//
// Launches and device buffers
//===----------------------------------------------------------------------===//

void gpu_kernels::buildBlockLaunch(
    OpBuilder &b, Location loc, int64_t numBlocks, TypeRange workgroupBuffers,
    function_ref<void(OpBuilder &, Location, const KernelIds &)> body) {
  Value one = cIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, cIndex(b, loc, numBlocks), one, one,
      cIndex(b, loc, kThreadsPerBlock), one, one,
      /*dynamicSharedMemorySize=*/Value(), /*asyncTokenType=*/Type(),
      /*asyncDependencies=*/ValueRange(), workgroupBuffers);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  KernelIds ids;
  ids.block = launch.getBlockIds().x;
  ids.thread = launch.getThreadIds().x;
  Value blockStart =
      arith::MulIOp::create(b, loc, ids.block, launch.getBlockSize().x);
  ids.global = arith::AddIOp::create(b, loc, blockStart, ids.thread);
  ids.workgroup = launch.getWorkgroupAttributions();
  body(b, loc, ids);
  gpu::TerminatorOp::create(b, loc);
}

void gpu_kernels::buildLaunch(
    OpBuilder &b, Location loc, int64_t numThreads,
    function_ref<void(OpBuilder &, Location, Value)> body) {
  buildBlockLaunch(b, loc, llvm::divideCeil(numThreads, kThreadsPerBlock),
                   TypeRange(),
                   [&](OpBuilder &nb, Location nloc, const KernelIds &ids) {
                     body(nb, nloc, ids.global);
                   });
}

SmallVector<Value> gpu_kernels::delinearize(OpBuilder &b, Location loc,
                                            Value index,
                                            ArrayRef<int64_t> shape) {
  SmallVector<Value> indices(shape.size());
  for (int64_t dim = shape.size() - 1; dim >= 0; --dim) {
    indices[dim] =
        arith::RemUIOp::create(b, loc, index, cIndex(b, loc, shape[dim]));
    index = arith::DivUIOp::create(b, loc, index, cIndex(b, loc, shape[dim]));
  }
  return indices;
}

void gpu_kernels::buildIf(OpBuilder &b, Location loc, Value condition,
                          function_ref<void(OpBuilder &, Location)> then,
                          function_ref<void(OpBuilder &, Location)> otherwise) {
  auto withYield = [](function_ref<void(OpBuilder &, Location)> body) {
    return [body](OpBuilder &nb, Location nloc) {
      body(nb, nloc);
      scf::YieldOp::create(nb, nloc);
    };
  };
  if (!otherwise) {
    scf::IfOp::create(b, loc, condition, withYield(then));
    return;
  }
  scf::IfOp::create(b, loc, condition, withYield(then), withYield(otherwise));
}

int64_t gpu_kernels::getNumSlices(RankedTensorType type, int64_t inner) {
  ArrayRef<int64_t> shape = type.getShape();
  return computeProduct(shape.drop_back(inner));
}

/// Groups every dimension before the last `inner` with the first of them.
static SmallVector<ReassociationIndices>
getFoldingReassociation(int64_t rank, int64_t inner) {
  SmallVector<ReassociationIndices> groups(1);
  for (int64_t dim = 0; dim <= rank - inner; ++dim)
    groups.front().push_back(dim);
  for (int64_t dim = rank - inner + 1; dim < rank; ++dim)
    groups.push_back({dim});
  return groups;
}

static RankedTensorType getFoldedType(RankedTensorType type, int64_t inner) {
  SmallVector<int64_t> shape(type.getShape().take_back(inner));
  shape.front() *= getNumSlices(type, inner);
  return type.clone(shape);
}

Value gpu_kernels::toFoldedBuffer(OpBuilder &b, Location loc, Value tensor,
                                  int64_t inner) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (type.getRank() != inner)
    tensor = tensor::CollapseShapeOp::create(
        b, loc, getFoldedType(type, inner), tensor,
        getFoldingReassociation(type.getRank(), inner));
  return toBuffer(b, loc, tensor);
}

Value gpu_kernels::allocFolded(OpBuilder &b, Location loc,
                               RankedTensorType type, int64_t inner) {
  return allocDevice(b, loc, getFoldedType(type, inner));
}

Value gpu_kernels::toUnfoldedTensor(OpBuilder &b, Location loc, Value buffer,
                                    RankedTensorType type) {
  Value tensor = toTensor(b, loc, buffer);
  int64_t inner = cast<MemRefType>(buffer.getType()).getRank();
  if (type.getRank() == inner)
    return tensor;
  return tensor::ExpandShapeOp::create(
      b, loc, type, tensor, getFoldingReassociation(type.getRank(), inner));
}

//===----------------------------------------------------------------------===//
// Memory access
//===----------------------------------------------------------------------===//

SmallVector<Value> gpu_kernels::swizzledIndices(OpBuilder &b, Location loc,
                                                Value r, Value c) {
  return llvm::to_vector(SwizzleTiles::getTiledIndex(r, c, IndexArith{b, loc}));
}

void gpu_kernels::storeBlockScale(
    OpBuilder &b, Location loc, Value scales, bool tiled, Value scale,
    Value valid, ArrayRef<Value> guards,
    function_ref<Value(OpBuilder &, Location)> row, Value col) {
  Value stored = scale;
  if (tiled)
    stored = arith::SelectOp::create(b, loc, valid, scale,
                                     buildZeroBits(b, loc, scale.getType()));
  Value condition;
  for (Value guard : guards)
    condition = condition ? andI(b, loc, condition, guard) : guard;
  if (!tiled)
    condition = condition ? andI(b, loc, condition, valid) : valid;
  buildIf(b, loc, condition, [&](OpBuilder &nb, Location nl) {
    Value r = row(nb, nl);
    memref::StoreOp::create(nb, nl, stored, scales,
                            tiled ? swizzledIndices(nb, nl, r, col)
                                  : SmallVector<Value>{r, col});
  });
}

/// The alignment of a vector access: its size, up to 16 bytes.
static llvm::MaybeAlign getVectorAlignment(VectorType type) {
  int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  return llvm::MaybeAlign(std::min<int64_t>(bytes, 16));
}

Value gpu_kernels::loadVector(OpBuilder &b, Location loc, VectorType type,
                              Value buffer, ValueRange indices) {
  return vector::LoadOp::create(b, loc, type, buffer, indices,
                                /*nontemporal=*/false,
                                getVectorAlignment(type));
}

void gpu_kernels::storeVector(OpBuilder &b, Location loc, Value value,
                              Value buffer, ValueRange indices) {
  vector::StoreOp::create(
      b, loc, value, buffer, indices,
      /*nontemporal=*/false,
      getVectorAlignment(cast<VectorType>(value.getType())));
}

void gpu_kernels::storeVectorIf(OpBuilder &b, Location loc, Value condition,
                                Value value, Value buffer, ValueRange indices) {
  if (!condition)
    return storeVector(b, loc, value, buffer, indices);
  buildIf(b, loc, condition, [&](OpBuilder &nb, Location nloc) {
    storeVector(nb, nloc, value, buffer, indices);
  });
}

Value gpu_kernels::extendToF32(OpBuilder &b, Location loc, Value vector,
                               bool feedsMagnitudes) {
  auto type = cast<VectorType>(vector.getType());
  if (type.getElementType().isF32())
    return vector;
  int64_t length = type.getNumElements();
  if (feedsMagnitudes || !type.getElementType().isBF16() || length % 2)
    return arith::ExtFOp::create(b, loc, type.clone(b.getF32Type()), vector);
  // A bf16 is the high half of its f32, so each packed pair extends with one
  // shift (the low element) and one mask (the high one), where arith.extf's
  // expansion extracts the high element and shifts it back. LLVM would merge
  // that mask with a magnitude's, which costs ptxas its free |x| operand.
  auto wordsType = VectorType::get({length / 2}, b.getI32Type());
  Value words = vector::BitCastOp::create(b, loc, wordsType, vector);
  auto wordConstant = [&](uint32_t bits) {
    return splat(b, loc, words, b.getI32IntegerAttr(bits));
  };
  auto halvesType = wordsType.clone(b.getF32Type());
  Value low = arith::BitcastOp::create(
      b, loc, halvesType,
      arith::ShLIOp::create(b, loc, words, wordConstant(16)));
  Value high = arith::BitcastOp::create(
      b, loc, halvesType,
      arith::AndIOp::create(b, loc, words, wordConstant(0xFFFF0000u)));
  SmallVector<int64_t> interleaved;
  for (int64_t i = 0; i < length / 2; ++i)
    interleaved.append({i, length / 2 + i});
  return vector::ShuffleOp::create(b, loc, low, high, interleaved);
}

Value gpu_kernels::magnitude(OpBuilder &b, Location loc, Value floatVector) {
  auto type = cast<VectorType>(floatVector.getType());
  unsigned width = type.getElementTypeBitWidth();
  Value bits = arith::BitcastOp::create(
      b, loc, type.clone(b.getIntegerType(width)), floatVector);
  Value signMask = splat(b, loc, bits,
                         b.getIntegerAttr(b.getIntegerType(width),
                                          APInt::getSignedMaxValue(width)));
  return arith::BitcastOp::create(
      b, loc, type, arith::AndIOp::create(b, loc, bits, signMask));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

Value gpu_kernels::buildGroupMax(OpBuilder &b, Location loc, Value value,
                                 int64_t lanes, vector::CombiningKind kind) {
  for (int32_t offset = 1; offset < lanes; offset *= 2) {
    Value other = gpu::ShuffleOp::create(b, loc, value, offset, kWarpSize,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = vector::makeArithReduction(b, loc, kind, value, other);
  }
  return value;
}

MemRefType gpu_kernels::getCTAMaxBufferType(MLIRContext *context) {
  return MemRefType::get(
      {kWarpsPerBlock}, Float32Type::get(context), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
}

Value gpu_kernels::buildCTAMax(OpBuilder &b, Location loc, Value value,
                               Value thread, Value buffer,
                               vector::CombiningKind kind) {
  value = buildGroupMax(b, loc, value, kWarpSize, kind);
  Value warp =
      arith::DivUIOp::create(b, loc, thread, cIndex(b, loc, kWarpSize));
  Value lane =
      arith::RemUIOp::create(b, loc, thread, cIndex(b, loc, kWarpSize));
  buildIf(b, loc, isZeroIndex(b, loc, lane), [&](OpBuilder &nb, Location nl) {
    memref::StoreOp::create(nb, nl, value, buffer, warp);
  });
  gpu::BarrierOp::create(b, loc);
  // Every thread reads all warp maxima (broadcast loads): no second barrier
  // and no shuffle, and the buffer is read-only from here on.
  Value result = memref::LoadOp::create(b, loc, buffer, cIndex(b, loc, 0));
  for (int64_t w = 1; w < kWarpsPerBlock; ++w)
    result = vector::makeArithReduction(
        b, loc, kind, result,
        memref::LoadOp::create(b, loc, buffer, cIndex(b, loc, w)));
  return result;
}

Value gpu_kernels::buildAmaxBits(OpBuilder &b, Location loc, Value amax) {
  Value isNaN =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, amax, amax);
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), amax);
  return arith::SelectOp::create(
      b, loc, isNaN, arith::ConstantIntOp::create(b, loc, 0x7FC00000, 32), bits);
}

void gpu_kernels::buildAtomicMaxMagnitude(OpBuilder &b, Location loc,
                                          Value amax, Value buffer,
                                          ValueRange indices) {
  Value bits = buildAmaxBits(b, loc, amax);
  auto type = cast<MemRefType>(buffer.getType());
  Value words =
      arith::BitcastOp::create(b, loc, type.clone(b.getI32Type()), buffer);
  memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, bits, words,
                              indices);
}

Value gpu_kernels::zeroF32(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
}
