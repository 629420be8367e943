// A host implementation of the NCCL calls NcclCommunicator makes, for the
// emulated trainer (gpt_train_emulated): "device" memory is host memory
// (host_cuda_runtime.cpp), so each collective is the matching MPI call,
// queued on its stream and run when the host runtime's stream order gets
// to it (host_streams.cpp), after every collective issued before it, so
// ranks, which issue collectives in the same order (as NCCL requires),
// make the MPI calls in that order.
//
// Communicators: ncclGetUniqueId writes a tag (the creating world rank and
// a count) into the id; ncclCommInitRank splits MPI_COMM_WORLD by that tag,
// keyed by the NCCL rank. The split is collective over the world, so every
// world rank must create its communicators in the same order, which
// DeviceMesh2D does (world, shard group, replicate group).
//
// Types: fp32 and bf16 (reduced in fp32, rounded to nearest even, as a
// one-step reduction would be); ops: sum and average.
//
// Faults, for tests of what the host does when a collective cannot finish
// (GPT_EMULATED_NCCL_FAULT; every rank of the job has the same variable):
//  - hang:N makes the process's N-th collective (1 is the first, counted in
//    issue order over all communicators) never finish, on every rank, as
//    when the network fails without NCCL noticing. Collectives issued later
//    never finish either (they are ordered after it).
//  - error:N as hang:N, and ncclCommGetAsyncError reports ncclRemoteError
//    once the stream order reaches it (the GPU runs it and NCCL notices),
//    not when it is issued.
//  - stall:N@R: world rank R's host stops for good when it issues its N-th
//    collective (a deadlock, a read that never returns); on the other ranks
//    that collective never finishes, since R never joins it.
// No rank is left blocked in an MPI call waiting for a rank that stopped:
// the collectives that cannot finish make no MPI call at all.
#include <cuda_bf16.h>
#include <mpi.h>
#include <nccl.h>

#include "api_log.hpp"
#include "host_streams.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

struct ncclComm {
  MPI_Comm comm;
  int rank, size;
};

