/* MXRuntime.h - C ABI of libmx_runtime, shared by the runtime and the lowerings.
 *
 * This is the only contract between compiled mx code, the Python binding and
 * the runtime library: plain C (no CUDA headers, streams and device pointers
 * are `void *`) so the compiler can include it to get the i32 encodings of
 * element types and scale modes it passes to mxrtScaledMatmul and
 * mxrtEncodeTensorMap. Every function returns an mxrtStatus, except
 * mxrtEncodeTensorMap (which returns its map, zeroed on failure); on failure a human-readable message (the failing call,
 * the CUDA/cuBLAS status name and number, the device ordinal, name and
 * compute capability) is printed to stderr and kept as the sticky last error
 * until mxrtGetLastError() reads it. The library also exports the mgpu*
 * entry points that MLIR's gpu-to-llvm lowering calls; those keep upstream's
 * signatures and are deliberately not declared here (mxrtSetCallStream says
 * what call-stream mode changes in them).
 */
#ifndef MX_RUNTIME_MXRUNTIME_H
#define MX_RUNTIME_MXRUNTIME_H

#include <stdint.h>

#if defined(_WIN32)
#define MXRT_API __declspec(dllexport)
#else
#define MXRT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, encoded by the lowering as i32 constants. E8M0 stands for
 * any byte that is not an FP8 operand (block scales); only mxrtEncodeTensorMap
 * takes it. F4E2M1 data is packed two elements to a byte, element 2i in the
 * low nibble; F6E3M2 and F6E2M3 data four elements to three bytes, element
 * 4i + j in bits 6j..6j+5 of the little-endian 24-bit word of bytes
 * 3i..3i+2; I8 is MXINT8 data, code c meaning c * 2^-6. */
typedef enum mxrtElemType {
  MXRT_TYPE_F8E4M3 = 0,
  MXRT_TYPE_F8E5M2 = 1,
  MXRT_TYPE_BF16 = 2,
  MXRT_TYPE_F16 = 3,
  MXRT_TYPE_F32 = 4,
  MXRT_TYPE_E8M0 = 5,
  MXRT_TYPE_F4E2M1 = 6,
  MXRT_TYPE_U32 = 7, /* the order keys of a float max (mxrtAllReduce) */
  MXRT_TYPE_F6E3M2 = 8,
  MXRT_TYPE_F6E2M3 = 9,
  MXRT_TYPE_I8 = 10
} mxrtElemType;

/* How an operand X of mxrtScaledMatmul is stored (rows = M for A, N for B):
 *  K_CONTIGUOUS  [rows, K] row-major (the "TN" form).
 *  K_OUTER       [K, rows] row-major, as a columnwise quantize leaves it. */
typedef enum mxrtOperandLayout {
  MXRT_LAYOUT_K_CONTIGUOUS = 0,
  MXRT_LAYOUT_K_OUTER = 1
} mxrtOperandLayout;

/* Scale modes of one operand X with `rows` rows (M or N) and K, encoded as
 * i32; KB = ceil(K / 128). Layouts are the ones the project's ops emit and
 * do not depend on the operand's layout:
 *  TENSOR_F32        one f32 on the device scaling the whole operand.
 *  VEC32_UE8M0       MX (FP8 or FP4 data): one E8M0 byte per 32 K elements,
 *                    in the 128x4 swizzled layout used by cuBLASLt and
 *                    tcgen05: rows padded to a multiple of 128, K/32 padded
 *                    to a multiple of 4, 512-byte tiles row-major over
 *                    (row / 128, kblk / 4), byte (r, c) of a tile at
 *                    (r % 32) * 16 + (r / 32) * 4 + c.
 *  VEC128_F32        one f32 per 1x128 block: row-major [rows, KB].
 *  BLK128X128_F32    one f32 per 128x128 block: row-major
 *                    [ceil(rows/128), KB].
 *  VEC16_UE4M3       NVFP4 (FP4 data): one E4M3 byte per 16 K elements, in
 *                    the 128x4 swizzled layout of VEC32_UE8M0.
 *  VEC128_F32_KB_ROWS one f32 per 1x128 block: row-major [KB, rows], which
 *                    is cuBLASLt's own layout (mx.swizzle layout blockwise,
 *                    or the scales of a columnwise quantize of a K_OUTER
 *                    operand); passed through without a copy.
 */
