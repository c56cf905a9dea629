//===- NcclApi.h - The part of NCCL's C ABI the runtime uses ----*- C++ -*-===//
//
// NCCL is loaded at run time (Nccl.cpp), so the runtime declares the few
// NCCL types it passes instead of including nccl.h, which the machines that
// build the runtime may lack. These are NCCL 2.x's: C enums (ints), an
// opaque communicator, and the 128-byte unique id passed by value.
// NcclAbiCheck.cpp compares them with nccl.h where that header is found.
//
//===----------------------------------------------------------------------===//

#ifndef MX_LIB_RUNTIME_NCCLAPI_H
#define MX_LIB_RUNTIME_NCCLAPI_H

#include "mx/Runtime/MXRuntime.h"

namespace mxrt::nccl {

using Comm = struct OpaqueComm *;
using Result = int;
enum : Result { Success = 0, UnhandledCudaError = 1, InProgress = 7 };
enum DataType : int {
  Uint8 = 1,
  Uint32 = 3,
  Float16 = 6,
  Float32 = 7,
  Bfloat16 = 9
};
enum RedOp : int { Sum = 0, Max = 2 };
struct UniqueId {
  char internal[MXRT_UNIQUE_ID_BYTES];
};

} // namespace mxrt::nccl

#endif // MX_LIB_RUNTIME_NCCLAPI_H
