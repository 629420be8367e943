#include "strategies/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "comm/mesh.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "io/data_loader.hpp"
#include "io/metrics.hpp"
#include "io/tokenizer.hpp"
#include "model/cpu/gemm_peak.hpp"
#include "model/flops.hpp"
#include "model/gpt.hpp"
#include "model/schedule.hpp"
#include "strategies/model_state.hpp"

namespace gpt {
namespace {

constexpr int kWarmupSteps = 2;  // excluded from the run's throughput summary

std::string format_eta(double s) {
  const int t = static_cast<int>(s);
  return t >= 3600 ? fmt::format("{}h{:02d}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02d}s", t / 60, t % 60);
}

}  // namespace

struct Trainer::Impl {
  const RunConfig& cfg;
  const MpiEnv& env;
  DeviceMesh2D mesh;
  ParamLayout layout;
  MemoryTracker mem;
  ReplicatedState state;
  GPT<float> model;
  DataLoader loader;
  std::optional<DataLoader> val_loader;
  std::unique_ptr<Tokenizer> tokenizer;
  MetricsWriter metrics;
  LRSchedule sched;
  std::vector<int32_t> tokens, targets;
  double gemm_peak = 0;

  Impl(const RunConfig& c, const MpiEnv& e, MeshShape shape)
      : cfg(c),
        env(e),
        mesh(e, shape, parse_comm_backend(c.comm)),
        layout(c.gpt),
        state(layout, c.seed, &mem),
        model(layout, {c.micro_batch, c.seq_len, c.activation_checkpointing, 0}, &mem),
        loader(LoaderOptions{expand_globs(c.data), c.seq_len, c.global_batch, c.micro_batch, e.rank(), e.size(),
                             c.seed, true, c.gpt.vocab_size}),
        metrics(is_log_rank() ? c.metrics : std::string()),
        sched{c.lr, c.min_lr, c.warmup, c.steps} {
    if (!c.val_data.empty()) {
      val_loader.emplace(LoaderOptions{expand_globs(c.val_data), c.seq_len, c.micro_batch * e.size(), c.micro_batch,
                                       e.rank(), e.size(), c.seed, false, c.gpt.vocab_size});
    }
    if (c.sample_tokens > 0) tokenizer = make_tokenizer(c.tokenizer, c.vocab, c.merges);
    tokens.resize(size_t(c.micro_batch) * c.seq_len);
    targets.resize(tokens.size());
    gemm_peak = cpu::measure_gemm_peak();
  }

  double evaluate() {
    val_loader->seek({0, 0});
    double sum = 0;
    for (int b = 0; b < cfg.val_batches; ++b) {
      val_loader->micro_batch(0, tokens.data(), targets.data());
      sum += forward_backward<float>(model, state.params(), {}, tokens.data(), targets.data(), 0.f);
      val_loader->advance();
    }
    return sum / cfg.val_batches;
  }

  std::string sample(int step) {
    // A separate 1-sequence model: sampling must not disturb the training
    // activations, and it grows the context one token at a time.
    MemoryTracker sample_mem;
    GPT<float> m(layout, {1, cfg.seq_len, false, 0}, &sample_mem);
    const int V = cfg.gpt.vocab_size;
    std::vector<int32_t> ctx{tokenizer->eot() >= 0 ? tokenizer->eot() : int32_t('\n')};
    std::vector<int> out;
    std::vector<float> logits(size_t(cfg.gpt.padded_vocab()));
    std::mt19937_64 rng(cfg.seed + uint64_t(step));
    const auto P = state.params();
    for (int i = 0; i < cfg.sample_tokens; ++i) {
      const int len = static_cast<int>(std::min<size_t>(ctx.size(), size_t(cfg.seq_len)));
      const int32_t* window = ctx.data() + ctx.size() - len;
      m.set_shape(1, len);
      m.forward_embedding(P[layout.embedding_unit()], window);
      for (int l = 0; l < cfg.gpt.n_layer; ++l) m.forward_block(l, P[layout.block_unit(l)]);
      m.logits_row(P[layout.final_unit()], P[layout.embedding_unit()], len - 1, logits.data());
      // Softmax sampling at temperature 1 with a portable uniform draw.
      const float mx = *std::max_element(logits.begin(), logits.begin() + V);
      double total = 0;
      for (int j = 0; j < V; ++j) total += std::exp(double(logits[j] - mx));
      double u = double(rng() >> 11) * 0x1p-53 * total, acc = 0;
      int next = V - 1;
      for (int j = 0; j < V; ++j) {
        acc += std::exp(double(logits[j] - mx));
        if (acc >= u) {
          next = j;
          break;
        }
      }
      ctx.push_back(next);
      out.push_back(next);
    }
    return tokenizer->decode(out);
  }

  nlohmann::json mem_json() const {
    return {{"params", mem.bytes(MemCategory::kParams)},
            {"grads", mem.bytes(MemCategory::kGrads)},
            {"optim", mem.bytes(MemCategory::kOptim)},
            {"activations", mem.bytes(MemCategory::kActivations)},
            {"peak", mem.peak()}};
  }

