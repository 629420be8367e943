// What a strategy costs per rank, predicted from the model shape and the
// placement alone (no MPI, no allocation): model-state memory by category,
// activation and transient-buffer memory, and communication bytes per
// optimizer step split into traffic inside a node and across nodes.
//
// Model state and communication are *exact* for the engine in
// data_parallel.cpp: they are computed from the same padded shards
// (shard_range) and follow the same schedule (which collective, how often,
// in which group), so tests compare them with the measured numbers for
// equality. Activations mirror the buffers GPT<T> allocates. Transient
// buffers (gathered units, unit gradients in flight) are an upper bound from
// the engine's in-flight limits.
#pragma once

#include <cstdint>
#include <string>

#include "comm/mesh.hpp"
#include "model/config.hpp"
#include "model/attention_ds.hpp"
#include "model/recompute.hpp"
#include "strategies/strategy.hpp"

namespace gpt {

// The numeric format of a run, as it decides bytes per element.
//   fp32 (CPU): params, grads, Adam moments fp32; the params are the master copy.
//   bf16 (GPU): bf16 params and grads; fp32 master weights and moments
//   (12 bytes per owned element); zero3 gathers bf16 params; gradients are
//   reduced in `reduce_bytes` (fp32 by default, --reduce-dtype).
struct NumericFormat {
  int param_bytes = 4, grad_bytes = 4, optim_bytes = 8, reduce_bytes = 4, act_bytes = 4;
  int accum_bytes = 4;  // sharded gradient accumulators (zero2/zero3): fp32 in every format
  bool gpu = false;  // the device model's layout: fp32 per-row statistics, 256 MiB logits chunks, no CPU scratch
  static NumericFormat fp32();
  static NumericFormat bf16(bool reduce_in_fp32 = true);
};

// --attention on a GPU in bf16: our kernels, cuDNN's fused attention, or
// whichever the trainer finds cuDNN can run (auto).
enum class AttentionImpl { kOurs, kCudnn, kAuto };
AttentionImpl parse_attention(const std::string& s);  // "ours" | "cudnn" | "auto"

struct Workload {
  GPTConfig model;
  int seq_len = 0;      // training T (<= model.seq_len); 0: the model's context
  int T() const { return seq_len > 0 ? seq_len : model.seq_len; }
  int micro_batch = 1;  // sequences per rank per micro-batch
  int accum = 1;        // micro-batches per optimizer step
  bool activation_checkpointing = false;
  Recompute recompute = Recompute::kNone;  // ignored with activation_checkpointing, as the model does
  int threads = 1;      // CPU attention scratch is per thread
  // The run draws samples (--sample-tokens > 0): their key/value cache,
  // L x T x 2C elements of the activation type, stays allocated from the
  // first sample on (model/gpt.hpp decode_cache_elems).
  bool samples = false;
  NumericFormat format = NumericFormat::fp32();
  // GPU, bf16: the attention backward's budget for stored score gradients
  // (GPTOptions::attention_ds_budget).
  int64_t attention_ds_budget = kAttentionDsDefaultBytes;
  // GPU, bf16: which attention runs (--attention). cuDNN's keeps no stored
  // dS but its backward's fp32 dQ accumulator and its engine's workspace
  // (attention_cudnn_backward_data_bytes, attention_cudnn_engine_bytes: an
  // H100's or H200's). auto is decided on the GPU: the larger of the two counts.
  AttentionImpl attention = AttentionImpl::kOurs;
  // false: evaluation only (gpt_train --steps 0, StrategyOptions::trains):
  // the parameters are the whole model state, and no gradient is reduced.
  // Its "step" is one batch's forward pass (accum 1): compute a third of a
  // training step's, communication the blocks' gathers where parameters
  // are sharded, nothing otherwise.
  bool trains = true;
};

struct Placement {
  StrategyKind kind = StrategyKind::kDdp;
  StrategyKind hybrid_inner = StrategyKind::kZero3;
  MeshShape mesh;  // hybrid: R x S; ddp uses 1 x ... as "all ranks replicate"; zero*: 1 x world
  int ranks_per_node = 1;
  int world() const { return mesh.replicas * mesh.shard; }
  // Shard-group size and replica count as the engine uses them.
  int shard_size() const;
  int replicas() const;
  std::string name() const;  // "zero3", "hybrid 2x4 (zero3)"
};
// The placement of `kind` on `world` ranks (mesh for hybrid; ignored otherwise).
Placement make_placement(StrategyKind kind, StrategyKind inner, MeshShape mesh, int ranks_per_node);

struct MemoryCost {
  int64_t params = 0, grads = 0, optim = 0, activations = 0, buffers = 0;
  int64_t sample_cache = 0;  // Workload::samples: sampling's key/value cache
  int64_t model_state() const { return params + grads + optim; }
  int64_t total() const { return model_state() + activations + buffers + sample_cache; }
};

struct CommCost {
  // Sent per rank per optimizer step (ring convention); an evaluation's
  // (!Workload::trains): per batch, its blocks' gathers (the embedding and
  // final units' are once per evaluation).
  int64_t bytes = 0;
  int64_t intra_bytes = 0;   // of which over links inside a node (average over ranks)
  int64_t inter_bytes = 0;   // of which over links between nodes
  int64_t shard_bytes = 0;   // in the shard group (all-gathers, reduce-scatters, the norm)
  int64_t replicate_bytes = 0;  // in the replicate group (ddp all-reduce, hybrid's across-replica all-reduce)
  int64_t after_backward_bytes = 0;  // shard-group bytes that cannot overlap compute: the norm's, and on
                                     // the host zero1/zero2's post-step all-gathers (on a GPU they
                                     // overlap the next forward)
  bool shard_group_spans_nodes = false, replicate_group_spans_nodes = false;
  // The fewest of the group's ranks on one node: a ring across nodes leaves
  // each node through the inter-node links of the group's ranks there.
  int shard_group_ranks_per_node = 1, replicate_group_ranks_per_node = 1;
  // The most nodes one group of the kind spans (1: inside a node).
  int shard_group_nodes = 1, replicate_group_nodes = 1;
  // Collectives per rank per optimizer step, as the engine issues them (one
  // per unit, never coalesced), by group and kind: a ring all-gather or
  // reduce-scatter takes n-1 steps, an all-reduce 2(n-1), so their latency
  // differs. `calls` is what the communicators count (CommTotals::calls).
  struct Calls {
    int64_t gathers_scatters = 0, all_reduces = 0;
    int64_t total() const { return gathers_scatters + all_reduces; }
  };
  Calls shard_calls, replicate_calls;
  Calls after_backward_calls;  // of shard_calls, those of after_backward_bytes
  int64_t calls = 0;
};

MemoryCost memory_cost(const Workload& w, const Placement& p);
CommCost comm_cost(const Workload& w, const Placement& p);
// Activation bytes of one rank's model (GPT<T>'s saved tensors, gradients of
// the current unit, the classifier's logits chunk, attention scratch).
int64_t activation_bytes(const Workload& w);

}  // namespace gpt
