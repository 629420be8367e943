#include "comm/nccl_communicator.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/cuda/host_wait.hpp"
#include "core/trace.hpp"

#include "comm/mpi_check.hpp"

namespace gpt {
namespace {

std::string gpu_error_message(const std::string& what, const char* stmt, const char* file, int line) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = "?";
  gethostname(host, sizeof host);
  return fmt::format("{} failed on rank {} ({}): {} at {}:{}", stmt, rank, host, what, file, line);
}
[[noreturn]] void throw_gpu_error(const std::string& what, const char* stmt, const char* file, int line) {
  throw CommError(gpu_error_message(what, stmt, file, line));
}
// An asynchronous NCCL error: the communicator's queued collectives will
// never finish, so this is a StuckError (core/error.hpp), not a CommError.
void check_async_error(ncclComm_t comm, const char* file, int line) {
  ncclResult_t r = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm, &r);
  if (q != ncclSuccess) throw_gpu_error(ncclGetErrorString(q), "ncclCommGetAsyncError", file, line);
  if (r != ncclSuccess && r != ncclInProgress)
    throw StuckError(gpu_error_message(ncclGetErrorString(r), "an NCCL collective (asynchronous error)", file, line));
}

}  // namespace
}  // namespace gpt

#define GPT_CUDA_CHECK(stmt)                                                                          \
  do {                                                                                                \
    cudaError_t e_ = (stmt);                                                                          \
    if (e_ != cudaSuccess) ::gpt::throw_gpu_error(cudaGetErrorString(e_), #stmt, __FILE__, __LINE__); \
  } while (0)
#define GPT_NCCL_CHECK(stmt)                                                                          \
  do {                                                                                                \
    ncclResult_t r_ = (stmt);                                                                         \
    if (r_ != ncclSuccess) ::gpt::throw_gpu_error(ncclGetErrorString(r_), #stmt, __FILE__, __LINE__); \
  } while (0)

namespace gpt {

namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::kF32 ? ncclFloat32 : ncclBfloat16; }
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclAvg; }

}  // namespace

// A collective's handle. Its events are created with it and kept while the
// communicator's pool reuses it: an event recorded again may have an
// earlier cudaStreamWaitEvent on it still pending, and that wait keeps the
// record it was issued after, as CUDA specifies. start/end bracket the
// collective on the comm stream; arrive marks where the compute stream
// reached its first wait() (the stall is end - arrive, when positive).
class NcclCommunicator::NcclWork final : public Work {
 public:
  explicit NcclWork(ncclComm_t comm) : comm_(comm) {
    GPT_CUDA_CHECK(cudaEventCreate(&start_));
    GPT_CUDA_CHECK(cudaEventCreate(&end_));
    GPT_CUDA_CHECK(cudaEventCreate(&arrive_));
  }
  ~NcclWork() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
    cudaEventDestroy(arrive_);
  }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // For a new collective, issued on behalf of `compute` at host time
  // `issued_us` (traces).
  void begin(cudaStream_t compute, CollectiveNames op, double issued_us, int64_t bytes) {
    compute_ = compute;
    waited_ = false;
    op_ = op;
    issued_us_ = issued_us;
    bytes_ = bytes;
  }

  bool is_completed() override {
    check_async();
    const cudaError_t q = cudaEventQuery(end_);
    if (q == cudaErrorNotReady) return false;
    GPT_CUDA_CHECK(q);
    return true;
  }
  void wait() override {
    check_async();
    if (!waited_) GPT_CUDA_CHECK(cudaEventRecord(arrive_, compute_));
    waited_ = true;
    GPT_CUDA_CHECK(cudaStreamWaitEvent(compute_, end_, 0));  // the compute stream waits, not the host
  }

 private:
  friend class NcclCommunicator;
  void check_async() { check_async_error(comm_, __FILE__, __LINE__); }
  cudaEvent_t start_ = nullptr, end_ = nullptr, arrive_ = nullptr;
  cudaStream_t compute_ = nullptr;
  ncclComm_t comm_;
  bool waited_ = false;
  CollectiveNames op_{"", ""};
  double issued_us_ = 0;
  int64_t bytes_ = 0;
};