typedef enum mxrtScaleMode {
  MXRT_SCALE_TENSOR_F32 = 0,
  MXRT_SCALE_VEC32_UE8M0 = 1,
  MXRT_SCALE_VEC128_F32 = 2,
  MXRT_SCALE_BLK128X128_F32 = 3,
  MXRT_SCALE_VEC16_UE4M3 = 4,
  MXRT_SCALE_VEC128_F32_KB_ROWS = 5
} mxrtScaleMode;

typedef enum mxrtStatus {
  MXRT_SUCCESS = 0,
  MXRT_ERROR_INVALID_ARGUMENT = 1, /* bad shape, type, mode or alignment */
  MXRT_ERROR_CUDA = 2,             /* a CUDA driver call failed */
  MXRT_ERROR_CUBLAS = 3,           /* a cuBLASLt call failed */
  MXRT_ERROR_NOT_SUPPORTED = 4,    /* valid request this GPU cannot run */
  MXRT_ERROR_NCCL = 5              /* NCCL is missing, failed or timed out */
} mxrtStatus;

/* Returns the first error recorded since the previous call ("" if none) and
 * clears it. The text stays valid until the calling thread calls again. */
MXRT_API const char *mxrtGetLastError(void);

/* Device helpers on the current default device (see mgpuSetDefaultDevice).
 * Copies and memset are synchronous and ordered with the legacy default
 * stream; allocations of 0 bytes yield NULL. */
MXRT_API int32_t mxrtMalloc(void **ptr, uint64_t bytes);
MXRT_API int32_t mxrtFree(void *ptr);
MXRT_API int32_t mxrtMemcpyHtoD(void *dst, const void *src, uint64_t bytes);
MXRT_API int32_t mxrtMemcpyDtoH(void *dst, const void *src, uint64_t bytes);
MXRT_API int32_t mxrtMemcpyDtoD(void *dst, const void *src, uint64_t bytes);
MXRT_API int32_t mxrtMemset8(void *dst, uint8_t value, uint64_t bytes);
MXRT_API int32_t mxrtSynchronize(void);
/* Synchronizes the current device and hands the memory its stream-ordered
 * pool keeps cached (freed buffers of compiled calls in call-stream mode)
 * and the idle registered buffers of the collectives (mxrtCollectiveAlloc)
 * back to the driver, as torch.cuda.empty_cache() does for torch's. */
MXRT_API int32_t mxrtEmptyCache(void);
MXRT_API int32_t mxrtDeviceComputeCapability(int *major, int *minor);

/* Call-stream mode, per host thread (like mgpuSetDefaultDevice): while
 * enabled (enabled = 1) on the calling thread, compiled GPU functions called
 * from that thread run on `stream`, a CUstream of the default device's
 * primary context (torch's streams are), or NULL for the legacy default
 * stream (torch's default stream). enabled = 0 restores the default mode
 * (`stream` is then ignored), in which each call creates its own stream,
 * allocates with cuMemAlloc, frees temporaries with cuMemFree and waits for
 * its work before returning. That stream is a blocking one (not
 * CU_STREAM_NON_BLOCKING): its work starts after the work queued on the
 * legacy default stream before the call, which is what DLPack promises a
 * consumer that asks a producer for a tensor with stream=None (or 1), so a
 * compiled function never reads an input that torch has not finished
 * writing. Only the flag and the stream are stored, so it is cheap to set
 * around every call. In call-stream mode (which orders the call after the
 * caller's earlier work on `stream` by construction):
 *  - The mgpu* entry points use the call stream: creating a stream returns
 *    it, and destroying or synchronizing it does nothing, so a compiled
 *    function returns as soon as its work is enqueued. Its results are ready
 *    in stream order: work the caller enqueues later on the same stream may
 *    use them; other streams must wait for it (an event). Asynchronous faults
 *    of its kernels surface at the caller's next synchronization, reported
 *    by the caller's CUDA calls rather than mxrtGetLastError().
 *  - Device memory of compiled code (results and temporaries) is allocated
 *    with cuMemAllocFromPoolAsync from the device's default memory pool, on
 *    the call stream; the pool is set, once per device, to keep freed memory
 *    cached (release threshold UINT64_MAX, as torch's caching allocator
 *    does) rather than return it to the driver at each synchronization.
 *    Temporaries are freed with cuMemFreeAsync on the call stream. Results
 *    belong to the caller, who frees each with mxrtFreeAsync on the stream
 *    it was produced on (or on another stream once that one has waited for
 *    it); mxrtFree also works but does not wait for pending work: call it
 *    only once the work using the result has completed.
 *  - mxrtScaledMatmul given a NULL stream runs on the call stream, and its
 *    internal workspace is allocated and freed on that stream too.
 * Returns MXRT_ERROR_INVALID_ARGUMENT if enabled is neither 0 nor 1; never
 * touches the device. */
