#include "comm/mpi_communicator.hpp"

#include <unistd.h>

#include <climits>
#include <cstring>

#include "comm/mpi_check.hpp"
#include "core/bf16.hpp"
#include "core/timer.hpp"

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

}  // namespace

struct MpiCommunicator::Task final : Work {
  std::function<void()> fn;
  CommStats* stats = nullptr;
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
    cv.wait(lk, [&] { return done; });
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
    try {
      task->fn();
    } catch (...) {
      task->error = std::current_exception();
    }
    stats_.add_time(t.seconds());
    task->fn = nullptr;
    {
      std::lock_guard lk(task->mu);
      task->done = true;
    }
    task->cv.notify_all();
  }
}

WorkPtr MpiCommunicator::enqueue(std::function<void()> fn, int64_t bytes) {
  auto task = std::make_shared<Task>();
  task->fn = std::move(fn);
  task->stats = &stats_;
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
  return enqueue(
      [=, this] {
        GPT_MPI_CHECK(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, mpi_type(t), mpi_sum(t), comm_));
        if (op == ReduceOp::kAvg) scale(recv, count, t, 1.f / float(size_));
      },
      ring_bytes(2, count * dtype_size(t)));
}

WorkPtr MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType t,
                                              ReduceOp op) {
  const int n = checked_count(recv_count);
  checked_count(recv_count * size_t(size_));
  const size_t es = dtype_size(t);
  const bool in_place = static_cast<const char*>(send) + rank_ * recv_count * es == static_cast<char*>(recv);
  return enqueue(
      [=, this] {
        if (in_place) {
          // MPI's in-place form leaves the result at the start of the buffer;
          // ours keeps it at this rank's offset.
          void* full = const_cast<void*>(send);
          GPT_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, full, n, mpi_type(t), mpi_sum(t), comm_));
          if (rank_ != 0) std::memmove(recv, full, recv_count * es);
        } else {
          GPT_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, mpi_type(t), mpi_sum(t), comm_));
        }
        if (op == ReduceOp::kAvg) scale(recv, recv_count, t, 1.f / float(size_));
      },
      ring_bytes(1, recv_count * size_t(size_) * es));
}

WorkPtr MpiCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType t) {
  const int n = checked_count(send_count);
  checked_count(send_count * size_t(size_));
  const size_t es = dtype_size(t);
  const bool in_place = static_cast<const char*>(send) == static_cast<char*>(recv) + rank_ * send_count * es;
  return enqueue(
      [=, this] {
        GPT_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(t), recv, n, mpi_type(t), comm_));
      },
      ring_bytes(1, send_count * size_t(size_) * es));
}

WorkPtr MpiCommunicator::broadcast_async(void* buf, size_t count, DType t, int root) {
  const int n = checked_count(count);
  GPT_CHECK(root >= 0 && root < size_, "broadcast root {} outside communicator of {}", root, size_);
  return enqueue([=, this] { GPT_MPI_CHECK(MPI_Bcast(buf, n, mpi_type(t), root, comm_)); },
                 ring_bytes(1, count * dtype_size(t)));
}

WorkPtr MpiCommunicator::barrier_async() {
  return enqueue([this] { GPT_MPI_CHECK(MPI_Barrier(comm_)); }, 0);
}

}  // namespace gpt
