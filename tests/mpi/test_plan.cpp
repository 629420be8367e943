// The planner against the trainer, on 1-4 ranks: for every strategy (and
// hybrid meshes), predicted model-state memory and communication bytes per
// step equal what the trainer measures exactly, with and without gradient
// accumulation; predicted activations within 20% of measured, predicted
// transient buffers an upper bound; and both against the idealised formulas
// of architecture.md within 1% (an independent derivation, so a planner bug
// that the engine shared would still show). Also: --strategy auto runs the
// planner's choice, and --trace writes a Chrome trace in which zero3's
// prefetched all-gathers overlap compute and ddp's, zero1's and zero2's
// gradient collectives are issued during backward. Evaluation only
// (--steps 0) keeps the parameters alone, as predicted.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <filesystem>

#include <fmt/format.h>

#include "fixtures.hpp"
#include "core/shard.hpp"
#include "model/layout.hpp"
#include "mpi_test_env.hpp"
#include "trace_reader.hpp"
#include "strategies/planner.hpp"
#include "strategies/trainer.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string strategy, mesh, inner;
};

std::vector<Case> cases(int W) {
  std::vector<Case> c = {{"ddp", "", "zero3"}, {"zero1", "", "zero3"}, {"zero2", "", "zero3"}, {"zero3", "", "zero3"}};
  c.push_back({"hybrid", fmt::format("1x{}", W), "zero3"});
  c.push_back({"hybrid", fmt::format("{}x1", W), "zero2"});
  if (W == 4)
    for (std::string inner : {"zero3", "zero2"}) c.push_back({"hybrid", "2x2", inner});
  return c;
}

Placement placement_of(const Case& k, int W) {
  const MeshShape mesh = k.mesh.empty() ? MeshShape{1, W} : parse_mesh(k.mesh, W);
  return make_placement(parse_strategy(k.strategy), parse_strategy(k.inner), mesh, W);
}

Workload workload_of(const RunConfig& c, int W) {
  Workload w;
  w.model = c.gpt;
  w.seq_len = c.seq_len;
  w.micro_batch = c.micro_batch;
  w.accum = c.global_batch / (c.micro_batch * W);
  w.activation_checkpointing = c.activation_checkpointing;
  w.threads = 1;
  w.samples = c.sample_tokens > 0;
  return w;
}

TEST(Planner, PredictionsEqualMeasuredForEveryStrategy) {
  const int W = test::env().size();
  for (const int accum : {1, 2}) {
    for (const Case& k : cases(W)) {
      RunConfig c = test::small_run();
      c.steps = 1;
      c.micro_batch = 2;
      c.global_batch = c.micro_batch * W * accum;
      c.strategy = k.strategy;
      c.mesh = k.mesh;
      c.hybrid_inner = k.inner;
      const std::string what = fmt::format("{} {} ({}) accum {}", k.strategy, k.mesh, k.inner, accum);
      SCOPED_TRACE(what);
      const TrainSummary got = Trainer(c, MPI_COMM_WORLD).run();
      const Workload w = workload_of(c, W);
      const Placement p = placement_of(k, W);
      const MemoryCost mem = memory_cost(w, p);
      const CommCost comm = comm_cost(w, p);
      EXPECT_EQ(got.model_state_bytes, mem.model_state());
      EXPECT_EQ(got.comm_bytes_per_step, comm.bytes);
      EXPECT_EQ(got.comm_calls_per_step, comm.calls);
      EXPECT_NEAR(double(got.activation_bytes), double(mem.activations), 0.2 * double(got.activation_bytes));
      EXPECT_LE(got.buffer_bytes, mem.buffers);
      // One node: nothing crosses a node boundary.
      EXPECT_EQ(comm.inter_bytes, 0);
      if (test::env().rank() == 0)
        fmt::print("{:<28} state {:>9} = {:>9} | comm {:>9} = {:>9} in {:>3} = {:>3} | act {:>9} ~ {:>9} | buffers "
                   "{:>8} <= {:>8}\n",
                   what, got.model_state_bytes, mem.model_state(), got.comm_bytes_per_step, comm.bytes,
                   got.comm_calls_per_step, comm.calls, got.activation_bytes, mem.activations, got.buffer_bytes,
                   mem.buffers);
    }
  }
}

