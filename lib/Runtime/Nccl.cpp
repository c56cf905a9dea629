//===- Nccl.cpp - Collectives of libmx_runtime on NCCL --------------------===//
//
// The process's communicator (mxrtCommInit) and the collectives that
// compiled code calls (mxrtAllGather, mxrtAllReduce, mxrtReduceScatter), on
// NCCL. NCCL is loaded at run time with dlopen, so the runtime builds
// without nccl.h and runs where NCCL is absent; the few types and entry
// points used are declared here with NCCL's C ABI (enums are ints, the
// unique id a 128-byte struct passed by value), which NcclAbiCheck.cpp
// compares with nccl.h wherever that header is found.
//
// Collectives between mxrtGroupStart and mxrtGroupEnd are one NCCL group
// (ncclGroupStart/End): NCCL launches them together, as one kernel per
// stream, at the group's end. The group holds the communicator's locks from
// its start to its end, so that no other thread's collective, abort or
// destroy lands inside it. Its collectives are checked when called but
// handed to NCCL only at its end: NCCL's group cannot be cancelled (its end
// launches whatever was queued), and anything that fails in between -- a
// result buffer that could not be allocated, a member rejected -- must
// keep every member from running. Such a group ends without calling NCCL,
// with the status of that failure, and the communicator stays usable.
// Inside a compiled call (mxrtCallBegin), a collective after a failure of
// the call is skipped like the call's kernels.
//
// Nothing waits forever without a message. Every collective, or every group
// of them, is followed by an event on its stream; in call-stream mode a
// watchdog thread polls the events and ncclCommGetAsyncError, otherwise the
// calling thread does before returning. An NCCL error, or a collective still
// running after the communicator's timeout (a rank that never joined, a peer
// that died), aborts the communicator -- ncclCommAbort ends the pending NCCL
// kernels, so the streams move on -- and records the error (printed, sticky);
// later collectives fail at once with it. ncclCommInitRank runs on a helper
// thread that the caller stops waiting for after the timeout.
//
//===----------------------------------------------------------------------===//

#include "NcclInternal.h"
#include "RuntimeInternal.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace mxrt;
using namespace mxrt::nccl;
using Clock = std::chrono::steady_clock;

namespace {

template <typename Fn> bool bind(void *handle, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn != nullptr;
}

// NCCL (2.22 and later) connects the peers of an algorithm inside the first
// collective that uses it unless NCCL_RUNTIME_CONNECT=0. That connection is a
// blocking host-side exchange with the peers, so a rank that never joins
// would hang the caller inside ncclAllGather, before any event exists for
// the timeout to watch. Asking for the connections at ncclCommInitRank puts
// that wait under mxrtCommInit's timeout instead. A value the user set wins;
// NCCL reads it once per process, so a communicator that torch created
// earlier in the process decides it (docs/distributed.md).
void connectPeersAtInit() {
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
}

Library loadLibrary() {
  Library lib;
  connectPeersAtInit();
  const char *override = std::getenv("MX_NCCL_LIBRARY");
  const char *path = override && *override ? override : "libnccl.so.2";
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    lib.error = format("NCCL is not available: dlopen(\"%s\") failed (%s); "
                       "install NCCL (e.g. the nvidia-nccl-cu13 wheel that "
                       "torch uses) or set MX_NCCL_LIBRARY to its "
                       "libnccl.so.2",
                       path, reason ? reason : "no reason given");
    return lib;
  }
  const char *missing = nullptr;
  auto need = [&](const char *name, auto &fn) {
    if (!missing && !bind(handle, name, fn))
      missing = name;
  };
  need("ncclGetVersion", lib.getVersion);
  need("ncclGetUniqueId", lib.getUniqueId);
  need("ncclCommInitRank", lib.commInitRank);
  need("ncclCommDestroy", lib.commDestroy);
  need("ncclCommAbort", lib.commAbort);
  need("ncclCommGetAsyncError", lib.commGetAsyncError);
  need("ncclGetErrorString", lib.getErrorString);
  need("ncclAllGather", lib.allGather);
  need("ncclAllReduce", lib.allReduce);
  need("ncclReduceScatter", lib.reduceScatter);
  need("ncclBroadcast", lib.broadcast);
  need("ncclSend", lib.send);
  need("ncclRecv", lib.recv);
  need("ncclGroupStart", lib.groupStart);
  need("ncclGroupEnd", lib.groupEnd);
  bind(handle, "ncclGetLastError", lib.getLastError);
  bind(handle, "ncclMemAlloc", lib.memAlloc);
  bind(handle, "ncclMemFree", lib.memFree);
  bind(handle, "ncclCommRegister", lib.commRegister);
  bind(handle, "ncclCommDeregister", lib.commDeregister);
  if (missing)
    lib.error =
        format("%s has no %s: mx needs NCCL 2.7 or later", path, missing);
  return lib;
}

} // namespace

