//===- NcclAbiCheck.cpp - NcclApi.h against nccl.h ------------------------===//
//
// Compiled (never linked) where nccl.h is found: the build fails if the
// runtime's own declarations of NCCL's ABI (NcclApi.h) disagree with it.
//
//===----------------------------------------------------------------------===//

#include "NcclApi.h"

#include <nccl.h>

namespace nccl = mxrt::nccl;

static_assert(sizeof(ncclResult_t) == sizeof(nccl::Result));
static_assert(sizeof(ncclDataType_t) == sizeof(int));
static_assert(sizeof(ncclRedOp_t) == sizeof(int));
static_assert(sizeof(ncclUniqueId) == sizeof(nccl::UniqueId));
static_assert(NCCL_UNIQUE_ID_BYTES == MXRT_UNIQUE_ID_BYTES);
static_assert(int(ncclSuccess) == int(nccl::Success));
static_assert(int(ncclUnhandledCudaError) == int(nccl::UnhandledCudaError));
static_assert(int(ncclInProgress) == int(nccl::InProgress));
static_assert(int(ncclUint8) == int(nccl::Uint8));
static_assert(int(ncclUint32) == int(nccl::Uint32));
static_assert(int(ncclFloat16) == int(nccl::Float16));
static_assert(int(ncclFloat32) == int(nccl::Float32));
static_assert(int(ncclBfloat16) == int(nccl::Bfloat16));
static_assert(int(ncclSum) == int(nccl::Sum));
static_assert(int(ncclMax) == int(nccl::Max));
