// DeviceMesh2D: the world as R x S ranks. A shard group is S consecutive
// ranks (by default one node: ranks are laid out node by node), the
// replicate group of a rank is the R ranks at the same position in their
// shard groups. Strategies shard inside the shard group and replicate
// across the replicate group.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/mpi_env.hpp"

namespace gpt {

enum class CommBackend { kMpi, kNccl };
CommBackend parse_comm_backend(const std::string& s);  // "mpi" | "nccl"; ConfigError otherwise
bool nccl_built();  // whether this build has the NCCL communicator

struct MeshShape {
  int replicas = 1;  // R
  int shard = 1;     // S
  bool operator==(const MeshShape&) const = default;
};
std::string to_string(const MeshShape& m);  // "RxS"

// Parses "RxS". Throws ConfigError naming the value when it is malformed,
// non-positive, or R*S != world.
MeshShape parse_mesh(const std::string& spec, int world);
// nodes x ranks-per-node when every node runs the same number of ranks;
// 1 x world otherwise.
MeshShape default_mesh(const MpiEnv& env);
// The same for the ranks of `comm` (collective over comm).
MeshShape default_mesh(MPI_Comm comm);

class DeviceMesh2D {
 public:
  // Collective over the world: every rank must construct the mesh, in the
  // same order relative to other collectives. `device` is the CUDA device of
  // NCCL communicators (ignored for MPI).
  DeviceMesh2D(const MpiEnv& env, MeshShape shape, CommBackend backend, int device = 0);
  // The same over the ranks of `base` (e.g. MPI_COMM_SELF for a one-rank reference).
  DeviceMesh2D(MPI_Comm base, MeshShape shape, CommBackend backend, int device = 0);
  ~DeviceMesh2D();

  MeshShape shape() const { return shape_; }
  int replica_index() const { return replica_; }  // which shard group, 0..R-1
  int shard_index() const { return shard_; }      // position in the shard group, 0..S-1
  Communicator& world() { return *world_; }
  Communicator& shard_group() { return *shard_comm_; }
  Communicator& replicate_group() { return *replicate_comm_; }
  // Every communicator's check_health() (throws on an asynchronous failure).
  void check_health();

 private:
  MeshShape shape_;
  int replica_ = 0, shard_ = 0;
  std::unique_ptr<Communicator> world_, shard_comm_, replicate_comm_;
};

// A communicator of `backend` over the ranks of `comm` (collective over comm).
std::unique_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm comm, int device);

}  // namespace gpt
