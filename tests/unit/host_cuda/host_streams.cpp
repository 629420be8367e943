// Streams, events, copies and memsets of the host CUDA runtime (see
// host_streams.hpp).
//
// Order (GPT_EMULATED_STREAMS), so that what a GPU may do but rarely does
// happens here every time:
//  - lazy (the default): queued work runs only when the host needs it: a
//    stream, event or device synchronisation, a synchronous cudaMemcpy, a
//    cudaFree. Then only the work that needs runs, each stream just as far
//    as needed. So a stream that does not wait for another stream's result
//    runs before that result exists; a host read without a synchronisation
//    sees memory the queued work has not written yet (cudaMalloc's 0xFF:
//    NaN); a buffer handed to its next user while another stream still
//    reads it is overwritten first. cudaEventQuery answers
//    cudaErrorNotReady until the work before the event has been made to run,
//    except that a host that keeps asking about the same record sees it
//    finish: the second query of a record runs the work before it (a
//    polling wait, core/cuda/host_wait.hpp, would otherwise never end).
//  - eager-comm: the same, except that streams created non-blocking (the
//    NCCL communicator's) run each operation as soon as what it waits for
//    has run. So a collective that does not wait for its inputs reads them
//    before the compute stream has written them, and one that overwrites a
//    buffer the compute stream has not finished reading does so before the
//    read.
//  - program: work runs when it is queued, in program order (for telling
//    an ordering failure from any other).
// Every rank of a job runs the same calls, so the lazy order is the same on
// every rank, and collectives queued on streams (host_nccl.cpp) run in the
// same order everywhere, as NCCL requires.
//
// What CUDA promises and this keeps: a stream runs its work in order; a
// blocking stream's work runs after the legacy default stream's earlier
// work, and legacy-stream work after every blocking stream's earlier work;
// cudaStreamWaitEvent orders a stream after the work before the event's
// last record. Synchronous memsets of device memory do not block the host
// (as documented), cudaFree and cudaFreeHost synchronise the device.
//
// Collectives that never finish (GPT_EMULATED_NCCL_FAULT, host_nccl.cpp):
// such an operation never runs, nor does anything queued after it or
// waiting for it. cudaStreamQuery answers cudaErrorNotReady for a stream
// that needs it, as a GPU would; a synchronisation that needs it (a GPU
// would block forever there) ends the process with a message naming the
// call, so a test sees the unbounded wait instead of hanging.
//
// Thread-safe: one lock around queues and execution (the MPI
// communicator's progress thread copies on the legacy stream, and may so
// run compute kernels, while the main thread queues more).
#include "host_streams.hpp"

#include "api_log.hpp"
#include "host_cuda_runtime.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Stream;
// "Stream s has run its first n operations."
struct Point {
  Stream* s = nullptr;
  uint64_t n = 0;
};
struct Op {
  std::function<void()> work;  // empty: an event record or wait; never: called when first reached
  std::vector<Point> after;
  bool never = false;  // a collective that never finishes (enqueue_stuck_collective)
};
struct Stream {
  bool legacy = false, blocking = true;
  std::deque<Op> queue;
  uint64_t issued = 0, done = 0;
};
struct Event {
  Point recorded;  // s == nullptr: never recorded (waits on it are no-ops)
  bool timing = true;  // false: created with cudaEventDisableTiming
  // When the last record ran here (set by the record operation itself, so
  // it is the host time the emulator reached that point of its stream).
  std::shared_ptr<std::chrono::steady_clock::time_point> ran_at;
  bool asked = false;  // a query of the last record has been answered not ready
};

std::recursive_mutex g_mu;  // guards everything below
Stream g_legacy{true, false, {}, 0, 0};
std::vector<Stream*> g_streams;  // live user streams, in creation order (the same on every rank)
std::vector<std::unique_ptr<Stream>> g_destroyed;  // drained; events may still point at them
std::set<Event*> g_events;
Point g_last_collective;  // the last operation queued by enqueue_collective

