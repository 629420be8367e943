#include "comm/mpi_communicator.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <chrono>
#include <optional>
#include <string>

#include "comm/mpi_check.hpp"
#include "core/bf16.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"
#include "core/watchdog.hpp"
#ifdef GPT_HAVE_CUDA_RUNTIME
#include <cuda_runtime.h>
#endif

namespace gpt {

void throw_mpi_error(int code, const char* stmt, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = "?";
  gethostname(host, sizeof host);
  throw CommError(fmt::format("{} failed on rank {} ({}): {} at {}:{}", stmt, rank, host, std::string(msg, len),
                              file, line));
}

namespace {

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

MPI_Op bf16_sum_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    MPI_Op_create(&bf16_sum, 1, &o);
    return o;
  }();
  return op;
}

MPI_Datatype mpi_type(DType t) { return t == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T; }
MPI_Op mpi_sum(DType t) { return t == DType::kF32 ? MPI_SUM : bf16_sum_op(); }

int checked_count(size_t n) {
  GPT_CHECK(n <= size_t(INT_MAX), "collective of {} elements exceeds MPI's int count", n);
  return static_cast<int>(n);
}

void scale(void* buf, size_t n, DType t, float s) {
  if (t == DType::kF32) {
    auto* p = static_cast<float*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] *= s;
  } else {
    auto* p = static_cast<uint16_t*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(bf16_to_f32(p[i]) * s);
  }
}

#ifdef GPT_HAVE_CUDA_RUNTIME
// Device memory needs staging; asked only when a GPU is usable at all.
int device_of(const void* p) {
  static const bool usable = [] {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();
    return ok;
  }();
  if (!usable || p == nullptr) return -1;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CommError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}
#endif

}  // namespace