namespace {

size_t type_size(ncclDataType_t t) { return t == ncclFloat32 ? 4 : 2; }
bool supported(ncclDataType_t t) { return t == ncclFloat32 || t == ncclBfloat16; }

std::vector<float> widen(const void* p, size_t n, ncclDataType_t t) {
  std::vector<float> v(n);
  if (t == ncclFloat32) {
    std::memcpy(v.data(), p, n * 4);
  } else {
    const auto* b = static_cast<const __nv_bfloat16*>(p);
    for (size_t i = 0; i < n; ++i) v[i] = __bfloat162float(b[i]);
  }
  return v;
}
void narrow(void* p, const float* v, size_t n, ncclDataType_t t) {
  if (t == ncclFloat32) {
    std::memcpy(p, v, n * 4);
  } else {
    auto* b = static_cast<__nv_bfloat16*>(p);
    for (size_t i = 0; i < n; ++i) b[i] = __float2bfloat16_rn(v[i]);
  }
}
void finish_op(std::vector<float>& v, ncclRedOp_t op, int size) {
  if (op == ncclAvg)
    for (float& x : v) x /= float(size);
}

struct Fault {
  long at = 0;          // the collective that never finishes (0: none)
  bool report = false;  // error: ncclCommGetAsyncError reports it
  int stall_rank = -1;  // stall: the world rank whose host stops there
};
Fault fault_from_environment() {
  const char* v = std::getenv("GPT_EMULATED_NCCL_FAULT");
  if (!v || !*v) return {};
  const std::string s = v;
  const size_t colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  char* end = nullptr;
  const long n = colon == std::string::npos ? 0 : std::strtol(s.c_str() + colon + 1, &end, 10);
  long rank = -1;
  if (kind == "stall" && end && *end == '@') rank = std::strtol(end + 1, &end, 10);
  const bool ok = (kind == "hang" || kind == "error" || (kind == "stall" && rank >= 0)) && n >= 1 && end && !*end;
  if (!ok) {
    std::fprintf(stderr, "host NCCL: GPT_EMULATED_NCCL_FAULT=%s is not hang:N, error:N or stall:N@RANK (N >= 1)\n", v);
    std::exit(2);
  }
  return {n, kind == "error", int(rank)};
}
const Fault g_fault = fault_from_environment();
long g_issued = 0;       // collectives issued so far
bool g_failed = false;   // the faulty collective has been reached with report set

// Queues a collective's work, or, for the faulty one, work that never runs
// (or, on a stalling rank, never returns).
void issue(cudaStream_t stream, std::function<void()> work) {
  if (++g_issued != g_fault.at) return host_cuda::enqueue_collective(stream, std::move(work));
  if (g_fault.stall_rank >= 0) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == g_fault.stall_rank) {
      std::fprintf(stderr, "host NCCL: rank %d stalls at collective %ld (GPT_EMULATED_NCCL_FAULT)\n", rank, g_issued);
      // A GPU runs what is queued on it without its host: the collectives
      // before this one still meet the other ranks'.
      host_cuda::synchronize_device("a stalling rank's GPU");
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  host_cuda::enqueue_stuck_collective(stream, [] { g_failed = g_fault.report; });
}

}  // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static int count = 0;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::memset(id, 0, sizeof *id);
  const int tag = world_rank * 4096 + count++;
  std::memcpy(id->internal, &tag, sizeof tag);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  int tag = 0;
  std::memcpy(&tag, id.internal, sizeof tag);
  auto* c = new ncclComm{MPI_COMM_NULL, rank, nranks};
  if (MPI_Comm_split(MPI_COMM_WORLD, tag, rank, &c->comm) != MPI_SUCCESS) {
    delete c;
    return ncclSystemError;
  }
  int size = 0;
  MPI_Comm_size(c->comm, &size);
  if (size != nranks) {
    MPI_Comm_free(&c->comm);
    delete c;
    return ncclInvalidUsage;
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  host_cuda::synchronize_device("ncclCommDestroy");  // its queued collectives run first
  MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

// A failing MPI call ends the job (MPI_ERRORS_ARE_FATAL): only the
// injected fault is reported here.
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* r) {
  *r = g_failed ? ncclRemoteError : ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  if (r == ncclSuccess) return "no error";
  if (r == ncclRemoteError) return "remote process exited or there was a network error (GPT_EMULATED_NCCL_FAULT)";
  return "host NCCL error";
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  host_cuda::count_call("nccl.all_reduce");
  if (!supported(t) || (op != ncclSum && op != ncclAvg)) return ncclInvalidArgument;
  issue(stream, [=] {
    std::vector<float> v = widen(send, count, t);
    MPI_Allreduce(MPI_IN_PLACE, v.data(), int(count), MPI_FLOAT, MPI_SUM, comm->comm);
    finish_op(v, op, comm->size);
    narrow(recv, v.data(), count, t);
  });
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  host_cuda::count_call("nccl.reduce_scatter");
  if (!supported(t) || (op != ncclSum && op != ncclAvg)) return ncclInvalidArgument;
  issue(stream, [=] {
    // Widened copies: send and recv may overlap (in place: recv is this
    // rank's piece of send).
    const std::vector<float> v = widen(send, recv_count * size_t(comm->size), t);
    std::vector<float> piece(recv_count);
    MPI_Reduce_scatter_block(v.data(), piece.data(), int(recv_count), MPI_FLOAT, MPI_SUM, comm->comm);
    finish_op(piece, op, comm->size);
    narrow(recv, piece.data(), recv_count, t);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
  host_cuda::count_call("nccl.all_gather");
  if (!supported(t)) return ncclInvalidArgument;
  const size_t bytes = send_count * type_size(t);
  issue(stream, [=] {
    const std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
    MPI_Allgather(mine.data(), int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, comm->comm);
  });
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  host_cuda::count_call("nccl.broadcast");
  if (!supported(t)) return ncclInvalidArgument;
  const size_t bytes = count * type_size(t);
  issue(stream, [=] {
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    MPI_Bcast(recv, int(bytes), MPI_BYTE, root, comm->comm);
  });
  return ncclSuccess;
}
