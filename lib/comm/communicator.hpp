// The collective-communication interface the strategies program against.
//
// Rules every caller keeps (as in PyTorch c10d):
//  * Every rank of a communicator issues the same collectives in the same
//    order, with the same counts and dtypes.
//  * An async collective's buffers must stay alive and untouched until its
//    Work has completed (wait() returned, or is_completed() returned true).
//  * wait() rethrows the collective's error. On a GPU communicator, waiting
//    means the caller's compute stream waits (no host sync).
//  * Collectives run on the communicator's own progress engine (an MPI
//    progress thread, or NCCL's stream), so they overlap the caller's compute.
//
// Buffers: `count` is in elements of `dtype`. Passing send == recv makes
// all_reduce in place; reduce_scatter in place means recv == send + rank *
// recv_count, all_gather in place means send == recv + rank * send_count.
// Counts that do not divide by size() are the caller's concern: pad with
// shard_range() (core/shard.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace gpt {

enum class DType { kF32, kBF16 };
enum class ReduceOp { kSum, kAvg };

constexpr size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
std::string to_string(DType t);

// A collective's names in traces: the operation, and a caller's wait for it
// (the MPI communicator's and the NCCL communicator's alike).
struct CollectiveNames {
  const char* op;
  const char* wait;
};
inline constexpr CollectiveNames kAllReduceNames{"all_reduce", "wait all_reduce"},
    kReduceScatterNames{"reduce_scatter", "wait reduce_scatter"}, kAllGatherNames{"all_gather", "wait all_gather"},
    kBroadcastNames{"broadcast", "wait broadcast"}, kBarrierNames{"barrier", "wait barrier"};

// A handle on one async collective.
class Work {
 public:
  virtual ~Work() = default;
  // Never blocks. True once the result is in the output buffer.
  virtual bool is_completed() = 0;
  // Blocks until completion (time spent here counts as exposed
  // communication; on a GPU communicator the compute stream is what waits,
  // and its stall is what counts) and rethrows the collective's error, if any.
  virtual void wait() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// Totals since the last reset(). Bytes are what this rank sends under ring
// algorithms, with n = communicator size and S = the collective's full
// buffer in bytes (all_reduce: the buffer; reduce_scatter: the input;
// all_gather: the output; broadcast: the buffer), rounded down to integers:
//   all_reduce 2 (n-1) S / n; reduce_scatter, all_gather, broadcast (n-1) S / n;
//   barrier 0. A communicator of one rank sends nothing.
struct CommTotals {
  int64_t bytes = 0;
  int64_t calls = 0;
  double time_s = 0;     // wall time the collectives took on the progress engine
  double exposed_s = 0;  // time the caller (on a GPU: its compute stream) spent blocked waiting for them
};

class CommStats {
 public:
  void add_issue(int64_t bytes);
  void add_time(double s);
  void add_exposed(double s);
  CommTotals totals() const;
  void reset();

 private:
  mutable std::mutex mu_;
  CommTotals t_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "mpi" or "nccl"

  virtual WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType t, ReduceOp op) = 0;
  // send: size() * recv_count elements; recv: recv_count elements (rank's piece).
  virtual WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) = 0;
  // send: send_count elements; recv: size() * send_count elements in rank order.
  virtual WorkPtr all_gather_async(const void* send, void* recv, size_t send_count, DType t) = 0;
  virtual WorkPtr broadcast_async(void* buf, size_t count, DType t, int root) = 0;
  virtual WorkPtr barrier_async() = 0;

  // Blocking forms: the async form followed by wait().
  void all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op);
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op);
  void all_gather(const void* send, void* recv, size_t send_count, DType t);
  void broadcast(void* buf, size_t count, DType t, int root);
  void barrier();

  // GPU communicators: the stream whose work a collective's input waits
  // for and whose later work waits for its result (a cudaStream_t; the host
  // communicators ignore it).
  virtual void set_compute_stream(void* /*stream*/) {}
  // GPU communicators time their collectives, and the compute stream's
  // waits for them, with events that complete after the host has moved on:
  // this adds to stats() those that have completed since the last call
  // (with `finish`, it first waits for all of them: the end of a run). The
  // host communicators account as they go.
  virtual void update_stats(bool /*finish*/ = false) {}
  // Throws StuckError when the communicator has failed asynchronously (NCCL:
  // ncclCommGetAsyncError); the host communicators fail synchronously.
  // Polled while the host waits for the GPU (core/cuda/host_wait.hpp).
  virtual void check_health() {}

  CommStats& stats() { return stats_; }
  // Names this communicator's lane in traces ("shard", "replicate", ...);
  // until then its collectives are not traced.
  void set_trace_label(const std::string& label);

 protected:
  // Bytes this rank sends for a collective, per the convention above.
  int64_t ring_bytes(double factor, size_t full_bytes) const;
  CommStats stats_;
  std::string trace_label_;
  int trace_lane_ = -1;
};

// A Work that is already complete (communicators of one rank).
class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

}  // namespace gpt