MXRT_API int32_t mxrtSetCallStream(void *stream, int32_t enabled);

/* The call guard of compiled functions. mx-lower-to-nvvm brackets every
 * public function with mxrtCallBegin (at its entry, which then checks each
 * memref argument with mxrtCheckArgument) and mxrtCallEnd (before each
 * return); calls nest, per host thread. From the first failure the runtime
 * records inside a call (a refused argument, a failed tensor-map encode,
 * allocation, module load or launch) to the end of the outermost call, the
 * runtime enqueues no further device work of that call: kernel launches,
 * cuBLASLt matmuls, copies, memsets and collectives (with their group) are
 * skipped (allocations, frees and
 * synchronizations still run), so a kernel never starts on memory it cannot
 * use, which would kill the CUDA context. The call's results are then
 * garbage; the failure is mxrtGetLastError()'s message and the status that
 * mxrtCallEnd returns (and mxrtInvoke). Outside calls nothing is skipped. */
MXRT_API void mxrtCallBegin(const char *function);

/* The status of the call's first failure (MXRT_SUCCESS if none); ends the
 * call (the outermost one: resets the guard). */
MXRT_API int32_t mxrtCallEnd(void);

/* The status the last outermost compiled call of the calling thread ended
 * with (what its mxrtCallEnd returned), and resets it to MXRT_SUCCESS: how a
 * caller of `_mlir_ciface_*` learns that the call failed and why (with
 * mxrtGetLastError()). */
MXRT_API int32_t mxrtTakeLastCallStatus(void);

/* Every device memory argument of a compiled function must start at a
 * multiple of this many bytes: the kernels load and store 16-byte vectors,
 * TMA and cuBLASLt need 16-byte aligned bases. torch's and the runtime's
 * allocations are (256 bytes and more); views at an element offset may not
 * be, and the Python binding copies those first. */
#define MXRT_ARGUMENT_ALIGNMENT 16

/* Checks memref argument `index` (of the function named at mxrtCallBegin)
 * whose data starts at `pointer`: NULL, or not a multiple of `alignment`
 * bytes, fails the call (MXRT_ERROR_INVALID_ARGUMENT) with a message that
 * names the function, the argument and the pointer. */
MXRT_API void mxrtCheckArgument(int32_t index, const void *pointer,
                                int64_t alignment);

/* Frees device memory from the stream-ordered allocator (the results of a
 * compiled function called in call-stream mode) with cuMemFreeAsync,
 * ordered after the work enqueued before on `stream` (NULL: the legacy
 * default stream); the memory may be reused by allocations ordered after
 * the free. Returns at once, without waiting for the device. NULL ptr is a
 * no-op. Runs on the current default device, which must be the one the
 * memory was allocated on. Memory from cuMemAlloc (default-mode results,
 * mxrtMalloc) is freed with mxrtFree. */
MXRT_API int32_t mxrtFreeAsync(void *ptr, void *stream);

/* A DLPack DLManagedTensor (dlpack.h v0.8 layout; wrap it in a "dltensor"
 * PyCapsule) viewing `data` as a row-major CUDA tensor of `ndim` (<= 16)
 * dimensions `shape` (copied) and element type (DLPack `code`, `bits`) on
 * device ordinal `device`. Its deleter, called by the consumer when it frees
 * the tensor, frees `allocation` with mxrtFreeAsync on `stream` (NULL
 * allocation: nothing is freed), after the work enqueued on every other
 * stream on which mxrtInvoke passed the tensor to a compiled function, and
 * then the struct. This is how the Python binding hands call-stream results
 * to torch. NULL (and the last error set)
 * for a bad rank or no host memory. */
