// Communicator over MPI on host buffers.
//
// Async collectives are executed in issue order by a progress thread that
// owns this communicator's MPI_Comm (a duplicate of the one given), so they
// progress while the caller computes: Open MPI's non-blocking collectives
// would only advance inside MPI calls, and the trainer's compute is Eigen
// GEMMs that make none. This needs MPI_THREAD_MULTIPLE (see MpiEnv), because
// the threads of several communicators (mesh groups) call MPI concurrently.
//
// fp32 reduces with MPI_FLOAT; bf16 travels as 16-bit words with a
// user-defined sum (accumulated in fp32 per pair). Averages are sums scaled
// by 1/size() afterwards.
//
// Device buffers (CUDA builds): a collective whose buffers are device memory
// is staged through pinned host memory on the progress thread (copy in, MPI
// on the host copy, copy out), so several ranks can share one GPU without
// NCCL. With a compute stream set (set_compute_stream), issuing a collective
// first waits for that stream, so its inputs are ready; without one the
// caller must have synchronised it. The outputs are on the device when
// wait() returns.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/work_pool.hpp"

namespace gpt {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  MPI_Comm comm() const { return comm_; }
  void set_compute_stream(void* stream) override { compute_stream_ = stream; }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) override;
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override;
  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count, DType t) override;
  WorkPtr broadcast_async(void* buf, size_t count, DType t, int root) override;
  WorkPtr barrier_async() override;

 private:
  // One collective as data, run by the progress thread (run()): issuing one
  // allocates nothing once the task pool has grown to the most collectives
  // in flight at once.
  enum class Op { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kBarrier };
  struct Call {
    Op op = Op::kBarrier;
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;  // elements: all_reduce's and broadcast's buffer, reduce_scatter's recv, all_gather's send
    DType t = DType::kF32;
    ReduceOp reduce = ReduceOp::kSum;
    int root = 0;
    bool in_place = false;
  };
  static CollectiveNames names(Op op);  // for traces and the watchdog
  struct Task;
  WorkPtr enqueue(const Call& call, int64_t bytes);
  void run(const Call& c);  // on the progress thread
  // Runs fn(send, recv) on host memory: directly, or through pinned staging
  // when either buffer is on a GPU. Called on the progress thread only.
  template <typename Fn>
  void run_on_host(const void* send, size_t send_bytes, void* recv, size_t recv_bytes, const Fn& fn);
  void* staging_ = nullptr;  // pinned host memory (CUDA builds), grown on demand
  size_t staging_bytes_ = 0;
  void* compute_stream_ = nullptr;  // cudaStream_t whose work inputs wait for
  void progress_loop();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::mutex mu_;
  std::condition_variable cv_;
  WorkPool<Task> pool_;  // a task is free once it has run
  // Issued tasks not yet taken by the progress thread: queue_[head_...].
  std::vector<Task*> queue_;
  size_t head_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace gpt
