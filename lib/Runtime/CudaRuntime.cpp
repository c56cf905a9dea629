//===- CudaRuntime.cpp - CUDA driver entry points of libmx_runtime --------===//
//
// Host side of compiled mx programs: the mgpu* functions that MLIR 22's
// gpu-to-llvm lowering and gpu.binary/launch_func translation call, with the
// signatures of upstream's CudaRuntimeWrappers.cpp, plus the mxrt device
// helpers of the Python binding and the error/context plumbing that the
// other files of the library share (RuntimeInternal.h). Everything goes
// through the CUDA driver API on the primary context of the default device,
// retained once per device and never released: modules are loaded from
// global constructors and unloaded from global destructors, so the context
// must outlive every static object. Compiled code cannot check a status, so
// mgpu* failures are printed and kept as the sticky last error
// (mxrtGetLastError) and the function returns what upstream returns (null
// handle or nothing); mxrt* functions return a status. In call-stream mode
// (mxrtSetCallStream, per host thread) the mgpu* stream and memory entry
// points run compiled code on the caller's stream with stream-ordered
// allocation instead of a private stream that the host waits for. Compiled
// functions bracket themselves with the call guard (mxrtCallBegin/End): after
// a failure inside a call, the entry points that enqueue device work return
// without doing it, so that no kernel starts on arguments it cannot take.
//
//===----------------------------------------------------------------------===//

#include "NcclInternal.h"
#include "RuntimeInternal.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#define MGPU_API extern "C" MXRT_API

namespace mxrt {

std::string format(const char *fmt, ...) {
  va_list args, copy;
  va_start(args, fmt);
  va_copy(copy, args);
  int size = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(size > 0 ? size : 0, '\0');
  if (size > 0)
    std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

namespace {
std::mutex errorMutex;
std::string stickyError;  // First error since the last mxrtGetLastError().
std::string lastPrinted;  // Suppresses the same message printed in a loop.
thread_local int defaultDevice = 0; // Like upstream: per host thread.

// mxrtSetCallStream's state, per host thread like the default device: a
// caller on another thread (another torch stream) has its own.
struct CallStream {
  bool enabled = false;
  CUstream stream = nullptr; // May be NULL: the legacy default stream.
};
thread_local CallStream callStream;

bool isCallStream(CUstream stream) {
  return callStream.enabled && stream == callStream.stream;
}

// The call guard (mxrtCallBegin .. mxrtCallEnd), per host thread like the
// call stream: a failure recorded by this thread inside a compiled call stops
// the call's later device work.
struct CallGuard {
  int32_t depth = 0;
  int32_t status = MXRT_SUCCESS;     // The call's first failure.
  const char *function = nullptr;    // The innermost call's name.
  int32_t lastStatus = MXRT_SUCCESS; // Of the last outermost call.
};
thread_local CallGuard callGuard;

// This thread's failures: how many fail() recorded, and the latest status.
thread_local uint64_t failureCount = 0;
thread_local int32_t lastFailure = MXRT_SUCCESS;
} // namespace

static void recordError(const std::string &message) {
  std::lock_guard<std::mutex> lock(errorMutex);
  if (message != lastPrinted) {
    std::fprintf(stderr, "mx runtime error: %s\n", message.c_str());
    lastPrinted = message;
  }
  if (stickyError.empty())
    stickyError = message;
}

// "device 0: NVIDIA H100 80GB HBM3, compute capability 9.0"; works (less
// informatively) when the driver itself is what failed. Errors found before
// the first device use (argument checks) still name the device: cuInit is
// idempotent.
static std::string describeDevice(int ordinal) {
  CUdevice device;
  char name[256];
  int major = 0, minor = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, ordinal) != CUDA_SUCCESS ||
      cuDeviceGetName(name, sizeof(name), device) != CUDA_SUCCESS ||
      cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                           device) != CUDA_SUCCESS ||
      cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                           device) != CUDA_SUCCESS)
    return format("device %d: unavailable", ordinal);
  return format("device %d: %s, compute capability %d.%d", ordinal, name,
                major, minor);
}