MXRT_API void *mxrtExportDLPack(void *data, void *allocation, int32_t ndim,
                                const int64_t *shape, uint8_t code,
                                uint8_t bits, int32_t device, void *stream);

/* How mxrtInvoke exports one result: the rank of its memref descriptor, the
 * shape of the memory it views (packed FP4: half the innermost extent), its
 * DLPack type and the bytes of one element (1 for packed FP4). */
typedef struct mxrtResultLayout {
  int32_t rank;
  int32_t storedRank;
  const int64_t *storedShape;
  uint8_t code;
  uint8_t bits;
  int32_t itemBytes;
} mxrtResultLayout;

/* One call of a compiled function's C interface `function`
 * (`_mlir_ciface_<name>`) in call-stream mode on `stream`:
 * function(results, args[0], ..., args[numArgs - 1]) (no `results` pointer
 * when numResults is 0), every argument a pointer (a memref descriptor; at
 * most 16), then each of the numResults descriptors laid out one after the
 * other in `results` is exported with mxrtExportDLPack into exported[i]
 * (on the calling thread's default device, mgpuSetDefaultDevice).
 * owned[i] is 0 when that result's allocation is an argument's or an earlier
 * result's: it is then exported without being freed (copy it). Errors
 * earlier than the call are dropped; a failure of the call returns the
 * status of its first failure (mxrtCallEnd's; MXRT_ERROR_CUDA for a failure
 * outside the call guard) with its message left for mxrtGetLastError(),
 * frees the results the call allocated and exports nothing. This is the
 * Python binding's fast path (one foreign call). */
MXRT_API int32_t mxrtInvoke(void *function, void *stream, int32_t numArgs,
                            void *const *args, void *results,
                            int32_t numResults,
                            const mxrtResultLayout *layouts, void **exported,
                            int32_t *owned);

/* Shape rules of mxrtScaledMatmul that come from cuBLASLt (and are stated
 * again below): every stored operand row and every output row is a multiple
 * of MXRT_CUBLAS_ROW_BYTES bytes, and an operand with VEC128_F32 or
 * VEC128_F32_KB_ROWS scales has a multiple of MXRT_CUBLAS_VEC128_ROWS rows
 * (cuBLASLt reads those scales with the rows as the leading dimension; it
 * answers NOT_SUPPORTED otherwise, seen on H100 with cuBLAS 13.1). The
 * runtime refuses requests that break them; the cuBLAS lowering rejects such
 * ops when compiling, their shapes being static. */
#define MXRT_CUBLAS_ROW_BYTES 16
#define MXRT_CUBLAS_VEC128_ROWS 4

/* out[m, n] = alpha * sum_k deq(A)[m, k] * deq(B)[n, k] with f32
 * accumulation, on cuBLASLt, enqueued on `stream` (NULL: legacy default
 * stream, or the calling thread's call stream in call-stream mode, see
 * mxrtSetCallStream). A and B are stored as their layouts say
 * (mxrtOperandLayout), out is [m, n] row-major. aType/bType: F8E4M3 or F8E5M2
 * (not both E5M2) or F4E2M1 (both); outType: BF16, F16 or F32. Both operands
 * use TENSOR_F32, both VEC32_UE8M0, both VEC16_UE4M3 (F4E2M1 only), or each one
 * of VEC128_F32 / VEC128_F32_KB_ROWS / BLK128X128_F32, with scales laid out as
 * described at mxrtScaleMode. `alpha` is a device pointer to one f32 (NVFP4:
 * the product of the operands' tensor scales) or NULL for 1. k must be a
 * multiple of 16 (32 for VEC32 and for F4E2M1, 128 for the 128-block modes)
 * and every stored row 16-byte aligned; data, output and block-scale
 * pointers 16-byte aligned; n * sizeof(out) a multiple of 16. What the GPU or
 * cuBLASLt cannot run (VEC32_UE8M0, VEC16_UE4M3 and F4E2M1 before compute
 * capability 10.0, K_OUTER operands of FP8 before 10.0, BLK128X128_F32 on
 * both operands, VEC128 modes on an operand whose rows are not a multiple of
 * 4) fails with MXRT_ERROR_NOT_SUPPORTED; it never computes a wrong result.
 * FP8 tensor cores of compute capability 9.x accumulate with less than f32
 * precision (relative error ~1.3e-4 measured on H100 for any scale mode).
 * Calls on one device are serialized by the runtime (they share a
 * workspace); across streams they are ordered through an event. */
