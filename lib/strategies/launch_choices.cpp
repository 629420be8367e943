#include "strategies/launch_choices.hpp"

#include "comm/mesh.hpp"
#include "comm/mpi_env.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/logging.hpp"
#include "core/plural.hpp"
#include "core/threads.hpp"
#include "model/flops.hpp"
#include "strategies/cost_model.hpp"
#include "strategies/planner.hpp"

namespace gpt {
namespace {

// --device cuda: the memory and peak FLOP/s per rank the planner assumes are
// those of the GPUs the ranks will use, each shared by the ranks on it, the
// least of any rank (so every rank plans alike); the peak by name at the
// run's precision (model/flops.hpp). Where a rank sees no GPU the planner's
// defaults stay (its backend then ends the run with the reason). Returns
// what the memory came from, for the log.
std::string fit_plan_to_gpus(const RunConfig& c, MPI_Comm base, const std::optional<RankGpu>& gpu,
                             ClusterSpec* cluster) {
  // The least over ranks of: bytes, FLOP/s per rank, intra-node bytes/s (0:
  // no GPU), and 1 for a GPU of its own, 0 for one shared.
  double least[4] = {0, 0, 0, 1};
  if (gpu) {
    const double peak = gpu->peak_flops(c.precision == Precision::kBf16);
    const double ring = gpu_ring_bandwidth(gpu->name);
    least[0] = double(gpu->memory / gpu->ranks);
    least[1] = peak > 0 ? peak : cluster->peak_flops / gpu->ranks;
    // Ranks sharing a GPU talk through the MPI communicator's host staging,
    // at its bandwidth and latency.
    least[2] = gpu->ranks > 1 ? ClusterSpec::kHostIntraBw : ring > 0 ? ring : cluster->intra_bw;
    least[3] = gpu->ranks > 1 ? 0 : 1;
  }
  MPI_Allreduce(MPI_IN_PLACE, least, 4, MPI_DOUBLE, MPI_MIN, base);
  if (least[0] <= 0) return "the planner's default: a rank sees no GPU";
  cluster->device_memory = int64_t(least[0]);
  cluster->peak_flops = least[1];
  cluster->intra_bw = least[2];
  if (least[3] == 0) {
    cluster->base_lat = ClusterSpec::kHostBaseLat;
    cluster->intra_lat = ClusterSpec::kHostIntraLat;
  }
  return fmt::format("{}: {}{}; the least of any rank", gpu->name, format_bytes(double(gpu->memory)),
                     gpu->ranks > 1 ? fmt::format(" shared by {} ranks", gpu->ranks) : "");
}

// What the planner is given for this run: its workload, and the cluster as
// the job sees it (memory per rank: --device-mem, else with --device cuda the
// GPU's memory shared by the ranks on it, else this host's memory shared by
// the ranks on it; the run's precision; on cuda the GPU's peak and its links'
// ring bandwidth inside a node, or host staging's for ranks sharing a GPU).
// Collective over base.
struct PlanInputs {
  int world = 1;
  Workload w;
  ClusterSpec cluster;
  std::string memory_from;  // for the log
};
PlanInputs plan_inputs(const RunConfig& c, MPI_Comm base, const std::optional<RankGpu>& gpu) {
  PlanInputs in;
  MPI_Comm_size(base, &in.world);
  const NodeLayout nodes = node_layout(base);
  in.w = run_workload(c, in.world, num_threads());
  const bool cuda = c.device == DeviceKind::kCuda;
  in.cluster = ClusterSpec::defaults(cuda ? "cuda" : "cpu", in.world, nodes.uniform ? nodes.local_size : in.world);
  in.memory_from =
      cuda ? fit_plan_to_gpus(c, base, gpu, &in.cluster) : host_memory().source + ", shared by the node's ranks";
  if (!c.device_mem.empty()) {
    in.cluster.device_memory = parse_bytes(c.device_mem, "device-mem");
    in.memory_from = "--device-mem";
  }
  if (c.peak_tflops > 0) in.cluster.peak_flops = c.peak_tflops * 1e12;  // as `plan --peak-tflops`
  return in;
}

// A strategy given by name that the planner predicts will not fit: a warning
// before anything is allocated, with the numbers and what --strategy auto
// would run. Running out of host memory is otherwise the kernel's OOM
// killer's SIGKILL, which says nothing. Not an error: the predicted
// activations are an estimate (tested within 20% of measured).
void warn_if_it_may_not_fit(const RunConfig& c, MPI_Comm base, const PlanInputs& in) {
  const StrategyKind kind = parse_strategy(c.strategy);
  const MeshShape mesh = kind == StrategyKind::kHybrid ? resolve_mesh(c, base) : MeshShape{1, in.world};
  const Placement p = make_placement(kind, parse_strategy(c.hybrid_inner), mesh, in.cluster.ranks_per_node);
  const MemoryCost m = memory_cost(in.w, p);
  const double usable = in.cluster.headroom * double(in.cluster.device_memory);
  if (double(m.total()) <= usable) return;
  const Plan plan = make_plan(in.w, in.cluster);
  const std::string instead =
      plan.best >= 0
          ? fmt::format("--strategy auto would run {} ({} per rank)", plan.rows[size_t(plan.best)].placement.name(),
                        format_bytes(double(plan.rows[size_t(plan.best)].mem.total())))
          : plan.reasoning;
  warn0(
      "{} is predicted to need {} per rank (model state {}, activations {}, buffers {}), more than the {} usable "
      "of {} per rank ({}): the run may run out of memory; {}",
      p.name(), format_bytes(double(m.total())), format_bytes(double(m.model_state())),
      format_bytes(double(m.activations)), format_bytes(double(m.buffers + m.sample_cache)), format_bytes(usable),
      format_bytes(double(in.cluster.device_memory)), in.memory_from, instead);
}

}  // namespace

MeshShape resolve_mesh(const RunConfig& cfg, MPI_Comm base) {
  int size = 1;
  MPI_Comm_size(base, &size);
  return cfg.mesh.empty() ? default_mesh(base) : parse_mesh(cfg.mesh, size);
}

// --strategy auto: the planner's recommendation for this model, batch and
// world (plan_inputs). Other strategies pass through unchanged, with a
// warning where they may not fit.
RunConfig resolve_strategy(const RunConfig& c, MPI_Comm base, const std::optional<RankGpu>& gpu, std::string* note) {
  if (c.strategy != "auto") {
    // A bad value the check meets (a batch that does not divide, a mesh of
    // another size) is every rank's alike, so every rank skips the check, and
    // it is reported where it was before the check existed, in its order.
    try {
      warn_if_it_may_not_fit(c, base, plan_inputs(c, base, gpu));
    } catch (const ConfigError&) {
    }
    return c;
  }
  const PlanInputs in = plan_inputs(c, base, gpu);
  const int world = in.world;
  const ClusterSpec& cluster = in.cluster;
  const std::string& memory_from = in.memory_from;
  const Plan plan = make_plan(in.w, cluster);
  const std::string across = world > cluster.ranks_per_node
                                 ? fmt::format(", {} x {:.3g} GB/s across", cluster.inter_links, cluster.inter_bw / 1e9)
                                 : "";
  log0(
      "strategy auto: plan for {}, {} per node, {} per rank ({}), {:.3g} GB/s inside a node{}; {:.4g} TFLOP/s per "
      "rank{} x {:.0f}% MFU\n{}",
      count_of(world, "rank"), cluster.ranks_per_node, format_bytes(double(cluster.device_memory)), memory_from,
      cluster.intra_bw / 1e9, across, cluster.peak_flops / 1e12, c.peak_tflops > 0 ? " (--peak-tflops)" : "",
      100 * cluster.assumed_mfu, format_plan(plan));
  if (plan.best < 0) throw ConfigError("invalid strategy = 'auto': " + plan.reasoning);
  const Placement& p = plan.rows[size_t(plan.best)].placement;
  RunConfig r = c;
  r.strategy = to_string(p.kind);
  if (p.kind == StrategyKind::kHybrid) {
    r.mesh = to_string(p.mesh);
    r.hybrid_inner = to_string(p.hybrid_inner);
  }
  *note = plan.reasoning;
  return r;
}

// --comm auto: NCCL on --device cuda when this build has it and every rank
// of every node has a GPU of its own (NCCL's requirement; told apart by
// UUID, RankGpu), else the MPI communicator (on cuda: staged through host
// memory, for ranks sharing a GPU). Decided on all ranks together, so they
// agree; `note` says why.
RunConfig resolve_comm(const RunConfig& c, MPI_Comm base, const std::optional<RankGpu>& gpu, std::string* note) {
  if (c.comm != "auto") return c;
  RunConfig r = c;
  r.comm = "mpi";
  if (c.device != DeviceKind::kCuda) return r;
  if (!nccl_built()) {
    *note = "comm auto: mpi (this build has no NCCL)";
    return r;
  }
  int own_gpu = gpu && gpu->ranks == 1 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &own_gpu, 1, MPI_INT, MPI_MIN, base);
  if (own_gpu) {
    r.comm = "nccl";
    *note = "comm auto: nccl (one GPU per rank)";
  } else {
    const std::string why = !gpu             ? std::string("this rank sees no GPU")
                            : gpu->ranks > 1 ? fmt::format("{} ranks of this node use one GPU", gpu->ranks)
                                             : std::string("ranks of another node share a GPU");
    *note = fmt::format("comm auto: mpi, staged through host memory ({}; NCCL needs one GPU per rank)", why);
  }
  return r;
}

}  // namespace gpt