using host_cuda::StreamOrder;
StreamOrder from_environment() {
  const char* v = std::getenv("GPT_EMULATED_STREAMS");
  const std::string name = v ? v : "lazy";
  if (name == "lazy") return StreamOrder::kLazy;
  if (name == "eager-comm") return StreamOrder::kEagerComm;
  if (name == "program") return StreamOrder::kProgram;
  std::fprintf(stderr, "host CUDA runtime: GPT_EMULATED_STREAMS=%s is not lazy, eager-comm or program\n", v);
  std::exit(2);
}
StreamOrder g_order = from_environment();
StreamOrder order() { return g_order; }

[[noreturn]] void misuse(const char* what) {
  std::fprintf(stderr, "host CUDA runtime: %s\n", what);
  std::abort();
}
// A synchronisation reached work that never finishes.
[[noreturn]] void hangs(const char* call) {
  std::fprintf(stderr,
               "host CUDA runtime: %s waits for a collective that never finishes (GPT_EMULATED_NCCL_FAULT): "
               "on a GPU this process would hang here\n",
               call);
  std::abort();
}

Stream* stream_of(cudaStream_t h) {
  if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread) return &g_legacy;
  auto* s = reinterpret_cast<Stream*>(h);
  if (std::find(g_streams.begin(), g_streams.end(), s) == g_streams.end())
    misuse("work queued on a stream that was destroyed or never created");
  return s;
}

// "Point p has run" (a point on no stream: nothing to wait for).
bool reached(const Point& p) { return !p.s || p.s->done >= p.n; }

bool ready(const Op& op) { return std::all_of(op.after.begin(), op.after.end(), reached); }
// The stream order has reached a collective that never finishes: tell its
// issuer once (host NCCL: the asynchronous error appears now).
void reach(Op& op) {
  if (op.work) std::exchange(op.work, nullptr)();
}
void run_eager_comm();
// Runs s's next operation (what it waits for has run).
void run_front(Stream* s) {
  std::function<void()> work = std::move(s->queue.front().work);
  s->queue.pop_front();
  if (work) work();
  ++s->done;
  run_eager_comm();
}
// eager-comm: every operation of a non-blocking stream whose waits are
// done runs now.
void run_eager_comm() {
  static bool running = false;  // run_front calls back: one loop at a time
  if (order() != StreamOrder::kEagerComm || running) return;
  running = true;
  for (bool progress = true; progress;) {
    progress = false;
    for (Stream* s : g_streams)
      while (!s->blocking && s->done < s->issued && ready(s->queue.front())) {
        if (s->queue.front().never) {
          reach(s->queue.front());
          break;
        }
        run_front(s);
        progress = true;
      }
  }
  running = false;
}

// Runs stream s's operations until it has run n, each one after what it
// waits for (depth first, iteratively: the chains can be long). False when
// that needs an operation that never finishes (what could run has run).
bool run_until(Stream* s, uint64_t n) {
  std::vector<Point> todo{{s, n}};
  while (!todo.empty()) {
    const Point p = todo.back();
    if (p.s->done >= p.n) {
      todo.pop_back();
      continue;
    }
    Op& op = p.s->queue.front();
    if (op.never) {
      if (ready(op)) reach(op);
      return false;
    }
    const auto waits = std::find_if_not(op.after.begin(), op.after.end(), reached);
    if (waits != op.after.end())
      todo.push_back(*waits);
    else
      run_front(p.s);
  }
  return true;
}
// run_until for a call that blocks the host until the work has finished.
void block_until(Stream* s, uint64_t n, const char* call) {
  if (!run_until(s, n)) hangs(call);
}
void run_all(const char* call) {
  block_until(&g_legacy, g_legacy.issued, call);
  for (Stream* s : g_streams) block_until(s, s->issued, call);
}

void push(Stream* s, std::function<void()> work, std::vector<Point> after = {}, bool never = false) {
  if (s->legacy) {
    for (Stream* b : g_streams)
      if (b->blocking && b->done < b->issued) after.push_back({b, b->issued});
  } else if (s->blocking && g_legacy.done < g_legacy.issued) {
    after.push_back({&g_legacy, g_legacy.issued});
  }
  s->queue.push_back(Op{std::move(work), std::move(after), never});
  ++s->issued;
  if (order() == StreamOrder::kProgram) run_until(s, s->issued);
  run_eager_comm();
}

}  // namespace