const Library &mxrt::nccl::getLibrary() {
  static const Library library = loadLibrary();
  return library;
}

std::string mxrt::nccl::describeFailure(const char *call, Result result,
                                        Comm comm) {
  static const char *const names[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress"};
  const Library &lib = getLibrary();
  bool known = result >= 0 && result < static_cast<int>(std::size(names));
  std::string text = format("%s failed with %s (%d): %s", call,
                            known ? names[result] : "an unknown result", result,
                            lib.getErrorString(result));
  const char *last = lib.getLastError ? lib.getLastError(comm) : nullptr;
  if (last && *last)
    text += format(": %s", last);
  return text;
}

namespace {

// A collective enqueued on a stream, marked by an event recorded after it.
struct Pending {
  CUevent event;
  Clock::time_point start;
  std::string what;
};

// The process's communicator. Its mutex orders NCCL calls on it (NCCL's
// communicators are not thread-safe) and guards the pending list, which
// the watchdog polls.
struct Communicator {
  Comm comm = nullptr;
  int size = 0, rank = 0, device = 0;
  std::chrono::seconds timeout{0};
  std::mutex mutex;
  std::deque<Pending> pending;
  std::string failure; // Why it was aborted; sticky.
  std::condition_variable wake;
  bool stopping = false;
  std::thread watchdog;
  // The stream of the collectives that may overlap the caller's work
  // (mxrtAllGatherPlaced), made on first use; see mxrtCollectivesJoin.
  CUstream side = nullptr;
  // Which communicator of the process this is (the registered buffers'
  // registrations belong to one; NcclMemory.cpp).
  uint64_t generation = 0;
};

std::mutex commMutex; // Guards `current` (creation and destruction).
std::unique_ptr<Communicator> current;
uint64_t generations = 0; // Communicators made so far; under commMutex.

// Aborts `c` for `reason` (with c.mutex held): the pending NCCL kernels end,
// every later collective fails with the reason, which is recorded now.
int32_t abortCommunicator(Communicator &c, const std::string &reason) {
  if (c.failure.empty()) {
    c.failure = reason;
    getLibrary().commAbort(c.comm);
    c.comm = nullptr;
    dropRegistrations(nullptr, c.generation);
  }
  for (Pending &p : c.pending)
    cuEventDestroy(p.event);
  c.pending.clear();
  return fail(MXRT_ERROR_NCCL, reason + "; the communicator is aborted");
}

enum class Progress { done, running, failed };

// One look at a pending collective (with c.mutex held and the device's
// context current): complete, still running, or failed (c aborted).
Progress poll(Communicator &c, const Pending &p, int32_t *status) {
  CUresult query = cuEventQuery(p.event);
  if (query == CUDA_SUCCESS)
    return Progress::done;
  if (query != CUDA_ERROR_NOT_READY) {
    *status = abortCommunicator(
        c, p.what + ": " + format("cuEventQuery failed (%d)", int(query)));
    return Progress::failed;
  }
  Result async = nccl::Success;
  Result result = getLibrary().commGetAsyncError(c.comm, &async);
  if (result != nccl::Success ||
      (async != nccl::Success && async != nccl::InProgress)) {
    *status = abortCommunicator(
        c,
        p.what + ": " +
            describeFailure("NCCL (asynchronously)",
                            result != nccl::Success ? result : async, c.comm));
    return Progress::failed;
  }
  if (Clock::now() - p.start > c.timeout) {
    *status = abortCommunicator(
        c, format("%s did not complete within %lld s: a rank did not join "
                  "the collective, or is stuck",
                  p.what.c_str(), static_cast<long long>(c.timeout.count())));
    return Progress::failed;
  }
  return Progress::running;
}

// The watchdog of call-stream mode: polls the pending collectives every
// millisecond until the communicator is destroyed.
void watch(Communicator *c) {
  setDefaultDevice(c->device);
  std::unique_lock<std::mutex> lock(c->mutex);
  while (!c->stopping) {
    c->wake.wait_for(lock, std::chrono::milliseconds(1));
    if (c->pending.empty() || !c->failure.empty())
      continue;
    DeviceScope scope;
    if (!scope)
      continue;
    int32_t status;
    while (!c->pending.empty()) {
      Progress progress = poll(*c, c->pending.front(), &status);
      if (progress != Progress::done)
        break;
      cuEventDestroy(c->pending.front().event);
      c->pending.pop_front();
    }
  }
}

// Waits (with c.mutex held by `lock`, the context current) for `p` on the
// calling thread; the event is destroyed either way.
int32_t waitFor(Communicator &c, Pending p,
                std::unique_lock<std::mutex> &lock) {
  int32_t status = MXRT_SUCCESS;
  Progress progress;
  while ((progress = poll(c, p, &status)) == Progress::running) {
    // Let the watchdog and other threads at the communicator meanwhile.
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    lock.lock();
    if (!c.failure.empty()) {
      status = fail(MXRT_ERROR_NCCL,
                    p.what + ": the communicator was aborted: " + c.failure);
      progress = Progress::failed;
      break;
    }
  }
  cuEventDestroy(p.event);
  return progress == Progress::done ? MXRT_SUCCESS : status;
}

// Locks the process's communicator for `call` (commMutex by `commLock`, its
// own mutex by `lock`) and points `c` at it, or fails: NCCL missing, no
// communicator, or an aborted one.
int32_t lockCommunicator(const char *call,
                         std::unique_lock<std::mutex> &commLock,
                         std::unique_lock<std::mutex> &lock, Communicator *&c) {
  const Library &lib = getLibrary();
  if (!lib.error.empty())
    return fail(MXRT_ERROR_NCCL, format("%s: %s", call, lib.error.c_str()));
  commLock = std::unique_lock<std::mutex>(commMutex);
  if (!current) {
    commLock.unlock();
    return fail(MXRT_ERROR_NCCL,
                format("%s: no communicator: call mxrtCommInit first "
                       "(mx.runtime.init_process_group)",
                       call));
  }
  c = current.get();
  lock = std::unique_lock<std::mutex>(c->mutex);
  if (!c->failure.empty()) {
    std::string failure = c->failure;
    lock.unlock();
    commLock.unlock();
    return fail(MXRT_ERROR_NCCL, format("%s: the communicator was aborted: %s",
                                        call, failure.c_str()));
  }
  return MXRT_SUCCESS;
}

// Follows collectives just enqueued on `stream` (described by `what`) with
// an event, which the calling thread waits for (`watched` false) or hands
// to the watchdog. With c.mutex held by `lock` and the context current.
int32_t track(Communicator &c, CUstream stream, bool watched, std::string what,
              std::unique_lock<std::mutex> &lock) {
  Pending p{nullptr, Clock::now(), std::move(what)};
  int32_t status;
  if ((status = checkCu(cuEventCreate(&p.event, CU_EVENT_DISABLE_TIMING),
                        "cuEventCreate")))
    return status;
  if ((status = checkCu(cuEventRecord(p.event, stream), "cuEventRecord"))) {
    cuEventDestroy(p.event);
    return status;
  }
  if (!watched)
    return waitFor(c, std::move(p), lock);
  c.pending.push_back(std::move(p));
  return MXRT_SUCCESS;
}

// Enqueues one collective on NCCL's communicator, as rank `rank`, on a
// stream.
using Enqueue = std::function<Result(Comm, int rank, CUstream)>;

// Makes the communicator's side stream, once (with c.mutex held and the
// context current). Non-blocking: it orders after nothing but the events
// that forkSideStream records. Of the highest priority: a collective there
// overlaps the call stream's next kernel (a pipelined gather's next chunk
// quantize) only if its CTAs are placed before that kernel's waiting ones;
// at the default priority NCCL's kernel waited for the quantize's last wave
// (2 x H100, docs/distributed.md).
int32_t makeSideStream(Communicator &c) {
  if (c.side)
    return MXRT_SUCCESS;
  int least = 0, greatest = 0;
  if (int32_t status =
          checkCu(cuCtxGetStreamPriorityRange(&least, &greatest),
                  "cuCtxGetStreamPriorityRange"))
    return status;
  return checkCu(
      cuStreamCreateWithPriority(&c.side, CU_STREAM_NON_BLOCKING, greatest),
      "cuStreamCreateWithPriority");
}

// Orders the side stream after the work enqueued on `origin` so far.
int32_t forkSideStream(Communicator &c, CUstream origin) {
  CUevent event;
  if (int32_t status = checkCu(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
                               "cuEventCreate"))
    return status;
  int32_t status = checkCu(cuEventRecord(event, origin), "cuEventRecord");
  if (!status)
    status = checkCu(cuStreamWaitEvent(c.side, event, 0), "cuStreamWaitEvent");
  cuEventDestroy(event); // Released once the wait is satisfied.
  return status;
}

// The collectives of the calling thread's open group (mxrtGroupStart ..
// mxrtGroupEnd; NCCL's groups are per thread too). The outermost start
// takes the communicator's locks and notes the thread's failure count; the
// collectives are checked and kept; the outermost end, unless anything
// failed on the thread since the start, runs them as one NCCL group, with
// one event per stream, and releases the locks.
struct Group {
  struct Member {
    Enqueue enqueue;
    CUstream stream;
    bool watched;
    std::string what;
    // On the side stream, forked from `origin` when the group runs.
    bool side;
    CUstream origin;
  };
  int depth = 0;
  int32_t status = MXRT_SUCCESS;
  uint64_t failuresAtStart = 0;
  // Collectives called in the group, run or rejected.
  int64_t collectives = 0;
  Communicator *communicator = nullptr;
  std::unique_lock<std::mutex> commLock, lock;
  std::vector<Member> members;
};
thread_local Group group;

// The status that keeps the open group's collectives from running: the
// failure of its start, of the compiled call around it, or of anything else
// on this thread since its start; MXRT_SUCCESS if none.
int32_t getGroupFailure() {
  if (group.status)
    return group.status;
  if (int32_t status = getCallFailure())
    return group.status = status;
  int32_t last;
  if (getFailureCount(&last) != group.failuresAtStart)
    group.status = last;
  return group.status;
}

// Fails `call`, which takes commMutex itself, while this thread holds it in
// an open group (it would deadlock).
int32_t checkNoOpenGroup(const char *call) {
  if (!group.depth)
    return MXRT_SUCCESS;
  return fail(MXRT_ERROR_INVALID_ARGUMENT,
              format("%s: a collective group is open on this thread "
                     "(mxrtGroupEnd first)",
                     call));
}

// "a group of 2 collectives (all-gather of 8 bytes, all-gather of 4 bytes)".
std::string describeGroup(const std::vector<std::string> &whats) {
  if (whats.size() == 1)
    return whats.front();
  std::string text = format("a group of %zu collectives (", whats.size());
  for (size_t i = 0; i < whats.size(); ++i)
    text += (i ? ", " : "") + whats[i];
  return text + ")";
}

// Runs the collectives of `g` as one NCCL group (ncclGroupEnd launches
// them) and tracks them, one event per stream, with the communicator's
// locks held. A member that NCCL rejects fails the group, which NCCL then
// ends without launching any.
int32_t runGroup(Group &g) {
  Communicator &c = *g.communicator;
  DeviceScope scope;
  if (!scope)
    return scope.status();
  for (const Group::Member &member : g.members)
    if (member.side)
      if (int32_t status = forkSideStream(c, member.origin))
        return status;
  const Library &lib = getLibrary();
  if (Result result = lib.groupStart())
    return fail(MXRT_ERROR_NCCL,
                describeFailure("ncclGroupStart", result, c.comm));
  int32_t status = MXRT_SUCCESS;
  for (Group::Member &member : g.members)
    if (Result result = member.enqueue(c.comm, c.rank, member.stream)) {
      status = fail(MXRT_ERROR_NCCL,
                    describeFailure(member.what.c_str(), result, c.comm));
      break;
    }
  Result ended = lib.groupEnd();
  if (status)
    return status;
  if (ended)
    return fail(MXRT_ERROR_NCCL, describeFailure("ncclGroupEnd", ended, c.comm));
  std::vector<Group::Member> members = std::move(g.members);
  while (!members.empty()) {
    CUstream stream = members.front().stream;
    bool watched = true;
    std::vector<std::string> whats;
    for (auto it = members.begin(); it != members.end();) {
      if (it->stream != stream) {
        ++it;
        continue;
      }
      watched &= it->watched;
      whats.push_back(std::move(it->what));
      it = members.erase(it);
    }
    if (int32_t status =
            track(c, stream, watched, describeGroup(whats), g.lock))
      return status;
  }
  return MXRT_SUCCESS;
}

// Runs the collective `enqueue(comm, rank, stream)` from `send` to `recv`,
// described by `what`, for a program partitioned over `groupSize` devices,
// and waits for it or hands it to the watchdog (see the file comment); in
// an open group, checks it and adds it to the group instead. With `side`,
// it runs on the communicator's side stream, after the work enqueued on
// `stream` before it, and is always handed to the watchdog
// (mxrtCollectivesJoin waits for it). Skipped after a failure of the
// compiled call or of the open group.
int32_t runCollective(const char *call, const std::string &what,
                      const void *send, const void *recv, int32_t groupSize,
                      void *stream, bool side, Enqueue enqueue) {
  if (group.depth)
    ++group.collectives;
  if (int32_t status = group.depth ? getGroupFailure() : getCallFailure())
    return status;
  if (!send || !recv)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("%s: the %s buffer of the %s is NULL; nothing was "
                       "launched",
                       call, send ? "receive" : "send", what.c_str()));
  std::unique_lock<std::mutex> commLock, ownLock;
  Communicator *c = group.communicator;
  if (!group.depth)
    if (int32_t status = lockCommunicator(call, commLock, ownLock, c))
      return status;
  if (groupSize != c->size)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("%s: the program was partitioned for %d devices, the "
                       "communicator has %d ranks",
                       call, groupSize, c->size));
  DeviceScope scope;
  if (!scope)
    return scope.status();
  if (scope.ordinal() != c->device)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("%s: called on device %d, the communicator is on "
                       "device %d (mgpuSetDefaultDevice)",
                       call, scope.ordinal(), c->device));
  auto origin = static_cast<CUstream>(stream);
  bool watched = stream != nullptr || getCallStream(&origin);
  CUstream cuStream = origin;
  if (side) {
    if (int32_t status = makeSideStream(*c))
      return status;
    cuStream = c->side;
    watched = true;
  }
  if (group.depth) {
    group.members.push_back(
        {std::move(enqueue), cuStream, watched, what, side, origin});
    return MXRT_SUCCESS;
  }
  if (side)
    if (int32_t status = forkSideStream(*c, origin))
      return status;
  if (Result result = enqueue(c->comm, c->rank, cuStream))
    return fail(MXRT_ERROR_NCCL, describeFailure(call, result, c->comm));
  return track(*c, cuStream, watched, what, ownLock);
}

} // namespace