// Evaluation only (--steps 0): every strategy keeps its parameters alone
// (no gradients, master weights or moments), and the model one block's
// activations and no backward buffers, as the planner predicts: model state
// and activations exactly, buffers an upper bound; a quarter of training's
// model state in fp32, about half its activations here. A batch of an
// evaluation sends the bytes the planner counts for it.
TEST(Planner, EvaluationOnlyKeepsTheParametersAloneAsPredicted) {
  const int W = test::env().size();
  for (const Case& k : cases(W)) {
    RunConfig c = test::small_run();
    c.micro_batch = 2;
    c.global_batch = c.micro_batch * W;
    c.strategy = k.strategy;
    c.mesh = k.mesh;
    c.hybrid_inner = k.inner;
    SCOPED_TRACE(fmt::format("{} {} ({})", k.strategy, k.mesh, k.inner));
    c.steps = 1;
    const TrainSummary trained = Trainer(c, MPI_COMM_WORLD).run();
    c.steps = 0;
    c.val_data = c.data;
    c.val_batches = 1;
    const int64_t one_batch = Trainer(c, MPI_COMM_WORLD).run().eval_comm_bytes;
    c.val_batches = 3;
    const TrainSummary evaluated = Trainer(c, MPI_COMM_WORLD).run();
    Workload w = workload_of(c, W);
    w.trains = false;  // one block's activations serve every forward; no backward buffers
    const MemoryCost mem = memory_cost(w, placement_of(k, W));
    // A batch of an evaluation sends what the planner counts for it: the blocks' gathers where parameters are
    // sharded (the ends are gathered once per evaluation: in the first batch's bytes, not in the others').
    const CommCost comm = comm_cost(w, placement_of(k, W));
    EXPECT_EQ(evaluated.eval_comm_bytes - one_batch, 2 * comm.bytes);
    EXPECT_GE(one_batch, comm.bytes);
    const Placement p = placement_of(k, W);
    const bool gathers = p.shard_size() > 1 && sharding_rule(p.kind, p.hybrid_inner, p.shard_size()).params_sharded;
    EXPECT_EQ(comm.bytes > 0, gathers);
    EXPECT_EQ(mem.grads, 0);
    EXPECT_EQ(mem.optim, 0);
    EXPECT_EQ(evaluated.model_state_bytes, mem.params);
    EXPECT_EQ(evaluated.model_state_bytes, memory_cost(workload_of(c, W), placement_of(k, W)).params);
    EXPECT_EQ(evaluated.activation_bytes, mem.activations);  // the host model's, as the planner counts them
    EXPECT_LE(evaluated.buffer_bytes, mem.buffers);
    // fp32: 4 bytes a parameter of training's 16 (parameters, gradients, moments) where nothing is sharded.
    if (k.strategy == "ddp") {
      EXPECT_EQ(4 * evaluated.model_state_bytes, trained.model_state_bytes);
    }
    EXPECT_LT(evaluated.model_state_bytes, trained.model_state_bytes);
    EXPECT_LT(evaluated.activation_bytes, trained.activation_bytes);
    EXPECT_LT(evaluated.peak_bytes, trained.peak_bytes);
    if (test::env().rank() == 0)
      fmt::print("{:<20} evaluation: state {:>8} = {:>8} (training {:>8}) | act {:>8} ~ {:>8} (training {:>8})\n",
                 fmt::format("{} {}", k.strategy, k.mesh), evaluated.model_state_bytes, mem.params,
                 trained.model_state_bytes, evaluated.activation_bytes, mem.activations, trained.activation_bytes);
  }
}

// Sampling's key/value cache stays allocated from the first sample on: a
// run that samples after its first step peaks higher by exactly what the
// planner counts for it, whatever the strategy (zero3 gathers into the
// buffers training already holds).
TEST(Planner, CountsSamplingsKeyValueCacheAsMeasured) {
  const int W = test::env().size();
  for (const Case& k : cases(W)) {
    if (k.strategy != "ddp" && k.strategy != "zero3") continue;
    RunConfig c = test::small_run();
    c.steps = 2;
    c.strategy = k.strategy;
    const std::string what = k.strategy;
    SCOPED_TRACE(what);
    const TrainSummary quiet = Trainer(c, MPI_COMM_WORLD).run();
    c.sample_every = 1;
    c.sample_tokens = 3;
    const TrainSummary sampled = Trainer(c, MPI_COMM_WORLD).run();
    const Placement p = placement_of(k, W);
    const MemoryCost with = memory_cost(workload_of(c, W), p);
    c.sample_tokens = 0;
    const MemoryCost without = memory_cost(workload_of(c, W), p);
    EXPECT_EQ(without.sample_cache, 0);
    EXPECT_EQ(with.sample_cache, int64_t(c.gpt.n_layer) * c.seq_len * 2 * c.gpt.n_embd * int64_t(sizeof(float)));
    EXPECT_EQ(with.total() - without.total(), with.sample_cache);
    EXPECT_EQ(sampled.peak_bytes - quiet.peak_bytes, with.sample_cache);
  }
}

