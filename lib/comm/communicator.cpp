#include "comm/communicator.hpp"

#include "core/trace.hpp"

#include "core/timer.hpp"

namespace gpt {

void Communicator::set_trace_label(const std::string& label) {
  trace_label_ = "comm " + label;
  trace_lane_ = trace::lane(trace_label_);
}

std::string to_string(DType t) { return t == DType::kF32 ? "f32" : "bf16"; }

void CommStats::add_issue(int64_t bytes) {
  std::lock_guard lk(mu_);
  t_.bytes += bytes;
  t_.calls += 1;
}
void CommStats::add_time(double s) {
  std::lock_guard lk(mu_);
  t_.time_s += s;
}
void CommStats::add_exposed(double s) {
  std::lock_guard lk(mu_);
  t_.exposed_s += s;
}
CommTotals CommStats::totals() const {
  std::lock_guard lk(mu_);
  return t_;
}
void CommStats::reset() {
  std::lock_guard lk(mu_);
  t_ = {};
}

int64_t Communicator::ring_bytes(double factor, size_t full_bytes) const {
  const int64_t n = size();
  if (n <= 1) return 0;
  // factor * (n-1) * S / n in exact integer arithmetic (factor is 1 or 2).
  return static_cast<int64_t>(factor) * (n - 1) * static_cast<int64_t>(full_bytes) / n;
}

void Communicator::all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op) {
  all_reduce_async(send, recv, count, t, op)->wait();
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) {
  reduce_scatter_async(send, recv, recv_count, t, op)->wait();
}
void Communicator::all_gather(const void* send, void* recv, size_t send_count, DType t) {
  all_gather_async(send, recv, send_count, t)->wait();
}
void Communicator::broadcast(void* buf, size_t count, DType t, int root) {
  broadcast_async(buf, count, t, root)->wait();
}
void Communicator::barrier() { barrier_async()->wait(); }

}  // namespace gpt