int32_t
mxrt::nccl::withCommunicator(const char *call,
                             const std::function<int32_t(CommHandle)> &fn) {
  std::unique_lock<std::mutex> commLock, ownLock;
  Communicator *c = group.communicator;
  if (group.depth && group.status)
    return group.status;
  if (!group.depth)
    if (int32_t status = lockCommunicator(call, commLock, ownLock, c))
      return status;
  DeviceScope scope;
  if (!scope)
    return scope.status();
  return fn({c->comm, c->generation});
}

namespace {

std::string describeBytes(const char *call, uint64_t bytes) {
  return format("%s of %llu bytes", call,
                static_cast<unsigned long long>(bytes));
}

// NCCL's type and size of an mxrtElemType the reductions take.
bool getDataType(int32_t elemType, int *type, uint64_t *bytes) {
  switch (elemType) {
  case MXRT_TYPE_F32:
    *type = nccl::Float32, *bytes = 4;
    return true;
  case MXRT_TYPE_U32:
    *type = nccl::Uint32, *bytes = 4;
    return true;
  case MXRT_TYPE_BF16:
    *type = nccl::Bfloat16, *bytes = 2;
    return true;
  case MXRT_TYPE_F16:
    *type = nccl::Float16, *bytes = 2;
    return true;
  default:
    return false;
  }
}

// Checks the element type and reduction of mxrtAllReduce/ReduceScatter.
int32_t getReduction(const char *call, int32_t elemType, int32_t op, int *type,
                     uint64_t *bytes, int *redOp) {
  if (!getDataType(elemType, type, bytes))
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("%s: element type %d is not F32, BF16, F16 or U32", call,
                       elemType));
  if (op != MXRT_REDUCE_SUM && op != MXRT_REDUCE_MAX)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("%s: reduction %d is neither MXRT_REDUCE_SUM nor "
                       "MXRT_REDUCE_MAX",
                       call, op));
  *redOp = op == MXRT_REDUCE_SUM ? nccl::Sum : nccl::Max;
  return MXRT_SUCCESS;
}