// What a sample and a validation send: a strategy that shards parameters
// gathers every block once per pass (a sample's token is one pass: the
// prompt's, then one position each; a validation batch is one) and the
// embedding and final units once for all the passes (they stay gathered
// from the first to the last); the others send nothing.
TEST(Planner, ForwardOnlyPassesGatherEachBlockPerPassAndTheEndsOnce) {
  const int W = test::env().size();
  for (const Case& k : cases(W)) {
    RunConfig c = test::small_run();
    c.steps = 1;
    c.strategy = k.strategy;
    c.mesh = k.mesh;
    c.hybrid_inner = k.inner;
    c.sample_tokens = 5;
    c.val_data = c.data;
    c.val_batches = 3;
    const std::string what = fmt::format("{} {} ({})", k.strategy, k.mesh, k.inner);
    SCOPED_TRACE(what);
    const TrainSummary got = Trainer(c, MPI_COMM_WORLD).run();
    const Placement p = placement_of(k, W);
    const int S = p.shard_size();
    const ParamLayout layout(c.gpt);
    const bool sharded = sharding_rule(p.kind, p.hybrid_inner, S).params_sharded;
    const auto sent_by = [&](int passes) {
      int64_t want = 0;
      for (size_t u = 0; sharded && u < layout.num_units(); ++u) {
        const int64_t bytes = shard_range(layout.unit(u).numel, S, 0).padded_numel * int64_t(sizeof(float));
        const int64_t sent = int64_t(S - 1) * bytes / S;  // an all-gather's share per rank, the ring convention
        const bool ends = u == layout.embedding_unit() || u == layout.final_unit();
        want += (ends ? 1 : passes) * sent;
      }
      return want;
    };
    EXPECT_EQ(got.sample_comm_bytes, sent_by(c.sample_tokens));
    EXPECT_EQ(got.eval_comm_bytes, sent_by(c.val_batches));
    if (sharded && S > 1) {
      EXPECT_GT(sent_by(1), 0);
    }
  }
}

// The idealised formulas (Ψ from the model, not from padded shards), fp32
// and bf16, for the flat strategies and a hybrid mesh.
TEST(Planner, AgreesWithTheIdealisedFormulas) {
  Workload w;
  w.model = preset("gpt2-124m");
  w.seq_len = 1024;
  const double Psi = double(ParamLayout(w.model).total_numel());
  const double C = w.model.n_embd, V = w.model.padded_vocab(), Tc = w.model.seq_len;
  // zero3 keeps the embedding and ln_f gathered through the micro-batch: one all-gather fewer for those.
  const double emb_final = V * C + Tc * C + 2 * C;
  for (const int N : {2, 8, 64}) {
    SCOPED_TRACE(fmt::format("N = {}", N));
    const auto mem = [&](StrategyKind k, const NumericFormat& f) {
      Workload x = w;
      x.format = f;
      return double(memory_cost(x, make_placement(k, StrategyKind::kZero3, {1, N}, 8)).model_state());
    };
    const auto comm = [&](StrategyKind k, const NumericFormat& f) {
      Workload x = w;
      x.format = f;
      return double(comm_cost(x, make_placement(k, StrategyKind::kZero3, {1, N}, 8)).bytes);
    };
    const auto fp32 = NumericFormat::fp32(), bf16 = NumericFormat::bf16(true);
    const double r = double(N - 1) / N;
    EXPECT_NEAR(mem(StrategyKind::kDdp, fp32), 16 * Psi, 0.01 * 16 * Psi);
    EXPECT_NEAR(mem(StrategyKind::kZero1, fp32), 8 * Psi + 8 * Psi / N, 0.01 * Psi);
    EXPECT_NEAR(mem(StrategyKind::kZero2, fp32), 4 * Psi + 12 * Psi / N, 0.01 * Psi);
    EXPECT_NEAR(mem(StrategyKind::kZero3, fp32), 16 * Psi / N, 0.01 * 16 * Psi / N);
    EXPECT_NEAR(mem(StrategyKind::kDdp, bf16), 16 * Psi, 0.01 * 16 * Psi);
    EXPECT_NEAR(mem(StrategyKind::kZero1, bf16), 4 * Psi + 12 * Psi / N, 0.01 * Psi);
    // zero2/zero3 in bf16 accumulate their gradient shard in fp32 (as
    // DeepSpeed's bf16 mode does): 4 Psi/N of gradients where the ZeRO
    // paper's fp16 accounting has 2 Psi/N.
    EXPECT_NEAR(mem(StrategyKind::kZero2, bf16), 2 * Psi + 16 * Psi / N, 0.01 * Psi);
    EXPECT_NEAR(mem(StrategyKind::kZero3, bf16), 18 * Psi / N, 0.01 * 18 * Psi / N);
    EXPECT_NEAR(comm(StrategyKind::kDdp, fp32), 4 * 2 * Psi * r, 0.01 * 4 * Psi);
    EXPECT_NEAR(comm(StrategyKind::kZero1, fp32), 4 * 2 * Psi * r, 0.01 * 4 * Psi);
    EXPECT_NEAR(comm(StrategyKind::kZero2, fp32), 4 * 2 * Psi * r, 0.01 * 4 * Psi);
    EXPECT_NEAR(comm(StrategyKind::kZero3, fp32) + 4 * emb_final * r, 4 * 3 * Psi * r, 0.01 * 4 * Psi);
    // bf16: zero3 gathers bf16 parameters twice, reduces fp32 gradients once.
    EXPECT_NEAR(comm(StrategyKind::kZero3, bf16) + 2 * emb_final * r, (2 * 2 + 4) * Psi * r, 0.01 * 4 * Psi);
    // An evaluation's batch: zero3 gathers the blocks' bf16 parameters once (the ends once per evaluation);
    // the strategies that keep whole parameters send nothing.
    Workload e = w;
    e.trains = false;
    e.format = bf16;
    const auto eval_comm = [&](StrategyKind k) {
      return comm_cost(e, make_placement(k, StrategyKind::kZero3, {1, N}, 8));
    };
    EXPECT_NEAR(double(eval_comm(StrategyKind::kZero3).bytes), 2 * (Psi - emb_final) * r, 0.01 * 2 * Psi);
    EXPECT_EQ(eval_comm(StrategyKind::kZero3).calls, w.model.n_layer);
    for (StrategyKind k : {StrategyKind::kDdp, StrategyKind::kZero1, StrategyKind::kZero2}) {
      EXPECT_EQ(eval_comm(k).bytes, 0) << to_string(k);
      EXPECT_EQ(eval_comm(k).calls, 0) << to_string(k);
    }
  }
  // Hybrid R x S = 8 x 8 on 8 nodes of 8: 3Ψ(S-1)/S inside the node, 2(Ψ/S)(R-1)/R across.
  const Placement h = make_placement(StrategyKind::kHybrid, StrategyKind::kZero3, {8, 8}, 8);
  const CommCost c = comm_cost(w, h);
  EXPECT_NEAR(double(c.intra_bytes) + 4 * emb_final * 7 / 8, 4 * 3 * Psi * 7 / 8, 0.01 * 4 * Psi);
  EXPECT_NEAR(double(c.inter_bytes), 4 * 2 * (Psi / 8) * 7 / 8, 0.01 * 4 * Psi / 8);
  EXPECT_TRUE(c.replicate_group_spans_nodes);
  EXPECT_FALSE(c.shard_group_spans_nodes);
}

