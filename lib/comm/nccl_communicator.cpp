#include "comm/nccl_communicator.hpp"

#include <unistd.h>

#include <vector>

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

#define GPT_CUDA_CHECK(stmt)                                                                              \
  do {                                                                                                    \
    cudaError_t e_ = (stmt);                                                                              \
    if (e_ != cudaSuccess) ::gpt::throw_gpu_error(cudaGetErrorString(e_), #stmt, __FILE__, __LINE__);     \
  } while (0)
#define GPT_NCCL_CHECK(stmt)                                                                              \
  do {                                                                                                    \
    ncclResult_t r_ = (stmt);                                                                             \
    if (r_ != ncclSuccess) ::gpt::throw_gpu_error(ncclGetErrorString(r_), #stmt, __FILE__, __LINE__);     \
  } while (0)

namespace gpt {
namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::kF32 ? ncclFloat32 : ncclBfloat16; }
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclAvg; }

}  // namespace

// A collective's handle. Its timing events are created with it and kept
// while the communicator's pool reuses it: an event recorded again may have
// an earlier cudaStreamWaitEvent on it still pending, and that wait keeps
// the record it was issued after, as CUDA specifies.
class NcclCommunicator::NcclWork final : public Work {
 public:
  NcclWork(cudaStream_t compute, ncclComm_t comm, CommStats* stats) : compute_(compute), comm_(comm), stats_(stats) {
    GPT_CUDA_CHECK(cudaEventCreate(&start_));
    GPT_CUDA_CHECK(cudaEventCreate(&end_));
  }
  ~NcclWork() override {
    account();
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
  }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // For a new collective, issued on behalf of `compute`: the last one's
  // time is counted if it has finished.
  void begin(cudaStream_t compute) {
    account();
    compute_ = compute;
    accounted_ = false;
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t end() const { return end_; }

  bool is_completed() override {
    check_async();
    const cudaError_t q = cudaEventQuery(end_);
    if (q == cudaErrorNotReady) return false;
    GPT_CUDA_CHECK(q);
    account();
    return true;
  }
  void wait() override {
    check_async();
    GPT_CUDA_CHECK(cudaStreamWaitEvent(compute_, end_, 0));  // the compute stream waits, not the host
  }

 private:
  void check_async() { check_async_error(comm_, __FILE__, __LINE__); }
  void account() {
    if (accounted_ || cudaEventQuery(end_) != cudaSuccess) return;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, end_) == cudaSuccess) stats_->add_time(ms / 1e3);
    accounted_ = true;
  }
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  cudaStream_t compute_;
  ncclComm_t comm_;
  CommStats* stats_;
  bool accounted_ = true;  // nothing recorded yet
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
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (ready_) cudaEventDestroy(ready_);
  if (comm_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::check_health() { check_async_error(comm_, __FILE__, __LINE__); }

template <typename Issue>
WorkPtr NcclCommunicator::launch(const Issue& issue, int64_t bytes) {
  GPT_CUDA_CHECK(cudaSetDevice(device_));
  // Any Work its issuer has dropped: its events may be recorded again.
  const std::shared_ptr<NcclWork> work = works_.take(
      [](NcclWork&) { return true; }, [&] { return std::make_shared<NcclWork>(compute_, comm_, &stats_); });
  work->begin(compute_);
  GPT_CUDA_CHECK(cudaEventRecord(ready_, compute_));
  GPT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  GPT_CUDA_CHECK(cudaEventRecord(work->start(), stream_));
  GPT_NCCL_CHECK(issue(stream_));
  GPT_CUDA_CHECK(cudaEventRecord(work->end(), stream_));
  stats_.add_issue(bytes);
  return work;
}

WorkPtr NcclCommunicator::all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
  return launch([&](cudaStream_t s) { return ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, s); },
                ring_bytes(2, count * dtype_size(t)));
}

WorkPtr NcclCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t,
                                               ReduceOp op) {
  return launch(
      [&](cudaStream_t s) { return ncclReduceScatter(send, recv, recv_count, nccl_type(t), nccl_op(op), comm_, s); },
      ring_bytes(1, recv_count * size_t(size_) * dtype_size(t)));
}

WorkPtr NcclCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType t) {
  return launch([&](cudaStream_t s) { return ncclAllGather(send, recv, send_count, nccl_type(t), comm_, s); },
                ring_bytes(1, send_count * size_t(size_) * dtype_size(t)));
}

WorkPtr NcclCommunicator::broadcast_async(void* buf, size_t count, DType t, int root) {
  GPT_CHECK(root >= 0 && root < size_, "broadcast root {} outside communicator of {}", root, size_);
  return launch([&](cudaStream_t s) { return ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, s); },
                ring_bytes(1, count * dtype_size(t)));
}

WorkPtr NcclCommunicator::barrier_async() {
  // NCCL has no barrier: a one-element all-reduce orders every rank the same way.
  return launch(
      [&](cudaStream_t s) { return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, s); }, 0);
}

}  // namespace gpt