namespace host_cuda {
void enqueue(cudaStream_t stream, std::function<void()> work) {
  std::lock_guard lk(g_mu);
  push(stream_of(stream), std::move(work));
}
namespace {
void push_collective(cudaStream_t stream, std::function<void()> work, bool never) {
  std::lock_guard lk(g_mu);
  Stream* s = stream_of(stream);
  std::vector<Point> after;
  if (g_last_collective.s) after.push_back(g_last_collective);
  push(s, std::move(work), std::move(after), never);
  g_last_collective = {s, s->issued};
}
}  // namespace
void enqueue_collective(cudaStream_t stream, std::function<void()> work) {
  push_collective(stream, std::move(work), false);
}
void enqueue_stuck_collective(cudaStream_t stream, std::function<void()> reached) {
  push_collective(stream, std::move(reached), true);
}
void synchronize_device(const char* call) {
  std::lock_guard lk(g_mu);
  run_all(call);
}
void set_stream_order(StreamOrder o) {
  std::lock_guard lk(g_mu);
  g_order = o;
  run_eager_comm();
}
}  // namespace host_cuda

cudaError_t cudaDeviceSynchronize() {
  host_cuda::count_call("sync.device");
  host_cuda::synchronize_device("cudaDeviceSynchronize");
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* h, unsigned flags) {
  host_cuda::count_call("create.stream");
  auto* s = new Stream;
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  std::lock_guard lk(g_mu);
  g_streams.push_back(s);
  *h = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* h) { return cudaStreamCreateWithFlags(h, cudaStreamDefault); }
// Queued work still runs (here: now, as far as it can: destroying a stream
// does not wait for it); events recorded on the stream stay valid.
cudaError_t cudaStreamDestroy(cudaStream_t h) {
  host_cuda::count_call("destroy.stream");
  std::lock_guard lk(g_mu);
  Stream* s = stream_of(h);
  if (s == &g_legacy) return cudaErrorInvalidResourceHandle;
  (void)run_until(s, s->issued);
  g_streams.erase(std::find(g_streams.begin(), g_streams.end(), s));
  g_destroyed.emplace_back(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  host_cuda::count_call("sync.stream");
  std::lock_guard lk(g_mu);
  Stream* s = stream_of(h);
  block_until(s, s->issued, "cudaStreamSynchronize");
  return cudaSuccess;
}
// A GPU that finishes a stream's work as soon as the host asks whether it
// has (unless it needs a collective that never finishes): the query runs
// it, and so counts as a stream wait (the bounded waits of
// core/cuda/host_wait.hpp poll with it).
cudaError_t cudaStreamQuery(cudaStream_t h) {
  host_cuda::count_call("sync.stream");
  std::lock_guard lk(g_mu);
  Stream* s = stream_of(h);
  return run_until(s, s->issued) ? cudaSuccess : cudaErrorNotReady;
}

namespace {
Event* event_of(cudaEvent_t h) {
  auto* e = reinterpret_cast<Event*>(h);
  if (!g_events.count(e)) misuse("an event that was destroyed or never created");
  return e;
}
}  // namespace
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* h, unsigned flags) {
  host_cuda::count_call("create.event");
  auto* e = new Event;
  e->timing = (flags & cudaEventDisableTiming) == 0;
  std::lock_guard lk(g_mu);
  g_events.insert(e);
  *h = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* h) { return cudaEventCreateWithFlags(h, cudaEventDefault); }
