// Communicator over NCCL on device buffers (compiled when CUDA and NCCL are
// found: GPT_HAVE_NCCL).
//
// Ordering: collectives run on this communicator's own non-blocking stream.
// Before each collective the comm stream waits on an event recorded on the
// compute stream (so inputs are ready); after it, an event is recorded on
// the comm stream. Work::wait() makes the *compute stream* wait on that
// event: the host never blocks. is_completed() queries the event.
//
// Works: each collective's Work (with its events) comes from a pool and is
// reused once its issuer has dropped it and its times have been read, and
// one event marks the compute stream for every collective, so issuing a
// collective creates no CUDA event and allocates nothing (the hot-loop audit,
// tests/gpu/hot_loop.sh, and the allocation audit, tests/alloc_audit.sh,
// hold it to that).
//
// Time: each collective's duration on the comm stream (its start and end
// events), and how long the compute stream waited for it (from where it
// reached its first wait(), an event recorded there, to the collective's
// end, when that is later), are read once both have completed, by
// update_stats() (the trainer calls it where it reads the step's totals),
// and added to stats().time_s and exposed_s: exposure here is the compute
// stream's stall, as on the host it is the caller's. A collective still
// running then counts in a later read. With a --trace, each one read is
// also a slice on its communicator's lane at the GPU's times, and each
// stall one on the lane "<label>: compute stream waiting".
//
// Bootstrap: rank 0 of the MPI group creates the ncclUniqueId and broadcasts
// it over MPI; every rank then joins with ncclCommInitRank on `device`.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/work_pool.hpp"

namespace gpt {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm group, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  // The stream collectives follow and that waits for their results (default: the legacy stream 0).
  void set_compute_stream(void* s) override { compute_ = static_cast<cudaStream_t>(s); }
  void check_health() override;
  void update_stats(bool finish = false) override;
  cudaStream_t comm_stream() const { return stream_; }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) override;
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override;
  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count, DType t) override;
  WorkPtr broadcast_async(void* buf, size_t count, DType t, int root) override;
  WorkPtr barrier_async() override;

 private:
  class NcclWork;  // a collective's handle and timing events (nccl_communicator.cpp)
  // The one place that orders streams, issues a collective (issue(stream))
  // and hands out its Work.
  template <typename Issue>
  WorkPtr launch(CollectiveNames op, const Issue& issue, int64_t bytes);
  static constexpr size_t kPrefill = 64;  // Works made up front (see the constructor)

  int rank_ = 0, size_ = 1, device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t compute_ = nullptr;
  float* barrier_buf_ = nullptr;  // one device float for barrier_async()
  cudaEvent_t ready_ = nullptr;     // recorded on the compute stream before each collective
  WorkPool<NcclWork> works_;  // Works may outlive the communicator
  std::vector<std::shared_ptr<NcclWork>> timing_;  // collectives whose times are not yet read, in issue order
  cudaEvent_t trace_ref_ = nullptr;                // --trace: the GPU's clock against the trace's
  double trace_ref_us_ = 0;
  uint64_t trace_epoch_ = 0;
  int stall_lane_ = -1;
};

}  // namespace gpt
