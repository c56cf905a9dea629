//===- DLPack.cpp - Hand compiled-code results to DLPack consumers --------===//
//
// mxrtExportDLPack wraps device memory that compiled code allocated in a
// DLPack DLManagedTensor whose deleter frees it stream-ordered, so that a
// consumer (torch.utils.dlpack.from_dlpack) owns the result without a copy
// and without calling back into Python when it frees it: building the
// struct here costs one allocation, where building it with ctypes cost
// several microseconds per result. The structs follow dlpack.h (v0.8, the
// "dltensor" capsule ABI every consumer accepts); they are spelled out here
// so that the runtime needs no DLPack header.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstring>
#include <new>

namespace {

struct DLDevice {
  int32_t deviceType;
  int32_t deviceId;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byteOffset;
};

struct DLManagedTensor {
  DLTensor dlTensor;
  void *managerContext;
  void (*deleter)(DLManagedTensor *self);
};

constexpr int32_t kDLCUDA = 2;
constexpr int32_t kMaxRank = 16;

// The managed tensor, the allocation it frees and its shape, in one block.
struct Export {
  DLManagedTensor managed;
  void *allocation;
  CUstream stream;
  int64_t shape[kMaxRank];
};

void deleteExport(DLManagedTensor *self) {
  auto *exported = reinterpret_cast<Export *>(self);
  mxrtFreeAsync(exported->allocation, exported->stream);
  delete exported;
}

} // namespace

extern "C" MXRT_API void *mxrtExportDLPack(void *data, void *allocation,
                                           int32_t ndim, const int64_t *shape,
                                           uint8_t code, uint8_t bits,
                                           int32_t device, void *stream) {
  if (ndim < 0 || ndim > kMaxRank || (ndim && !shape)) {
    mxrt::fail(MXRT_ERROR_INVALID_ARGUMENT,
               mxrt::format("mxrtExportDLPack: rank %d is outside 0..%d", ndim,
                            kMaxRank));
    return nullptr;
  }
  auto *exported = new (std::nothrow) Export();
  if (!exported) {
    mxrt::fail(MXRT_ERROR_INVALID_ARGUMENT,
               "mxrtExportDLPack: out of host memory");
    return nullptr;
  }
  exported->allocation = allocation;
  exported->stream = static_cast<CUstream>(stream);
  std::memcpy(exported->shape, shape, sizeof(int64_t) * ndim);
  DLTensor &tensor = exported->managed.dlTensor;
  tensor.data = data;
  tensor.device = {kDLCUDA, device};
  tensor.ndim = ndim;
  tensor.dtype = {code, bits, 1};
  tensor.shape = exported->shape;
  tensor.strides = nullptr; // Row-major.
  exported->managed.deleter = deleteExport;
  return &exported->managed;
}
