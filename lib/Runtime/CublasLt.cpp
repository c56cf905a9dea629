//===- CublasLt.cpp - mxrtScaledMatmul on cuBLASLt ------------------------===//
//
// Scaled FP8/FP4 matmul out[M,N] = alpha deq(A)[M,K] . deq(B)[N,K]^T through
// cuBLASLt. cuBLASLt is column-major, so the problem is handed over
// transposed: cuBLASLt's A is our B, its B is our A and its D is N x M
// column-major, which is our row-major out[M, N]; the scale pointers and
// modes swap along with the operands. A K-contiguous operand [rows, K] is a
// column-major K x rows matrix (our B: op T, our A: op N, the "TN" form FP8
// wants before SM100); a K-outer one [K, rows] is rows x K (op N / op T).
// Descriptors, layouts and the heuristic's algorithm are cached per problem;
// one cuBLASLt handle and one arena (32 MiB workspace + scratch for re-laid-out
// scales) exist per device. Calls are serialized by a mutex and, across
// streams, by an event recorded after each matmul, because they share the
// arena. A request the GPU cannot run fails with MXRT_ERROR_NOT_SUPPORTED.
// In call-stream mode (mxrtSetCallStream) a NULL stream means the calling
// thread's call stream, and growing the arena is stream-ordered too (freed
// and allocated on that stream from the device's default pool), so that a
// call does not make the host wait for the device (except once, to free an
// arena that a default-mode call made with cuMemAlloc).
//
// Scale layouts. For each operand X[rows, K] the "outer" dimension is rows,
// the "inner" one K, and KB = ceil(K / 128). cuBLASLt's layouts (cublasLt.h
// defers to the cuBLAS docs; sizes as in NVIDIA CUDALibrarySamples
// cuBLASLt/Common/helpers.h getScaleTensorSize, strides as PyTorch's
// is_blockwise_{1x128,128x128}_scaling checks; both re-layouts below are
// verified on H100 with cuBLAS 13.1 by python/tests/test_gpu_runtime.py):
//  * SCALAR_32F: one f32. Passed through when 16-byte aligned; otherwise (a
//    batch slice's scale, 4 bytes after the previous one) copied into a
//    16-byte aligned arena slot: cublasLtMatmul answers NOT_SUPPORTED for a
//    scalar scale that is only 4-byte aligned (seen on H100, cuBLAS 13.1).
//  * VEC32_UE8M0: the 128x4-tiled E8M0 layout of mxrtScaleMode, which is the
//    project's layout too. Passed through.
//  * VEC128_32F: outer-dimension-major, scale(r, j) at j * rows + r, while
//    ours is row-major [rows][KB] (scale(r, j) at r * KB + j). The runtime
//    transposes it into scratch with cublasLtMatrixTransform; a lowering that
//    emits [KB][rows] directly would make this copy unnecessary.
//    VEC128_F32_KB_ROWS is that layout already and is passed through.
//  * BLK128x128_32F: row-major [ceil(rows/128)][KB] like ours, but with the
//    row pitch rounded up to a multiple of 4 entries (16 bytes). The runtime
//    re-pitches it with cuMemcpy2DAsync when KB % 4 != 0 and passes it
//    through otherwise; a lowering padding rows to 4 entries avoids the copy.
//  * VEC16_UE4M3 (NVFP4): the 128x4-tiled layout of VEC32. Passed through;
//    the tensor scales reach cuBLASLt as a device alpha.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cublasLt.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

using namespace mxrt;

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr size_t kArenaAlign = 256;

size_t alignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct Problem {
  int64_t m, n, k;
  const void *a, *aScales, *b, *bScales;
  const float *alpha; // device; NULL for 1
  void *out;
  int32_t aType, aLayout, aMode, bType, bLayout, bMode, outType;
};

const char *typeName(int32_t type) {
  static const char *names[] = {"F8E4M3", "F8E5M2", "BF16",   "F16",
                                "F32",    "E8M0",   "F4E2M1", "U32",
                                "F6E3M2", "F6E2M3", "I8"};
  return type >= 0 && type <= MXRT_TYPE_I8 ? names[type] : "<invalid type>";
}

