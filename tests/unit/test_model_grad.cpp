// Finite-difference check of the analytic backward pass, in double precision
// so the check is sharp: central differences with h = 1e-6 have truncation
// error ~h^2 and round-off ~1e-16/h, both far below the 1e-7 relative
// tolerance, while any wrong term in a backward formula is O(1) off.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>
#include <omp.h>

#include "model/gpt.hpp"
#include "model/init.hpp"
#include "strategies/cost_model.hpp"

namespace gpt {
namespace {

struct Fixture {
  GPTConfig cfg{2, 2, 8, 8, 37};  // vocab 37 -> padded 128: padding exercised
  ParamLayout layout{cfg};
  int B = 2, T = 5;               // T < n_ctx: a shorter sequence than the model allows
  std::vector<std::vector<double>> params, grads;
  std::vector<int32_t> tokens, targets;

  explicit Fixture(uint64_t seed = 7) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.1);
    for (const UnitSpec& u : layout.units()) {
      params.emplace_back(u.numel);
      grads.emplace_back(u.numel, 0.0);
      init_unit(u, seed, params.back().data());
      // Perturb everything (LayerNorm weights 1 and biases 0 would hide
      // mistakes), except wte's padded rows, which must stay exactly zero.
      for (const TensorSpec& t : u.tensors)
        for (int64_t i = 0; i < t.init_numel; ++i) params.back()[t.offset + i] += noise(rng);
    }
    for (int i = 0; i < B * T; ++i) {
      tokens.push_back(int32_t(rng() % 20));  // tokens < 20: wte rows 20..36 get head gradient only
      targets.push_back(int32_t(rng() % cfg.vocab_size));
    }
  }
  std::vector<const double*> P() const {
    std::vector<const double*> p;
    for (auto& v : params) p.push_back(v.data());
    return p;
  }
  std::vector<double*> G() {
    std::vector<double*> g;
    for (auto& v : grads) g.push_back(v.data());
    return g;
  }
};

double loss_of(GPT<double>& m, Fixture& f) {
  return forward_backward<double>(m, f.P(), {}, f.tokens.data(), f.targets.data(), 0.0);
}

