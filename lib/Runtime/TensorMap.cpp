//===- TensorMap.cpp - mxrtEncodeTensorMap: TMA descriptors ---------------===//
//
// The generated GEMM kernels load their tiles with cp.async.bulk.tensor,
// which reads a CUtensorMap. MLIR 22.1's nvgpu.tma.create.descriptor cannot
// make them: it encodes f8 tensors with the BF16 data type, so every stride
// and box comes out twice too large. The host code the lowering emits calls
// mxrtEncodeTensorMap instead, with the dimensions and box in stack arrays,
// on every launch, and passes the 128 bytes to the kernel by value, as a
// __grid_constant__ parameter (as CUTLASS does): encoding is host work only
// (cuTensorMapEncodeTiled), so a launch needs no copy to the device, no wait
// for one, and no device memory that outlives the kernels reading it.
//
// TMA has no FP8 type: it moves bytes, and the data type fixes only the
// element size (strides, box bytes) and which out-of-bounds fills are
// allowed. FP8 operands and E8M0 scales are therefore encoded as UINT8; the
// zero fill (FLOAT_OOB_FILL_NONE) is what the GEMM needs for ragged edges.
// Packed FP4 and FP6 are the 16U4_ALIGN16B / 16U6_ALIGN16B types, which
// place each 16 elements of a row in 16 bytes of shared memory, the layout
// tcgen05's kind::mxf8f6f4 reads (SM100; a kernel that decodes packed bytes
// itself maps them as I8).
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstring>
#include <string>

using namespace mxrt;