const char *modeName(int32_t mode) {
  static const char *names[] = {"TENSOR_F32",  "VEC32_UE8M0",
                                "VEC128_F32",  "BLK128X128_F32",
                                "VEC16_UE4M3", "VEC128_F32_KB_ROWS"};
  return mode >= 0 && mode <= MXRT_SCALE_VEC128_F32_KB_ROWS ? names[mode]
                                                            : "<invalid mode>";
}

cudaDataType_t cudaType(int32_t type) {
  switch (type) {
  case MXRT_TYPE_F8E4M3: return CUDA_R_8F_E4M3;
  case MXRT_TYPE_F8E5M2: return CUDA_R_8F_E5M2;
  case MXRT_TYPE_BF16: return CUDA_R_16BF;
  case MXRT_TYPE_F16: return CUDA_R_16F;
  case MXRT_TYPE_F4E2M1: return CUDA_R_4F_E2M1;
  default: return CUDA_R_32F;
  }
}

cublasLtMatmulMatrixScale_t ltScaleMode(int32_t mode) {
  switch (mode) {
  case MXRT_SCALE_VEC32_UE8M0: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  case MXRT_SCALE_VEC128_F32:
  case MXRT_SCALE_VEC128_F32_KB_ROWS: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  case MXRT_SCALE_VEC16_UE4M3: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
  case MXRT_SCALE_BLK128X128_F32: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  default: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  }
}

bool isVec128(int32_t mode) {
  return mode == MXRT_SCALE_VEC128_F32 || mode == MXRT_SCALE_VEC128_F32_KB_ROWS;
}

bool isBlock128(int32_t mode) {
  return isVec128(mode) || mode == MXRT_SCALE_BLK128X128_F32;
}

// Bits of one element of an operand type.
int64_t elementBits(int32_t type) { return type == MXRT_TYPE_F4E2M1 ? 4 : 8; }

// The extent of the stored rows of one operand: K, or rows when K-outer.
int64_t storedRow(int32_t layout, int64_t rows, int64_t k) {
  return layout == MXRT_LAYOUT_K_OUTER ? rows : k;
}

std::string problemText(const Problem &p) {
  auto layout = [](int32_t l) {
    return l == MXRT_LAYOUT_K_OUTER ? "K-outer" : "K-contiguous";
  };
  return format("A %s/%s/%s, B %s/%s/%s, out %s, m=%ld n=%ld k=%ld",
                typeName(p.aType), layout(p.aLayout), modeName(p.aMode),
                typeName(p.bType), layout(p.bLayout), modeName(p.bMode),
                typeName(p.outType), long(p.m), long(p.n), long(p.k));
}

int32_t invalid(const std::string &why) {
  return fail(MXRT_ERROR_INVALID_ARGUMENT, "mxrtScaledMatmul: " + why);
}

int32_t notSupported(const Problem &p, const std::string &why) {
  return fail(MXRT_ERROR_NOT_SUPPORTED,
              "mxrtScaledMatmul: " + problemText(p) +
                  " is not supported by cuBLASLt on this GPU (" + why +
                  "); use the generated GEMM kernel (mx-lower-to-nvvm "
                  "gemm=kernel: wgmma on sm_90a) or dequantize + BF16 GEMM "
                  "instead");
}

std::string ltStatusText(cublasStatus_t status) {
  return format("%s (%d): %s", cublasLtGetStatusName(status), int(status),
                cublasLtGetStatusString(status));
}

int32_t checkLt(cublasStatus_t status, const char *call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return MXRT_SUCCESS;
  return fail(MXRT_ERROR_CUBLAS,
              format("%s failed with %s", call, ltStatusText(status).c_str()));
}