bool hasPendingError() {
  std::lock_guard<std::mutex> lock(errorMutex);
  return !stickyError.empty();
}

int32_t fail(int32_t status, const std::string &what) {
  recordError(what + " [" + describeDevice(defaultDevice) + "]");
  ++failureCount;
  lastFailure = status;
  if (callGuard.depth && callGuard.status == MXRT_SUCCESS)
    callGuard.status = status;
  return status;
}

int32_t getCallFailure() {
  return callGuard.depth ? callGuard.status : MXRT_SUCCESS;
}

uint64_t getFailureCount(int32_t *last) {
  if (last)
    *last = lastFailure;
  return failureCount;
}

int32_t takeLastCallStatus() {
  return std::exchange(callGuard.lastStatus, MXRT_SUCCESS);
}

std::string cudaStatusText(CUresult result) {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  return format("%s (%d): %s", name ? name : "CUDA_ERROR_UNKNOWN_CODE",
                static_cast<int>(result), text ? text : "no description");
}

int32_t cudaFailure(CUresult result, const std::string &call) {
  return fail(MXRT_ERROR_CUDA, call + " failed with " + cudaStatusText(result));
}

int32_t checkCu(CUresult result, const char *call) {
  return result == CUDA_SUCCESS ? MXRT_SUCCESS : cudaFailure(result, call);
}

//===----------------------------------------------------------------------===//
// Contexts
//===----------------------------------------------------------------------===//

int getDefaultDevice() { return defaultDevice; }

void setDefaultDevice(int ordinal) { defaultDevice = ordinal; }

int32_t enterDevice(int *ordinal, bool *pushed) {
  static std::mutex mutex;
  static std::vector<CUcontext> *contexts = new std::vector<CUcontext>();
  *ordinal = defaultDevice;
  CUcontext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    static const std::pair<CUresult, int> driver = [] {
      int count = 0;
      CUresult result = cuInit(0);
      return std::make_pair(result ? result : cuDeviceGetCount(&count), count);
    }();
    if (int32_t status = checkCu(driver.first, "cuInit"))
      return status;
    int count = driver.second;
    if (*ordinal < 0 || *ordinal >= count)
      return fail(MXRT_ERROR_CUDA, format("default device %d does not exist "
                                          "(%d CUDA devices visible)",
                                          *ordinal, count));
    if (contexts->size() < static_cast<size_t>(count))
      contexts->resize(count, nullptr);
    CUcontext &slot = (*contexts)[*ordinal];
    if (!slot) {
      CUdevice device;
      if (int32_t status = checkCu(cuDeviceGet(&device, *ordinal), "cuDeviceGet"))
        return status;
      if (int32_t status = checkCu(cuDevicePrimaryCtxRetain(&slot, device),
                                   "cuDevicePrimaryCtxRetain"))
        return status;
    }
    context = slot;
  }
  CUcontext current = nullptr;
  *pushed = cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != context;
  return *pushed ? checkCu(cuCtxPushCurrent(context), "cuCtxPushCurrent")
                 : MXRT_SUCCESS;
}

void leaveDevice(bool pushed) {
  CUcontext popped;
  if (pushed)
    cuCtxPopCurrent(&popped);
}

//===----------------------------------------------------------------------===//
// Call-stream mode
//===----------------------------------------------------------------------===//

bool getCallStream(CUstream *stream) {
  if (callStream.enabled)
    *stream = callStream.stream;
  return callStream.enabled;
}

