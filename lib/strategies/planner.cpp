#include "strategies/planner.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bytes.hpp"
#include "core/host_memory.hpp"
#include "io/data_loader.hpp"
#include "model/flops.hpp"

namespace gpt {

Workload run_workload(const RunConfig& c, int world, int threads, const std::string& source) {
  Workload w;
  w.model = c.gpt;
  w.seq_len = c.seq_len;  // 0: the model's context (Workload::T)
  w.micro_batch = c.micro_batch;
  // An evaluation (--steps 0) has no global batch: its batches are one micro-batch per rank.
  w.accum = c.steps > 0 ? accum_steps(c.global_batch, c.micro_batch, world, source) : 1;
  w.activation_checkpointing = c.activation_checkpointing;
  w.recompute = c.recompute;
  w.threads = threads;
  w.samples = c.sample_tokens > 0;
  w.trains = c.steps > 0;
  const bool cuda = c.device == DeviceKind::kCuda;
  if (cuda && c.precision == Precision::kBf16) w.format = NumericFormat::bf16(c.reduce_dtype == "fp32");
  w.format.gpu = cuda;
  w.attention_ds_budget = c.attention_ds_budget();
  w.attention = parse_attention(c.attention);
  return w;
}

ClusterSpec ClusterSpec::defaults(const std::string& device, int world, int ranks_per_node) {
  ClusterSpec c;
  c.world = world;
  c.ranks_per_node = std::max(1, ranks_per_node);
  if (device == "cuda") {
    c.device_memory = int64_t(80) << 30;
    c.peak_flops = gpu_peak_flops("H100", true);
    c.intra_bw = gpu_ring_bandwidth("H100");  // 360 GB/s, NVLink 4's ring (nccl-tests, 8x H100 SXM)
    c.inter_bw = 45e9;   // 400 Gb/s InfiniBand (NDR: 46-48 GB/s measured per NIC)
    c.inter_links = c.ranks_per_node;  // one NIC per GPU (DGX/HGX H100: 8 x 400 Gb/s)
    // NCCL's own tuning model (src/graph/tuning.cc, 2.19 to 2.21), Simple
    // protocol: a ring hop over NVLink 3.4 us, over the network 14 us; a
    // tree step 28 us over either (a 256 KiB chunk's worth).
    c.base_lat = 8.4e-6;
    c.intra_lat = 3.4e-6;
    c.inter_lat = 14e-6;
    c.tree_lat = 28e-6;
  } else {
    // The host's memory (or its cgroup's limit, a SLURM job's --mem) split
    // between the ranks on it; a few GFLOP/s per rank; shared-memory MPI
    // inside the node, 10 GbE across.
    c.device_memory = host_memory().bytes / c.ranks_per_node;
    c.peak_flops = 50e9;
    c.intra_bw = kHostIntraBw;
    c.inter_bw = 1.2e9;
    c.inter_links = 1;  // one 10 GbE NIC per node
    c.base_lat = kHostBaseLat;
    c.intra_lat = kHostIntraLat;
    c.inter_lat = 25e-6;  // a TCP message over 10 GbE (an assumption; --inter-lat-us)
    c.tree_lat = c.inter_lat;  // Open MPI's tree and recursive-doubling all-reduces, a message a step
  }
  return c;
}

double ClusterSpec::latency(bool all_reduce, int n, int nodes) const {
  if (n <= 1) return 0;
  const int steps = all_reduce ? 2 * (n - 1) : n - 1;
  const int across = nodes <= 1 ? 0 : std::min(steps, all_reduce ? 2 * nodes : nodes - 1);
  const double ring = base_lat + (steps - across) * intra_lat + across * inter_lat;
  if (!all_reduce || nodes <= 1) return ring;
  const int per_node = (n + nodes - 1) / nodes;
  const double tree = 2 * (per_node - 1 + std::ceil(std::log2(double(nodes)))) * tree_lat;
  return std::min(ring, tree);
}

double ClusterSpec::ring_bw(bool spans_nodes, int ranks_on_a_node) const {
  if (!spans_nodes) return intra_bw;
  const double links = double(inter_links) * std::max(1, ranks_on_a_node) / std::max(1, ranks_per_node);
  return std::min(intra_bw, inter_bw * links);
}

std::vector<Placement> candidate_placements(int world, int rpn) {
  std::vector<Placement> out;
  const MeshShape flat{1, world};
  for (auto k : {StrategyKind::kDdp, StrategyKind::kZero1, StrategyKind::kZero2, StrategyKind::kZero3})
    out.push_back(make_placement(k, StrategyKind::kZero3, flat, rpn));
  for (int S = 2; S < world; ++S) {
    if (world % S) continue;
    for (auto inner : {StrategyKind::kZero3, StrategyKind::kZero2})
      out.push_back(make_placement(StrategyKind::kHybrid, inner, {world / S, S}, rpn));
  }
  return out;
}

namespace {

PlanRow evaluate(const Workload& w, const ClusterSpec& c, const Placement& p) {
  PlanRow r;
  r.placement = p;
  r.mem = memory_cost(w, p);
  r.comm = comm_cost(w, p);
  r.fits = double(r.mem.total()) <= c.headroom * double(c.device_memory);
  const int T = w.T();
  const double tokens_rank = double(w.micro_batch) * T * std::max(1, w.accum);
  // An evaluation's batch is one forward pass (a third of a training step's FLOPs), recomputing nothing.
  r.compute_s = (w.trains ? train_flops_per_token(w.model, T) : forward_flops_per_token(w.model, T)) * tokens_rank /
                (c.peak_flops * c.assumed_mfu) * (w.activation_checkpointing && w.trains ? 4.0 / 3.0 : 1.0);
  const CommCost& m = r.comm;
  const double shard_bw = c.ring_bw(m.shard_group_spans_nodes, m.shard_group_ranks_per_node);
  const double rep_bw = c.ring_bw(m.replicate_group_spans_nodes, m.replicate_group_ranks_per_node);
  const auto latency = [&](const CommCost::Calls& k, int n, int nodes) {
    return double(k.gathers_scatters) * c.latency(false, n, nodes) + double(k.all_reduces) * c.latency(true, n, nodes);
  };
  const int S = p.shard_size(), R = p.replicas();
  const double shard_lat = latency(m.shard_calls, S, m.shard_group_nodes);
  const double after_lat = latency(m.after_backward_calls, S, m.shard_group_nodes);
  const double rep_lat = latency(m.replicate_calls, R, m.replicate_group_nodes);
  r.latency_s = shard_lat + rep_lat;
  const double serial = double(m.after_backward_bytes) / shard_bw + after_lat;
  const double overlappable = double(m.shard_bytes - m.after_backward_bytes) / shard_bw + (shard_lat - after_lat) +
                              double(m.replicate_bytes) / rep_bw + rep_lat;
  // Reductions hide behind backward (2/3 of compute); all-gathers behind
  // forward too: zero3's before each unit's forward and backward, and on a
  // GPU zero1/zero2's of the last update before the unit's next forward.
  // Lumped: the whole compute.
  const bool gathers_in_forward =
      S > 1 && (sharding_rule(p.kind, p.hybrid_inner, S).params_sharded || w.format.gpu);
  const double window = r.compute_s * (gathers_in_forward || !w.trains ? 1.0 : 2.0 / 3.0);
  r.comm_s = serial + overlappable;
  r.exposed_s = serial + std::max(0.0, overlappable - window);
  r.step_s = r.compute_s + r.exposed_s;
  r.tokens_per_s = tokens_rank * p.world() / r.step_s;
  return r;
}

}  // namespace

Plan make_plan(const Workload& w, const ClusterSpec& c) {
  Plan plan;
  plan.workload = w;
  plan.cluster = c;
  for (const Placement& p : candidate_placements(c.world, c.ranks_per_node)) plan.rows.push_back(evaluate(w, c, p));
  // Fastest that fits; within 1% of each other (comm fully hidden), the one
  // that moves fewer bytes across nodes (the scarcer links, shared with other
  // jobs), then fewer bytes, then the one that needs less memory.
  for (int i = 0; i < int(plan.rows.size()); ++i) {
    const PlanRow& r = plan.rows[size_t(i)];
    if (!r.fits) continue;
    if (plan.best < 0) {
      plan.best = i;
      continue;
    }
    const PlanRow& b = plan.rows[size_t(plan.best)];
    const bool faster = r.step_s < b.step_s * 0.99;
    const bool tie = !faster && r.step_s <= b.step_s * 1.01;
    const auto lighter = [](const PlanRow& x, const PlanRow& y) {
      return std::tuple(x.comm.inter_bytes, x.comm.bytes, x.mem.total()) <
             std::tuple(y.comm.inter_bytes, y.comm.bytes, y.mem.total());
    };
    if (faster || (tie && lighter(r, b))) plan.best = i;
  }
  const double budget = c.headroom * double(c.device_memory);
  if (plan.best < 0) {
    const auto smallest = std::min_element(plan.rows.begin(), plan.rows.end(), [](const PlanRow& a, const PlanRow& b) {
      return a.mem.total() < b.mem.total();
    });
    plan.reasoning = fmt::format(
        "nothing fits: the smallest, {}, needs {} per rank against {} usable ({} x {:.0f}%). Lower "
        "--micro-batch, recompute activations (--recompute gelu-ln, then --activation-checkpointing), {}or add "
        "ranks.",
        smallest->placement.name(), format_bytes(double(smallest->mem.total())), format_bytes(budget),
        format_bytes(double(c.device_memory)), 100 * c.headroom,
        smallest->mem.sample_cache > 0
            ? fmt::format("draw no samples (--sample-tokens 0: {} of key/value cache), ",
                          format_bytes(double(smallest->mem.sample_cache)))
            : std::string());
    return plan;
  }
  const PlanRow& b = plan.rows[size_t(plan.best)];
  std::vector<std::string> too_big;
  for (const PlanRow& r : plan.rows)
    if (!r.fits) too_big.push_back(r.placement.name());
  const char* step = w.trains ? "step" : "batch";  // an evaluation's step is a batch's forward pass
  plan.reasoning = fmt::format(
      "{}: needs {} per rank of {} usable, predicted {:.3f} s per {} ({:.0f} tokens/s), {} of communication per "
      "{} in {} collectives ({:.3f} s of latency), {:.3f} s of it exposed.{}",
      b.placement.name(), format_bytes(double(b.mem.total())), format_bytes(budget), b.step_s, step, b.tokens_per_s,
      format_bytes(double(b.comm.bytes)), step, b.comm.calls, b.latency_s, b.exposed_s,
      too_big.empty() ? " Every candidate fits; it is the fastest (ties go to fewer bytes across nodes, then fewer "
                        "bytes, then less memory)."
                      : fmt::format(" It is the fastest of those that fit; {} do not fit.", fmt::join(too_big, ", ")));
  return plan;
}

std::string format_plan(const Plan& p) {
  // One unit for the whole table: GiB when any placement needs a GiB, else MiB.
  int64_t largest = 0;
  for (const PlanRow& r : p.rows) largest = std::max({largest, r.mem.total(), r.comm.bytes});
  const bool gib = largest >= (int64_t(1) << 30);
  const char* unit = gib ? "GiB" : "MiB";
  const auto b = [&](int64_t x) {
    return gib ? fmt::format("{:.2f}", double(x) / 0x1p30) : fmt::format("{:.1f}", double(x) / 0x1p20);
  };
  const char* step = p.workload.trains ? "step" : "batch";  // an evaluation's: one batch's forward pass
  std::string s = fmt::format(
      "| strategy | params | grads | optim | activations | buffers | sample cache | total {0} | fits "
      "| comm/{1} {0} (intra / inter) | compute s | exposed comm s | {1} s | tokens/s |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|---:|---:|\n",
      unit, step);
  for (size_t i = 0; i < p.rows.size(); ++i) {
    const PlanRow& r = p.rows[i];
    s += fmt::format("| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} ({} / {}) | {:.3f} | {:.3f} | {:.3f} | {:.0f} |\n",
                     r.placement.name(), int(i) == p.best ? " **(recommended)**" : "", b(r.mem.params),
                     b(r.mem.grads), b(r.mem.optim), b(r.mem.activations), b(r.mem.buffers), b(r.mem.sample_cache),
                     b(r.mem.total()),
                     r.fits ? "yes" : "no", b(r.comm.bytes), b(r.comm.intra_bytes), b(r.comm.inter_bytes),
                     r.compute_s, r.exposed_s, r.step_s, r.tokens_per_s);
  }
  s += "\nrecommendation: " + p.reasoning + "\n";
  return s;
}

}  // namespace gpt