// How mxrtAllGatherPlaced moves a chunk: one ncclBroadcast per root (the
// default), or ncclSend/ncclRecv with every peer ($MX_NCCL_PLACED_GATHER=
// sendrecv), both as one NCCL group. Broadcast is NCCL's ring collective on
// all its channels, and in place at the root; send/recv is the point-to-
// point path, whose bandwidth between two GPUs can differ, so it is kept
// selectable for measurement (bench/placed_gather.py).
enum class PlacedMethod { broadcast, sendRecv };

int32_t getPlacedMethod(PlacedMethod *method) {
  const char *value = std::getenv("MX_NCCL_PLACED_GATHER");
  std::string name = value ? value : "";
  if (name.empty() || name == "broadcast")
    *method = PlacedMethod::broadcast;
  else if (name == "sendrecv")
    *method = PlacedMethod::sendRecv;
  else
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("mxrtAllGatherPlaced: MX_NCCL_PLACED_GATHER is \"%s\", "
                       "expected \"broadcast\" or \"sendrecv\"",
                       name.c_str()));
  return MXRT_SUCCESS;
}

// Enqueues the placed gather of one chunk (see mxrtAllGatherPlaced) as one
// NCCL group: every rank's `bytes` land at `at(rank)`. A part sent from
// elsewhere is first copied to its own place, so that every rank hands NCCL
// the same kind of buffers: NCCL decides from each rank's own buffers alone
// whether to move them as registered memory (NcclMemory.cpp), and a root
// sending from unregistered memory into a gather that its peers receive in
// registered memory would disagree with them (stale bytes or a hang, by
// NCCL 2.28's sources). An out-of-place broadcast copies that part anyway.
Result enqueuePlaced(PlacedMethod method, const void *send, char *base,
                     uint64_t bytes, uint64_t stride, int size, Comm comm,
                     int rank, CUstream stream) {
  const Library &lib = getLibrary();
  auto at = [&](int r) { return base + static_cast<uint64_t>(r) * stride; };
  if (send != at(rank) && cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(at(rank)),
                                        reinterpret_cast<CUdeviceptr>(send),
                                        bytes, stream) != CUDA_SUCCESS)
    return nccl::UnhandledCudaError;
  if (Result result = lib.groupStart())
    return result;
  Result result = nccl::Success;
  for (int peer = 0; peer < size && result == nccl::Success; ++peer) {
    if (method == PlacedMethod::broadcast) {
      result = lib.broadcast(at(peer), at(peer), bytes, nccl::Uint8, peer, comm,
                             stream);
      continue;
    }
    if (peer == rank)
      continue; // In place: nothing to move.
    result = lib.send(at(rank), bytes, nccl::Uint8, peer, comm, stream);
    if (result == nccl::Success)
      result = lib.recv(at(peer), bytes, nccl::Uint8, peer, comm, stream);
  }
  Result ended = lib.groupEnd();
  return result != nccl::Success ? result : ended;
}