int32_t getStreamOrderedPool(int ordinal, CUmemoryPool *pool) {
  static std::mutex mutex;
  static auto *pools = new std::vector<CUmemoryPool>();
  std::lock_guard<std::mutex> lock(mutex);
  if (pools->size() <= static_cast<size_t>(ordinal))
    pools->resize(ordinal + 1, nullptr);
  CUmemoryPool &slot = (*pools)[ordinal];
  if (!slot) {
    // The default release threshold (0) hands freed memory back to the
    // driver at every synchronization; keep it cached instead, as torch's
    // caching allocator does, so that steady-state calls allocate nothing
    // from the driver.
    CUdevice device;
    CUmemoryPool found;
    cuuint64_t keepAll = UINT64_MAX;
    int32_t status;
    if ((status = checkCu(cuDeviceGet(&device, ordinal), "cuDeviceGet")) ||
        (status = checkCu(cuDeviceGetDefaultMemPool(&found, device),
                          "cuDeviceGetDefaultMemPool")) ||
        (status =
             checkCu(cuMemPoolSetAttribute(
                         found, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepAll),
                     "cuMemPoolSetAttribute(RELEASE_THRESHOLD)")))
      return status;
    slot = found;
  }
  *pool = slot;
  return MXRT_SUCCESS;
}

} // namespace mxrt

using namespace mxrt;

namespace {
CUdeviceptr devicePtr(const void *ptr) {
  return reinterpret_cast<CUdeviceptr>(ptr);
}

std::string bytesText(const char *call, uint64_t bytes) {
  return format("%s(%llu bytes)", call, static_cast<unsigned long long>(bytes));
}

// Like checkCu for calls whose description is formatted: `describe()`
// builds it only when the call failed.
template <typename Describe>
int32_t checkCuWith(CUresult result, Describe &&describe) {
  return result == CUDA_SUCCESS ? MXRT_SUCCESS : cudaFailure(result, describe());
}

// Runs one driver call of an mgpu* entry point with the default device's
// context current (compiled code may call with none current, e.g. on the
// legacy stream) and reports its failure.
template <typename Call, typename Describe>
void runOnDevice(Call &&call, Describe &&describe) {
  DeviceScope scope;
  if (scope)
    checkCuWith(call(), describe);
}

// Call-stream mode's mgpuMemAlloc: from the device's default pool, usable
// in stream order on `stream` (the call stream) and by the caller's later
// work on it.
void *allocOnStream(uint64_t sizeBytes, CUstream stream) {
  CUdeviceptr ptr = 0;
  DeviceScope scope;
  CUmemoryPool pool;
  if (scope && !getStreamOrderedPool(scope.ordinal(), &pool))
    checkCuWith(cuMemAllocFromPoolAsync(&ptr, sizeBytes, pool, stream), [&] {
      return bytesText("cuMemAllocFromPoolAsync", sizeBytes);
    });
  return reinterpret_cast<void *>(ptr);
}

std::string kernelName(CUfunction function) {
  const char *name = nullptr;
  if (cuFuncGetName(&name, function) != CUDA_SUCCESS || !name)
    return "<unknown kernel>";
  return name;
}

// What the launch path looks up once rather than at every launch: each
// kernel's function handle, and the dynamic shared memory limit set on it.
// A module's unload drops them (a later module may reuse the handles).
struct FunctionCache {
  std::mutex mutex;
  std::map<std::pair<CUmodule, std::string>, CUfunction> functions;
  std::unordered_map<CUfunction, int32_t> sharedLimits;
};

FunctionCache &getFunctionCache() {
  static auto *cache = new FunctionCache(); // Used from static destructors.
  return *cache;
}

// Kernels asking for more than the default 48 KiB of dynamic shared memory
// must opt in per function (once: the driver keeps it); the driver rejects
// more than the device has.
bool prepareSharedMemory(CUfunction function, int32_t smem) {
  if (smem <= 48 * 1024)
    return true;
  FunctionCache &cache = getFunctionCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  int32_t &limit = cache.sharedLimits[function];
  if (limit >= smem)
    return true;
  if (checkCuWith(
          cuFuncSetAttribute(function,
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             smem),
          [&] {
            return format("cuFuncSetAttribute(kernel '%s', "
                          "MAX_DYNAMIC_SHARED_SIZE_BYTES, %d)",
                          kernelName(function).c_str(), smem);
          }))
    return false;
  limit = smem;
  return true;
}

std::string launchDescription(const char *call, CUfunction function,
                              intptr_t gx, intptr_t gy, intptr_t gz,
                              intptr_t bx, intptr_t by, intptr_t bz,
                              int32_t smem) {
  return format("%s(kernel '%s', grid %ldx%ldx%ld, block %ldx%ldx%ld, %d "
                "bytes dynamic shared memory)",
                call, kernelName(function).c_str(), long(gx), long(gy),
                long(gz), long(bx), long(by), long(bz), smem);
}

CUmodule loadModule(const void *data, size_t size, int jitOptLevel) {
  DeviceScope scope;
  if (!scope)
    return nullptr;
  // The log turns "CUDA_ERROR_INVALID_PTX" into the ptxas diagnostic.
  char log[8192] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log)),
                    reinterpret_cast<void *>(static_cast<intptr_t>(jitOptLevel))};
  CUmodule module = nullptr;
  CUresult result = cuModuleLoadDataEx(&module, data, jitOptLevel >= 0 ? 3 : 2,
                                       options, values);
  if (result != CUDA_SUCCESS) {
    std::string what = format("cuModuleLoadDataEx(%zu-byte %s)", size,
                              jitOptLevel >= 0 ? "PTX" : "GPU binary");
    cudaFailure(result, log[0] ? what + " [log: " + log + "]" : what);
    return nullptr;
  }
  return module;
}

