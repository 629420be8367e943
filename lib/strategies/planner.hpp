// The planner: for a model, a batch shape and a cluster (ranks, ranks per
// node, device memory, bandwidths), every strategy and mesh with its
// predicted memory per rank, communication per step and step time, whether
// it fits, and a recommendation. `apps/plan` prints it; `gpt_train
// --strategy auto` runs the recommendation.
//
// Memory and bytes come from cost_model.hpp (exact for this engine). Time is
// a model, stated here so its verdicts can be checked:
//   compute   = model FLOPs of this rank's tokens / (peak × assumed MFU),
//               × 4/3 with activation checkpointing (forward recomputed);
//   comm      = per group, bytes / bandwidth, where a ring that crosses a
//               node boundary runs at the inter-node bandwidth (its slowest
//               link) and one inside a node at the intra-node bandwidth,
//               plus each collective's latency (ClusterSpec::latency);
//   exposed   = what cannot hide behind compute: ddp and hybrid replicate
//               all-reduces and zero1/zero2/zero3 reduce-scatters overlap
//               backward (2/3 of compute); all-gathers overlap forward too
//               (zero3's, and on a GPU zero1/zero2's post-step ones, which
//               end at the unit's next forward): the whole compute; the
//               gradient norm's all-reduce and, on the host, zero1/zero2's
//               post-step all-gathers hide behind nothing;
//   step      = compute + exposed.
// A placement fits when params + grads + optimizer + activations + buffers
// (+ sampling's key/value cache when the run samples) stay under `headroom` of the device memory (the rest is left for the
// allocator's fragmentation, library workspaces and the framework).
#pragma once

#include <string>
#include <vector>

#include "io/run_config.hpp"
#include "strategies/cost_model.hpp"

namespace gpt {

struct ClusterSpec {
  int world = 1;
  int ranks_per_node = 1;
  int64_t device_memory = 0;   // bytes per rank
  double peak_flops = 0;       // per rank, at the run's precision
  double assumed_mfu = 0.45;   // fraction of peak the compute reaches
  double intra_bw = 0;  // bytes/s a rank sends over a ring inside a node
  // Across nodes: each node has `inter_links` links of `inter_bw` bytes/s
  // each (per direction). A ring that crosses nodes leaves a node through
  // the links of its ranks there, as NCCL spreads its channels over the
  // NICs: a group with k ranks on a node (the fewest of any node it uses)
  // shares the node's links with the node's other groups, so its ring runs
  // at inter_bw x inter_links x k / ranks_per_node, at most intra_bw.
  double inter_bw = 0;
  int inter_links = 1;
  // Latency of one collective, NCCL's model (src/graph/tuning.cc, the
  // Simple protocol, which large buffers use). A ring: a fixed `base_lat`
  // plus one hop per ring step, `inter_lat` for the steps that cross nodes
  // and `intra_lat` for the others. An all-reduce across nodes may instead
  // run as a tree, 2 x (ranks per node - 1 + log2 nodes) steps of
  // `tree_lat`, and takes the lesser. Seconds.
  double base_lat = 0, intra_lat = 0, inter_lat = 0, tree_lat = 0;
  double headroom = 0.9;
  // Shared-memory MPI inside a node: the CPU default's intra-node bandwidth,
  // and that of ranks sharing a GPU, whose MPI communicator stages through
  // host memory.
  static constexpr double kHostIntraBw = 3e9;
  // Open MPI's shared-memory collectives, as bench_comm measures them on a
  // 2-core host (an 8-byte all-gather on 2 ranks: about 8 us).
  static constexpr double kHostBaseLat = 4e-6, kHostIntraLat = 4e-6;
  // Defaults for the device kind: "cuda" (H100-class: 80 GiB, 989 TFLOP/s
  // bf16, NVLink 360 GB/s, a 400 Gb/s InfiniBand NIC per GPU) or "cpu" (the memory
  // of this host, or its cgroup's limit (core/host_memory.hpp), shared by
  // the ranks on it; shared-memory MPI).
  static ClusterSpec defaults(const std::string& device, int world, int ranks_per_node);
  // The ring bandwidth of a group: intra_bw inside a node; across nodes, with
  // `ranks_on_a_node` of its ranks on its emptiest node, as described above.
  double ring_bw(bool spans_nodes, int ranks_on_a_node) const;
  // The latency of one collective over `n` ranks on `nodes` nodes: in a
  // ring, an all-gather or reduce-scatter takes n-1 steps, nodes-1 of them
  // across nodes; an all-reduce 2(n-1), 2 x nodes of them across (NCCL's
  // count); an all-reduce across nodes, the lesser of that and the tree's.
  double latency(bool all_reduce, int n, int nodes) const;
};

struct PlanRow {
  Placement placement;
  MemoryCost mem;
  CommCost comm;
  double compute_s = 0, comm_s = 0, exposed_s = 0, step_s = 0, tokens_per_s = 0;
  double latency_s = 0;  // of comm_s, the collectives' latency
  bool fits = false;
};

struct Plan {
  Workload workload;
  ClusterSpec cluster;
  std::vector<PlanRow> rows;  // every candidate, in a fixed order
  int best = -1;              // index into rows; -1 when nothing fits
  std::string reasoning;      // one paragraph: why `best`, or why nothing fits
};

// The workload a gpt_train config describes on `world` ranks of `threads`
// CPU threads each: its model, sequence length, micro-batch, accumulation
// (the data loader's accum_steps; `source`, a config file, is named in its
// error; 1 for an evaluation, steps = 0, which has no global batch),
// activation recomputation, samples and precision. Used by --strategy auto
// and plan --config alike, so they plan the same run.
Workload run_workload(const RunConfig& c, int world, int threads, const std::string& source = {});

// ddp, zero1, zero2, zero3, then hybrid R×S (zero3 and zero2 inside) for
// every 1 < S < world dividing world.
std::vector<Placement> candidate_placements(int world, int ranks_per_node);
Plan make_plan(const Workload& w, const ClusterSpec& c);
// Markdown table plus the recommendation, as `plan` prints it.
std::string format_plan(const Plan& p);

}  // namespace gpt

#include <nlohmann/json.hpp>

namespace gpt {
// Every number of the plan, for scripts (plan --json, the sweep report).
nlohmann::json plan_to_json(const Plan& p);
}  // namespace gpt
