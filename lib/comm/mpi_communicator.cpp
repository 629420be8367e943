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

void MpiCommunicator::run_on_host(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                                  const std::function<void(const void*, void*)>& fn) {
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

struct MpiCommunicator::Task final : Work {
  std::function<void()> fn;
  CommStats* stats = nullptr;
  const char* op = "";  // for traces
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
    // A wait that blocks is exposed communication: a slice on the caller's lane.
    std::optional<trace::Span> blocked;
    if (!done && trace::enabled()) blocked.emplace("wait", "comm");
    const Watchdog& w = watchdog();
    if (w.idle()) {
      cv.wait(lk, [&] { return done; });
    } else {
      // Bounded: a rank that never joins makes this a StuckError after
      // --comm-timeout, not a hang (core/watchdog.hpp).
      const std::string what = fmt::format("an MPI collective ({})", op);
      wait_until([&] { return cv.wait_for(lk, std::chrono::milliseconds(1), [&] { return done; }); }, w, what.c_str());
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
    std::shared_ptr<Task> task;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    Timer t;
    const double start_us = trace::enabled() ? trace::now_us() : 0;
    try {
      task->fn();
    } catch (...) {
      task->error = std::current_exception();
    }
    stats_.add_time(t.seconds());
    if (trace_lane_ >= 0 && trace::enabled()) {
      // The transfer itself on this communicator's lane, and issue -> completion
      // as an async slice (queued collectives overlap each other).
      static std::atomic<uint64_t> next_id{1};
      const double end_us = trace::now_us();
      trace::record({task->op, "comm", -1, trace_lane_, false, 0, start_us, end_us - start_us, task->bytes});
      trace::record({task->op, "collective", -1, trace_lane_, true, next_id++, task->issued_us,
                     end_us - task->issued_us, task->bytes});
    }
    task->fn = nullptr;
    {
      std::lock_guard lk(task->mu);
      task->done = true;
    }
    task->cv.notify_all();
  }
}

WorkPtr MpiCommunicator::enqueue(const char* op, std::function<void()> fn, int64_t bytes) {
#ifdef GPT_HAVE_CUDA_RUNTIME
  // Device inputs are copied by the progress thread: they must be complete.
  if (compute_stream_)
    cuda_ok(cudaStreamSynchronize(static_cast<cudaStream_t>(compute_stream_)), "cudaStreamSynchronize (MPI staging)");
#endif
  auto task = std::make_shared<Task>();
  task->fn = std::move(fn);
  task->stats = &stats_;
  task->op = op;
  task->bytes = bytes;
  if (trace::enabled()) task->issued_us = trace::now_us();
  stats_.add_issue(bytes);
  {
    std::lock_guard lk(mu_);
    queue_.push_back(task);
  }
  cv_.notify_one();
  return task;
}

WorkPtr MpiCommunicator::all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
  const int n = checked_count(count);
  const size_t bytes = count * dtype_size(t);
  return enqueue("all_reduce",
      [=, this] {
        run_on_host(send, bytes, recv, bytes, [&](const void* s, void* r) {
          GPT_MPI_CHECK(MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, n, mpi_type(t), mpi_sum(t), comm_));
          if (op == ReduceOp::kAvg) scale(r, count, t, 1.f / float(size_));
        });
      },
      ring_bytes(2, bytes));
}

WorkPtr MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t,
                                              ReduceOp op) {
  const int n = checked_count(recv_count);
  checked_count(recv_count * size_t(size_));
  const size_t es = dtype_size(t);
  const bool in_place = static_cast<const char*>(send) + rank_ * recv_count * es == static_cast<char*>(recv);
  return enqueue("reduce_scatter", 
      [=, this] {
        run_on_host(send, recv_count * size_t(size_) * es, recv, recv_count * es, [&](const void* s, void* r) {
          if (in_place) {
            // MPI's in-place form leaves the result at the start of the buffer;
            // ours keeps it at this rank's offset.
            void* full = const_cast<void*>(s);
            GPT_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, full, n, mpi_type(t), mpi_sum(t), comm_));
            if (rank_ != 0) std::memmove(r, full, recv_count * es);
          } else {
            GPT_MPI_CHECK(MPI_Reduce_scatter_block(s, r, n, mpi_type(t), mpi_sum(t), comm_));
          }
          if (op == ReduceOp::kAvg) scale(r, recv_count, t, 1.f / float(size_));
        });
      },
      ring_bytes(1, recv_count * size_t(size_) * es));
}

WorkPtr MpiCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType t) {
  const int n = checked_count(send_count);
  checked_count(send_count * size_t(size_));
  const size_t es = dtype_size(t);
  const bool in_place = static_cast<const char*>(send) == static_cast<char*>(recv) + rank_ * send_count * es;
  return enqueue("all_gather", 
      [=, this] {
        run_on_host(send, send_count * es, recv, send_count * size_t(size_) * es, [&](const void* s, void* r) {
          GPT_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : s, n, mpi_type(t), r, n, mpi_type(t), comm_));
        });
      },
      ring_bytes(1, send_count * size_t(size_) * es));
}

WorkPtr MpiCommunicator::broadcast_async(void* buf, size_t count, DType t, int root) {
  const int n = checked_count(count);
  GPT_CHECK(root >= 0 && root < size_, "broadcast root {} outside communicator of {}", root, size_);
  const size_t bytes = count * dtype_size(t);
  return enqueue("broadcast", 
      [=, this] {
        run_on_host(buf, bytes, buf, bytes,
                    [&](const void*, void* r) { GPT_MPI_CHECK(MPI_Bcast(r, n, mpi_type(t), root, comm_)); });
      },
      ring_bytes(1, bytes));
}

WorkPtr MpiCommunicator::barrier_async() {
  return enqueue("barrier", [this] { GPT_MPI_CHECK(MPI_Barrier(comm_)); }, 0);
}

}  // namespace gpt