TEST(Planner, RecommendsWhatFitsAndRefusesWhatDoesNot) {
  Workload w;
  w.model = preset("gpt2-1.5b");
  w.seq_len = 1024;
  w.micro_batch = 4;
  w.activation_checkpointing = true;
  w.format = NumericFormat::bf16(true);
  ClusterSpec c = ClusterSpec::defaults("cuda", 64, 8);
  Plan p = make_plan(w, c);
  ASSERT_GE(p.best, 0);
  // ddp needs ~16Ψ = 25 GB of model state: it fits in 80 GiB, but the sharded
  // strategies hide as much communication and move fewer bytes across nodes
  // (zero2: 1.07 GiB per step against ddp's 1.43), so ties go to them.
  const PlanRow& chosen = p.rows[size_t(p.best)];
  EXPECT_NE(chosen.placement.kind, StrategyKind::kDdp);
  EXPECT_LT(chosen.comm.inter_bytes, p.rows[0].comm.inter_bytes);
  EXPECT_LE(chosen.step_s, p.rows[0].step_s * 1.01);
  // 16 GiB per rank: ddp (24 GiB) no longer fits and must not be chosen.
  c.device_memory = int64_t(16) << 30;
  p = make_plan(w, c);
  ASSERT_GE(p.best, 0);
  EXPECT_FALSE(p.rows[0].fits);
  EXPECT_TRUE(p.rows[size_t(p.best)].fits);
  EXPECT_NE(p.reasoning.find("ddp"), std::string::npos) << p.reasoning;
  // 1 GiB: nothing fits, and the reasoning says what to change.
  c.device_memory = int64_t(1) << 30;
  p = make_plan(w, c);
  EXPECT_EQ(p.best, -1);
  EXPECT_NE(p.reasoning.find("nothing fits"), std::string::npos) << p.reasoning;
}