MXRT_API int32_t mxrtScaledMatmul(int64_t m, int64_t n, int64_t k,
                                  const void *a, int32_t aType, int32_t aLayout,
                                  const void *aScales, int32_t aScaleMode,
                                  const void *b, int32_t bType, int32_t bLayout,
                                  const void *bScales, int32_t bScaleMode,
                                  const float *alpha, void *out,
                                  int32_t outType, void *stream);

/* Swizzle modes of a TMA box, in bytes of its inner dimension. */
typedef enum mxrtTensorMapSwizzle {
  MXRT_SWIZZLE_NONE = 0,
  MXRT_SWIZZLE_32B = 32,
  MXRT_SWIZZLE_64B = 64,
  MXRT_SWIZZLE_128B = 128
} mxrtTensorMapSwizzle;

/* Encodes into `map` (128 bytes, 64-byte aligned, host memory the caller
 * owns) the CUtensorMap that describes the row-major tensor at `base`, for
 * cp.async.bulk.tensor: `rank` (2..5) dims listed INNERMOST FIRST in `dims`
 * (elements), densely packed (strides follow from dims and the element
 * size), boxes of `box` (elements, innermost first), element type `elemType`
 * (mxrtElemType; F8E4M3/F8E5M2/I8 encode as CU_TENSOR_MAP_DATA_TYPE_UINT8,
 * BF16 as BFLOAT16, F16 as FLOAT16, F32 as FLOAT32, E8M0 as UINT8, F4E2M1 as
 * 16U4_ALIGN16B and F6E3M2/F6E2M3 as 16U6_ALIGN16B: each 16 packed elements
 * of a row land in 16 bytes of shared memory, as SM100's tcgen05
 * kind::mxf8f6f4 reads them; those need a 32-byte aligned base and strides,
 * dims[0] a multiple of 128, box[0] = 128 and swizzle 128B or none),
 * interleave none, the given swizzle (mxrtTensorMapSwizzle), L2 promotion
 * 256B, out-of-bounds elements read as zero. No device memory and no device
 * work: a kernel takes the map as a 128-byte __grid_constant__ parameter
 * (what the compiled GEMMs do), or the caller copies it to the device.
 * Returns `map`; on failure the 128 bytes are zero and the reason is
 * recorded (sticky error, printed, and the current call guard skips its
 * later launches), e.g. map NULL or not 64-byte aligned, base not 16-byte
 * aligned, a stride not a multiple of 16 bytes, box larger than 256 or than
 * the swizzle span, rank out of range, cuTensorMapEncodeTiled's status.
 * Thread-safe. The arrays are read during the call only, so compiled code
 * may pass stack memory. */
MXRT_API void *mxrtEncodeTensorMap(void *map, const void *base,
                                   int32_t elemType, int32_t rank,
                                   const int64_t *dims, const int32_t *box,
                                   int32_t swizzle);

/* Collectives across the GPUs of a job: one process per GPU, each with one
 * communicator over all of them, on NCCL (libnccl.so.2, or the library that
 * $MX_NCCL_LIBRARY names), which the runtime loads with dlopen on first use:
 * the runtime builds and runs without it, and only these functions fail
 * where it is missing (MXRT_ERROR_NCCL, saying which library was looked for
 * and why it did not load). An NCCL failure is an MXRT_ERROR_NCCL with
 * NCCL's error string and last-error text. Nothing waits forever: a
 * collective that has not completed within the communicator's timeout, or
 * that NCCL reports an asynchronous error for, aborts the communicator
 * (ncclCommAbort, which ends the pending NCCL kernels), records the error
 * (printed, sticky) and makes every later collective fail. */

/* Bytes of NCCL's unique id (ncclUniqueId). */
#define MXRT_UNIQUE_ID_BYTES 128

typedef enum mxrtReduceOp {
  MXRT_REDUCE_SUM = 0,
  MXRT_REDUCE_MAX = 1
} mxrtReduceOp;

/* Writes a new unique id (MXRT_UNIQUE_ID_BYTES bytes) to `id`: one process
 * makes it and hands it to the others (torchrun's store, a file) before
 * they all call mxrtCommInit with it. Needs no GPU. */