  TrainSummary run() {
    const int64_t tokens_per_step = int64_t(cfg.global_batch) * cfg.seq_len;
    const double flops_per_step = train_flops_per_token(cfg.gpt, cfg.seq_len) * double(tokens_per_step);
    Communicator* comms[] = {&mesh.world(), &mesh.shard_group(), &mesh.replicate_group()};
    nlohmann::json header = {{"type", "run"},
                             {"config", cfg.to_json()},
                             {"strategy", to_string(cfg.strategy)},
                             {"world_size", env.size()},
                             {"mesh", to_string(mesh.shape())},
                             {"comm_backend", cfg.comm},
                             {"params", layout.model_numel()},
                             {"params_stored", layout.total_numel()},
                             {"train_tokens", loader.num_tokens()},
                             {"accum_steps", loader.accum_steps()},
                             {"threads", num_threads()},
                             {"gemm_peak_flops", gemm_peak},
                             {"flops_per_token", train_flops_per_token(cfg.gpt, cfg.seq_len)}};
    metrics.write(header);
    log0("model {}: {:.2f}M parameters, {} layers, {} heads, width {}, vocab {} (padded {}), T={}", cfg.model,
         layout.model_numel() / 1e6, cfg.gpt.n_layer, cfg.gpt.n_head, cfg.gpt.n_embd, cfg.gpt.vocab_size,
         cfg.gpt.padded_vocab(), cfg.seq_len);
    log0("data: {} tokens, {} sequences; global batch {} = micro {} x accum {} x ranks {}; {} threads; GEMM peak "
         "{:.1f} GFLOP/s",
         loader.num_tokens(), loader.num_windows(), cfg.global_batch, cfg.micro_batch, loader.accum_steps(),
         env.size(), num_threads(), gemm_peak / 1e9);

    if (val_loader) log0("step 0: val loss {:.4f}", evaluate());
    TrainSummary sum;
    const float loss_scale = 1.f / float(tokens_per_step);
    double steady_time = 0;
    int steady_steps = 0;
    Timer run_timer;
    for (int step = 0; step < cfg.steps; ++step) {
      Timer t;
      for (Communicator* c : comms) c->stats().reset();
      state.zero_grads();
      double loss = 0;
      for (int m = 0; m < loader.accum_steps(); ++m) {
        loader.micro_batch(m, tokens.data(), targets.data());
        loss += forward_backward<float>(model, state.params(), state.grads(), tokens.data(), targets.data(),
                                        loss_scale);
      }
      loss /= loader.accum_steps();
      if (!std::isfinite(loss)) throw Error(fmt::format("loss is {} at step {}: training diverged", loss, step + 1));
      const double norm = state.grad_norm();
      const float lr = sched.at(step);
      state.step(cfg.adam, {lr, step + 1, clip_scale(norm, cfg.clip)});
      loader.advance();
      const double dt = t.seconds();
      if (step >= kWarmupSteps) {
        steady_time += dt;
        ++steady_steps;
      }
      CommTotals comm;
      for (Communicator* c : comms) {
        const CommTotals x = c->stats().totals();
        comm.bytes += x.bytes;
        comm.time_s += x.time_s;
        comm.exposed_s += x.exposed_s;
      }
      const double tps = tokens_per_step / dt;
      const double mfu = flops_per_step / dt / gemm_peak;
      if (step == 0) sum.first_loss = loss;
      sum.final_loss = loss;

      nlohmann::json rec = {{"step", step + 1},
                            {"loss", loss},
                            {"lr", lr},
                            {"grad_norm", norm},
                            {"tokens_per_s", tps},
                            {"mfu", mfu},
                            {"step_time_s", dt},
                            {"mem", mem_json()},
                            {"comm", {{"bytes", comm.bytes}, {"time_s", comm.time_s}, {"exposed_s", comm.exposed_s}}}};
      const bool last = step + 1 == cfg.steps;
      if (val_loader && ((cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0) || last)) {
        const double vl = evaluate();
        rec["val_loss"] = vl;
        sum.final_val_loss = vl;
        log0("step {}: val loss {:.4f}", step + 1, vl);
      }
      metrics.write(rec);
      if ((step + 1) % cfg.log_every == 0 || last) {
        const double eta = run_timer.seconds() / (step + 1) * (cfg.steps - step - 1);
        log0("step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} tok/s | mfu {:.1f}% | {:.0f} ms | eta {}",
             step + 1, cfg.steps, loss, lr, norm, tps, 100 * mfu, 1000 * dt, format_eta(eta));
      }
      if (tokenizer && ((cfg.sample_every > 0 && (step + 1) % cfg.sample_every == 0) || last)) {
        log0("sample at step {}:\n{}", step + 1, sample(step + 1));
      }
    }
    sum.steps = cfg.steps;
    if (steady_steps > 0) {
      sum.tokens_per_s = tokens_per_step * steady_steps / steady_time;
      sum.mfu = flops_per_step * steady_steps / steady_time / gemm_peak;
    }
    log0("done: {} steps, loss {:.4f} -> {:.4f}{}, {:.0f} tok/s, MFU {:.1f}% of measured GEMM peak (steps after "
         "{} warm-up)",
         cfg.steps, sum.first_loss, sum.final_loss,
         sum.final_val_loss >= 0 ? fmt::format(", val loss {:.4f}", sum.final_val_loss) : "", sum.tokens_per_s,
         100 * sum.mfu, kWarmupSteps);
    return sum;
  }
};

Trainer::Trainer(const RunConfig& cfg, const MpiEnv& env) {
  const MeshShape shape = cfg.mesh.empty() ? default_mesh(env) : parse_mesh(cfg.mesh, env.size());
  if (env.size() != 1) {
    throw ConfigError(fmt::format("world size {}: this build trains on one rank; the multi-rank strategies "
                                  "(ddp/zero*/hybrid over MPI) are not in it yet",
                                  env.size()));
  }
  set_num_threads(cfg.threads);
  impl_ = std::make_unique<Impl>(cfg, env, shape);
}

Trainer::~Trainer() = default;

TrainSummary Trainer::run() { return impl_->run(); }

}  // namespace gpt
