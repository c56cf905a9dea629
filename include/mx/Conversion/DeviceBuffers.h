//===- DeviceBuffers.h - Tensors as device buffers in GPU lowerings -*- C++
//-*-===//
//
// The seams between the tensor-level host code the GPU lowerings emit and the
// device memory their kernels and library calls use: an input tensor's buffer
// and its device address, a result allocated with `gpu.alloc` (owned by the
// caller once returned) and its tensor view. Every lowering that hands
// device memory to a kernel or to the runtime goes through these, so that
// bufferization sees the same ops from all of them.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_DEVICEBUFFERS_H
#define MX_CONVERSION_DEVICEBUFFERS_H

#include "mx/Dialect/MX/IR/MXDialect.h"
#include "mx/Runtime/MXRuntime.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mx {

/// A device buffer (`gpu.alloc`) with the shape and element type of `type`.
mlir::Value allocDevice(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type);

/// The buffer behind a tensor operand (read only).
mlir::Value toBuffer(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value tensor);

/// The buffer behind a tensor operand whose new value an op writes in place
/// (one-shot bufferization copies the tensor first where its old value is
/// read later; the callers make sure it is not).
mlir::Value toUpdatedBuffer(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value tensor);

/// The tensor view of a result buffer.
mlir::Value toTensor(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value buffer);

/// Rows [firstRow, firstRow + rows) of `buffer` (identity layout, static
/// shape) as a buffer of their own, without a copy: identity layout, offset
/// 0, its aligned pointer advanced to the first row, which is what the
/// kernels and getDevicePointer take. (memref.view shifts a pointer only on
/// i8 buffers; a subview keeps the offset in its layout, which the kernels'
/// identity-layout operands do not take.) Built as the memref's LLVM
/// descriptor, which the LLVM lowering folds.
mlir::Value viewRows(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value buffer, int64_t firstRow, int64_t rows);

/// A buffer of `type` (identity layout, static shape) that starts
/// `byteOffset` (an i64 value) bytes into `buffer`, as viewRows builds it:
/// for views whose place is known only when the program runs (a process's
/// slot of a gathered buffer).
mlir::Value viewBytesAt(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value buffer, mlir::Value byteOffset,
                        mlir::MemRefType type);

/// The device memory at `pointer` (an !llvm.ptr) as a buffer of `type`
/// (identity layout, static shape), its memref descriptor built as viewRows
/// builds it: for memory that a runtime call returns (mxrtCollectiveAlloc).
mlir::Value wrapDevicePointer(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value pointer, mlir::MemRefType type);

/// The runtime's code (mxrtElemType, MXRuntime.h) of an element type, if it
/// has one.
std::optional<int32_t> getRuntimeElementType(mlir::Type type);

/// The runtime's code of a GEMM operand layout.
mxrtOperandLayout getRuntimeLayout(OperandLayout layout);

/// The device address of a tensor's buffer (or of a buffer) as `!llvm.ptr`,
/// for kernel arguments and runtime calls. It is the buffer's aligned base:
/// right for the identity-layout, offset-0 buffers that bufferization gives
/// function arguments and `gpu.alloc` returns, which is all the lowerings
/// pass.
mlir::Value getDevicePointer(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value tensorOrBuffer);

/// The runtime's C functions that lowered host code calls (MXRuntime.h), C
/// symbols called as they are, with no MLIR memref convention or C-interface
/// wrapper: their names and LLVM types.
constexpr llvm::StringLiteral kEncodeTensorMapFn = "mxrtEncodeTensorMap";
constexpr llvm::StringLiteral kScaledMatmulFn = "mxrtScaledMatmul";
mlir::LLVM::LLVMFunctionType getTensorMapFnType(mlir::MLIRContext *context);
mlir::LLVM::LLVMFunctionType getScaledMatmulFnType(mlir::MLIRContext *context);

/// A CUtensorMap as a value: the 128 bytes that `mxrtEncodeTensorMap` writes
/// and a kernel takes by value (a `__grid_constant__` parameter), aligned to
/// `kTensorMapAlignment` bytes wherever it is stored, as TMA requires.
mlir::LLVM::LLVMArrayType getTensorMapType(mlir::MLIRContext *context);
constexpr int64_t kTensorMapAlignment = 64;

/// The runtime's placed all-gather, which runs on the communicator's side
/// stream, and the join that orders the call stream after that stream.
constexpr llvm::StringLiteral kAllGatherPlacedFn = "mxrtAllGatherPlaced";
constexpr llvm::StringLiteral kCollectivesJoinFn = "mxrtCollectivesJoin";

/// The unit attribute on a `gpu.alloc` whose buffer a collective writes (a
/// gathered buffer, which its producers may fill in place): its memory is
/// the runtime's, registered with NCCL where that pays, from
/// `kCollectiveAllocFn` and freed by `kCollectiveFreeFn` (MXRuntime.h).
/// convert-shard-to-mxrt sets it; convert-collective-buffers-to-mxrt, after
/// the frees are placed, turns the allocation and its frees into those calls.
/// Elsewhere the buffer is an ordinary allocation.
constexpr llvm::StringLiteral kCollectiveBufferAttr = "mx.collective_buffer";
constexpr llvm::StringLiteral kCollectiveAllocFn = "mxrtCollectiveAlloc";
constexpr llvm::StringLiteral kCollectiveFreeFn = "mxrtCollectiveFree";

/// The unit attribute on a `gpu.alloc` of f32 magnitudes, as the amax
/// kernels write them: every sign bit clear and every NaN 0x7FC00000, so
/// that the u32 order of their bits is the order of their values, NaN above
/// +Inf. convert-mx-to-gpu sets it on mx.amax's result; convert-shard-to-mxrt
/// then takes a max over them as a u32 max of the bits themselves, with no
/// kernels to make order keys and none to turn them back.
constexpr llvm::StringLiteral kMagnitudeBitsAttr = "mx.magnitude_bits";

/// Whether the runtime's C function `name` (MXRuntime.h), as lowered host
/// code calls it, uses the device buffers it is given only in the work of
/// the call, in stream order, and keeps none of them past it. What it returns
/// may still refer to a buffer (the map `mxrtEncodeTensorMap` returns does,
/// and so does what is loaded from it): its users use the buffer.
bool usesBuffersInStreamOrder(llvm::StringRef name);

/// Whether `module` can call the runtime's C function `name` (MXRuntime.h)
/// with LLVM type `type`: it does not define `name`, or declares or defines
/// it as an LLVM function of that type. Otherwise `reason` says what the
/// module has instead, for the lowering to report on its op before it
/// rewrites anything.
mlir::LogicalResult checkRuntimeFunction(mlir::ModuleOp module,
                                         llvm::StringRef name,
                                         mlir::LLVM::LLVMFunctionType type,
                                         std::string &reason);

} // namespace mx

#endif // MX_CONVERSION_DEVICEBUFFERS_H