NcclCommunicator::NcclCommunicator(MPI_Comm group, int device) : device_(device) {
  GPT_MPI_CHECK(MPI_Comm_rank(group, &rank_));
  GPT_MPI_CHECK(MPI_Comm_size(group, &size_));
  GPT_CUDA_CHECK(cudaSetDevice(device_));
  ncclUniqueId id;
  if (rank_ == 0) GPT_NCCL_CHECK(ncclGetUniqueId(&id));
  GPT_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group));
  GPT_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  GPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  GPT_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
  GPT_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  GPT_CUDA_CHECK(cudaEventCreate(&trace_ref_));
  // Collectives whose times are not yet read hold their Works: the pool
  // and the list grow to as many as the host issues ahead of the GPU, which
  // depends on timing; made up front so that a step that happens to run
  // further ahead than any before does not create events in the loop.
  works_.fill(kPrefill, [&] { return std::make_shared<NcclWork>(comm_); });
  timing_.reserve(4 * kPrefill);
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_) cudaStreamSynchronize(stream_);
  timing_.clear();  // their times are no longer read (update_stats(true) reads them at a run's end)
  if (trace_ref_) cudaEventDestroy(trace_ref_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (ready_) cudaEventDestroy(ready_);
  if (comm_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::check_health() { check_async_error(comm_, __FILE__, __LINE__); }

template <typename Issue>
WorkPtr NcclCommunicator::launch(CollectiveNames op, const Issue& issue, int64_t bytes) {
  GPT_CUDA_CHECK(cudaSetDevice(device_));
  // A Work its issuer has dropped and whose times have been read: its
  // events may be recorded again.
  const std::shared_ptr<NcclWork> work =
      works_.take([](NcclWork&) { return true; }, [&] { return std::make_shared<NcclWork>(comm_); });
  work->begin(compute_, op, trace::enabled() ? trace::now_us() : 0, bytes);
  GPT_CUDA_CHECK(cudaEventRecord(ready_, compute_));
  GPT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  GPT_CUDA_CHECK(cudaEventRecord(work->start_, stream_));
  GPT_NCCL_CHECK(issue(stream_));
  GPT_CUDA_CHECK(cudaEventRecord(work->end_, stream_));
  stats_.add_issue(bytes);
  // Read here too when the list is full, for callers that never read the
  // totals (a benchmark's loop): the times the host has not asked for still
  // free their Works.
  if (timing_.size() == timing_.capacity()) update_stats();
  timing_.push_back(work);
  return work;
}

// A collective is read once its end has been reached and, if it was waited
// for, the compute stream's arrival too; one never waited for is read once
// its issuer has dropped it (only the pool and this list hold it). Not
// blocking unless `finish`.
void NcclCommunicator::update_stats(bool finish) {
  const bool tracing = trace::enabled() && trace_lane_ >= 0;
  if (tracing && trace_epoch_ != trace::epoch()) {
    // The GPU's clock against the trace's: an event reached while the host
    // waits for it, read right after (once per trace, not in the hot loop).
    GPT_CUDA_CHECK(cudaEventRecord(trace_ref_, stream_));
    cuda::wait_event(trace_ref_, "the trace's clock reference");
    trace_ref_us_ = trace::now_us();
    trace_epoch_ = trace::epoch();
    if (stall_lane_ < 0) stall_lane_ = trace::lane(trace_label_ + ": compute stream waiting");
  }
  const auto reached = [&](cudaEvent_t e) {
    if (finish) cuda::wait_event(e, "the collectives' timing at the end of the run");
    const cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) return false;
    GPT_CUDA_CHECK(q);
    return true;
  };
  const auto ms = [](cudaEvent_t a, cudaEvent_t b) {
    float t = 0;
    GPT_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    return double(t);
  };
  // The collectives run on one stream in issue order: once one has not
  // ended, neither has any after it (so a read costs no query of those).
  size_t kept = 0, i = 0;
  bool ended = true;
  for (; i < timing_.size(); ++i) {
    std::shared_ptr<NcclWork>& w = timing_[i];
    const bool dropped = w.use_count() == 2;  // the pool's and this list's
    const bool due = w->waited_ || dropped || finish;
    if (due && !reached(w->end_)) ended = false;
    if (!ended) break;
    if (!due || (w->waited_ && !reached(w->arrive_))) {
      if (kept != i) timing_[kept] = std::move(w);
      ++kept;
      continue;
    }
    const double run_ms = ms(w->start_, w->end_);
    const double stall_ms = w->waited_ ? std::max(0.0, ms(w->arrive_, w->end_)) : 0.0;
    stats_.add_time(run_ms / 1e3);
    stats_.add_exposed(stall_ms / 1e3);
    if (tracing && trace_epoch_ == trace::epoch() && w->issued_us_ > 0) {
      static std::atomic<uint64_t> next_id{uint64_t(1) << 40};  // apart from the MPI communicator's ids
      const double begin_us = trace_ref_us_ + 1e3 * ms(trace_ref_, w->start_);
      const double end_us = begin_us + 1e3 * run_ms;
      trace::record({w->op_.op, "comm", -1, trace_lane_, false, 0, begin_us, end_us - begin_us, w->bytes_});
      trace::record({w->op_.op, "collective", -1, trace_lane_, true, next_id++, w->issued_us_,
                     std::max(0.0, end_us - w->issued_us_), w->bytes_});
      if (stall_ms > 0)
        trace::record({w->op_.wait, "comm", -1, stall_lane_, false, 0, end_us - 1e3 * stall_ms, 1e3 * stall_ms, -1});
    }
  }
  for (; i < timing_.size(); ++i, ++kept)
    if (kept != i) timing_[kept] = std::move(timing_[i]);
  timing_.resize(kept);
}

WorkPtr NcclCommunicator::all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
  return launch(
      kAllReduceNames,
      [&](cudaStream_t s) { return ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, s); },
      ring_bytes(2, count * dtype_size(t)));
}

WorkPtr NcclCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) {
  return launch(
      kReduceScatterNames,
      [&](cudaStream_t s) { return ncclReduceScatter(send, recv, recv_count, nccl_type(t), nccl_op(op), comm_, s); },
      ring_bytes(1, recv_count * size_t(size_) * dtype_size(t)));
}

WorkPtr NcclCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType t) {
  return launch(
      kAllGatherNames, [&](cudaStream_t s) { return ncclAllGather(send, recv, send_count, nccl_type(t), comm_, s); },
      ring_bytes(1, send_count * size_t(size_) * dtype_size(t)));
}

WorkPtr NcclCommunicator::broadcast_async(void* buf, size_t count, DType t, int root) {
  GPT_CHECK(root >= 0 && root < size_, "broadcast root {} outside communicator of {}", root, size_);
  return launch(
      kBroadcastNames, [&](cudaStream_t s) { return ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, s); },
      ring_bytes(1, count * dtype_size(t)));
}

WorkPtr NcclCommunicator::barrier_async() {
  // NCCL has no barrier: a one-element all-reduce orders every rank the same way.
  return launch(
      kBarrierNames,
      [&](cudaStream_t s) { return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, s); }, 0);
}

}  // namespace gpt