// Waits already queued keep what they wait for (as in CUDA).
cudaError_t cudaEventDestroy(cudaEvent_t h) {
  host_cuda::count_call("destroy.event");
  std::lock_guard lk(g_mu);
  Event* e = event_of(h);
  g_events.erase(e);
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t stream) {
  host_cuda::count_call("event.record");
  std::lock_guard lk(g_mu);
  Event* e = event_of(h);
  Stream* s = stream_of(stream);
  auto at = std::make_shared<std::chrono::steady_clock::time_point>();
  push(s, [at] { *at = std::chrono::steady_clock::now(); });  // a record is the stream's next operation
  e->recorded = {s, s->issued};
  e->ran_at = std::move(at);
  e->asked = false;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t h, unsigned) {
  host_cuda::count_call("event.wait");
  std::lock_guard lk(g_mu);
  const Point p = event_of(h)->recorded;
  std::vector<Point> after;
  if (p.s) after.push_back(p);
  push(stream_of(stream), nullptr, std::move(after));
  return cudaSuccess;
}
// Lazy: the first query of a record finds its work not run; the next one
// runs it (unless it needs a collective that never finishes).
cudaError_t cudaEventQuery(cudaEvent_t h) {
  host_cuda::count_call("query.event");
  std::lock_guard lk(g_mu);
  Event* e = event_of(h);
  const Point p = e->recorded;
  if (reached(p)) return cudaSuccess;
  if (!std::exchange(e->asked, true)) return cudaErrorNotReady;
  return run_until(p.s, p.n) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t h) {
  host_cuda::count_call("sync.event");
  std::lock_guard lk(g_mu);
  const Point p = event_of(h)->recorded;
  if (p.s) block_until(p.s, p.n, "cudaEventSynchronize");
  return cudaSuccess;
}
// As CUDA: an event never recorded or created without timing is an invalid
// handle here; one recorded but not yet reached is not ready. The time is
// the host's between the emulator running the two records (on one stream,
// the work queued between them), so never negative there.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  std::lock_guard lk(g_mu);
  const Event *ea = event_of(a), *eb = event_of(b);
  if (!ea->timing || !eb->timing || !ea->recorded.s || !eb->recorded.s) return cudaErrorInvalidResourceHandle;
  if (!reached(ea->recorded) || !reached(eb->recorded)) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(*eb->ran_at - *ea->ran_at).count();
  return cudaSuccess;
}

// Copies and memsets are stream operations; the synchronous copy waits for
// its own completion. Their sources are read when they run. The API log
// counts copies by direction, found from the pointers as cudaMemcpyDefault
// would, and counts one whose host side is pageable twice more: as a copy
// the driver stages through a pinned buffer, and, into pageable memory, as
// the host synchronisation it is on a GPU (cudaMemcpyAsync returns only when
// the copy is done); here it stays as lazy as any other copy, which is
// stricter.
namespace {
void count_copy(void* dst, const void* src) {
  using host_cuda::Memory;
  const Memory d = host_cuda::memory_of(dst), s = host_cuda::memory_of(src);
  const bool dd = d == Memory::kDevice, sd = s == Memory::kDevice;
  host_cuda::count_call(dd && sd ? "copy.d2d" : dd ? "copy.h2d" : sd ? "copy.d2h" : "copy.h2h");
  if ((dd || sd) && (d == Memory::kPageable || s == Memory::kPageable)) {
    host_cuda::count_call("copy.pageable");
    if (d == Memory::kPageable) host_cuda::count_call("sync.pageable_d2h");
  }
}
}  // namespace
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  count_copy(dst, src);
  if (bytes) host_cuda::enqueue(stream, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  count_copy(dst, src);
  if (width && height)
    host_cuda::enqueue(stream, [=] {
      for (size_t r = 0; r < height; ++r)
        std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
    });
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind /*kind*/) {
  host_cuda::count_call("sync.memcpy");
  count_copy(dst, src);
  if (bytes) host_cuda::enqueue(nullptr, [=] { std::memmove(dst, src, bytes); });
  std::lock_guard lk(g_mu);
  Stream* s = stream_of(nullptr);
  block_until(s, s->issued, "cudaMemcpy");
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  host_cuda::count_call("memset");
  if (bytes) host_cuda::enqueue(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) { return cudaMemsetAsync(p, value, bytes, nullptr); }