int32_t validate(const Problem &p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0)
    return invalid(format("m, n and k must be positive, got %ld, %ld, %ld",
                          long(p.m), long(p.n), long(p.k)));
  auto isFp8 = [](int32_t t) {
    return t == MXRT_TYPE_F8E4M3 || t == MXRT_TYPE_F8E5M2;
  };
  bool fp4 = p.aType == MXRT_TYPE_F4E2M1 && p.bType == MXRT_TYPE_F4E2M1;
  if (!fp4 && (!isFp8(p.aType) || !isFp8(p.bType)))
    return invalid(format("A and B must be F8E4M3 or F8E5M2, or both F4E2M1, "
                          "got %s and %s",
                          typeName(p.aType), typeName(p.bType)));
  for (int32_t layout : {p.aLayout, p.bLayout})
    if (layout != MXRT_LAYOUT_K_CONTIGUOUS && layout != MXRT_LAYOUT_K_OUTER)
      return invalid(format("unknown operand layout %d", layout));
  if (p.aType == MXRT_TYPE_F8E5M2 && p.bType == MXRT_TYPE_F8E5M2)
    return invalid("cuBLASLt has no F8E5M2 x F8E5M2 matmul; quantize one "
                   "operand to F8E4M3");
  if (p.outType != MXRT_TYPE_BF16 && p.outType != MXRT_TYPE_F16 &&
      p.outType != MXRT_TYPE_F32)
    return invalid(format("out must be BF16, F16 or F32, got %s",
                          typeName(p.outType)));
  for (int32_t mode : {p.aMode, p.bMode})
    if (mode < MXRT_SCALE_TENSOR_F32 || mode > MXRT_SCALE_VEC128_F32_KB_ROWS)
      return invalid(format("unknown scale mode %d", mode));
  bool bothBlock128 = isBlock128(p.aMode) && isBlock128(p.bMode);
  if (p.aMode != p.bMode && !bothBlock128)
    return invalid(format("scale modes %s (A) and %s (B) cannot be combined: "
                          "both TENSOR_F32, both VEC32_UE8M0, both "
                          "VEC16_UE4M3, or each of VEC128_F32 / "
                          "VEC128_F32_KB_ROWS / BLK128X128_F32",
                          modeName(p.aMode), modeName(p.bMode)));
  bool fp4Mode =
      p.aMode == MXRT_SCALE_VEC32_UE8M0 || p.aMode == MXRT_SCALE_VEC16_UE4M3;
  if (fp4 && !fp4Mode)
    return invalid(format("F4E2M1 operands take VEC32_UE8M0 or VEC16_UE4M3 "
                          "scales, got %s",
                          modeName(p.aMode)));
  if (!fp4 && p.aMode == MXRT_SCALE_VEC16_UE4M3)
    return invalid(format("VEC16_UE4M3 scales take F4E2M1 operands, got %s",
                          typeName(p.aType)));
  // Each scale block must be whole.
  int64_t kMultiple = bothBlock128                        ? 128
                      : p.aMode == MXRT_SCALE_VEC32_UE8M0 ? 32
                      : p.aMode == MXRT_SCALE_VEC16_UE4M3 ? 16
                                                          : 1;
  if (p.k % kMultiple)
    return invalid(format("k=%ld must be a multiple of %ld for %s scales",
                          long(p.k), long(kMultiple), modeName(p.aMode)));
  // Stored rows must be 16-byte aligned.
  struct {
    const char *name;
    int32_t type, layout;
    int64_t rows;
  } operands[] = {{"A", p.aType, p.aLayout, p.m},
                  {"B", p.bType, p.bLayout, p.n}};
  for (const auto &op : operands) {
    int64_t row = storedRow(op.layout, op.rows, p.k);
    if (row * elementBits(op.type) % (8 * MXRT_CUBLAS_ROW_BYTES))
      return invalid(format("%s's stored rows of %ld %s elements are not a "
                            "multiple of 16 bytes",
                            op.name, long(row), typeName(op.type)));
  }
  int64_t outBytes = p.outType == MXRT_TYPE_F32 ? 4 : 2;
  if (p.n * outBytes % MXRT_CUBLAS_ROW_BYTES)
    return invalid(format("n=%ld: output rows must be a multiple of %d bytes "
                          "(n a multiple of %ld for %s)",
                          long(p.n), MXRT_CUBLAS_ROW_BYTES,
                          long(MXRT_CUBLAS_ROW_BYTES / outBytes),
                          typeName(p.outType)));
  struct { const char *name; const void *ptr; size_t align; } pointers[] = {
      {"a", p.a, 16}, {"b", p.b, 16}, {"out", p.out, 16},
      {"aScales", p.aScales, p.aMode == MXRT_SCALE_TENSOR_F32 ? 4u : 16u},
      {"bScales", p.bScales, p.bMode == MXRT_SCALE_TENSOR_F32 ? 4u : 16u}};
  if (reinterpret_cast<uintptr_t>(p.alpha) % 4)
    return invalid(format("alpha=%p is not 4-byte aligned", p.alpha));
  for (const auto &ptr : pointers) {
    if (!ptr.ptr)
      return invalid(format("%s is NULL", ptr.name));
    if (reinterpret_cast<uintptr_t>(ptr.ptr) % ptr.align)
      return invalid(format("%s=%p is not %zu-byte aligned", ptr.name, ptr.ptr,
                            ptr.align));
  }
  // VEC128 scales are stored outer-dimension-major; cuBLASLt rejects rows
  // that leave their columns unaligned (seen on H100 with cuBLAS 13.1:
  // heuristic NOT_SUPPORTED for rows % 4 != 0, fine for 4, 12, 132, 204).
  if ((isVec128(p.aMode) && p.m % MXRT_CUBLAS_VEC128_ROWS) ||
      (isVec128(p.bMode) && p.n % MXRT_CUBLAS_VEC128_ROWS))
    return notSupported(p, "cuBLASLt needs m (n) to be a multiple of 4 when "
                           "A (B) has VEC128_F32 scales");
  return MXRT_SUCCESS;
}

