#include "strategies/cost_model.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/shard.hpp"
#include "model/cpu/attention.hpp"
#include "model/gpt.hpp"
#include "model/layout.hpp"

namespace gpt {

NumericFormat NumericFormat::fp32() { return {}; }

NumericFormat NumericFormat::bf16(bool reduce_in_fp32) {
  NumericFormat f;
  f.param_bytes = 2;
  f.grad_bytes = 2;
  f.optim_bytes = 12;  // fp32 master + m + v
  f.reduce_bytes = reduce_in_fp32 ? 4 : 2;
  f.act_bytes = 2;
  f.gpu = true;  // bf16 is a GPU format
  return f;
}

AttentionImpl parse_attention(const std::string& s) {
  if (s == "ours") return AttentionImpl::kOurs;
  if (s == "cudnn") return AttentionImpl::kCudnn;
  if (s == "auto") return AttentionImpl::kAuto;
  throw ConfigError(fmt::format("invalid attention = '{}': expected ours, cudnn or auto", s));
}

int Placement::shard_size() const {
  switch (kind) {
    case StrategyKind::kDdp: return 1;
    case StrategyKind::kHybrid: return mesh.shard;
    default: return world();
  }
}

int Placement::replicas() const {
  switch (kind) {
    case StrategyKind::kDdp: return world();
    case StrategyKind::kHybrid: return mesh.replicas;
    default: return 1;
  }
}

std::string Placement::name() const {
  if (kind != StrategyKind::kHybrid) return to_string(kind);
  return fmt::format("hybrid {} ({})", to_string(mesh), to_string(hybrid_inner));
}

Placement make_placement(StrategyKind kind, StrategyKind inner, MeshShape mesh, int ranks_per_node) {
  Placement p;
  p.kind = kind;
  p.hybrid_inner = inner;
  p.mesh = mesh;
  p.ranks_per_node = std::max(1, ranks_per_node);
  return p;
}

namespace {

// Group sizes and what is sharded, as the engine derives them.
struct Sharding : ShardingRule {
  int S = 1, R = 1;
};

Sharding sharding_of(const Placement& p) {
  return {sharding_rule(p.kind, p.hybrid_inner, p.shard_size()), p.shard_size(), p.replicas()};
}

// Bytes one rank sends in a ring collective over n ranks: `factor` = 1 for
// all-gather and reduce-scatter, 2 for all-reduce (the communicator's
// accounting convention, comm/communicator.hpp).
int64_t ring(int factor, int64_t bytes, int n) { return n <= 1 ? 0 : factor * int64_t(n - 1) * bytes / n; }

// Fraction of the links of one group's ring that cross nodes: the group of
// n ranks first, first + stride, ... Ranks are laid out node by node, as
// mpirun and srun place them by default.
double crossing_fraction(int first, int stride, int n, int ranks_per_node) {
  if (n <= 1) return 0;
  int crossing = 0;
  for (int i = 0; i < n; ++i) {
    const int a = first + i * stride, b = first + ((i + 1) % n) * stride;
    crossing += a / ranks_per_node != b / ranks_per_node;
  }
  return double(crossing) / n;
}

// How many of a group's ranks are on each node it uses.
std::map<int, int> ranks_on_nodes(int first, int stride, int n, int ranks_per_node) {
  std::map<int, int> on_node;
  for (int i = 0; i < n; ++i) ++on_node[(first + i * stride) / ranks_per_node];
  return on_node;
}

// The rings of all `groups` groups of one kind (group g: ranks g * first_step,
// + stride, ...; every rank is in one). Where the shard size does not divide
// the ranks per node, some groups cross a node boundary and others do not:
// the bytes' split is the average over the groups (over ranks), and the time
// is the slowest group's, so `spans`, `fewest` and `nodes` come from the worst ones.
struct RingSpan {
  double crossing = 0;  // average fraction of ring links that cross nodes
  bool spans = false;   // some group crosses a node boundary
  int fewest = 0;       // of the crossing groups, the fewest ranks of one on a node (n when none crosses)
  int nodes = 1;        // the most nodes one group uses
};
RingSpan ring_span(int groups, int first_step, int stride, int n, int ranks_per_node) {
  RingSpan r{.fewest = n};
  for (int g = 0; g < groups; ++g) {
    const double f = crossing_fraction(g * first_step, stride, n, ranks_per_node);
    r.crossing += f / groups;
    if (f > 0) {
      r.spans = true;
      const std::map<int, int> on_nodes = ranks_on_nodes(g * first_step, stride, n, ranks_per_node);
      for (const auto& [node, k] : on_nodes) r.fewest = std::min(r.fewest, k);
      r.nodes = std::max(r.nodes, int(on_nodes.size()));
    }
  }
  return r;
}

}  // namespace

int64_t activation_bytes(const Workload& w) {
  const GPTConfig& c = w.model;
  const int64_t B = w.micro_batch, T = w.T(), C = c.n_embd, H = c.n_head,
                L = c.n_layer, Vp = c.padded_vocab(), N = B * T;
  // Saved per block (model/activations.hpp BlockActivations): ln1, atty, res2, ln2 (4NC),
  // qkv (3NC), fc and its GELU (8NC), four per-row LayerNorm statistics, and
  // attention's log-sum-exp per row and head (flash-style on both devices:
  // no T x T probabilities). --recompute keeps the GELU output (4NC) and
  // the two LayerNorm outputs (2NC) in buffers shared by all blocks instead
  // (4NC and one NC: ln_1's output is used up before ln_2's is written).
  // Evaluation only (!w.trains: GPTOptions::forward_only) keeps one block's set, as checkpointing does.
  const bool one_set = w.activation_checkpointing || !w.trains;
  const Recompute r = one_set ? Recompute::kNone : w.recompute;
  const int64_t not_kept = (recomputes_gelu(r) ? 4 * N * C : 0) + (recomputes_ln(r) ? 2 * N * C : 0);
  const int64_t shared = (recomputes_gelu(r) ? 4 * N * C : 0) + (recomputes_ln(r) ? N * C : 0);
  // Per-row statistics (LayerNorm mean and rstd, the log-sum-exp, the row
  // losses) are fp32 on a GPU in every format; on the CPU everything is T.
  const int64_t stat_bytes = w.format.gpu ? 4 : w.format.act_bytes;
  const int64_t per_block = 15 * N * C - not_kept;
  const int64_t per_block_stats = 4 * N + N * H;
  const int64_t sets = one_set ? 1 : L;
  // Always present: L+1 residual streams, ln_f output and statistics, the
  // backward's working gradients (dlnf, dresid, dsmall: NC each; dbig 4NC;
  // dqkv 3NC; not in evaluation), per-row losses, one logits chunk of the fused classifier,
  // and attention's scratch: on the CPU per thread (model/cpu/attention.hpp),
  // on a GPU the backward's delta rows (fp32, N x H) and, in bf16, its
  // stored score gradients, or cuDNN's workspace with its attention
  // (model/attention_ds.hpp); in an evaluation cuDNN's forward workspace alone.
  // The logits chunk: ~32 MiB on the CPU, 256 MiB on a GPU (model/cuda/gpt_cuda.cpp).
  const int64_t chunk =
      std::min(N, w.format.gpu ? std::max<int64_t>(128, (int64_t(256) << 20) / (Vp * w.format.act_bytes) / 128 * 128)
                               : std::max<int64_t>(128, (int64_t(8) << 20) / Vp));
  const int64_t fixed = (L + 1) * N * C + (w.trains ? 11 : 1) * N * C + chunk * Vp +
                        (w.format.gpu ? 0 : cpu::attention_scratch(T, H, std::max(1, w.threads)));
  const bool bf16_gpu = w.format.gpu && w.format.act_bytes == 2;
  // An evaluation keeps none of the backward's scratch: our forward needs none, cuDNN's its engine's workspace.
  const int64_t ours = w.trains ? attention_backward_scratch_bytes(B, T, H, bf16_gpu ? w.attention_ds_budget : 0) : 0;
  const int64_t cudnn_backward = attention_backward_scratch_bytes(B, T, H, 0) + attention_cudnn_engine_bytes(B, T, H) +
                                 attention_cudnn_backward_data_bytes(B, T, C);
  const int64_t cudnn = w.trains ? cudnn_backward : attention_cudnn_forward_engine_bytes();
  const int64_t gpu_attention = !w.format.gpu                            ? 0
                                : !bf16_gpu                              ? ours
                                : w.attention == AttentionImpl::kCudnn ? cudnn
                                : w.attention == AttentionImpl::kAuto  ? std::max(ours, cudnn)
                                                                         : ours;
  return (sets * per_block + shared + fixed) * w.format.act_bytes + (sets * per_block_stats + 3 * N) * stat_bytes +
         gpu_attention;
}

MemoryCost memory_cost(const Workload& w, const Placement& p) {
  const ParamLayout layout(w.model);
  const Sharding s = sharding_of(p);
  const NumericFormat& f = w.format;
  MemoryCost m;
  int64_t emb_full = 0, fin_full = 0, block_full = 0;
  for (size_t u = 0; u < layout.num_units(); ++u) {
    const ShardRange sh = shard_range(layout.unit(u).numel, s.S, 0);
    m.params += f.param_bytes * (s.params_sharded ? sh.shard_numel : sh.padded_numel);
    if (w.trains) {
      m.grads += s.grads_sharded ? f.accum_bytes * sh.shard_numel : f.grad_bytes * sh.padded_numel;
      m.optim += f.optim_bytes * sh.shard_numel;
    }
    if (u == layout.embedding_unit()) emb_full = sh.padded_numel;
    else if (u == layout.final_unit()) fin_full = sh.padded_numel;
    else block_full = sh.padded_numel;
  }
  // Transient full-unit buffers, kept in the engine's cache once allocated
  // (upper bound). zero3: the embedding and final units gathered through
  // the micro-batch plus the current and prefetched block; zero2 and zero3:
  // a full gradient per unit in backward, with at most two reduce-scatters
  // in flight beside the one being accumulated.
  // Evaluation only (!w.trains): no gradient is computed, so none is held or reduced.
  if (s.params_sharded) m.buffers += f.param_bytes * (emb_full + fin_full + 2 * block_full);
  if (s.grads_sharded && w.trains) m.buffers += f.grad_bytes * (emb_full + fin_full + 3 * block_full);
  // Gradients reduced in another type than they are computed in (bf16
  // widened to fp32) go through a converted copy of each full unit: the
  // in-flight units above with sharded gradients; every unit, held until
  // the optimizer step, for ddp and zero1 (when they communicate at all).
  if (f.reduce_bytes != f.grad_bytes && w.trains) {
    const int64_t all_units = emb_full + fin_full + int64_t(layout.config().n_layer) * block_full;
    if (s.grads_sharded) m.buffers += f.reduce_bytes * (emb_full + fin_full + 3 * block_full);
    else if (s.S > 1 || s.R > 1) m.buffers += f.reduce_bytes * all_units;
  }
  m.activations = activation_bytes(w);
  if (w.samples) m.sample_cache = decode_cache_elems(w.model, w.T()) * w.format.act_bytes;
  return m;
}

CommCost comm_cost(const Workload& w, const Placement& p) {
  const ParamLayout layout(w.model);
  const Sharding s = sharding_of(p);
  const NumericFormat& f = w.format;
  const int a = std::max(1, w.accum);
  // Collectives a group issues per call site: a group of one rank issues none.
  const int shard = s.S > 1 ? 1 : 0, replicate = s.R > 1 ? 1 : 0;
  CommCost c;
  for (size_t u = 0; u < layout.num_units(); ++u) {
    const ShardRange sh = shard_range(layout.unit(u).numel, s.S, 0);
    const int64_t full_p = sh.padded_numel * f.param_bytes, full_r = sh.padded_numel * f.reduce_bytes;
    const bool emb_or_final = u == layout.embedding_unit() || u == layout.final_unit();
    if (!w.trains) {
      // Evaluation only: no gradient, so no reduction and no norm. Sharded
      // parameters are gathered once per forward pass (one batch), except
      // the embedding and final units, gathered once for all the passes of
      // an evaluation (Trainer::Impl::release_ends): a batch of a long
      // evaluation gathers the blocks alone. Replicated ones send nothing.
      if (s.params_sharded && !emb_or_final) {
        c.shard_bytes += ring(1, full_p, s.S);
        c.shard_calls.gathers_scatters += shard;
      }
      continue;
    }
    if (s.params_sharded) {
      // zero3: all-gather in forward and again in backward, except the
      // embedding and final units, which stay gathered through the
      // micro-batch; one reduce-scatter per micro-batch.
      const int gathers = emb_or_final ? 1 : 2;
      c.shard_bytes += a * (gathers * ring(1, full_p, s.S) + ring(1, full_r, s.S));
      c.shard_calls.gathers_scatters += shard * a * (gathers + 1);
    } else if (s.grads_sharded) {
      // zero2: reduce-scatter per micro-batch, all-gather of the updated
      // shards per step (on a GPU overlapping the next forward, on the host
      // ending the step).
      c.shard_bytes += a * ring(1, full_r, s.S) + ring(1, full_p, s.S);
      c.shard_calls.gathers_scatters += shard * (a + 1);
      if (!f.gpu) {
        c.after_backward_bytes += ring(1, full_p, s.S);
        c.after_backward_calls.gathers_scatters += shard;
      }
    } else if (s.zero1) {
      // zero1: one reduce-scatter of the accumulated gradient (in the last
      // micro-batch's backward), one all-gather of params after the step
      // (as zero2's).
      c.shard_bytes += ring(1, full_r, s.S) + ring(1, full_p, s.S);
      c.shard_calls.gathers_scatters += 2 * shard;
      if (!f.gpu) {
        c.after_backward_bytes += ring(1, full_p, s.S);
        c.after_backward_calls.gathers_scatters += shard;
      }
    }
    // ddp: all-reduce of the full gradient; hybrid: of the owned shard.
    const int64_t reduced = (s.S > 1 ? sh.shard_numel : sh.padded_numel) * f.reduce_bytes;
    c.replicate_bytes += ring(2, reduced, s.R);
    c.replicate_calls.all_reduces += replicate;
  }
  if (w.trains) {
    c.shard_bytes += ring(2, 4, s.S);  // the grad-norm partial sums (one fp32) over the shard group
    c.after_backward_bytes += ring(2, 4, s.S);
    c.shard_calls.all_reduces += shard;
    c.after_backward_calls.all_reduces += shard;
  }
  c.bytes = c.shard_bytes + c.replicate_bytes;
  c.calls = c.shard_calls.total() + c.replicate_calls.total();
  // Shard groups: S consecutive ranks, R of them; replicate groups: stride S, S of them.
  const RingSpan sg = ring_span(s.R, s.S, 1, s.S, p.ranks_per_node);
  const RingSpan rg = ring_span(s.S, 1, s.S, s.R, p.ranks_per_node);
  c.shard_group_spans_nodes = sg.spans;
  c.replicate_group_spans_nodes = rg.spans;
  c.shard_group_ranks_per_node = sg.fewest;
  c.replicate_group_ranks_per_node = rg.fewest;
  c.shard_group_nodes = sg.nodes;
  c.replicate_group_nodes = rg.nodes;
  c.inter_bytes = int64_t(sg.crossing * double(c.shard_bytes) + rg.crossing * double(c.replicate_bytes));
  c.intra_bytes = c.bytes - c.inter_bytes;
  return c;
}

}  // namespace gpt
