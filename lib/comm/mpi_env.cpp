#include "comm/mpi_env.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/error_report.hpp"

namespace gpt {

NodeLayout node_layout(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  NodeLayout n;
  MPI_Comm_rank(node, &n.local_rank);
  MPI_Comm_size(node, &n.local_size);
  MPI_Comm_free(&node);
  int leaders = n.local_rank == 0 ? 1 : 0, minmax[2] = {n.local_size, -n.local_size};
  MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, minmax, 2, MPI_INT, MPI_MIN, comm);
  n.num_nodes = leaders;
  n.uniform = minmax[0] == -minmax[1];
  return n;
}

std::vector<char> gather_on_node(MPI_Comm comm, const void* mine, int bytes) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int size = 1;
  MPI_Comm_size(node, &size);
  std::vector<char> all(size_t(size) * size_t(bytes));
  MPI_Allgather(mine, bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, node);
  MPI_Comm_free(&node);
  return all;
}

int ranks_on_node_with(MPI_Comm comm, const std::string& key) {
  constexpr size_t kLen = 64;
  std::string mine = key.substr(0, kLen);
  mine.resize(kLen, '\0');
  const std::vector<char> all = gather_on_node(comm, mine.data(), int(kLen));
  int same = 0;
  for (size_t at = 0; at < all.size(); at += kLen) same += mine.compare(0, kLen, all.data() + at, kLen) == 0;
  return same;
}

MpiEnv::MpiEnv(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw std::runtime_error(
        "the MPI library provides thread level " + std::to_string(provided) +
        ", this program needs MPI_THREAD_MULTIPLE (communicators progress on their own threads)");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  const NodeLayout nodes = node_layout(MPI_COMM_WORLD);
  local_rank_ = nodes.local_rank;
  local_size_ = nodes.local_size;
  num_nodes_ = nodes.num_nodes;
  uniform_ = nodes.uniform;
  char host[256] = "?";
  gethostname(host, sizeof host);
  host_ = host;
  MPI_Comm_dup(MPI_COMM_WORLD, &reports_);  // abort()'s reports only: never mixed with other traffic
}

std::string MpiEnv::slurm_summary() const {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job) return "";
  auto get = [](const char* k) -> std::string {
    const char* v = std::getenv(k);
    return v ? v : "unset";
  };
  const std::string procid = get("SLURM_PROCID"), localid = get("SLURM_LOCALID");
  const bool agree = procid == std::to_string(rank_) && localid == std::to_string(local_rank_);
  return "SLURM_JOB_ID=" + std::string(job) + " SLURM_PROCID=" + procid + " SLURM_LOCALID=" + localid +
         (agree ? " (agree with MPI)"
                : " (differ from MPI rank " + std::to_string(rank_) + " / local " + std::to_string(local_rank_) +
                      ": launched by mpirun inside the allocation?)");
}

MpiEnv::~MpiEnv() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (reports_ != MPI_COMM_NULL) MPI_Comm_free(&reports_);
  MPI_Finalize();
}

// MPI_Initialized and MPI_Finalized may be called from any thread at any time.
[[noreturn]] static void end_job(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // not reached after MPI_Abort
}

namespace {

constexpr int kReportTag = 1, kAckTag = 2;
using Clock = std::chrono::steady_clock;

// A report on the wire: '1' or '0' (same_on_all_ranks), the host, '\0', the message.
std::string encode(const ErrorReport& r) {
  return std::string(1, r.same_on_all_ranks ? '1' : '0') + r.host + '\0' + r.message;
}

ErrorReport decode(int rank, const std::string& wire) {
  ErrorReport r;
  r.rank = rank;
  r.same_on_all_ranks = !wire.empty() && wire[0] == '1';
  const size_t nul = wire.find('\0');
  r.host = wire.substr(1, nul == std::string::npos ? std::string::npos : nul - 1);
  r.message = nul == std::string::npos ? std::string() : wire.substr(nul + 1);
  return r;
}

void print(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) std::fprintf(stderr, "%s\n", l.c_str());
  std::fflush(stderr);
}

}  // namespace

// Rank 0 collects the other ranks' reports until every rank has sent one or
// kCollect has passed since its own error, acknowledging each, then prints
// error_lines() and ends the job. Any other rank sends its report to rank 0
// and waits: acknowledged, rank 0 will print it and end the job (the rank
// waits kAbortWait for that, then prints its own line); not acknowledged
// within kAckWait (rank 0 has no error of its own: it is computing or
// waiting in a collective), it prints its own line and ends the job itself.
// The reports travel on reports_, a communicator nothing else uses, with
// point-to-point calls only, so they never meet a collective another rank
// is inside (MPI_THREAD_MULTIPLE lets them pass a stuck progress thread).
void MpiEnv::abort(const std::string& message, int code, bool same_on_all_ranks) const {
  const ErrorReport own{rank_, host_, message, same_on_all_ranks};
  if (size_ == 1) {
    print(error_lines({own}, 1));
    MPI_Finalize();
    std::exit(code);
  }
  constexpr auto kCollect = std::chrono::seconds(2), kAckWait = std::chrono::seconds(3),
                 kAbortWait = std::chrono::seconds(10);
  constexpr auto kPoll = std::chrono::milliseconds(1);
  if (rank_ == 0) {
    std::vector<ErrorReport> reports = {own};
    const auto deadline = Clock::now() + kCollect;
    while (int(reports.size()) < size_ && Clock::now() < deadline) {
      int pending = 0, n = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, reports_, &pending, &st);
      if (!pending) {
        std::this_thread::sleep_for(kPoll);
        continue;
      }
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string wire(size_t(n), '\0');
      MPI_Recv(wire.data(), n, MPI_CHAR, st.MPI_SOURCE, kReportTag, reports_, MPI_STATUS_IGNORE);
      MPI_Request ack;
      MPI_Isend(nullptr, 0, MPI_CHAR, st.MPI_SOURCE, kAckTag, reports_, &ack);
      MPI_Request_free(&ack);
      reports.push_back(decode(st.MPI_SOURCE, wire));
    }
    print(error_lines(reports, size_));
    end_job(code);
  }
  // Static: the buffer must outlive the send, and this function never returns.
  static std::string wire;
  wire = encode(own);
  MPI_Request req[2];
  MPI_Isend(wire.data(), int(wire.size()), MPI_CHAR, 0, kReportTag, reports_, &req[0]);
  MPI_Irecv(nullptr, 0, MPI_CHAR, 0, kAckTag, reports_, &req[1]);
  const auto start = Clock::now();
  for (int acked = 0; !acked;) {
    MPI_Test(&req[1], &acked, MPI_STATUS_IGNORE);
    if (acked) break;
    if (Clock::now() - start > kAckWait) {
      print(error_lines({own}, size_));
      end_job(code);
    }
    std::this_thread::sleep_for(kPoll);
  }
  std::this_thread::sleep_for(kAbortWait);  // rank 0 prints this rank's error and ends the job
  print(error_lines({own}, size_));
  end_job(code);
}

void MpiEnv::abort_now(const std::string& message, int code) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  end_job(code);
}

}  // namespace gpt
