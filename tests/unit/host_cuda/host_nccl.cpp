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
#include <cuda_bf16.h>
#include <mpi.h>
#include <nccl.h>

#include "api_log.hpp"
#include "host_streams.hpp"

#include <cstring>
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
  host_cuda::synchronize_device();  // its queued collectives run first
  MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* r) {
  *r = ncclSuccess;  // a failing MPI call ends the job (MPI_ERRORS_ARE_FATAL)
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "host NCCL error"; }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  host_cuda::count_call("nccl.all_reduce");
  if (!supported(t) || (op != ncclSum && op != ncclAvg)) return ncclInvalidArgument;
  host_cuda::enqueue_collective(stream, [=] {
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
  host_cuda::enqueue_collective(stream, [=] {
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
  host_cuda::enqueue_collective(stream, [=] {
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
  host_cuda::enqueue_collective(stream, [=] {
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    MPI_Bcast(recv, int(bytes), MPI_BYTE, root, comm->comm);
  });
  return ncclSuccess;
}
