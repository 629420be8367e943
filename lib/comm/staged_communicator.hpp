// A host communicator (MPI) used on device buffers, for several ranks that
// share one GPU (NCCL needs one GPU per rank): each collective waits for
// the compute stream, copies its input to host memory, runs the inner
// collective there, and copies the result back when waited on. Correct and
// simple, not fast: the testing path for multi-rank GPU strategies on one
// GPU. Compiled with CUDA (GPT_HAVE_CUDA).
#pragma once

#include <memory>

#include "comm/communicator.hpp"

namespace gpt {

class StagedCommunicator final : public Communicator {
 public:
  explicit StagedCommunicator(std::unique_ptr<Communicator> inner);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name() + "+staged"; }
  void set_compute_stream(void* stream) override { stream_ = stream; }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) override;
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override;
  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count, DType t) override;
  WorkPtr broadcast_async(void* buf, size_t count, DType t, int root) override;
  WorkPtr barrier_async() override { return inner_->barrier_async(); }

 private:
  std::unique_ptr<Communicator> inner_;
  void* stream_ = nullptr;  // cudaStream_t
};

}  // namespace gpt
