#include "comm/mesh.hpp"

#include <charconv>

#include "comm/mpi_check.hpp"
#include "comm/mpi_communicator.hpp"
#ifdef GPT_HAVE_NCCL
#include "comm/nccl_communicator.hpp"
#endif

namespace gpt {

CommBackend parse_comm_backend(const std::string& s) {
  if (s == "mpi") return CommBackend::kMpi;
  if (s == "nccl") return CommBackend::kNccl;
  throw ConfigError(fmt::format("invalid comm = '{}': expected mpi or nccl", s));
}

std::string to_string(const MeshShape& m) { return fmt::format("{}x{}", m.replicas, m.shard); }

MeshShape parse_mesh(const std::string& spec, int world) {
  const auto x = spec.find_first_of("xX");
  auto num = [&](std::string_view s, int& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && out >= 1;
  };
  MeshShape m;
  if (x == std::string::npos || !num(std::string_view(spec).substr(0, x), m.replicas) ||
      !num(std::string_view(spec).substr(x + 1), m.shard)) {
    throw ConfigError(fmt::format("invalid mesh = '{}': expected RxS with positive integers, e.g. 2x4", spec));
  }
  if (int64_t(m.replicas) * m.shard != world) {
    throw ConfigError(fmt::format("invalid mesh = '{}': {} x {} = {} ranks, but the world has {}", spec, m.replicas,
                                  m.shard, int64_t(m.replicas) * m.shard, world));
  }
  return m;
}

MeshShape default_mesh(const MpiEnv& env) {
  if (env.uniform()) return {env.num_nodes(), env.local_size()};
  return {1, env.size()};
}

MeshShape default_mesh(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const NodeLayout n = node_layout(comm);
  if (n.uniform) return {n.num_nodes, n.local_size};
  return {1, size};
}

bool nccl_built() {
#ifdef GPT_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm comm, int device) {
  if (backend == CommBackend::kMpi) return std::make_unique<MpiCommunicator>(comm);
#ifdef GPT_HAVE_NCCL
  return std::make_unique<NcclCommunicator>(comm, device);
#else
  (void)device;
  throw ConfigError("invalid comm = 'nccl': this build has no CUDA/NCCL (configure with a CUDA toolkit present)");
#endif
}

DeviceMesh2D::DeviceMesh2D(const MpiEnv& env, MeshShape shape, CommBackend backend, int device)
    : DeviceMesh2D(env.world(), shape, backend, device) {}

DeviceMesh2D::DeviceMesh2D(MPI_Comm base, MeshShape shape, CommBackend backend, int device) : shape_(shape) {
  int rank = 0, size = 1;
  GPT_MPI_CHECK(MPI_Comm_rank(base, &rank));
  GPT_MPI_CHECK(MPI_Comm_size(base, &size));
  GPT_CHECK(int64_t(shape.replicas) * shape.shard == size, "mesh {} does not cover {} ranks", to_string(shape), size);
  replica_ = rank / shape.shard;
  shard_ = rank % shape.shard;
  MPI_Comm shard_comm, replicate_comm;
  GPT_MPI_CHECK(MPI_Comm_split(base, replica_, shard_, &shard_comm));
  GPT_MPI_CHECK(MPI_Comm_split(base, shard_, replica_, &replicate_comm));
  world_ = make_communicator(backend, base, device);
  shard_comm_ = make_communicator(backend, shard_comm, device);
  replicate_comm_ = make_communicator(backend, replicate_comm, device);
  world_->set_trace_label("world");
  shard_comm_->set_trace_label("shard");
  replicate_comm_->set_trace_label("replicate");
  // The communicators hold their own duplicates.
  MPI_Comm_free(&shard_comm);
  MPI_Comm_free(&replicate_comm);
}

DeviceMesh2D::~DeviceMesh2D() = default;

void DeviceMesh2D::check_health() {
  for (Communicator* c : {world_.get(), shard_comm_.get(), replicate_comm_.get()})
    if (c) c->check_health();
}

}  // namespace gpt