// Ranked memref descriptor {allocated, aligned, offset, sizes[r], strides[r]}.
struct MemRefHeader {
  char *allocated;
  char *aligned;
  int64_t offset;
};

std::pair<char *, uint64_t> memrefExtent(int64_t rank, const void *descriptor,
                                         int64_t elementBytes) {
  auto *header = static_cast<const MemRefHeader *>(descriptor);
  auto *sizes = reinterpret_cast<const int64_t *>(header + 1);
  char *begin = header->aligned + header->offset * elementBytes;
  uint64_t lastElement = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (sizes[i] == 0)
      return {begin, 0};
    lastElement += (sizes[i] - 1) * sizes[rank + i]; // size * stride
  }
  return {begin, (lastElement + 1) * elementBytes};
}
} // namespace

//===----------------------------------------------------------------------===//
// mgpu* entry points of MLIR's GPU lowerings (upstream signatures)
//===----------------------------------------------------------------------===//

MGPU_API CUmodule mgpuModuleLoad(void *data, size_t gpuBlobSize) {
  return loadModule(data, gpuBlobSize, /*jitOptLevel=*/-1);
}

MGPU_API CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  return loadModule(data, data ? std::strlen(static_cast<char *>(data)) : 0,
                    optLevel < 0 ? 0 : optLevel);
}