template <typename Fn>
void MpiCommunicator::run_on_host(const void* send, size_t send_bytes, void* recv, size_t recv_bytes, const Fn& fn) {
#ifdef GPT_HAVE_CUDA_RUNTIME
  const int dev = std::max(device_of(send), device_of(recv));
  if (dev >= 0) {
    cuda_ok(cudaSetDevice(dev), "cudaSetDevice");
    // One staging region covering both buffers when they overlap (in-place
    // collectives), else the two side by side.
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool overlap = s < r + recv_bytes && r < s + send_bytes;
    const char* lo = overlap ? std::min<const char*>(s, r) : nullptr;
    const size_t need = overlap ? size_t(std::max<const char*>(s + send_bytes, r + recv_bytes) - lo)
                                : send_bytes + recv_bytes;
    if (need > staging_bytes_) {
      if (staging_) cudaFreeHost(staging_);
      staging_ = nullptr;
      cuda_ok(cudaMallocHost(&staging_, need), "cudaMallocHost (MPI staging)");
      staging_bytes_ = need;
    }
    char* h = static_cast<char*>(staging_);
    char* hs = overlap ? h + (s - lo) : h;
    char* hr = overlap ? h + (r - lo) : h + send_bytes;
    if (overlap) {
      cuda_ok(cudaMemcpy(h, lo, need, cudaMemcpyDeviceToHost), "cudaMemcpy D2H (MPI staging)");
    } else {
      cuda_ok(cudaMemcpy(hs, s, send_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H (MPI staging)");
    }
    fn(hs, hr);
    cuda_ok(cudaMemcpy(r, hr, recv_bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D (MPI staging)");
    return;
  }
#endif
  (void)send_bytes;
  (void)recv_bytes;
  fn(send, recv);
}

CollectiveNames MpiCommunicator::names(Op op) {
  switch (op) {
    case Op::kAllReduce: return kAllReduceNames;
    case Op::kReduceScatter: return kReduceScatterNames;
    case Op::kAllGather: return kAllGatherNames;
    case Op::kBroadcast: return kBroadcastNames;
    case Op::kBarrier: return kBarrierNames;
  }
  return {"?", "wait"};
}

struct MpiCommunicator::Task final : Work {
  Call call;
  CommStats* stats = nullptr;
  int64_t bytes = 0;
  double issued_us = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  bool is_completed() override {
    std::lock_guard lk(mu);
    return done;
  }
  void wait() override {
    Timer t;
    std::unique_lock lk(mu);
    // Where the caller waited for this collective, a slice on its lane
    // ("wait all_gather"): as long as it blocked (exposed communication),
    // and of no length when the collective had already completed.
    std::optional<trace::Span> blocked;
    if (trace::enabled()) blocked.emplace(names(call.op).wait, "comm");
    const Watchdog& w = watchdog();
    if (w.idle()) {
      cv.wait(lk, [&] { return done; });
    } else {
      // Bounded: a rank that never joins makes this a StuckError after
      // --comm-timeout, not a hang (core/watchdog.hpp).
      wait_until([&] { return cv.wait_for(lk, std::chrono::milliseconds(1), [&] { return done; }); }, w,
                 {"an MPI collective", names(call.op).op});
    }
    blocked.reset();
    stats->add_exposed(t.seconds());
    if (error) std::rethrow_exception(error);
  }
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  GPT_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  GPT_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  GPT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  GPT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  bf16_sum_op();  // create the user op now, on the main thread
  // Room for more collectives queued at once than a step issues, so that how
  // far the progress thread lags does not decide whether issuing allocates.
  queue_.reserve(1024);
  // Likewise the tasks: one is reused once its issuer has dropped it and it
  // has run, so how many are in use at once also depends on that lag. A
  // pool grown only on demand reached a new high-water mark in step 3 of
  // one CI run of alloc.hot_loop (MPI-staged zero3 on 2 ranks). 256 is more
  // than a whole zero3 micro-batch of gpt2-1.5b issues (3 per unit, 50 units).
  pool_.fill(256, [] { return std::make_shared<Task>(); });
  worker_ = std::thread([this] { progress_loop(); });
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  MPI_Comm_free(&comm_);
#ifdef GPT_HAVE_CUDA_RUNTIME
  if (staging_) cudaFreeHost(staging_);
#endif
}

void MpiCommunicator::progress_loop() {
  while (true) {
    Task* task = nullptr;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || head_ < queue_.size(); });
      if (head_ == queue_.size()) return;  // stop requested and nothing left
      task = queue_[head_++];
      if (head_ == queue_.size()) {
        queue_.clear();  // keeps its capacity: the next pushes allocate nothing
        head_ = 0;
      }
    }
    Timer t;
    const double start_us = trace::enabled() ? trace::now_us() : 0;
    std::exception_ptr error;
    try {
      run(task->call);
    } catch (...) {
      error = std::current_exception();
    }
    stats_.add_time(t.seconds());
    const char* op = names(task->call.op).op;
    if (trace_lane_ >= 0 && trace::enabled()) {
      // The transfer itself on this communicator's lane, and issue -> completion
      // as an async slice (queued collectives overlap each other).
      static std::atomic<uint64_t> next_id{1};
      const double end_us = trace::now_us();
      trace::record({op, "comm", -1, trace_lane_, false, 0, start_us, end_us - start_us, task->bytes});
      trace::record({op, "collective", -1, trace_lane_, true, next_id++, task->issued_us,
                     end_us - task->issued_us, task->bytes});
    }
    // The last touch of the task, under its lock: once done, enqueue may
    // hand it out again.
    std::lock_guard lk(task->mu);
    task->error = error;
    task->done = true;
    task->cv.notify_all();
  }
}

WorkPtr MpiCommunicator::enqueue(const Call& call, int64_t bytes) {
#ifdef GPT_HAVE_CUDA_RUNTIME
  // Device inputs are copied by the progress thread: they must be complete.
  if (compute_stream_)
    cuda_ok(cudaStreamSynchronize(static_cast<cudaStream_t>(compute_stream_)), "cudaStreamSynchronize (MPI staging)");
#endif
  const double issued_us = trace::enabled() ? trace::now_us() : 0;
  stats_.add_issue(bytes);
  std::shared_ptr<Task> task;
  {
    std::lock_guard lk(mu_);  // the pool and the queue
    task = pool_.take([](Task& t) { return t.is_completed(); }, [] { return std::make_shared<Task>(); });
    {
      std::lock_guard tl(task->mu);
      task->call = call;
      task->stats = &stats_;
      task->bytes = bytes;
      task->issued_us = issued_us;
      task->done = false;
      task->error = nullptr;
    }
    // The progress thread clears the queue when it has taken every task; if
    // it never catches up completely, the taken ones are dropped here once
    // the reserved room is used up, so even then the push does not grow it.
    if (queue_.size() == queue_.capacity() && head_ > 0) {
      queue_.erase(queue_.begin(), queue_.begin() + std::ptrdiff_t(head_));
      head_ = 0;
    }
    queue_.push_back(task.get());
  }
  cv_.notify_one();
  return task;
}

void MpiCommunicator::run(const Call& c) {
  const size_t es = dtype_size(c.t);
  const int n = static_cast<int>(c.count);  // checked when issued
  switch (c.op) {
    case Op::kAllReduce:
      run_on_host(c.send, c.count * es, c.recv, c.count * es, [&](const void* s, void* r) {
        GPT_MPI_CHECK(MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, n, mpi_type(c.t), mpi_sum(c.t), comm_));
        if (c.reduce == ReduceOp::kAvg) scale(r, c.count, c.t, 1.f / float(size_));
      });
      return;
    case Op::kReduceScatter:
      run_on_host(c.send, c.count * size_t(size_) * es, c.recv, c.count * es, [&](const void* s, void* r) {
        if (c.in_place) {
          // MPI's in-place form leaves the result at the start of the buffer;
          // ours keeps it at this rank's offset.
          void* full = const_cast<void*>(s);
          GPT_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, full, n, mpi_type(c.t), mpi_sum(c.t), comm_));
          if (rank_ != 0) std::memmove(r, full, c.count * es);
        } else {
          GPT_MPI_CHECK(MPI_Reduce_scatter_block(s, r, n, mpi_type(c.t), mpi_sum(c.t), comm_));
        }
        if (c.reduce == ReduceOp::kAvg) scale(r, c.count, c.t, 1.f / float(size_));
      });
      return;
    case Op::kAllGather:
      run_on_host(c.send, c.count * es, c.recv, c.count * size_t(size_) * es, [&](const void* s, void* r) {
        GPT_MPI_CHECK(
            MPI_Allgather(c.in_place ? MPI_IN_PLACE : s, n, mpi_type(c.t), r, n, mpi_type(c.t), comm_));
      });
      return;
    case Op::kBroadcast:
      run_on_host(c.recv, c.count * es, c.recv, c.count * es,
                  [&](const void*, void* r) { GPT_MPI_CHECK(MPI_Bcast(r, n, mpi_type(c.t), c.root, comm_)); });
      return;
    case Op::kBarrier:
      GPT_MPI_CHECK(MPI_Barrier(comm_));
      return;
  }
}