namespace {

constexpr int kMinRank = 2, kMaxRank = 5;
// What TMA requires of a tensor map's address, in any state space.
constexpr uintptr_t kMapAlignment = 64;
constexpr uint64_t kMaxDim = uint64_t(1) << 32;
constexpr uint64_t kMaxStrideBytes = uint64_t(1) << 40;
constexpr int32_t kMaxBox = 256;

struct Element {
  CUtensorMapDataType type;
  uint32_t bits;
  const char *name;
  /// A packed type that TMA spreads in shared memory, 16 elements to 16
  /// bytes (16U4_ALIGN16B, 16U6_ALIGN16B): with its own rules (below).
  bool unpacksToBytes = false;
};

bool elementOf(int32_t elemType, Element &out) {
  switch (elemType) {
  case MXRT_TYPE_F8E4M3: out = {CU_TENSOR_MAP_DATA_TYPE_UINT8, 8, "F8E4M3"}; return true;
  case MXRT_TYPE_F8E5M2: out = {CU_TENSOR_MAP_DATA_TYPE_UINT8, 8, "F8E5M2"}; return true;
  case MXRT_TYPE_BF16: out = {CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 16, "BF16"}; return true;
  case MXRT_TYPE_F16: out = {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 16, "F16"}; return true;
  case MXRT_TYPE_F32: out = {CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 32, "F32"}; return true;
  case MXRT_TYPE_E8M0: out = {CU_TENSOR_MAP_DATA_TYPE_UINT8, 8, "E8M0"}; return true;
  case MXRT_TYPE_I8: out = {CU_TENSOR_MAP_DATA_TYPE_UINT8, 8, "I8"}; return true;
  case MXRT_TYPE_U32: out = {CU_TENSOR_MAP_DATA_TYPE_UINT32, 32, "U32"}; return true;
  // What tcgen05's kind::mxf8f6f4 reads: each 16 packed elements of a row
  // in 16 bytes of shared memory.
  case MXRT_TYPE_F4E2M1: out = {CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, 4, "F4E2M1", true}; return true;
  case MXRT_TYPE_F6E3M2: out = {CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B, 6, "F6E3M2", true}; return true;
  case MXRT_TYPE_F6E2M3: out = {CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B, 6, "F6E2M3", true}; return true;
  default: return false;
  }
}

/// The 16U4/16U6_ALIGN16B rules of cuTensorMapEncodeTiled.
constexpr uint32_t kUnpackedAlignment = 32; // base and strides, bytes
constexpr uint32_t kUnpackedBox = 128;      // box[0] and a multiple of dims[0]

bool swizzleOf(int32_t bytes, CUtensorMapSwizzle &out) {
  switch (bytes) {
  case MXRT_SWIZZLE_NONE: out = CU_TENSOR_MAP_SWIZZLE_NONE; return true;
  case MXRT_SWIZZLE_32B: out = CU_TENSOR_MAP_SWIZZLE_32B; return true;
  case MXRT_SWIZZLE_64B: out = CU_TENSOR_MAP_SWIZZLE_64B; return true;
  case MXRT_SWIZZLE_128B: out = CU_TENSOR_MAP_SWIZZLE_128B; return true;
  default: return false;
  }
}

// The arguments of cuTensorMapEncodeTiled, checked.
struct Request {
  void *base;
  Element element;
  int32_t swizzleBytes;
  CUtensorMapSwizzle swizzle;
  cuuint32_t rank;
  cuuint64_t dims[kMaxRank];
  cuuint64_t strides[kMaxRank - 1]; // Bytes, of dims[1..rank-1].
  cuuint32_t box[kMaxRank];
};

int32_t invalid(const std::string &why) {
  return fail(MXRT_ERROR_INVALID_ARGUMENT, "mxrtEncodeTensorMap: " + why);
}

template <typename T> std::string listText(const T *values, cuuint32_t count) {
  std::string text = "[";
  for (cuuint32_t i = 0; i < count; ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

// The driver checks the same rules but answers only CUDA_ERROR_INVALID_VALUE;
// checking first names the argument at fault.
int32_t validate(const void *base, int32_t elemType, int32_t rank,
                 const int64_t *dims, const int32_t *box, int32_t swizzle,
                 Request &r) {
  if (rank < kMinRank || rank > kMaxRank)
    return invalid(format("rank %d is out of range %d..%d", rank, kMinRank,
                          kMaxRank));
  if (!dims || !box)
    return invalid(format("%s is NULL", dims ? "box" : "dims"));
  if (!elementOf(elemType, r.element))
    return invalid(format("unknown element type %d", elemType));
  if (!swizzleOf(swizzle, r.swizzle))
    return invalid(format("swizzle %d is not 0, 32, 64 or 128 (bytes)",
                          swizzle));
  if (!base)
    return invalid("base is NULL");
  if (reinterpret_cast<uintptr_t>(base) % 16)
    return invalid(format("base %p is not 16-byte aligned", base));
  r.base = const_cast<void *>(base);
  r.swizzleBytes = swizzle;
  r.rank = static_cast<cuuint32_t>(rank);

  bool unpacks = r.element.unpacksToBytes;
  if (unpacks && reinterpret_cast<uintptr_t>(base) % kUnpackedAlignment)
    return invalid(format("base %p of %s is not %u-byte aligned", base,
                          r.element.name, kUnpackedAlignment));
  if (unpacks && dims[0] % kUnpackedBox)
    return invalid(format("dims[0]=%lld %s elements is not a multiple of %u",
                          static_cast<long long>(dims[0]), r.element.name,
                          kUnpackedBox));
  // Bits, so that packed rows count exactly; a row is whole bytes below.
  uint64_t stride = r.element.bits;
  for (int32_t i = 0; i < rank; ++i) {
    if (dims[i] < 1 || static_cast<uint64_t>(dims[i]) > kMaxDim)
      return invalid(format("dims[%d]=%lld is out of range 1..2^32", i,
                            static_cast<long long>(dims[i])));
    r.dims[i] = static_cast<cuuint64_t>(dims[i]);
    if (i == 0)
      continue;
    if (r.dims[i - 1] > (8 * kMaxStrideBytes - 1) / stride)
      return invalid(format("the stride of dims[%d] (dims[0..%d] of %s) "
                            "reaches 2^40 bytes",
                            i, i - 1, r.element.name));
    stride *= r.dims[i - 1];
    uint32_t multiple = unpacks ? kUnpackedAlignment : 16;
    if (stride % (8 * multiple))
      return invalid(format("the stride of dims[%d], %.3f bytes (dims[0..%d] "
                            "of %u-bit %s elements), is not a multiple of %u",
                            i, static_cast<double>(stride) / 8, i - 1,
                            r.element.bits, r.element.name, multiple));
    r.strides[i - 1] = stride / 8;
  }

  for (int32_t i = 0; i < rank; ++i) {
    if (box[i] < 1 || box[i] > kMaxBox)
      return invalid(format("box[%d]=%d is out of range 1..%d", i, box[i],
                            kMaxBox));
    r.box[i] = static_cast<cuuint32_t>(box[i]);
  }
  if (unpacks) {
    // 128 elements, 128 bytes of shared memory: loads swizzle 128B or none.
    if (r.box[0] != kUnpackedBox || (swizzle != MXRT_SWIZZLE_NONE &&
                                     swizzle != MXRT_SWIZZLE_128B))
      return invalid(format("%s boxes are %u elements wide (box[0]=%d) and "
                            "swizzle 128B or none (swizzle %d)",
                            r.element.name, kUnpackedBox, box[0], swizzle));
    return MXRT_SUCCESS;
  }
  uint32_t innerBytes = r.box[0] * r.element.bits / 8;
  if (innerBytes % 16)
    return invalid(format("box[0]=%d %s elements is %u bytes, not a multiple "
                          "of 16",
                          box[0], r.element.name, innerBytes));
  if (swizzle != MXRT_SWIZZLE_NONE && innerBytes > uint32_t(swizzle))
    return invalid(format("box[0]=%d %s elements is %u bytes, more than the "
                          "%d-byte swizzle span",
                          box[0], r.element.name, innerBytes, swizzle));
  return MXRT_SUCCESS;
}

std::string requestText(const Request &r) {
  return format("cuTensorMapEncodeTiled(%s, base %p, dims %s, byte strides "
                "%s, box %s, swizzle %dB)",
                r.element.name, r.base, listText(r.dims, r.rank).c_str(),
                listText(r.strides, r.rank - 1).c_str(),
                listText(r.box, r.rank).c_str(), r.swizzleBytes);
}

} // namespace

extern "C" MXRT_API void *mxrtEncodeTensorMap(void *map, const void *base,
                                              int32_t elemType, int32_t rank,
                                              const int64_t *dims,
                                              const int32_t *box,
                                              int32_t swizzle) {
  if (!map) {
    invalid("map is NULL");
    return map;
  }
  // Zero unless encoded: a kernel given a failed map faults on no address.
  std::memset(map, 0, sizeof(CUtensorMap));
  if (reinterpret_cast<uintptr_t>(map) % kMapAlignment) {
    invalid(format("map %p is not %zu-byte aligned", map,
                   size_t(kMapAlignment)));
    return map;
  }
  Request r;
  if (validate(base, elemType, rank, dims, box, swizzle, r))
    return map;
  // The driver encodes for the current context's device.
  DeviceScope scope;
  if (!scope)
    return map;
  const cuuint32_t elementStrides[kMaxRank] = {1, 1, 1, 1, 1};
  if (CUresult result = cuTensorMapEncodeTiled(
          static_cast<CUtensorMap *>(map), r.element.type, r.rank, r.base,
          r.dims, r.strides, r.box, elementStrides,
          CU_TENSOR_MAP_INTERLEAVE_NONE, r.swizzle,
          CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)) {
    cudaFailure(result, requestText(r));
    std::memset(map, 0, sizeof(CUtensorMap));
  }
  return map;
}