MGPU_API void mgpuModuleUnload(CUmodule module) {
  if (!module)
    return;
  {
    FunctionCache &cache = getFunctionCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    for (auto it = cache.functions.begin(); it != cache.functions.end();) {
      if (it->first.first == module) {
        cache.sharedLimits.erase(it->second);
        it = cache.functions.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Runs from a global destructor; a driver already torn down at exit has
  // released the module with the process.
  CUresult result = cuModuleUnload(module);
  if (result != CUDA_ERROR_DEINITIALIZED)
    checkCu(result, "cuModuleUnload");
}

MGPU_API CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  if (!module) {
    fail(MXRT_ERROR_CUDA, format("cannot look up kernel '%s': its GPU module "
                                 "failed to load (see the earlier error)",
                                 name));
    return nullptr;
  }
  FunctionCache &cache = getFunctionCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  CUfunction &function = cache.functions[{module, name}];
  if (!function &&
      checkCuWith(cuModuleGetFunction(&function, module, name),
                  [&] { return format("cuModuleGetFunction('%s')", name); })) {
    cache.functions.erase({module, name});
    return nullptr;
  }
  return function;
}

/// Whether a launch of `function` goes ahead: its lookup succeeded (else a
/// failure that names the `launch` skipped) and no earlier step of the call
/// failed.
static bool canLaunch(CUfunction function, const char *launch) {
  if (!function) {
    fail(MXRT_ERROR_CUDA, format("%s skipped: its function lookup failed "
                                 "(see the earlier error)",
                                 launch));
    return false;
  }
  return !getCallFailure();
}

// `paramsCount` is part of upstream's ABI; the driver reads `params` itself.
MGPU_API void mgpuLaunchKernel(CUfunction function, intptr_t gridX,
                               intptr_t gridY, intptr_t gridZ, intptr_t blockX,
                               intptr_t blockY, intptr_t blockZ, int32_t smem,
                               CUstream stream, void **params, void **extra,
                               size_t /*paramsCount*/) {
  if (!canLaunch(function, "kernel launch"))
    return;
  DeviceScope scope;
  if (!scope || !prepareSharedMemory(function, smem))
    return;
  checkCuWith(cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                             blockZ, smem, stream, params, extra),
              [&] {
                return launchDescription("cuLaunchKernel", function, gridX,
                                         gridY, gridZ, blockX, blockY, blockZ,
                                         smem);
              });
}

MGPU_API void mgpuLaunchClusterKernel(CUfunction function, intptr_t clusterX,
                                      intptr_t clusterY, intptr_t clusterZ,
                                      intptr_t gridX, intptr_t gridY,
                                      intptr_t gridZ, intptr_t blockX,
                                      intptr_t blockY, intptr_t blockZ,
                                      int32_t smem, CUstream stream,
                                      void **params, void **extra,
                                      size_t /*paramsCount*/) {
  if (!canLaunch(function, "cluster kernel launch"))
    return;
  DeviceScope scope;
  if (!scope || !prepareSharedMemory(function, smem))
    return;
  // Clusters of more than 8 blocks are "non-portable" and need an opt-in.
  if (clusterX * clusterY * clusterZ > 8 &&
      checkCu(cuFuncSetAttribute(
                  function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                  1),
              "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)"))
    return;
  CUlaunchAttribute cluster = {};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = static_cast<unsigned>(clusterX);
  cluster.value.clusterDim.y = static_cast<unsigned>(clusterY);
  cluster.value.clusterDim.z = static_cast<unsigned>(clusterZ);
  CUlaunchConfig config = {};
  config.gridDimX = static_cast<unsigned>(gridX);
  config.gridDimY = static_cast<unsigned>(gridY);
  config.gridDimZ = static_cast<unsigned>(gridZ);
  config.blockDimX = static_cast<unsigned>(blockX);
  config.blockDimY = static_cast<unsigned>(blockY);
  config.blockDimZ = static_cast<unsigned>(blockZ);
  config.sharedMemBytes = static_cast<unsigned>(smem);
  config.hStream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  checkCuWith(cuLaunchKernelEx(&config, function, params, extra), [&] {
    return launchDescription("cuLaunchKernelEx", function, gridX, gridY, gridZ,
                             blockX, blockY, blockZ, smem) +
           format(" with cluster %ldx%ldx%ld", long(clusterX), long(clusterY),
                  long(clusterZ));
  });
}

MGPU_API CUstream mgpuStreamCreate() {
  // Call-stream mode: compiled code runs on the caller's stream.
  if (callStream.enabled)
    return callStream.stream;
  // Blocking: the call's work waits for what the caller queued on the legacy
  // default stream before it (DLPack's contract for stream=None).
  CUstream stream = nullptr;
  runOnDevice([&] { return cuStreamCreate(&stream, CU_STREAM_DEFAULT); },
              [] { return "cuStreamCreate"; });
  return stream;
}

MGPU_API void mgpuStreamDestroy(CUstream stream) {
  if (isCallStream(stream))
    return; // The caller's, not ours to destroy.
  runOnDevice([&] { return cuStreamDestroy(stream); },
              [] { return "cuStreamDestroy"; });
}

MGPU_API void mgpuStreamSynchronize(CUstream stream) {
  // In call-stream mode the stream orders the caller's later work after this
  // call's and the host does not wait; asynchronous faults of its kernels
  // then surface at the caller's next synchronization (in the caller's error
  // handling, not in mxrtGetLastError).
  if (isCallStream(stream))
    return;
  // Asynchronous faults of earlier kernels (illegal address, ...) surface here.
  runOnDevice([&] { return cuStreamSynchronize(stream); },
              [] { return "cuStreamSynchronize"; });
}

MGPU_API void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  runOnDevice([&] { return cuStreamWaitEvent(stream, event, 0); },
              [] { return "cuStreamWaitEvent"; });
}