void check_gradients(bool checkpointing, Recompute recompute = Recompute::kNone) {
  Fixture f;
  MemoryTracker mem;
  // Chunks of 3 rows: the fused classifier's chunk loop is exercised too.
  GPT<double> m(f.layout, {f.B, f.cfg.seq_len, checkpointing, 3, recompute}, &mem);
  m.set_shape(f.B, f.T);
  const double N = f.B * f.T;
  forward_backward<double>(m, f.P(), f.G(), f.tokens.data(), f.targets.data(), 1.0 / N);

  const double h = 1e-6;
  int checked = 0;
  for (size_t u = 0; u < f.layout.num_units(); ++u) {
    for (const TensorSpec& t : f.layout.unit(u).tensors) {
      std::vector<int64_t> idx;
      if (t.name == "transformer.wte.weight") {
        const int64_t C = f.cfg.n_embd;
        idx = {f.tokens[0] * C, f.tokens[3] * C + 5, 25 * C + 1, 36 * C + 7};  // embedding+head rows, head-only rows
      } else if (t.name == "transformer.wpe.weight") {
        idx = {0, 9, 4 * f.cfg.n_embd + 3};  // positions 0, 1, 4 (all < T)
      } else {
        for (int k = 0; k < 5; ++k) idx.push_back((k * 7919 + 13) % t.numel);
      }
      for (int64_t i : idx) {
        double& p = f.params[u][t.offset + i];
        const double saved = p;
        p = saved + h;
        const double lp = loss_of(m, f);
        p = saved - h;
        const double lm = loss_of(m, f);
        p = saved;
        const double fd = (lp - lm) / (2 * h);
        const double an = f.grads[u][t.offset + i];
        EXPECT_NEAR(an, fd, 1e-7 * std::max(1.0, std::abs(fd)) + 1e-9)
            << t.name << "[" << i << "] checkpointing=" << checkpointing << " recompute=" << to_string(recompute);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 + 3 + 5 * 12 * f.cfg.n_layer + 5 * 2);
  // Padded wte rows never receive gradient (excluded from softmax and loss).
  const int64_t C = f.cfg.n_embd;
  for (int64_t i = int64_t(f.cfg.vocab_size) * C; i < int64_t(f.cfg.padded_vocab()) * C; ++i)
    ASSERT_EQ(f.grads[0][i], 0.0) << "padded wte element " << i;
}

TEST(ModelGradient, FiniteDifferencesEveryTensorKind) { check_gradients(false); }
TEST(ModelGradient, FiniteDifferencesWithActivationCheckpointing) { check_gradients(true); }
TEST(ModelGradient, FiniteDifferencesWithRecompute) {
  check_gradients(false, Recompute::kGelu);
  check_gradients(false, Recompute::kGeluLn);
}

// The input (embedding) path: gradient with respect to the residual stream
// entering block 0, through everything above it, checked by moving wpe row t
// (which adds to exactly position t's input) along a random direction.
TEST(ModelGradient, DirectionalDerivativeOfInputPath) {
  Fixture f(11);
  MemoryTracker mem;
  GPT<double> m(f.layout, {f.B, f.cfg.seq_len, false, 0}, &mem);
  m.set_shape(f.B, f.T);
  forward_backward<double>(m, f.P(), f.G(), f.tokens.data(), f.targets.data(), 1.0 / (f.B * f.T));
  const int64_t C = f.cfg.n_embd, wpe = f.layout.wpe_offset();
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd;
  std::vector<double> dir(size_t(f.T * C));
  double analytic = 0;
  for (int64_t i = 0; i < f.T * C; ++i) {
    dir[i] = nd(rng);
    analytic += dir[i] * f.grads[0][wpe + i];
  }
  const double h = 1e-6;
  auto shifted = [&](double s) {
    for (int64_t i = 0; i < f.T * C; ++i) f.params[0][wpe + i] += s * dir[i];
    const double l = loss_of(m, f);
    for (int64_t i = 0; i < f.T * C; ++i) f.params[0][wpe + i] -= s * dir[i];
    return l;
  };
  const double fd = (shifted(h) - shifted(-h)) / (2 * h);
  EXPECT_NEAR(analytic, fd, 1e-7 * std::abs(fd));
}

TEST(ActivationCheckpointing, IdenticalGradientsAndLessMemory) {
  GPTConfig cfg{3, 4, 32, 16, 50};
  ParamLayout layout(cfg);
  std::vector<std::vector<float>> params;
  for (const UnitSpec& u : layout.units()) {
    params.emplace_back(u.numel);
    init_unit(u, 5, params.back().data());
  }
  std::vector<const float*> P;
  for (auto& p : params) P.push_back(p.data());
  std::vector<int32_t> tok(4 * 16), tgt(4 * 16);
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = int32_t((i * 31 + 7) % 50);
    tgt[i] = int32_t((i * 17 + 3) % 50);
  }
  std::vector<std::vector<float>> grads[2];
  int64_t act_bytes[2];
  double loss[2];
  for (int ck = 0; ck < 2; ++ck) {
    MemoryTracker mem;
    GPT<float> m(layout, {4, 16, ck == 1, 0}, &mem);
    act_bytes[ck] = mem.bytes(MemCategory::kActivations);
    std::vector<float*> G;
    for (const UnitSpec& u : layout.units()) grads[ck].emplace_back(u.numel, 0.f);
    for (auto& g : grads[ck]) G.push_back(g.data());
    loss[ck] = forward_backward<float>(m, P, G, tok.data(), tgt.data(), 1.f / 64);
  }
  EXPECT_EQ(loss[0], loss[1]);
  for (size_t u = 0; u < grads[0].size(); ++u) EXPECT_EQ(grads[0][u], grads[1][u]) << "unit " << u;  // bitwise
  EXPECT_LT(act_bytes[1], act_bytes[0] * 2 / 3) << act_bytes[1] << " vs " << act_bytes[0];
}

// --recompute: the same loss and gradients as keeping everything, bit for
// bit, with the activation memory the cost model predicts (exactly: it is
// what the planner and `plan` report): 4 N·C (gelu) and 6 N·C (gelu-ln)
// floats per block less, plus shared buffers of 4 N·C and N·C.
TEST(Recompute, IdenticalGradientsAndTheMemoryTheCostModelPredicts) {
  const int B = 3, T = 16;
  GPTConfig cfg{4, 4, 32, T, 50};
  ParamLayout layout(cfg);
  std::vector<std::vector<float>> params;
  for (const UnitSpec& u : layout.units()) {
    params.emplace_back(u.numel);
    init_unit(u, 9, params.back().data());
  }
  std::vector<const float*> P;
  for (auto& p : params) P.push_back(p.data());
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = int32_t((i * 29 + 5) % 50);
    tgt[i] = int32_t((i * 13 + 1) % 50);
  }
  struct Mode {
    Recompute r;
    bool ckpt;
  };
  const Mode modes[] = {{Recompute::kNone, false},
                        {Recompute::kGelu, false},
                        {Recompute::kGeluLn, false},
                        {Recompute::kNone, true},
                        {Recompute::kGeluLn, true}};
  std::vector<std::vector<float>> want;
  double want_loss = 0;
  int64_t act[5];
  for (int k = 0; k < 5; ++k) {
    const Mode& md = modes[k];
    SCOPED_TRACE(fmt::format("recompute {} checkpointing {}", to_string(md.r), md.ckpt));
    MemoryTracker mem;
    GPT<float> m(layout, {B, T, md.ckpt, 0, md.r}, &mem);
    act[k] = mem.bytes(MemCategory::kActivations);
    Workload w;
    w.model = cfg;
    w.seq_len = T;
    w.micro_batch = B;
    w.activation_checkpointing = md.ckpt;
    w.recompute = md.r;
    w.threads = omp_get_max_threads();
    EXPECT_EQ(act[k], activation_bytes(w));
    std::vector<std::vector<float>> grads;
    std::vector<float*> G;
    for (const UnitSpec& u : layout.units()) grads.emplace_back(u.numel, 0.f);
    for (auto& g : grads) G.push_back(g.data());
    // Two micro-batches: the second's recomputation must not see the first's leftovers.
    double loss = forward_backward<float>(m, P, G, tok.data(), tgt.data(), 1.f / (B * T));
    loss += forward_backward<float>(m, P, G, tgt.data(), tok.data(), 1.f / (B * T));
    if (k == 0) {
      want = grads;
      want_loss = loss;
      continue;
    }
    EXPECT_EQ(loss, want_loss);
    for (size_t u = 0; u < want.size(); ++u) EXPECT_EQ(grads[u], want[u]) << "unit " << u;  // bitwise
  }
  const int64_t NC = int64_t(B) * T * cfg.n_embd, L = cfg.n_layer;
  EXPECT_EQ(act[0] - act[1], (L - 1) * 4 * NC * 4);
  EXPECT_EQ(act[1] - act[2], (2 * L - 1) * NC * 4);
  EXPECT_EQ(act[4], act[3]);  // with checkpointing it is ignored
}