// How one operand's scales reach cuBLASLt (see the layout notes above).
struct ScaleStaging {
  enum Kind { PassThrough, Transpose, Repitch, AlignScalar } kind = PassThrough;
  size_t offset = 0, bytes = 0; // Destination inside the arena.
  cublasLtMatrixLayout_t from = nullptr, to = nullptr; // Transpose.
  size_t rowBytes = 0, pitch = 0, height = 0;          // Repitch.

  ScaleStaging() = default;
  ScaleStaging(const ScaleStaging &) = delete;
  ScaleStaging &operator=(const ScaleStaging &) = delete;
  ~ScaleStaging() {
    if (from)
      cublasLtMatrixLayoutDestroy(from);
    if (to)
      cublasLtMatrixLayoutDestroy(to);
  }

  int32_t init(int32_t mode, int64_t rows, int64_t k, size_t arenaOffset) {
    uint64_t kb = (k + 127) / 128;
    offset = arenaOffset;
    if (mode == MXRT_SCALE_TENSOR_F32) {
      kind = AlignScalar;
      bytes = sizeof(float);
      return MXRT_SUCCESS;
    }
    if (mode == MXRT_SCALE_VEC128_F32) {
      kind = Transpose;
      bytes = rows * kb * sizeof(float);
      if (int32_t status = checkLt(
              cublasLtMatrixLayoutCreate(&from, CUDA_R_32F, kb, rows, kb),
              "cublasLtMatrixLayoutCreate(VEC128 scales)"))
        return status;
      return checkLt(cublasLtMatrixLayoutCreate(&to, CUDA_R_32F, rows, kb, rows),
                     "cublasLtMatrixLayoutCreate(VEC128 scales, transposed)");
    }
    if (mode == MXRT_SCALE_BLK128X128_F32 && kb % 4) {
      kind = Repitch;
      rowBytes = kb * sizeof(float);
      pitch = alignUp(rowBytes, 16);
      height = (rows + 127) / 128;
      bytes = pitch * height;
    }
    return MXRT_SUCCESS;
  }
};

// Everything cuBLASLt needs for one problem shape/type/mode combination.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t ltA = nullptr, ltB = nullptr, ltD = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  ScaleStaging ltAScales, ltBScales; // Our B's and our A's scales.

  ~Plan() {
    for (cublasLtMatrixLayout_t layout : {ltA, ltB, ltD})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
  // The arena's last slot: a device 0.0f, cuBLASLt's beta when alpha is a
  // device pointer (the pointer mode covers both).
  size_t zeroOffset() const {
    return alignUp(ltBScales.offset + ltBScales.bytes, kArenaAlign);
  }
  size_t arenaBytes() const { return zeroOffset() + kArenaAlign; }
};