MGPU_API CUevent mgpuEventCreate() {
  CUevent event = nullptr;
  runOnDevice([&] { return cuEventCreate(&event, CU_EVENT_DISABLE_TIMING); },
              [] { return "cuEventCreate"; });
  return event;
}

MGPU_API void mgpuEventDestroy(CUevent event) {
  runOnDevice([&] { return cuEventDestroy(event); },
              [] { return "cuEventDestroy"; });
}

MGPU_API void mgpuEventSynchronize(CUevent event) {
  runOnDevice([&] { return cuEventSynchronize(event); },
              [] { return "cuEventSynchronize"; });
}

MGPU_API void mgpuEventRecord(CUevent event, CUstream stream) {
  runOnDevice([&] { return cuEventRecord(event, stream); },
              [] { return "cuEventRecord"; });
}

MGPU_API void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream,
                            bool isHostShared) {
  CUdeviceptr ptr = 0;
  if (sizeBytes == 0)
    return nullptr;
  if (callStream.enabled && !isHostShared)
    return allocOnStream(sizeBytes, stream);
  runOnDevice(
      [&] {
        return isHostShared
                   ? cuMemAllocManaged(&ptr, sizeBytes, CU_MEM_ATTACH_GLOBAL)
                   : cuMemAlloc(&ptr, sizeBytes);
      },
      [&] {
        return bytesText(isHostShared ? "cuMemAllocManaged" : "cuMemAlloc",
                         sizeBytes);
      });
  return reinterpret_cast<void *>(ptr);
}

MGPU_API void mgpuMemFree(void *ptr, CUstream stream) {
  if (!ptr || nccl::releaseRegistered(ptr, stream))
    return;
  // Call-stream mode: the temporaries compiled code frees came from
  // allocOnStream; free them after the work enqueued before, without the
  // device-wide wait of cuMemFree.
  if (callStream.enabled)
    runOnDevice([&] { return cuMemFreeAsync(devicePtr(ptr), stream); },
                [] { return "cuMemFreeAsync"; });
  else
    runOnDevice([&] { return cuMemFree(devicePtr(ptr)); },
                [] { return "cuMemFree"; });
}

MGPU_API void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                         CUstream stream) {
  if (getCallFailure())
    return;
  runOnDevice(
      [&] {
        return cuMemcpyAsync(devicePtr(dst), devicePtr(src), sizeBytes, stream);
      },
      [&] { return bytesText("cuMemcpyAsync", sizeBytes); });
}

MGPU_API void mgpuMemset32(void *dst, unsigned int value, size_t count,
                           CUstream stream) {
  if (getCallFailure())
    return;
  runOnDevice(
      [&] { return cuMemsetD32Async(devicePtr(dst), value, count, stream); },
      [&] { return bytesText("cuMemsetD32Async", 4 * count); });
}

MGPU_API void mgpuMemset16(void *dst, unsigned short value, size_t count,
                           CUstream stream) {
  if (getCallFailure())
    return;
  runOnDevice(
      [&] { return cuMemsetD16Async(devicePtr(dst), value, count, stream); },
      [&] { return bytesText("cuMemsetD16Async", 2 * count); });
}

MGPU_API void mgpuMemHostRegister(void *ptr, uint64_t sizeBytes) {
  runOnDevice([&] { return cuMemHostRegister(ptr, sizeBytes, 0); },
              [&] { return bytesText("cuMemHostRegister", sizeBytes); });
}