// A ring across nodes leaves each node through the inter-node links of its
// ranks there (NCCL spreads its channels over the NICs: nccl-tests' busbw
// across nodes is about a node's NICs together, not one NIC's), so a group
// gets its ranks' share of the node's links, at most NVLink's bandwidth;
// each row's communication time is its bytes over those bandwidths.
TEST(Planner, RingsAcrossNodesGetTheirRanksShareOfTheLinks) {
  Workload w;
  w.model = preset("gpt2-350m");
  w.seq_len = 1024;
  w.micro_batch = 4;
  w.format = NumericFormat::bf16(true);
  // 16 H100s, 8 per node, a 400 Gb/s NIC each.
  const ClusterSpec gpu = ClusterSpec::defaults("cuda", 16, 8);
  EXPECT_EQ(gpu.inter_links, 8);
  EXPECT_DOUBLE_EQ(gpu.ring_bw(false, 8), 360e9);
  EXPECT_DOUBLE_EQ(gpu.ring_bw(true, 8), 360e9);  // 8 NICs x 45 GB/s, NVLink's 360 bounds it
  EXPECT_DOUBLE_EQ(gpu.ring_bw(true, 4), 180e9);
  EXPECT_DOUBLE_EQ(gpu.ring_bw(true, 1), 45e9);
  struct Case {
    StrategyKind kind;
    MeshShape mesh;
    int shard_k, replicate_k;  // the group's fewest ranks on a node
    bool shard_spans, replicate_spans;
  };
  const Plan p = make_plan(w, gpu);
  for (const Case& k : {Case{StrategyKind::kDdp, {1, 16}, 8, 8, false, true},  // ddp: the world replicates
                        Case{StrategyKind::kZero3, {1, 16}, 8, 1, true, false},
                        Case{StrategyKind::kHybrid, {2, 8}, 8, 1, false, true},  // one replica per node
                        Case{StrategyKind::kHybrid, {8, 2}, 2, 4, false, true},  // stride 2: 4 per node
                        Case{StrategyKind::kHybrid, {4, 4}, 4, 2, false, true}}) {
    const Placement pl = make_placement(k.kind, StrategyKind::kZero3, k.mesh, 8);
    SCOPED_TRACE(pl.name());
    const CommCost c = comm_cost(w, pl);
    EXPECT_EQ(c.shard_group_spans_nodes, k.shard_spans);
    EXPECT_EQ(c.replicate_group_spans_nodes, k.replicate_spans);
    if (k.shard_spans) {
      EXPECT_EQ(c.shard_group_ranks_per_node, k.shard_k);
    }
    if (k.replicate_spans) {
      EXPECT_EQ(c.replicate_group_ranks_per_node, k.replicate_k);
    }
    const auto row = std::find_if(p.rows.begin(), p.rows.end(),
                                  [&](const PlanRow& r) { return r.placement.name() == pl.name(); });
    ASSERT_NE(row, p.rows.end());
    const double want = double(c.shard_bytes) / gpu.ring_bw(k.shard_spans, k.shard_k) +
                        double(c.replicate_bytes) / gpu.ring_bw(k.replicate_spans, k.replicate_k) + row->latency_s;
    EXPECT_NEAR(row->comm_s, want, 1e-9 * want);
  }
  // Ranks split unevenly: a shard group of 12 on nodes of 8 has 8 on one node and 4 on the next.
  EXPECT_EQ(comm_cost(w, make_placement(StrategyKind::kHybrid, StrategyKind::kZero3, {2, 12}, 8))
                .shard_group_ranks_per_node,
            4);
  // Shard groups of 3 on nodes of 8 (24 ranks): rank 0's group {0, 1, 2} stays inside
  // node 0, but {6, 7, 8} and {15, 16, 17} cross with one rank on a node (2 of their 3 ring
  // links: a sixth of the shard bytes over all ranks), and so set the time. The replicate
  // groups (stride 3) each cross 3 of their 8 links, with at least 2 ranks on every node.
  const CommCost odd = comm_cost(w, make_placement(StrategyKind::kHybrid, StrategyKind::kZero3, {8, 3}, 8));
  EXPECT_TRUE(odd.shard_group_spans_nodes);
  EXPECT_EQ(odd.shard_group_ranks_per_node, 1);
  EXPECT_TRUE(odd.replicate_group_spans_nodes);
  EXPECT_EQ(odd.replicate_group_ranks_per_node, 2);
  EXPECT_NEAR(double(odd.inter_bytes), double(odd.shard_bytes) / 6 + double(odd.replicate_bytes) * 3 / 8, 2.0);
  // CPUs: one 10 GbE link per node, shared by the node's groups: the world's ring
  // has it all, each of 4 replicate groups (one rank per node) a quarter.
  ClusterSpec cpu = ClusterSpec::defaults("cpu", 8, 4);
  EXPECT_EQ(cpu.inter_links, 1);
  EXPECT_DOUBLE_EQ(cpu.ring_bw(true, 4), 1.2e9);
  EXPECT_DOUBLE_EQ(cpu.ring_bw(true, 1), 0.3e9);
  cpu.inter_links = 4;  // --inter-links 4: a link per rank
  EXPECT_DOUBLE_EQ(cpu.ring_bw(true, 1), 1.2e9);
  EXPECT_DOUBLE_EQ(cpu.ring_bw(true, 4), cpu.intra_bw);  // 4.8 GB/s across, the host's 3 GB/s bounds it
}