WorkPtr MpiCommunicator::all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
  checked_count(count);
  return enqueue({Op::kAllReduce, send, recv, count, t, op}, ring_bytes(2, count * dtype_size(t)));
}

WorkPtr MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t,
                                              ReduceOp op) {
  checked_count(recv_count);
  checked_count(recv_count * size_t(size_));
  const size_t es = dtype_size(t);
  const bool in_place = static_cast<const char*>(send) + rank_ * recv_count * es == static_cast<char*>(recv);
  return enqueue({Op::kReduceScatter, send, recv, recv_count, t, op, 0, in_place},
                 ring_bytes(1, recv_count * size_t(size_) * es));
}

WorkPtr MpiCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType t) {
  checked_count(send_count);
  checked_count(send_count * size_t(size_));
  const size_t es = dtype_size(t);
  const bool in_place = static_cast<const char*>(send) == static_cast<char*>(recv) + rank_ * send_count * es;
  return enqueue({Op::kAllGather, send, recv, send_count, t, ReduceOp::kSum, 0, in_place},
                 ring_bytes(1, send_count * size_t(size_) * es));
}

WorkPtr MpiCommunicator::broadcast_async(void* buf, size_t count, DType t, int root) {
  checked_count(count);
  GPT_CHECK(root >= 0 && root < size_, "broadcast root {} outside communicator of {}", root, size_);
  return enqueue({Op::kBroadcast, buf, buf, count, t, ReduceOp::kSum, root}, ring_bytes(1, count * dtype_size(t)));
}

WorkPtr MpiCommunicator::barrier_async() { return enqueue({Op::kBarrier}, 0); }

}  // namespace gpt