// The result of ncclCommInitRank on its helper thread, which outlives the
// caller when the caller stops waiting.
struct InitState {
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false, abandoned = false;
  Result result = nccl::Success;
  int32_t status = MXRT_SUCCESS;
  Comm comm = nullptr;
};

void initOnThread(std::shared_ptr<InitState> state, nccl::UniqueId id, int size,
                  int rank, int device) {
  setDefaultDevice(device);
  Comm comm = nullptr;
  Result result = nccl::Success;
  int32_t status;
  {
    DeviceScope scope;
    status = scope.status();
    if (scope)
      result = getLibrary().commInitRank(&comm, size, id, rank);
  }
  std::lock_guard<std::mutex> lock(state->mutex);
  if (state->abandoned) {
    if (comm)
      getLibrary().commDestroy(comm);
    return;
  }
  state->finished = true;
  state->result = result;
  state->status = status;
  state->comm = comm;
  state->done.notify_all();
}

} // namespace

extern "C" {

MXRT_API int32_t mxrtCommUniqueId(void *id) {
  const Library &lib = getLibrary();
  if (!lib.error.empty())
    return fail(MXRT_ERROR_NCCL, "mxrtCommUniqueId: " + lib.error);
  if (!id)
    return fail(MXRT_ERROR_INVALID_ARGUMENT, "mxrtCommUniqueId: id is NULL");
  nccl::UniqueId unique;
  if (Result result = lib.getUniqueId(&unique))
    return fail(MXRT_ERROR_NCCL,
                describeFailure("ncclGetUniqueId", result, nullptr));
  std::memcpy(id, unique.internal, sizeof(unique.internal));
  return MXRT_SUCCESS;
}

MXRT_API int32_t mxrtCommInit(const void *id, int32_t size, int32_t rank,
                              int32_t timeoutSeconds) {
  if (int32_t status = checkNoOpenGroup("mxrtCommInit"))
    return status;
  const Library &lib = getLibrary();
  if (!lib.error.empty())
    return fail(MXRT_ERROR_NCCL, "mxrtCommInit: " + lib.error);
  if (!id || size < 1 || rank < 0 || rank >= size || timeoutSeconds <= 0)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("mxrtCommInit: bad arguments (id %s, size %d, rank %d, "
                       "timeout %d s)",
                       id ? "given" : "NULL", size, rank, timeoutSeconds));
  std::lock_guard<std::mutex> guard(commMutex);
  if (current)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("mxrtCommInit: this process is already rank %d of %d "
                       "(mxrtCommDestroy first)",
                       current->rank, current->size));
  int device;
  {
    DeviceScope scope;
    if (!scope)
      return scope.status();
    device = scope.ordinal();
  }
  nccl::UniqueId unique;
  std::memcpy(unique.internal, id, sizeof(unique.internal));
  auto state = std::make_shared<InitState>();
  std::thread(initOnThread, state, unique, size, rank, device).detach();
  std::unique_lock<std::mutex> lock(state->mutex);
  if (!state->done.wait_for(lock, std::chrono::seconds(timeoutSeconds),
                            [&] { return state->finished; })) {
    state->abandoned = true;
    return fail(MXRT_ERROR_NCCL,
                format("mxrtCommInit: ncclCommInitRank (rank %d of %d) did "
                       "not complete within %d s: every rank must call "
                       "mxrtCommInit with the same id and size",
                       rank, size, timeoutSeconds));
  }
  if (state->status)
    return state->status;
  if (state->result != nccl::Success)
    return fail(MXRT_ERROR_NCCL,
                describeFailure("ncclCommInitRank", state->result, nullptr));
  auto c = std::make_unique<Communicator>();
  c->comm = state->comm;
  c->size = size;
  c->rank = rank;
  c->device = device;
  c->timeout = std::chrono::seconds(timeoutSeconds);
  c->generation = ++generations;
  c->watchdog = std::thread(watch, c.get());
  current = std::move(c);
  return MXRT_SUCCESS;
}

