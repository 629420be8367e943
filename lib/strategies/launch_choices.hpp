// What a run's launch-time choices resolve to, decided on all ranks
// together before anything is allocated: --strategy auto (the planner's
// recommendation for the GPUs or host memory the ranks have, or a warning
// where a strategy given by name is predicted not to fit), --comm auto, and
// the device mesh.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

#include "comm/mesh.hpp"
#include "io/run_config.hpp"
#include "strategies/unit_model.hpp"

namespace gpt {

// --mesh, or the default: nodes x ranks per node.
MeshShape resolve_mesh(const RunConfig& cfg, MPI_Comm base);

// --strategy auto: the planner's choice of strategy (and mesh and inner
// sharding for hybrid), logged with its table; `note` gets its reasoning.
// Another strategy comes back unchanged, with a warning where the planner
// predicts it will not fit in --device-mem (or the GPU's or host's memory).
// Collective over base.
RunConfig resolve_strategy(const RunConfig& c, MPI_Comm base, const std::optional<RankGpu>& gpu, std::string* note);

// --comm auto: nccl on cuda where the build has it and every rank has a GPU
// of its own, else mpi; `note` says why. Collective over base.
RunConfig resolve_comm(const RunConfig& c, MPI_Comm base, const std::optional<RankGpu>& gpu, std::string* note);

}  // namespace gpt