// Every collective costs a latency, NCCL's own model of it (src/graph/
// tuning.cc, the Simple protocol): 8.4 us plus 3.4 us per ring step over
// NVLink and 14 us per step across nodes, or, for an all-reduce across
// nodes, a tree's 2 x (ranks per node - 1 + log2 nodes) steps of 28 us where
// that is less. The engine issues one collective per unit and pass (the
// counts are checked against the trainer's in PredictionsEqualMeasured...),
// so on many ranks a small model's step is latency, and the planner keeps
// the long rings off it.
TEST(Planner, EveryCollectiveAddsNcclsLatency) {
  const ClusterSpec gpu = ClusterSpec::defaults("cuda", 64, 8);
  const double us = 1e-6;
  EXPECT_NEAR(gpu.latency(false, 8, 1), (8.4 + 7 * 3.4) * us, 1e-12);   // all-gather in a node: 7 hops
  EXPECT_NEAR(gpu.latency(true, 8, 1), (8.4 + 14 * 3.4) * us, 1e-12);   // all-reduce: 14
  EXPECT_NEAR(gpu.latency(false, 64, 8), (8.4 + 56 * 3.4 + 7 * 14) * us, 1e-12);  // 7 of 63 steps across
  // All-reduces across nodes: 64 on 8 nodes, the ring's 8.4 + 110 x 3.4 + 16 x 14 = 606.4 us against
  // the tree's 2 x (7 + 3) x 28 = 560 us; one rank on each of 8 nodes, 204.4 against 168; 16 on 2
  // nodes, 152.8 against 448.
  EXPECT_NEAR(gpu.latency(true, 64, 8), 560 * us, 1e-12);
  EXPECT_NEAR(gpu.latency(true, 8, 8), 168 * us, 1e-12);
  EXPECT_NEAR(gpu.latency(true, 16, 2), (8.4 + 26 * 3.4 + 4 * 14) * us, 1e-12);
  EXPECT_EQ(gpu.latency(true, 1, 1), 0);

  Workload w;
  w.model = preset("gpt2-124m");  // 14 units: the embedding, 12 blocks, the final LayerNorm
  w.seq_len = 1024;
  w.micro_batch = 1;
  w.accum = 2;
  w.format = NumericFormat::bf16(true);
  struct Case {
    StrategyKind kind;
    MeshShape mesh;
    int64_t shard_gs, shard_ar, after_gs, after_ar, replicate_ar;
    int shard_nodes, replicate_nodes;
  };
  const Plan p = make_plan(w, gpu);
  for (const Case& k : {
           Case{StrategyKind::kDdp, {1, 64}, 0, 0, 0, 0, 14, 1, 8},
           Case{StrategyKind::kZero1, {1, 64}, 28, 1, 0, 1, 0, 8, 1},  // on a GPU only the norm is after backward
           Case{StrategyKind::kZero2, {1, 64}, 2 * 14 + 14, 1, 0, 1, 0, 8, 1},  // a reduce-scatter per micro-batch
           Case{StrategyKind::kZero3, {1, 64}, 2 * (26 + 14), 1, 0, 1, 0, 8, 1},  // 26 gathers, 14 scatters
           Case{StrategyKind::kHybrid, {8, 8}, 2 * (26 + 14), 1, 0, 1, 14, 1, 8},
       }) {
    const Placement pl = make_placement(k.kind, StrategyKind::kZero3, k.mesh, 8);
    SCOPED_TRACE(pl.name());
    const CommCost c = comm_cost(w, pl);
    EXPECT_EQ(c.shard_calls.gathers_scatters, k.shard_gs);
    EXPECT_EQ(c.shard_calls.all_reduces, k.shard_ar);
    EXPECT_EQ(c.after_backward_calls.gathers_scatters, k.after_gs);
    EXPECT_EQ(c.after_backward_calls.all_reduces, k.after_ar);
    EXPECT_EQ(c.replicate_calls.all_reduces, k.replicate_ar);
    EXPECT_EQ(c.replicate_calls.gathers_scatters, 0);
    EXPECT_EQ(c.calls, k.shard_gs + k.shard_ar + k.replicate_ar);
    EXPECT_EQ(c.shard_group_nodes, k.shard_nodes);
    EXPECT_EQ(c.replicate_group_nodes, k.replicate_nodes);
    const auto row = std::find_if(p.rows.begin(), p.rows.end(),
                                  [&](const PlanRow& r) { return r.placement.name() == pl.name(); });
    ASSERT_NE(row, p.rows.end());
    const int S = pl.shard_size(), R = pl.replicas();
    const double want = double(k.shard_gs) * gpu.latency(false, S, k.shard_nodes) +
                        double(k.shard_ar) * gpu.latency(true, S, k.shard_nodes) +
                        double(k.replicate_ar) * gpu.latency(true, R, k.replicate_nodes);
    EXPECT_NEAR(row->latency_s, want, 1e-12);
    // What comes between backward and the step (the norm) is exposed, its latency at least.
    const double after = double(k.after_gs) * gpu.latency(false, S, k.shard_nodes) +
                         double(k.after_ar) * gpu.latency(true, S, k.shard_nodes);
    EXPECT_GE(row->exposed_s, after);
  }
  // zero1 reduce-scatters in the last micro-batch's backward, as zero2 does in
  // every one, and both all-gather the update for the next forward: with one
  // micro-batch their communication is the same, and so is what of it hides.
  {
    Workload one = w;
    one.accum = 1;
    const Plan q = make_plan(one, gpu);
    EXPECT_EQ(q.rows[1].placement.kind, StrategyKind::kZero1);
    EXPECT_EQ(q.rows[2].placement.kind, StrategyKind::kZero2);
    EXPECT_EQ(q.rows[1].comm.calls, q.rows[2].comm.calls);
    EXPECT_DOUBLE_EQ(q.rows[1].comm_s, q.rows[2].comm_s);
    EXPECT_DOUBLE_EQ(q.rows[1].exposed_s, q.rows[2].exposed_s);
    EXPECT_LT(q.rows[1].exposed_s, q.rows[1].comm_s);
    // On the host those all-gathers end the step instead (its progress
    // threads share the cores with the compute): they cannot hide.
    Workload cpu = one;
    cpu.format = NumericFormat::fp32();
    for (const StrategyKind k : {StrategyKind::kZero1, StrategyKind::kZero2}) {
      const CommCost c = comm_cost(cpu, make_placement(k, StrategyKind::kZero3, {1, 64}, 8));
      EXPECT_EQ(c.after_backward_calls.gathers_scatters, 14) << to_string(k);
      const int64_t norm = 2 * 4 * 63 / 64;  // one fp32 all-reduced
      EXPECT_EQ(c.after_backward_bytes, (c.shard_bytes - norm) / 2 + norm) << to_string(k);  // the params' half
    }
  }
  // 256 ranks, one sequence each: without latency a flat placement over all 256 (zero2: everything
  // hidden, the fewest bytes) looks best; with it, zero3's 41 rings of 256 ranks cost about 0.05 s,
  // over ten times the compute, and the planner keeps the shard group to a node or two.
  w.accum = 1;
  ClusterSpec big = ClusterSpec::defaults("cuda", 256, 8);
  const Plan with = make_plan(w, big);
  big.base_lat = big.intra_lat = big.inter_lat = big.tree_lat = 0;
  const Plan without = make_plan(w, big);
  ASSERT_GE(with.best, 0);
  ASSERT_GE(without.best, 0);
  EXPECT_EQ(without.rows[size_t(without.best)].placement.shard_size(), 256)
      << without.rows[size_t(without.best)].placement.name();
  const Placement chosen = with.rows[size_t(with.best)].placement;
  EXPECT_EQ(chosen.kind, StrategyKind::kHybrid) << chosen.name();
  EXPECT_LE(chosen.shard_size(), 16) << chosen.name();
  EXPECT_GT(with.rows[3].latency_s, 10 * with.rows[3].compute_s);  // zero3
  EXPECT_NE(with.reasoning.find("collectives"), std::string::npos) << with.reasoning;
}