namespace gpt {

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanRow& r : p.rows) {
    rows.push_back({{"strategy", to_string(r.placement.kind)},
                    {"hybrid_inner", to_string(r.placement.hybrid_inner)},
                    {"mesh", to_string(r.placement.mesh)},
                    {"name", r.placement.name()},
                    {"mem",
                     {{"params", r.mem.params},
                      {"grads", r.mem.grads},
                      {"optim", r.mem.optim},
                      {"activations", r.mem.activations},
                      {"buffers", r.mem.buffers},
                      {"sample_cache", r.mem.sample_cache},
                      {"model_state", r.mem.model_state()},
                      {"total", r.mem.total()}}},
                    {"comm",
                     {{"bytes", r.comm.bytes},
                      {"intra_bytes", r.comm.intra_bytes},
                      {"inter_bytes", r.comm.inter_bytes},
                      {"shard_bytes", r.comm.shard_bytes},
                      {"replicate_bytes", r.comm.replicate_bytes},
                      {"collectives", r.comm.calls}}},
                    {"fits", r.fits},
                    {"compute_s", r.compute_s},
                    {"comm_s", r.comm_s},
                    {"latency_s", r.latency_s},
                    {"exposed_s", r.exposed_s},
                    {"step_s", r.step_s},
                    {"tokens_per_s", r.tokens_per_s}});
  }
  const ClusterSpec& c = p.cluster;
  return {{"cluster",
           {{"world", c.world},
            {"ranks_per_node", c.ranks_per_node},
            {"device_memory", c.device_memory},
            {"peak_flops", c.peak_flops},
            {"assumed_mfu", c.assumed_mfu},
            {"intra_bw", c.intra_bw},
            {"inter_bw", c.inter_bw},
            {"inter_links", c.inter_links},
            {"base_lat", c.base_lat},
            {"intra_lat", c.intra_lat},
            {"inter_lat", c.inter_lat},
            {"tree_lat", c.tree_lat},
            {"headroom", c.headroom}}},
          {"rows", rows},
          {"recommended", p.best >= 0 ? nlohmann::json(p.rows[size_t(p.best)].placement.name()) : nlohmann::json()},
          {"reasoning", p.reasoning}};
}

}  // namespace gpt
