//===- DeviceBuffers.cpp - Tensors as device buffers in GPU lowerings -----===//
//
// See DeviceBuffers.h.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/DeviceBuffers.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

Value mx::allocDevice(OpBuilder &b, Location loc, RankedTensorType type) {
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  return gpu::AllocOp::create(b, loc, memrefType, /*asyncToken=*/Type(),
                              ValueRange(), ValueRange(), ValueRange())
      .getMemref();
}

static Value getBuffer(OpBuilder &b, Location loc, Value tensor,
                       bool readOnly) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      readOnly);
}

Value mx::toBuffer(OpBuilder &b, Location loc, Value tensor) {
  return getBuffer(b, loc, tensor, /*readOnly=*/true);
}

Value mx::toUpdatedBuffer(OpBuilder &b, Location loc, Value tensor) {
  return getBuffer(b, loc, tensor, /*readOnly=*/false);
}

Value mx::toTensor(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
      buffer, /*restrict=*/true, /*writable=*/true);
}

std::optional<int32_t> mx::getRuntimeElementType(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return MXRT_TYPE_F8E4M3;
  if (isa<Float8E5M2Type>(type))
    return MXRT_TYPE_F8E5M2;
  if (isa<Float4E2M1FNType>(type))
    return MXRT_TYPE_F4E2M1;
  if (isa<Float8E8M0FNUType>(type))
    return MXRT_TYPE_E8M0;
  if (isa<Float6E3M2FNType>(type))
    return MXRT_TYPE_F6E3M2;
  if (isa<Float6E2M3FNType>(type))
    return MXRT_TYPE_F6E2M3;
  if (type.isSignlessInteger(8))
    return MXRT_TYPE_I8;
  if (type.isBF16())
    return MXRT_TYPE_BF16;
  if (type.isF16())
    return MXRT_TYPE_F16;
  if (type.isF32())
    return MXRT_TYPE_F32;
  return std::nullopt;
}

mxrtOperandLayout mx::getRuntimeLayout(OperandLayout layout) {
  return layout == OperandLayout::k_outer ? MXRT_LAYOUT_K_OUTER
                                          : MXRT_LAYOUT_K_CONTIGUOUS;
}

Value mx::getDevicePointer(OpBuilder &b, Location loc, Value tensorOrBuffer) {
  Value buffer = isa<TensorType>(tensorOrBuffer.getType())
                     ? toBuffer(b, loc, tensorOrBuffer)
                     : tensorOrBuffer;
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value integer = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), integer);
}

Value mx::viewRows(OpBuilder &b, Location loc, Value buffer, int64_t firstRow,
                   int64_t rows) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows;
  int64_t rowBits = type.getElementTypeBitWidth();
  for (int64_t size : llvm::drop_begin(shape))
    rowBits *= size;
  Value offset =
      LLVM::ConstantOp::create(b, loc, b.getI64Type(), firstRow * rowBits / 8);
  return viewBytesAt(b, loc, buffer, offset,
                     MemRefType::get(shape, type.getElementType()));
}

Value mx::viewBytesAt(OpBuilder &b, Location loc, Value buffer,
                      Value byteOffset, MemRefType type) {
  Value first = LLVM::GEPOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), b.getI8Type(),
      getDevicePointer(b, loc, buffer), ValueRange{byteOffset});
  return wrapDevicePointer(b, loc, first, type);
}

Value mx::wrapDevicePointer(OpBuilder &b, Location loc, Value pointer,
                            MemRefType type) {
  MLIRContext *context = b.getContext();
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i64 = b.getI64Type();
  auto sizes = LLVM::LLVMArrayType::get(i64, type.getRank());
  auto descriptorType =
      LLVM::LLVMStructType::getLiteral(context, {ptr, ptr, i64, sizes, sizes});
  auto constant = [&](int64_t value) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64, value);
  };
  auto insert = [&](Value descriptor, Value value, ArrayRef<int64_t> at) {
    return LLVM::InsertValueOp::create(b, loc, descriptor, value, at);
  };
  Value descriptor = LLVM::PoisonOp::create(b, loc, descriptorType);
  descriptor = insert(descriptor, pointer, {0});
  descriptor = insert(descriptor, pointer, {1});
  descriptor = insert(descriptor, constant(0), {2});
  int64_t stride = 1;
  for (int64_t dim = type.getRank() - 1; dim >= 0; --dim) {
    descriptor = insert(descriptor, constant(type.getDimSize(dim)), {3, dim});
    descriptor = insert(descriptor, constant(stride), {4, dim});
    stride *= type.getDimSize(dim);
  }
  return UnrealizedConversionCastOp::create(b, loc, type, descriptor)
      .getResult(0);
}

bool mx::usesBuffersInStreamOrder(StringRef name) {
  // The calls the lowerings emit; mxrtFree(Async) and mxrtExportDLPack, which
  // free or hand on ownership, are not among them.
  static constexpr StringLiteral kCalls[] = {
      kEncodeTensorMapFn, kScaledMatmulFn,    "mxrtAllGather",
      "mxrtAllReduce", "mxrtReduceScatter", "mxrtCheckArgument"};
  return llvm::is_contained(kCalls, name);
}

LogicalResult mx::checkRuntimeFunction(ModuleOp module, StringRef name,
                                       LLVM::LLVMFunctionType type,
                                       std::string &reason) {
  Operation *symbol = module.lookupSymbol(name);
  if (!symbol)
    return success();
  auto function = dyn_cast<LLVM::LLVMFuncOp>(symbol);
  if (function && function.getFunctionType() == type)
    return success();
  llvm::raw_string_ostream os(reason);
  os << "the module defines @" << name << " as ";
  if (function)
    os << function.getFunctionType();
  else
    os << "'" << symbol->getName() << "'";
  os << ", not the runtime's " << type;
  return failure();
}

LLVM::LLVMFunctionType mx::getTensorMapFnType(MLIRContext *context) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32);
  return LLVM::LLVMFunctionType::get(ptr,
                                     {ptr, ptr, i32, i32, ptr, ptr, i32});
}

LLVM::LLVMArrayType mx::getTensorMapType(MLIRContext *context) {
  // CU_TENSOR_MAP_NUM_QWORDS (cuda.h) 64-bit words.
  return LLVM::LLVMArrayType::get(IntegerType::get(context, 64), 16);
}

LLVM::LLVMFunctionType mx::getScaledMatmulFnType(MLIRContext *context) {
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i32 = IntegerType::get(context, 32), i64 = IntegerType::get(context, 64);
  return LLVM::LLVMFunctionType::get(i32, {i64, i64, i64, ptr, i32, i32, ptr,
                                           i32, ptr, i32, i32, ptr, i32, ptr,
                                           ptr, i32, ptr});
}