MGPU_API void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                        int64_t elementSizeBytes) {
  auto [ptr, bytes] = memrefExtent(rank, descriptor, elementSizeBytes);
  if (bytes)
    mgpuMemHostRegister(ptr, bytes);
}

MGPU_API void mgpuMemHostUnregister(void *ptr) {
  runOnDevice([&] { return cuMemHostUnregister(ptr); },
              [] { return "cuMemHostUnregister"; });
}

MGPU_API void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                          int64_t elementSizeBytes) {
  auto [ptr, bytes] = memrefExtent(rank, descriptor, elementSizeBytes);
  if (bytes)
    mgpuMemHostUnregister(ptr);
}

MGPU_API void mgpuSetDefaultDevice(int32_t device) { setDefaultDevice(device); }

//===----------------------------------------------------------------------===//
// mxrt* device helpers
//===----------------------------------------------------------------------===//

namespace {
// Runs `body` with the default device current; transfers of 0 bytes are
// no-ops that do not even initialize CUDA.
template <typename Body> int32_t onDevice(uint64_t bytes, Body &&body) {
  if (bytes == 0)
    return MXRT_SUCCESS;
  DeviceScope scope;
  return scope ? body(scope.ordinal()) : scope.status();
}

// Device-to-device copies and memsets may return before they complete; the
// helpers promise synchronous behavior, so wait for the legacy stream.
int32_t syncLegacyStream(int32_t status) {
  return status ? status
                : checkCu(cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}
} // namespace

extern "C" {

MXRT_API const char *mxrtGetLastError(void) {
  thread_local std::string returned;
  std::lock_guard<std::mutex> lock(errorMutex);
  returned = std::move(stickyError);
  stickyError.clear();
  lastPrinted.clear();
  return returned.c_str();
}

MXRT_API int32_t mxrtMalloc(void **ptr, uint64_t bytes) {
  if (!ptr)
    return fail(MXRT_ERROR_INVALID_ARGUMENT, "mxrtMalloc: ptr is NULL");
  *ptr = nullptr;
  return onDevice(bytes, [&](int) {
    return checkCuWith(cuMemAlloc(reinterpret_cast<CUdeviceptr *>(ptr), bytes),
                       [&] { return bytesText("cuMemAlloc", bytes); });
  });
}

MXRT_API int32_t mxrtFree(void *ptr) {
  // Synchronous, as cuMemFree is: a registered buffer is reused only after
  // the device's work so far, whatever stream used it.
  if (nccl::releaseRegistered(ptr, nullptr, /*synchronous=*/true))
    return MXRT_SUCCESS;
  return onDevice(ptr != nullptr, [&](int) {
    return checkCu(cuMemFree(devicePtr(ptr)), "cuMemFree");
  });
}

MXRT_API void mxrtCallBegin(const char *function) {
  if (callGuard.depth++ == 0)
    callGuard.status = MXRT_SUCCESS;
  callGuard.function = function;
}

MXRT_API int32_t mxrtCallEnd(void) {
  int32_t status = callGuard.status;
  if (callGuard.depth > 0 && --callGuard.depth == 0) {
    callGuard.lastStatus = status;
    callGuard.status = MXRT_SUCCESS;
  }
  return status;
}

MXRT_API int32_t mxrtTakeLastCallStatus(void) { return takeLastCallStatus(); }

MXRT_API void mxrtCheckArgument(int32_t index, const void *pointer,
                                int64_t alignment) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  if (pointer && alignment > 0 && address % alignment == 0)
    return;
  const char *function =
      callGuard.function ? callGuard.function : "<compiled function>";
  if (!pointer) {
    fail(MXRT_ERROR_INVALID_ARGUMENT,
         format("@%s argument %d is a NULL pointer; nothing of the call was "
                "launched",
                function, index));
    return;
  }
  fail(MXRT_ERROR_INVALID_ARGUMENT,
       format("@%s argument %d: device pointer %p is %llu bytes past a "
              "%lld-byte boundary; the compiled kernels need arguments that "
              "start %lld-byte aligned (a view at an element offset of a "
              "larger tensor may not: pass a copy). Nothing of the call was "
              "launched",
              function, index, pointer,
              static_cast<unsigned long long>(address % alignment),
              static_cast<long long>(alignment),
              static_cast<long long>(alignment)));
}

MXRT_API int32_t mxrtSetCallStream(void *stream, int32_t enabled) {
  if (enabled != 0 && enabled != 1)
    return fail(
        MXRT_ERROR_INVALID_ARGUMENT,
        format("mxrtSetCallStream: enabled must be 0 or 1, got %d", enabled));
  callStream.enabled = enabled == 1;
  callStream.stream = enabled ? static_cast<CUstream>(stream) : nullptr;
  return MXRT_SUCCESS;
}

MXRT_API int32_t mxrtFreeAsync(void *ptr, void *stream) {
  if (nccl::releaseRegistered(ptr, static_cast<CUstream>(stream)))
    return MXRT_SUCCESS;
  return onDevice(ptr != nullptr, [&](int) {
    return checkCu(
        cuMemFreeAsync(devicePtr(ptr), static_cast<CUstream>(stream)),
        "cuMemFreeAsync");
  });
}

MXRT_API int32_t mxrtMemcpyHtoD(void *dst, const void *src, uint64_t bytes) {
  return onDevice(bytes, [&](int) {
    return checkCuWith(cuMemcpyHtoD(devicePtr(dst), src, bytes),
                       [&] { return bytesText("cuMemcpyHtoD", bytes); });
  });
}

MXRT_API int32_t mxrtMemcpyDtoH(void *dst, const void *src, uint64_t bytes) {
  return onDevice(bytes, [&](int) {
    return checkCuWith(cuMemcpyDtoH(dst, devicePtr(src), bytes),
                       [&] { return bytesText("cuMemcpyDtoH", bytes); });
  });
}

MXRT_API int32_t mxrtMemcpyDtoD(void *dst, const void *src, uint64_t bytes) {
  return onDevice(bytes, [&](int) {
    return syncLegacyStream(
        checkCuWith(cuMemcpyDtoD(devicePtr(dst), devicePtr(src), bytes),
                    [&] { return bytesText("cuMemcpyDtoD", bytes); }));
  });
}

MXRT_API int32_t mxrtMemset8(void *dst, uint8_t value, uint64_t bytes) {
  return onDevice(bytes, [&](int) {
    return syncLegacyStream(
        checkCuWith(cuMemsetD8(devicePtr(dst), value, bytes),
                    [&] { return bytesText("cuMemsetD8", bytes); }));
  });
}

MXRT_API int32_t mxrtSynchronize(void) {
  return onDevice(1, [](int) {
    return checkCu(cuCtxSynchronize(), "cuCtxSynchronize");
  });
}

MXRT_API int32_t mxrtEmptyCache(void) {
  return onDevice(1, [](int ordinal) {
    CUmemoryPool pool;
    if (int32_t status = checkCu(cuCtxSynchronize(), "cuCtxSynchronize"))
      return status;
    if (int32_t status = nccl::trimRegistered())
      return status;
    if (int32_t status = getStreamOrderedPool(ordinal, &pool))
      return status;
    return checkCu(cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo");
  });
}

MXRT_API int32_t mxrtDeviceComputeCapability(int *major, int *minor) {
  if (!major || !minor)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                "mxrtDeviceComputeCapability: NULL output pointer");
  return onDevice(1, [&](int ordinal) {
    CUdevice device;
    int32_t status;
    if ((status = checkCu(cuDeviceGet(&device, ordinal), "cuDeviceGet")) ||
        (status = checkCu(cuDeviceGetAttribute(
                              major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                              device),
                          "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)")))
      return status;
    return checkCu(
        cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                             device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  });
}

} // extern "C"