// A forward-only model (--steps 0's): the same losses, row by row and bit
// for bit, as a model that can train, with the activation memory the cost
// model predicts for an evaluation (one block's set, no backward buffers),
// and a gradient or backward asked of it is an error, not a write through
// an empty buffer.
TEST(ForwardOnly, SameLossesInTheMemoryTheCostModelPredicts) {
  const int B = 3, T = 16;
  GPTConfig cfg{4, 4, 32, T, 50};
  ParamLayout layout(cfg);
  std::vector<std::vector<float>> params, grads;
  for (const UnitSpec& u : layout.units()) {
    params.emplace_back(u.numel);
    init_unit(u, 11, params.back().data());
    grads.emplace_back(u.numel, 0.f);
  }
  std::vector<const float*> P;
  for (auto& p : params) P.push_back(p.data());
  std::vector<float*> G;
  for (auto& g : grads) G.push_back(g.data());
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = int32_t((i * 23 + 2) % 50);
    tgt[i] = int32_t((i * 19 + 4) % 50);
  }
  MemoryTracker mem_train, mem_eval;
  GPT<float> trains(layout, {B, T}, &mem_train);
  GPTOptions opt{B, T};
  opt.forward_only = true;
  GPT<float> evaluates(layout, opt, &mem_eval);
  Workload w;
  w.model = cfg;
  w.seq_len = T;
  w.micro_batch = B;
  w.threads = omp_get_max_threads();
  EXPECT_EQ(mem_train.bytes(MemCategory::kActivations), activation_bytes(w));
  w.trains = false;
  EXPECT_EQ(mem_eval.bytes(MemCategory::kActivations), activation_bytes(w));
  const int64_t NC = int64_t(B) * T * cfg.n_embd;
  EXPECT_LT(activation_bytes(w), mem_train.bytes(MemCategory::kActivations) - (cfg.n_layer - 1) * 15 * NC * 4);
  // Two batches: the second must not see the first's activations.
  for (const auto& [in, out] : {std::pair{&tok, &tgt}, std::pair{&tgt, &tok}}) {
    const double want = forward_backward<float>(trains, P, {}, in->data(), out->data(), 0.f);
    EXPECT_EQ(forward_backward<float>(evaluates, P, {}, in->data(), out->data(), 0.f), want);
    for (int i = 0; i < B * T; ++i) ASSERT_EQ(evaluates.row_losses()[i], trains.row_losses()[i]) << "row " << i;
  }
  EXPECT_ANY_THROW(forward_backward<float>(evaluates, P, G, tok.data(), tgt.data(), 1.f));
  EXPECT_ANY_THROW(evaluates.backward_final(P[layout.final_unit()], G[layout.final_unit()]));
  EXPECT_ANY_THROW(evaluates.backward_block(0, P[layout.block_unit(0)], G[layout.block_unit(0)]));
  EXPECT_ANY_THROW(evaluates.backward_embedding(tok.data(), G[layout.embedding_unit()]));
}

}  // namespace
}  // namespace gpt