MXRT_API int32_t mxrtCommUniqueId(void *id);

/* Makes this process rank `rank` of `size` in the communicator of `id`, on
 * the current default device (mgpuSetDefaultDevice: one GPU per process).
 * Every rank must call it with the same id and size; it returns once all
 * have (NCCL's ncclCommInitRank), or fails with MXRT_ERROR_NCCL after
 * `timeoutSeconds` (> 0; also the timeout of every collective on it) if
 * some rank did not come. Once per process: a second call fails until
 * mxrtCommDestroy. */
MXRT_API int32_t mxrtCommInit(const void *id, int32_t size, int32_t rank,
                              int32_t timeoutSeconds);

/* Destroys the communicator (after its pending collectives complete; an
 * aborted one is just released). No-op without one. */
MXRT_API int32_t mxrtCommDestroy(void);

/* The size and rank of the communicator; MXRT_ERROR_NCCL without one. */
MXRT_API int32_t mxrtCommRank(int32_t *size, int32_t *rank);

/* The collectives that compiled code calls (convert-shard-to-mxrt), each on
 * `stream`: NULL is the call stream in call-stream mode (see
 * mxrtSetCallStream), else the legacy default stream, and then the call
 * waits for the collective to complete; on the call stream or a given one
 * it returns once the collective is enqueued (the watchdog follows it).
 * `groupSize` is the number of devices the program was partitioned for; it must
 * be the communicator's size. Buffers are device memory of this rank's
 * device; a NULL one is MXRT_ERROR_INVALID_ARGUMENT. Inside a compiled call
 * that has failed, a collective is skipped and returns the call's failure
 * (see mxrtCallBegin): the other ranks then wait for it and time out,
 * unless the same failure stopped them too (every rank runs the same
 * program on the same shapes).
 *  mxrtAllGather      recv = the `sendBytes` of every rank's send, in rank
 *                     order (bytes: any element type, packed FP4 included).
 *  mxrtAllReduce      recv = the element-wise `op` of every rank's `count`
 *                     elements of `elemType` (F32, BF16, F16, U32).
 *  mxrtReduceScatter  recv = slice `rank` (`recvCount` elements) of the
 *                     element-wise `op` of every rank's groupSize * recvCount
 *                     elements.
 * MXRT_REDUCE_MAX on floats is NCCL's, which drops NaN: compiled code
 * reduces U32 order keys instead (see convert-shard-to-mxrt). */

/* A group of collectives (NCCL's ncclGroupStart/ncclGroupEnd): the
 * collectives that the calling thread calls between mxrtGroupStart and
 * mxrtGroupEnd are checked when called and enqueued together at
 * mxrtGroupEnd, which NCCL launches as
 * one kernel per stream, and the runtime follows them with one event per
 * stream (waited for at mxrtGroupEnd where a collective of the group was on
 * the legacy default stream outside call-stream mode). No collective of the
 * group may read what another one writes. Compiled code groups the
 * independent collectives that are one call each (convert-shard-to-mxrt).
 * The group holds the communicator from start to end: other threads'
 * collectives wait, and this thread's mxrtCommInit, mxrtCommDestroy and
 * mxrtCommRank fail until mxrtGroupEnd. Groups nest; the outermost pair
 * counts. A failed mxrtGroupStart (no NCCL, no communicator, an aborted one)
 * still opens the group: its collectives and its mxrtGroupEnd return the
 * same failure. Any failure that the calling thread records between the
 * outermost start and end (a collective refused, an allocation that failed,
 * the compiled call's guard) fails the group the same way: none of its
 * collectives reaches NCCL, mxrtGroupEnd returns that failure's status
 * without a message of its own, and the communicator stays usable.
 * mxrtGroupEnd without a start is MXRT_ERROR_INVALID_ARGUMENT. */
MXRT_API int32_t mxrtGroupStart(void);
MXRT_API int32_t mxrtGroupEnd(void);
MXRT_API int32_t mxrtAllGather(const void *send, void *recv, uint64_t sendBytes,
                               int32_t groupSize, void *stream);
MXRT_API int32_t mxrtAllReduce(const void *send, void *recv, uint64_t count,
                               int32_t elemType, int32_t op, int32_t groupSize,
                               void *stream);