MXRT_API int32_t mxrtCommDestroy(void) {
  if (int32_t status = checkNoOpenGroup("mxrtCommDestroy"))
    return status;
  std::lock_guard<std::mutex> guard(commMutex);
  if (!current)
    return MXRT_SUCCESS;
  Communicator &c = *current;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stopping = true;
  }
  c.wake.notify_all();
  c.watchdog.join();
  int32_t status = MXRT_SUCCESS;
  {
    std::unique_lock<std::mutex> lock(c.mutex);
    DeviceScope scope;
    while (scope && status == MXRT_SUCCESS && !c.pending.empty()) {
      Pending p = std::move(c.pending.front());
      c.pending.pop_front();
      status = waitFor(c, std::move(p), lock);
    }
    if (c.comm) {
      dropRegistrations(c.comm, c.generation);
      if (Result result = getLibrary().commDestroy(c.comm))
        status = fail(MXRT_ERROR_NCCL,
                      describeFailure("ncclCommDestroy", result, c.comm));
    }
    if (scope && c.side)
      cuStreamDestroy(c.side);
  }
  current.reset();
  return status;
}

MXRT_API int32_t mxrtCommRank(int32_t *size, int32_t *rank) {
  if (!size || !rank)
    return fail(MXRT_ERROR_INVALID_ARGUMENT, "mxrtCommRank: NULL output");
  if (int32_t status = checkNoOpenGroup("mxrtCommRank"))
    return status;
  std::lock_guard<std::mutex> guard(commMutex);
  if (!current)
    return fail(MXRT_ERROR_NCCL,
                "mxrtCommRank: no communicator (mxrtCommInit)");
  *size = current->size;
  *rank = current->rank;
  return MXRT_SUCCESS;
}

