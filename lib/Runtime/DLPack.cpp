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
// The free is ordered on the stream that produced the memory. A compiled
// call may read it on another stream (FSDP2 casts the weights, and with them
// delayed scaling's state, on its copy-in stream), so mxrtInvoke notes each
// export it reads on another stream, and the free then waits for the work
// enqueued on each of those streams before it: otherwise the producer's
// stream could reuse the memory while the reader still reads it.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

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

// The managed tensor, the allocation it frees and its shape, in one block;
// and the streams besides its own on which compiled calls read it.
struct Export {
  DLManagedTensor managed;
  void *allocation;
  uintptr_t end; // One past its last byte.
  CUstream stream;
  int64_t shape[kMaxRank];
  std::vector<CUstream> readers;
};

// The exports that free their allocation, by its address.
struct LiveExports {
  std::mutex mutex;
  std::map<uintptr_t, Export *> byAddress;
};

LiveExports &getLiveExports() {
  static auto *live = new LiveExports(); // Deleters may run at exit.
  return *live;
}

// Orders the free of `exported` after the work enqueued so far on each
// stream that read it; without a way to (a stream destroyed since), after
// all of the device's work.
void waitForReaders(const Export &exported) {
  mxrt::DeviceScope scope;
  if (!scope)
    return;
  for (CUstream reader : exported.readers) {
    CUevent event = nullptr;
    bool ordered =
        cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
        cuEventRecord(event, reader) == CUDA_SUCCESS &&
        cuStreamWaitEvent(exported.stream, event, 0) == CUDA_SUCCESS;
    if (event)
      cuEventDestroy(event);
    if (!ordered) {
      mxrt::checkCu(cuCtxSynchronize(),
                    "cuCtxSynchronize(before freeing a DLPack export)");
      return;
    }
  }
}

void deleteExport(DLManagedTensor *self) {
  auto *exported = reinterpret_cast<Export *>(self);
  if (exported->allocation) {
    LiveExports &live = getLiveExports();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.byAddress.erase(reinterpret_cast<uintptr_t>(exported->allocation));
  }
  if (!exported->readers.empty())
    waitForReaders(*exported);
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
  uint64_t bytes = (bits + 7) / 8;
  for (int32_t i = 0; i < ndim; ++i)
    bytes *= static_cast<uint64_t>(shape[i]);
  exported->end = reinterpret_cast<uintptr_t>(data) + bytes;
  if (allocation) {
    LiveExports &live = getLiveExports();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.byAddress[reinterpret_cast<uintptr_t>(allocation)] = exported;
  }
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

void mxrt::noteExportRead(const void *pointer, CUstream stream) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  LiveExports &live = getLiveExports();
  std::lock_guard<std::mutex> lock(live.mutex);
  auto it = live.byAddress.upper_bound(address);
  if (it == live.byAddress.begin())
    return;
  Export &exported = *std::prev(it)->second;
  if (address >= exported.end || stream == exported.stream)
    return;
  for (CUstream reader : exported.readers)
    if (reader == stream)
      return;
  exported.readers.push_back(stream);
}