TEST(Planner, StrategyAutoRunsThePlannersChoice) {
  const int W = test::env().size();
  RunConfig c = test::small_run();
  c.steps = 2;
  c.strategy = "auto";
  const TrainSummary s = Trainer(c, MPI_COMM_WORLD).run();
  EXPECT_NE(s.strategy, "auto");
  if (W == 1) {
    EXPECT_EQ(s.strategy, "ddp");  // nothing to shard, nothing to communicate
  }
  // A budget only the smallest candidate fits in: the trainer must run it,
  // whatever the speed model prefers.
  if (W >= 2) {
    const Workload w = workload_of(c, W);
    const std::vector<Placement> all = candidate_placements(W, W);
    size_t smallest = 0;
    for (size_t i = 1; i < all.size(); ++i)
      if (memory_cost(w, all[i]).total() < memory_cost(w, all[smallest]).total()) smallest = i;
    const int64_t need = memory_cost(w, all[smallest]).total();
    int64_t runner_up = INT64_MAX;
    for (size_t i = 0; i < all.size(); ++i)
      if (memory_cost(w, all[i]).total() > need) runner_up = std::min(runner_up, memory_cost(w, all[i]).total());
    ASSERT_LT(need, runner_up);
    c.device_mem = std::to_string(int64_t(double(need + runner_up) / 2 / 0.9));  // the planner keeps 10% headroom
    const TrainSummary t = Trainer(c, MPI_COMM_WORLD).run();
    EXPECT_EQ(t.strategy, to_string(all[smallest].kind)) << all[smallest].name();
    if (all[smallest].kind == StrategyKind::kHybrid) {
      EXPECT_EQ(t.mesh, to_string(all[smallest].mesh));
      EXPECT_EQ(t.hybrid_inner, to_string(all[smallest].hybrid_inner));
    }
  }
}