struct Device {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatrixTransformDesc_t transpose = nullptr;
  CUdeviceptr arena = 0; // [workspace | our B's scales | our A's scales]
  size_t arenaBytes = 0;
  bool arenaFromPool = false; // Allocated in call-stream mode.
  CUevent lastUse = nullptr; // Recorded after each matmul that used the arena.
  bool used = false;
};

int32_t initDevice(Device &dev) {
  cublasOperation_t trans = CUBLAS_OP_T;
  int32_t status;
  if (!dev.lastUse &&
      (status = checkCu(cuEventCreate(&dev.lastUse, CU_EVENT_DISABLE_TIMING),
                        "cuEventCreate")))
    return status;
  if (!dev.transpose &&
      ((status = checkLt(
            cublasLtMatrixTransformDescCreate(&dev.transpose, CUDA_R_32F),
            "cublasLtMatrixTransformDescCreate")) ||
       (status = checkLt(cublasLtMatrixTransformDescSetAttribute(
                             dev.transpose, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA,
                             &trans, sizeof(trans)),
                         "cublasLtMatrixTransformDescSetAttribute(TRANSA)"))))
    return status;
  if (!dev.handle)
    return checkLt(cublasLtCreate(&dev.handle), "cublasLtCreate");
  return MXRT_SUCCESS;
}

template <typename T>
int32_t setDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                const T &value, const char *name) {
  return checkLt(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(T)),
                 name);
}

// The column-major layout of an operand [rows, K] or [K, rows] (layout) and
// the op that makes it cuBLASLt's A (K x rows, op T when K-contiguous) or B
// (K x rows, op N when K-contiguous).
int32_t createOperandLayout(cublasLtMatrixLayout_t *layout, int32_t type,
                            int32_t storage, int64_t rows, int64_t k,
                            const char *name) {
  bool kOuter = storage == MXRT_LAYOUT_K_OUTER;
  uint64_t height = kOuter ? rows : k, width = kOuter ? k : rows;
  return checkLt(
      cublasLtMatrixLayoutCreate(layout, cudaType(type), height, width, height),
      name);
}

int32_t createPlan(const Problem &p, Plan &plan) {
  // K-outer flips the op of each side of the TN form.
  cublasOperation_t transA =
      p.bLayout == MXRT_LAYOUT_K_OUTER ? CUBLAS_OP_N : CUBLAS_OP_T;
  cublasOperation_t transB =
      p.aLayout == MXRT_LAYOUT_K_OUTER ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t ltAMode = ltScaleMode(p.bMode), ltBMode = ltScaleMode(p.aMode);
  cublasLtPointerMode_t pointerMode =
      p.alpha ? CUBLASLT_POINTER_MODE_DEVICE : CUBLASLT_POINTER_MODE_HOST;
  int32_t status;
  if ((status = checkLt(
           cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate")) ||
      (status = setDesc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, transA,
                        "cublasLtMatmulDescSetAttribute(TRANSA)")) ||
      (status = setDesc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, transB,
                        "cublasLtMatmulDescSetAttribute(TRANSB)")) ||
      (status = setDesc(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, ltAMode,
                        "cublasLtMatmulDescSetAttribute(A_SCALE_MODE)")) ||
      (status = setDesc(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, ltBMode,
                        "cublasLtMatmulDescSetAttribute(B_SCALE_MODE)")) ||
      (status =
           setDesc(plan.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, pointerMode,
                   "cublasLtMatmulDescSetAttribute(POINTER_MODE)")) ||
      (status = createOperandLayout(&plan.ltA, p.bType, p.bLayout, p.n, p.k,
                                    "cublasLtMatrixLayoutCreate(A)")) ||
      (status = createOperandLayout(&plan.ltB, p.aType, p.aLayout, p.m, p.k,
                                    "cublasLtMatrixLayoutCreate(B)")) ||
      (status = checkLt(cublasLtMatrixLayoutCreate(
                            &plan.ltD, cudaType(p.outType), p.n, p.m, p.n),
                        "cublasLtMatrixLayoutCreate(D)")))
    return status;
  if ((status = plan.ltAScales.init(p.bMode, p.n, p.k, kWorkspaceBytes)))
    return status;
  return plan.ltBScales.init(
      p.aMode, p.m, p.k,
      alignUp(plan.ltAScales.offset + plan.ltAScales.bytes, kArenaAlign));
}