MXRT_API int32_t mxrtGroupStart(void) {
  if (group.depth++)
    return group.status;
  group.failuresAtStart = getFailureCount();
  group.status = lockCommunicator("mxrtGroupStart", group.commLock, group.lock,
                                  group.communicator);
  return group.status;
}

MXRT_API int32_t mxrtGroupEnd(void) {
  if (!group.depth)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                "mxrtGroupEnd: no collective group is open on this thread "
                "(mxrtGroupStart)");
  if (--group.depth)
    return group.status;
  // A failure in the group stops its collectives and is their status; a
  // group that had none called in it (only a misuse rejected inside it)
  // drops nothing, and its failures were returned where they happened.
  int32_t status = MXRT_SUCCESS;
  if (group.collectives) {
    status = getGroupFailure();
    if (!status && !group.members.empty())
      status = runGroup(group);
  }
  if (group.lock.owns_lock())
    group.lock.unlock();
  if (group.commLock.owns_lock())
    group.commLock.unlock();
  group.status = MXRT_SUCCESS;
  group.communicator = nullptr;
  group.members.clear();
  group.collectives = 0;
  return status;
}

MXRT_API int32_t mxrtAllGather(const void *send, void *recv, uint64_t sendBytes,
                               int32_t groupSize, void *stream) {
  if (sendBytes == 0)
    return MXRT_SUCCESS;
  return runCollective("mxrtAllGather", describeBytes("all-gather", sendBytes),
                       send, recv, groupSize, stream, /*side=*/false,
                       [=](Comm comm, int, CUstream s) {
                         return getLibrary().allGather(send, recv, sendBytes,
                                                       nccl::Uint8, comm, s);
                       });
}

MXRT_API int32_t mxrtAllReduce(const void *send, void *recv, uint64_t count,
                               int32_t elemType, int32_t op, int32_t groupSize,
                               void *stream) {
  int type = 0, redOp = 0;
  uint64_t bytes = 0;
  if (int32_t status =
          getReduction("mxrtAllReduce", elemType, op, &type, &bytes, &redOp))
    return status;
  if (count == 0)
    return MXRT_SUCCESS;
  return runCollective(
      "mxrtAllReduce", describeBytes("all-reduce", count * bytes), send, recv,
      groupSize, stream, /*side=*/false, [=](Comm comm, int, CUstream s) {
        return getLibrary().allReduce(send, recv, count, type, redOp, comm, s);
      });
}