MXRT_API int32_t mxrtReduceScatter(const void *send, void *recv,
                                   uint64_t recvCount, int32_t elemType,
                                   int32_t op, int32_t groupSize, void *stream);

/* The all-gather of one chunk of every rank's part, each landing at its
 * place in the gathered buffer, on the communicator's side stream so that
 * it can overlap the caller's next work (a pipelined quantized gather:
 * quantize chunk c + 1 while chunk c crosses the wire). For every rank r,
 * bytes [r * rankStrideBytes + offsetBytes, + chunkBytes) of `recv` become
 * rank r's `chunkBytes` at `send`; in place where `send` is this rank's own
 * place in `recv` (NCCL's convention), which is how compiled code calls it:
 * its quantize writes each chunk there. A `send` elsewhere is first copied
 * to that place on the side stream, so that NCCL sees every rank's buffers
 * alike (registered or not; mxrtCollectiveAlloc). The chunk must lie within
 * a rank's stride. Called with C chunks at offsets c * chunkBytes it gives
 * the bytes of mxrtAllGather of the whole parts.
 * It runs as one NCCL group of ncclBroadcast, one per root
 * ($MX_NCCL_PLACED_GATHER=sendrecv: ncclSend/ncclRecv with every peer
 * instead), on the side stream, which first waits for the work enqueued on
 * `stream` (NULL: the call stream in call-stream mode, else the legacy
 * default stream) before the call (an event); it returns once enqueued, in
 * either mode, and the watchdog follows it. Inside mxrtGroupStart/End it
 * joins the group (the side stream then waits for `stream` at
 * mxrtGroupEnd). Nothing may read `recv`, or free or reuse `send` or
 * `recv`, before mxrtCollectivesJoin: the stream-ordered pool frees buffers
 * on the call stream, which only the join orders after the side stream.
 * Errors are those of the collectives above. */
MXRT_API int32_t mxrtAllGatherPlaced(const void *send, void *recv,
                                     uint64_t chunkBytes,
                                     uint64_t rankStrideBytes,
                                     uint64_t offsetBytes, int32_t groupSize,
                                     void *stream);

/* A device buffer of `bytes` for a collective to write (compiled code's
 * gathered buffers, which its quantize kernels fill in place), on `stream`
 * (NULL: the call stream in call-stream mode, else the legacy default
 * stream). From 1 MiB, where the library has ncclMemAlloc and
 * ncclCommRegister (NCCL 2.19 and later), it is memory registered with the
 * communicator, which NCCL moves without its staging copies, from a cache
 * of such buffers; otherwise, and below 1 MiB, it is what mgpuMemAlloc
 * returns. The registered buffer is usable on `stream` once the work before
 * its last free is done. Every free of the runtime (mxrtCollectiveFree,
 * mgpuMemFree, mxrtFree, mxrtFreeAsync, a DLPack capsule's deleter) gives
 * it back to the cache, after the work enqueued on the freeing stream (after
 * all the device's work for mxrtFree); mxrtEmptyCache frees the idle ones.
 * NULL, with the error recorded, where the allocation or the registration
 * failed (MXRT_ERROR_NCCL with NCCL's message; without a communicator:
 * call mxrtCommInit first). */
MXRT_API void *mxrtCollectiveAlloc(uint64_t bytes, void *stream);
/* Frees a buffer of mxrtCollectiveAlloc (or of mgpuMemAlloc) after the work
 * enqueued on `stream` so far (NULL as for mxrtCollectiveAlloc). */
MXRT_API void mxrtCollectiveFree(void *ptr, void *stream);

/* Orders `stream` (NULL: the call stream in call-stream mode) after every
 * collective enqueued on the side stream so far (cuStreamWaitEvent); in the
 * default mode (NULL outside call-stream mode) waits for them on the host,
 * within the communicator's timeout. Not skipped inside a failed compiled
 * call, and the streams are ordered even on an aborted communicator, so
 * that buffers freed after it are never in use by the side stream; it then
 * returns the call's failure or the abort. No-op where nothing ran on the
 * side stream; MXRT_ERROR_NCCL without NCCL or a communicator;
 * MXRT_ERROR_INVALID_ARGUMENT inside an open group. */
MXRT_API int32_t mxrtCollectivesJoin(void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MX_RUNTIME_MXRUNTIME_H */