// Picks the algorithm once the scale pointers are set on the descriptor.
int32_t chooseAlgo(const Device &dev, const Problem &p, bool aligned256,
                   Plan &plan) {
  cublasLtMatmulPreference_t pref = nullptr;
  if (int32_t status = checkLt(cublasLtMatmulPreferenceCreate(&pref),
                               "cublasLtMatmulPreferenceCreate"))
    return status;
  // Algorithms may assume 256-byte aligned operands unless told otherwise.
  uint64_t workspace = kWorkspaceBytes;
  uint32_t align = aligned256 ? 256 : 16;
  cublasStatus_t lt = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
      sizeof(workspace));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (lt == CUBLAS_STATUS_SUCCESS)
      lt = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align,
                                                sizeof(align));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (lt == CUBLAS_STATUS_SUCCESS)
    lt = cublasLtMatmulAlgoGetHeuristic(dev.handle, plan.desc, plan.ltA,
                                        plan.ltB, plan.ltD, plan.ltD, pref, 1,
                                        &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (lt == CUBLAS_STATUS_NOT_SUPPORTED ||
      (lt == CUBLAS_STATUS_SUCCESS && found == 0))
    return notSupported(p, lt == CUBLAS_STATUS_SUCCESS
                               ? "cublasLtMatmulAlgoGetHeuristic found no "
                                 "algorithm"
                               : "cublasLtMatmulAlgoGetHeuristic returned " +
                                     ltStatusText(lt));
  if (int32_t status = checkLt(lt, "cublasLtMatmulAlgoGetHeuristic"))
    return status;
  plan.algo = result.algo;
  return MXRT_SUCCESS;
}

// Grows the arena; waits for the matmul that last used it before freeing.
int32_t ensureArena(Device &dev, size_t bytes) {
  if (dev.arenaBytes >= bytes)
    return MXRT_SUCCESS;
  if (dev.arena) {
    if (int32_t status = checkCu(cuEventSynchronize(dev.lastUse),
                                 "cuEventSynchronize"))
      return status;
    cuMemFree(dev.arena);
    dev.arena = 0;
    dev.arenaBytes = 0;
  }
  if (CUresult result = cuMemAlloc(&dev.arena, bytes))
    return cudaFailure(result,
                       format("cuMemAlloc(%zu-byte cuBLASLt arena)", bytes));
  dev.arenaBytes = bytes;
  dev.arenaFromPool = false;
  // Zeroes every plan's beta slot, wherever it lies.
  return checkCu(cuMemsetD8(dev.arena, 0, bytes), "cuMemsetD8(arena)");
}

