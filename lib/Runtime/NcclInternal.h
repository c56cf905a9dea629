//===- NcclInternal.h - Shared internals of the NCCL part -------*- C++ -*-===//
//
// What Nccl.cpp (the communicator and the collectives) and NcclMemory.cpp
// (the registered buffers of the collectives) share: the loaded library's
// entry points, NCCL's failure text, and access to the process's
// communicator. Not installed.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_RUNTIME_NCCLINTERNAL_H
#define MX_LIB_RUNTIME_NCCLINTERNAL_H

#include "NcclApi.h"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace mxrt::nccl {

// The entry points of the loaded library, or why it did not load. The
// buffer registration functions are optional (NCCL 2.19 and later).
struct Library {
  std::string error;
  Result (*getVersion)(int *) = nullptr;
  Result (*getUniqueId)(UniqueId *) = nullptr;
  Result (*commInitRank)(Comm *, int, UniqueId, int) = nullptr;
  Result (*commDestroy)(Comm) = nullptr;
  Result (*commAbort)(Comm) = nullptr;
  Result (*commGetAsyncError)(Comm, Result *) = nullptr;
  const char *(*getErrorString)(Result) = nullptr;
  const char *(*getLastError)(Comm) = nullptr; // NCCL >= 2.13; optional.
  Result (*allGather)(const void *, void *, size_t, int, Comm,
                      CUstream) = nullptr;
  Result (*allReduce)(const void *, void *, size_t, int, int, Comm,
                      CUstream) = nullptr;
  Result (*reduceScatter)(const void *, void *, size_t, int, int, Comm,
                          CUstream) = nullptr;
  Result (*broadcast)(const void *, void *, size_t, int, int, Comm,
                      CUstream) = nullptr;
  Result (*send)(const void *, size_t, int, int, Comm, CUstream) = nullptr;
  Result (*recv)(void *, size_t, int, int, Comm, CUstream) = nullptr;
  Result (*groupStart)() = nullptr;
  Result (*groupEnd)() = nullptr;
  Result (*memAlloc)(void **, size_t) = nullptr;                   // Optional.
  Result (*memFree)(void *) = nullptr;                             // Optional.
  Result (*commRegister)(Comm, void *, size_t, void **) = nullptr; // Opt.
  Result (*commDeregister)(Comm, void *) = nullptr;                // Optional.

  bool canRegister() const {
    return memAlloc && memFree && commRegister && commDeregister;
  }
};

// The library, loaded on first use.
const Library &getLibrary();

// "<call> failed with ncclInvalidUsage (5): <error string>: <last error>".
std::string describeFailure(const char *call, Result result, Comm comm);

// The process's communicator as the registered buffers see it: NCCL's
// handle and the generation of the communicator (every mxrtCommInit makes a
// new one), so that a registration outlives no communicator.
struct CommHandle {
  Comm comm = nullptr;
  uint64_t generation = 0;
};

// Runs `fn` on the process's communicator with its locks held (those of the
// calling thread's open group where one is open), the context current;
// fails like a collective where there is none, or it was aborted.
int32_t withCommunicator(const char *call,
                         const std::function<int32_t(CommHandle)> &fn);

// Registered buffers (NcclMemory.cpp). A buffer of at least `bytes` for a
// collective's result, registered with the communicator, usable on
// `stream` (its previous user's work done first); NULL after a recorded
// failure. Falls back to the stream-ordered allocation where registration
// cannot be had (see mxrtCollectiveAlloc).
void *allocateRegistered(uint64_t bytes, CUstream stream);
// Takes back `ptr` if it is a registered buffer, for reuse after the work
// enqueued on `stream` so far (`synchronous`: after all the device's work,
// as a synchronous free promises); false (nothing done) for any other
// pointer.
bool releaseRegistered(void *ptr, CUstream stream, bool synchronous = false);
// Forgets every registration with the communicator of `generation`,
// deregistering it on `comm` first unless the communicator was aborted
// (`comm` NULL: its registrations went with it). With its locks held.
void dropRegistrations(Comm comm, uint64_t generation);
// Frees the registered buffers that nothing uses (mxrtEmptyCache).
int32_t trimRegistered();

} // namespace mxrt::nccl

#endif // MX_LIB_RUNTIME_NCCLINTERNAL_H