// Zero3's prefetch: the all-gather of block l+1 is issued before block l
// computes, so in the trace some all-gather (issue -> completion) overlaps a
// forward or backward slice. Without prefetch, every gather is waited for
// before its unit computes and nothing overlaps.
TEST(Trace, WritesChromeJsonAndShowsZero3PrefetchOverlap) {
  const int W = test::env().size();
  const fs::path dir = test::data_dir();
  RunConfig c = test::small_run();
  c.steps = 2;
  c.strategy = "zero3";
  c.trace = (dir / fmt::format("trace_np{}.json", W)).string();
  Trainer(c, MPI_COMM_WORLD).run();
  if (test::env().rank() != 0) return;
  const test::ParsedTrace t = test::read_trace(c.trace);
  EXPECT_EQ(int(t.slices.size()), W) << "one process per rank";
  std::vector<test::Slice> compute = t.named(0, "forward h.*"), backward = t.named(0, "backward h.*");
  const int L = c.gpt.n_layer;
  EXPECT_EQ(compute.size(), size_t(2 * L));
  EXPECT_EQ(backward.size(), size_t(2 * L));
  EXPECT_EQ(t.named(0, "optimizer step").size(), 2u);
  if (W == 1) return;  // nothing is sharded on one rank: no gathers
  compute.insert(compute.end(), backward.begin(), backward.end());
  const auto& gathers = t.collectives.at(0).at("all_gather");
  int overlapping = 0;
  for (const test::Slice& g : gathers)
    for (const test::Slice& k : compute) overlapping += g.b < k.e && k.b < g.e;
  EXPECT_GT(overlapping, 0) << "no all-gather overlaps compute: prefetch is not working";
  EXPECT_GE(gathers.size(), size_t(2 * (2 * L + 2)));
}

// The gradient collectives overlap backward: each unit's is issued as soon
// as the last micro-batch's backward is done with it (ddp: its bucket is
// full; zero1: the accumulated gradient is final; zero2: every micro-batch),
// so none is issued inside the step's "gradient sync", which only waits.
// Issue times are taken by the issuing thread, so this does not depend on
// how fast the collectives run.
TEST(Trace, GradientCollectivesAreIssuedDuringBackward) {
  const int W = test::env().size();
  if (W == 1) GTEST_SKIP() << "a one-rank communicator issues nothing";
  const fs::path dir = test::data_dir();
  const size_t units = ParamLayout(test::small_run().gpt).num_units();
  for (const char* strategy : {"ddp", "zero1", "zero2"}) {
    for (const int accum : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} with {} micro-batches", strategy, accum));
      RunConfig c = test::small_run();
      c.steps = 2;
      c.strategy = strategy;
      c.micro_batch = c.global_batch / (W * accum);
      if (c.strategy == "ddp") c.bucket_mb = 1e-6;  // every unit fills a bucket of its own
      c.trace = (dir / fmt::format("trace_{}_{}_np{}.json", strategy, accum, W)).string();
      Trainer(c, MPI_COMM_WORLD).run();
      if (test::env().rank() != 0) continue;
      const test::ParsedTrace t = test::read_trace(c.trace);
      const std::string op = c.strategy == "ddp" ? "all_reduce" : "reduce_scatter";
      const std::vector<test::Slice> syncs = t.named(0, "gradient sync"), backwards = t.named(0, "backward*");
      ASSERT_EQ(syncs.size(), size_t(c.steps));
      // The initial values come first: ddp sums each unit's parts in one all-reduce there (zero1/zero2 end
      // them with gathers); those are not the steps' gradient collectives.
      const std::vector<test::Slice> init = t.named(0, "initial values");
      ASSERT_EQ(init.size(), 1u);
      std::vector<test::Slice> issued;
      size_t at_init = 0;
      for (const test::Slice& r : t.collectives.at(0).at(op)) {
        if (init[0].b <= r.b && r.b <= init[0].e)
          ++at_init;
        else
          issued.push_back(r);
      }
      EXPECT_EQ(at_init, c.strategy == "ddp" ? units : 0) << op << "s of the initial values";
      const size_t per_step = c.strategy == "zero2" ? units * size_t(accum) : units;
      EXPECT_EQ(issued.size(), per_step * size_t(c.steps));
      double step_begin = 0;
      for (const test::Slice& sync : syncs) {
        // The step's last backward slice (the embedding's): every other
        // unit's collective of the last micro-batch was issued before it.
        double last_backward = step_begin;
        for (const test::Slice& k : backwards)
          if (k.b >= step_begin && k.e <= sync.b) last_backward = std::max(last_backward, k.b);
        int in_sync = 0, before_last_backward = 0;
        for (const test::Slice& r : issued) {
          in_sync += sync.b <= r.b && r.b <= sync.e;
          before_last_backward += step_begin <= r.b && r.b < last_backward;
        }
        EXPECT_EQ(in_sync, 0) << op << "s issued by the gradient sync: they did not overlap backward";
        EXPECT_GE(before_last_backward, int(units) - 1) << op << "s issued after backward";
        step_begin = sync.e;
      }
    }
  }
}

}  // namespace
}  // namespace gpt