// ensureArena in call-stream mode: every step is enqueued on `stream`, the
// host waits for nothing. The old arena is freed after the matmul that last
// used it (one from cuMemAlloc, made before call-stream mode, is freed as
// ensureArena does, once), and the new one is allocated from the device's
// default pool and zeroed in stream order.
int32_t ensureArenaOnStream(Device &dev, size_t bytes, CUstream stream,
                            int ordinal) {
  if (dev.arenaBytes >= bytes)
    return MXRT_SUCCESS;
  int32_t status;
  if (dev.arena && !dev.arenaFromPool) {
    if ((status =
             checkCu(cuEventSynchronize(dev.lastUse), "cuEventSynchronize")))
      return status;
    cuMemFree(dev.arena);
  } else if (dev.arena) {
    if ((dev.used &&
         (status = checkCu(cuStreamWaitEvent(stream, dev.lastUse, 0),
                           "cuStreamWaitEvent"))) ||
        (status = checkCu(cuMemFreeAsync(dev.arena, stream),
                          "cuMemFreeAsync(cuBLASLt arena)")))
      return status;
  }
  dev.arena = 0;
  dev.arenaBytes = 0;
  CUmemoryPool pool;
  if ((status = getStreamOrderedPool(ordinal, &pool)))
    return status;
  if (CUresult result =
          cuMemAllocFromPoolAsync(&dev.arena, bytes, pool, stream))
    return cudaFailure(
        result,
        format("cuMemAllocFromPoolAsync(%zu-byte cuBLASLt arena)", bytes));
  dev.arenaBytes = bytes;
  dev.arenaFromPool = true;
  // Zeroes every plan's beta slot, wherever it lies. The event orders a
  // later call on another stream after the allocation and the zeroing, even
  // if this call fails before its matmul.
  if ((status = checkCu(cuMemsetD8Async(dev.arena, 0, bytes, stream),
                        "cuMemsetD8Async(arena)")))
    return status;
  dev.used = true;
  return checkCu(cuEventRecord(dev.lastUse, stream), "cuEventRecord");
}

// Where cuBLASLt reads one operand's scales: the caller's buffer, or the
// arena slot that stageScales fills.
// Whether a scalar scale is used where it is.
bool isAligned16(const void *scales) {
  return reinterpret_cast<uintptr_t>(scales) % 16 == 0;
}

const void *stagedScales(const Device &dev, const ScaleStaging &staging,
                         const void *scales) {
  if (staging.kind == ScaleStaging::PassThrough ||
      (staging.kind == ScaleStaging::AlignScalar && isAligned16(scales)))
    return scales;
  return reinterpret_cast<const void *>(dev.arena + staging.offset);
}

// Enqueues the layout change of one operand's scales (see the notes above).
int32_t stageScales(const Device &dev, const ScaleStaging &staging,
                    const void *scales, CUstream stream) {
  CUdeviceptr dst = dev.arena + staging.offset;
  if (staging.kind == ScaleStaging::Transpose) {
    const float one = 1.0f, zero = 0.0f;
    return checkLt(cublasLtMatrixTransform(
                       dev.handle, dev.transpose, &one, scales, staging.from,
                       &zero, nullptr, nullptr, reinterpret_cast<void *>(dst),
                       staging.to, stream),
                   "cublasLtMatrixTransform(VEC128 scales)");
  }
  if (staging.kind == ScaleStaging::AlignScalar && !isAligned16(scales))
    return checkCu(cuMemcpyDtoDAsync(dst, reinterpret_cast<CUdeviceptr>(scales),
                                     sizeof(float), stream),
                   "cuMemcpyDtoDAsync(scalar scale)");
  if (staging.kind == ScaleStaging::Repitch) {
    CUDA_MEMCPY2D copy = {};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = reinterpret_cast<CUdeviceptr>(scales);
    copy.srcPitch = staging.rowBytes;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = dst;
    copy.dstPitch = staging.pitch;
    copy.WidthInBytes = staging.rowBytes;
    copy.Height = staging.height;
    return checkCu(cuMemcpy2DAsync(&copy, stream),
                   "cuMemcpy2DAsync(BLK128x128 scales)");
  }
  return MXRT_SUCCESS;
}

// Stages the scales and runs the matmul on `stream`.
int32_t enqueue(const Device &dev, const Plan &plan, const Problem &p,
                CUstream stream) {
  int32_t status;
  if ((status = stageScales(dev, plan.ltAScales, p.bScales, stream)) ||
      (status = stageScales(dev, plan.ltBScales, p.aScales, stream)))
    return status;
  const float one = 1.0f, zero = 0.0f;
  const void *alpha = p.alpha ? static_cast<const void *>(p.alpha) : &one;
  const void *beta =
      p.alpha ? reinterpret_cast<const void *>(dev.arena + plan.zeroOffset())
              : &zero;
  cublasStatus_t lt = cublasLtMatmul(
      dev.handle, plan.desc, alpha, p.b, plan.ltA, p.a, plan.ltB, beta, p.out,
      plan.ltD, p.out, plan.ltD, &plan.algo,
      reinterpret_cast<void *>(dev.arena), kWorkspaceBytes, stream);
  if (lt == CUBLAS_STATUS_NOT_SUPPORTED)
    return notSupported(p, "cublasLtMatmul returned " + ltStatusText(lt));
  return checkLt(lt, "cublasLtMatmul");
}

