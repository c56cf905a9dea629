//===- RuntimeInternal.h - Shared internals of libmx_runtime ----*- C++ -*-===//
//
// The error and context plumbing that CudaRuntime.cpp defines and the other
// translation units of the runtime (cuBLASLt, tensor maps) reuse, so that
// every failure is reported the same way (printed, kept as the sticky last
// error, device appended) and every driver call runs on the default device's
// primary context. Not installed: the library's public contract is
// include/mx/Runtime/MXRuntime.h alone.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define MX_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "mx/Runtime/MXRuntime.h"

#include <cuda.h>

#include <string>

namespace mxrt {

// printf-style formatting into a std::string.
std::string format(const char *fmt, ...);

// Records `what` with the current device appended (printed, sticky last
// error) and returns `status`.
int32_t fail(int32_t status, const std::string &what);

// Whether an error was recorded since the last mxrtGetLastError() (which
// still returns it).
bool hasPendingError();

// The status of the first failure recorded by this thread inside the
// current compiled call (mxrtCallBegin .. mxrtCallEnd), MXRT_SUCCESS if
// none or outside calls: the entry points that enqueue device work skip it
// when this is not MXRT_SUCCESS.
int32_t getCallFailure();

// The number of failures this thread has recorded (fail()) and, through
// `last` if given, the status of the latest: a scope that took the count at
// its start knows whether anything inside it failed (an open collective
// group, whose collectives must then not run).
uint64_t getFailureCount(int32_t *last = nullptr);

// The status the last outermost call of this thread ended with (mxrtCallEnd),
// and clears it.
int32_t takeLastCallStatus();

// Records "`call` failed with <status>" and returns MXRT_ERROR_CUDA.
int32_t cudaFailure(CUresult result, const std::string &call);

// MXRT_SUCCESS, or cudaFailure; builds no string on success.
int32_t checkCu(CUresult result, const char *call);

// The calling thread's default device (mgpuSetDefaultDevice), which every
// entry point runs on.
int getDefaultDevice();
void setDefaultDevice(int ordinal);

// Makes the primary context of the default device current and returns its
// ordinal. Where another context is current, it is pushed (`*pushed`), so
// that leaveDevice restores the caller's; where it is current already (torch
// works in the same primary context), nothing changes, which spares every
// runtime entry point two driver calls.
int32_t enterDevice(int *ordinal, bool *pushed);
void leaveDevice(bool pushed);

// Whether the calling thread is in call-stream mode (mxrtSetCallStream); if
// so, `*stream` is its call stream (NULL: the legacy default stream).
bool getCallStream(CUstream *stream);

// The default memory pool of device `ordinal`, from which call-stream mode
// allocates, set up on first use to keep the memory freed to it.
int32_t getStreamOrderedPool(int ordinal, CUmemoryPool *pool);

// Notes that compiled work on `stream` reads the memory at `pointer`: if it
// belongs to a result exported by mxrtExportDLPack on another stream, its
// free will wait for the work enqueued on `stream` before it (DLPack.cpp).
void noteExportRead(const void *pointer, CUstream stream);

// MLIR's GPU lowering's allocation entry points (CudaRuntime.cpp), which
// mxrtCollectiveAlloc and mxrtCollectiveFree fall back to.
extern "C" MXRT_API void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream,
                                       bool isHostShared);
extern "C" MXRT_API void mgpuMemFree(void *ptr, CUstream stream);

// The default device's primary context is current for the scope's lifetime.
class DeviceScope {
public:
  DeviceScope() : status_(enterDevice(&ordinal_, &pushed_)) {}
  ~DeviceScope() {
    if (status_ == MXRT_SUCCESS)
      leaveDevice(pushed_);
  }
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;
  explicit operator bool() const { return status_ == MXRT_SUCCESS; }
  int32_t status() const { return status_; }
  int ordinal() const { return ordinal_; }

private:
  int ordinal_ = 0;
  bool pushed_ = false;
  int32_t status_;
};

} // namespace mxrt

#endif // MX_LIB_RUNTIME_RUNTIMEINTERNAL_H
