#include "comm/staged_communicator.hpp"

#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace gpt {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("{} failed: {}", what, cudaGetErrorString(e)));
}

// The inner collective on host copies; wait() copies the result to the device.
class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr inner, std::vector<char> in, std::vector<char> out, void* dst, CommStats* stats)
      : inner_(std::move(inner)), in_(std::move(in)), out_(std::move(out)), dst_(dst), stats_(stats) {}
  bool is_completed() override {
    if (done_) return true;
    if (!inner_->is_completed()) return false;
    finish();
    return true;
  }
  void wait() override {
    if (done_) return;
    Timer t;
    inner_->wait();
    finish();
    stats_->add_exposed(t.seconds());
  }

 private:
  void finish() {
    if (dst_ && !out_.empty())
      cuda_ok(cudaMemcpy(dst_, out_.data(), out_.size(), cudaMemcpyHostToDevice), "staged copy to device");
    stats_->add_time(issued_.seconds());  // issue to completion, staging included
    done_ = true;
  }
  WorkPtr inner_;
  std::vector<char> in_, out_;  // alive until the inner collective is done
  void* dst_;
  CommStats* stats_;
  Timer issued_;
  bool done_ = false;
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

namespace {

// Waits for the compute stream (the input is ready), copies n bytes of the
// device input to a host vector.
std::vector<char> stage_in(const void* src, size_t n, void* stream) {
  cuda_ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  std::vector<char> h(n);
  if (n) cuda_ok(cudaMemcpy(h.data(), src, n, cudaMemcpyDeviceToHost), "staged copy to host");
  return h;
}

}  // namespace

WorkPtr StagedCommunicator::all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
  const size_t bytes = count * dtype_size(t);
  auto in = stage_in(send, bytes, stream_);
  std::vector<char> out(bytes);
  stats_.add_issue(ring_bytes(2, bytes));
  auto w = inner_->all_reduce_async(in.data(), out.data(), count, t, op);
  return std::make_shared<StagedWork>(std::move(w), std::move(in), std::move(out), recv, &stats_);
}

WorkPtr StagedCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t,
                                                 ReduceOp op) {
  const size_t piece = recv_count * dtype_size(t);
  auto in = stage_in(send, piece * size_t(size()), stream_);
  std::vector<char> out(piece);
  stats_.add_issue(ring_bytes(1, piece * size_t(size())));
  auto w = inner_->reduce_scatter_async(in.data(), out.data(), recv_count, t, op);
  return std::make_shared<StagedWork>(std::move(w), std::move(in), std::move(out), recv, &stats_);
}

WorkPtr StagedCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType t) {
  const size_t piece = send_count * dtype_size(t);
  auto in = stage_in(send, piece, stream_);
  std::vector<char> out(piece * size_t(size()));
  stats_.add_issue(ring_bytes(1, piece * size_t(size())));
  auto w = inner_->all_gather_async(in.data(), out.data(), send_count, t);
  return std::make_shared<StagedWork>(std::move(w), std::move(in), std::move(out), recv, &stats_);
}

WorkPtr StagedCommunicator::broadcast_async(void* buf, size_t count, DType t, int root) {
  const size_t bytes = count * dtype_size(t);
  auto in = stage_in(buf, bytes, stream_);
  stats_.add_issue(ring_bytes(1, bytes));
  auto w = inner_->broadcast_async(in.data(), count, t, root);
  // The broadcast result lands in `in` itself: it is the buffer copied back.
  return std::make_shared<StagedWork>(std::move(w), std::vector<char>(), std::move(in), buf, &stats_);
}

}  // namespace gpt