using PlanKey =
    std::tuple<int, int64_t, int64_t, int64_t, int32_t, int32_t, int32_t,
               int32_t, int32_t, int32_t, int32_t, bool, bool>;

int32_t scaledMatmul(const Problem &p, CUstream stream, bool streamOrdered,
                     int ordinal) {
  static auto *devices = new std::map<int, Device>();
  static auto *plans = new std::map<PlanKey, std::unique_ptr<Plan>>();
  Device &dev = (*devices)[ordinal];
  if (int32_t status = initDevice(dev))
    return status;

  bool aligned256 = true;
  for (const void *ptr : {p.a, p.b, static_cast<const void *>(p.out)})
    aligned256 &= reinterpret_cast<uintptr_t>(ptr) % 256 == 0;
  PlanKey key{ordinal,           p.m,       p.n,       p.k,
              p.aType,           p.aLayout, p.aMode,   p.bType,
              p.bLayout,         p.bMode,   p.outType, aligned256,
              p.alpha != nullptr};
  auto it = plans->find(key);
  std::unique_ptr<Plan> fresh;
  if (it == plans->end()) {
    fresh = std::make_unique<Plan>();
    if (int32_t status = createPlan(p, *fresh))
      return status;
  }
  Plan &plan = fresh ? *fresh : *it->second;
  if (int32_t status =
          streamOrdered
              ? ensureArenaOnStream(dev, plan.arenaBytes(), stream, ordinal)
              : ensureArena(dev, plan.arenaBytes()))
    return status;

  // The descriptor holds the scale pointers; set them before the heuristic
  // sees it for the first time.
  int32_t status;
  if ((status = setDesc(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                        stagedScales(dev, plan.ltAScales, p.bScales),
                        "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)")) ||
      (status = setDesc(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                        stagedScales(dev, plan.ltBScales, p.aScales),
                        "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)")))
    return status;
  if (fresh) {
    if ((status = chooseAlgo(dev, p, aligned256, *fresh)))
      return status;
    plans->emplace(key, std::move(fresh));
  }

  // The arena is shared: order this call after the previous one (a no-op on
  // the same stream; stream handles may be recycled, so always wait), and
  // record this one even if it failed half-way through enqueueing.
  if (dev.used && (status = checkCu(cuStreamWaitEvent(stream, dev.lastUse, 0),
                                    "cuStreamWaitEvent")))
    return status;
  status = enqueue(dev, plan, p, stream);
  dev.used = true;
  int32_t recorded = checkCu(cuEventRecord(dev.lastUse, stream), "cuEventRecord");
  return status ? status : recorded;
}

} // namespace

extern "C" MXRT_API int32_t mxrtScaledMatmul(
    int64_t m, int64_t n, int64_t k, const void *a, int32_t aType,
    int32_t aLayout, const void *aScales, int32_t aScaleMode, const void *b,
    int32_t bType, int32_t bLayout, const void *bScales, int32_t bScaleMode,
    const float *alpha, void *out, int32_t outType, void *stream) {
  // A compiled call that already failed enqueues nothing more.
  if (int32_t status = getCallFailure())
    return status;
  Problem p{m,       n,       k,          a,      aScales, b,
            bScales, alpha,   out,        aType,  aLayout, aScaleMode,
            bType,   bLayout, bScaleMode, outType};
  if (int32_t status = validate(p))
    return status;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  // Compiled code passes NULL; in call-stream mode that is the caller's
  // stream.
  CUstream callStream = nullptr;
  bool streamOrdered = getCallStream(&callStream);
  CUstream target =
      stream || !streamOrdered ? static_cast<CUstream>(stream) : callStream;
  DeviceScope scope;
  if (!scope)
    return scope.status();
  return scaledMatmul(p, target, streamOrdered, scope.ordinal());
}