MXRT_API int32_t mxrtReduceScatter(const void *send, void *recv,
                                   uint64_t recvCount, int32_t elemType,
                                   int32_t op, int32_t groupSize,
                                   void *stream) {
  int type = 0, redOp = 0;
  uint64_t bytes = 0;
  if (int32_t status = getReduction("mxrtReduceScatter", elemType, op, &type,
                                    &bytes, &redOp))
    return status;
  if (recvCount == 0)
    return MXRT_SUCCESS;
  return runCollective(
      "mxrtReduceScatter",
      describeBytes("reduce-scatter", recvCount * bytes * groupSize), send,
      recv, groupSize, stream, /*side=*/false, [=](Comm comm, int, CUstream s) {
        return getLibrary().reduceScatter(send, recv, recvCount, type, redOp,
                                          comm, s);
      });
}

MXRT_API int32_t mxrtAllGatherPlaced(const void *send, void *recv,
                                     uint64_t chunkBytes,
                                     uint64_t rankStrideBytes,
                                     uint64_t offsetBytes, int32_t groupSize,
                                     void *stream) {
  if (offsetBytes > rankStrideBytes ||
      chunkBytes > rankStrideBytes - offsetBytes)
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                format("mxrtAllGatherPlaced: a chunk of %llu bytes at offset "
                       "%llu does not fit in a rank's %llu bytes",
                       static_cast<unsigned long long>(chunkBytes),
                       static_cast<unsigned long long>(offsetBytes),
                       static_cast<unsigned long long>(rankStrideBytes)));
  PlacedMethod method = PlacedMethod::broadcast;
  if (int32_t status = getPlacedMethod(&method))
    return status;
  if (chunkBytes == 0)
    return MXRT_SUCCESS;
  std::string what = format(
      "placed all-gather of %llu bytes (at %llu + rank x %llu, by %s)",
      static_cast<unsigned long long>(chunkBytes),
      static_cast<unsigned long long>(offsetBytes),
      static_cast<unsigned long long>(rankStrideBytes),
      method == PlacedMethod::broadcast ? "ncclBroadcast"
                                        : "ncclSend/ncclRecv");
  char *base = static_cast<char *>(recv) + offsetBytes;
  return runCollective(
      "mxrtAllGatherPlaced", what, send, recv, groupSize, stream,
      /*side=*/true, [=](Comm comm, int rank, CUstream s) {
        return enqueuePlaced(method, send, base, chunkBytes, rankStrideBytes,
                             groupSize, comm, rank, s);
      });
}

MXRT_API int32_t mxrtCollectivesJoin(void *stream) {
  if (int32_t status = checkNoOpenGroup("mxrtCollectivesJoin"))
    return status;
  const Library &lib = getLibrary();
  std::unique_lock<std::mutex> commLock(commMutex);
  if (!lib.error.empty() || !current) {
    commLock.unlock();
    // Nothing ran on a side stream: the failure of the compiled call, which
    // skipped the collectives, is the only message.
    if (int32_t status = getCallFailure())
      return status;
    return fail(MXRT_ERROR_NCCL,
                format("mxrtCollectivesJoin: %s",
                       lib.error.empty() ? "no communicator: call "
                                           "mxrtCommInit first"
                                         : lib.error.c_str()));
  }
  Communicator &c = *current;
  std::unique_lock<std::mutex> lock(c.mutex);
  int32_t status = MXRT_SUCCESS;
  // The streams are ordered even after a failure (of the call, or an abort):
  // the caller frees the buffers of the side stream's collectives after this.
  if (c.side) {
    DeviceScope scope;
    if (!scope)
      return scope.status();
    auto target = static_cast<CUstream>(stream);
    bool onStream = stream != nullptr || getCallStream(&target);
    Pending p{nullptr, Clock::now(), "the collectives of the side stream"};
    if ((status = checkCu(cuEventCreate(&p.event, CU_EVENT_DISABLE_TIMING),
                          "cuEventCreate")))
      return status;
    if ((status = checkCu(cuEventRecord(p.event, c.side), "cuEventRecord"))) {
      cuEventDestroy(p.event);
      return status;
    }
    if (!onStream && c.failure.empty())
      return waitFor(c, std::move(p), lock);
    if (onStream)
      status = checkCu(cuStreamWaitEvent(target, p.event, 0),
                       "cuStreamWaitEvent");
    else
      status = checkCu(cuEventSynchronize(p.event), "cuEventSynchronize");
    cuEventDestroy(p.event);
  }
  if (status)
    return status;
  if (!c.failure.empty())
    return fail(MXRT_ERROR_NCCL,
                "mxrtCollectivesJoin: the communicator was aborted: " +
                    c.failure);
  return getCallFailure();
}

} // extern "C"
