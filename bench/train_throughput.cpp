// Single-rank CPU training throughput: tokens/s and MFU against a GEMM peak
// measured in the same run, for the configurations of the foundation issue:
//   (a) 4 layers, 4 heads, width 256, vocab 256, T=256, batch 8
//   (b) gpt2-124m at T=256, batch 4
//   (c) gpt2-124m at T=1024 (its own context), batch 1
// A step is the whole optimizer step of the trainer (forward, backward,
// global norm, clipping, AdamW). Prints a '#'-commented table, then one JSON
// line per configuration (--json FILE also writes them to a file).
//   train_throughput [--steps N] [--warmup N] [--threads N] [--configs a,b,c] [--json FILE]
#include <CLI/CLI.hpp>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../apps/command_line.hpp"  // kPositiveInt: the ranges named as integers
#include "json_lines.hpp"

#include "core/host_heap.hpp"
#include "core/memory.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "model/cpu/gemm_peak.hpp"
#include "model/flops.hpp"
#include "model/gpt.hpp"
#include "strategies/model_state.hpp"

namespace {

struct BenchConfig {
  std::string name;
  gpt::GPTConfig gpt;
  int B, T;
};

nlohmann::json run(const BenchConfig& bc, int warmup, int steps, bool ckpt, double peak) {
  using namespace gpt;
  ParamLayout layout(bc.gpt);
  MemoryTracker mem;
  ReplicatedState state(layout, 1, &mem);
  GPT<float> model(layout, {bc.B, bc.T, ckpt, 0}, &mem);
  std::vector<int32_t> tok(size_t(bc.B) * bc.T), tgt(tok.size());
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = int32_t((i * 2654435761u) % uint32_t(bc.gpt.vocab_size));
    tgt[i] = int32_t((i * 40503u + 7) % uint32_t(bc.gpt.vocab_size));
  }
  AdamWHyper h;
  double best = 1e30, total = 0, loss = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    Timer t;
    state.zero_grads();
    loss = forward_backward<float>(model, state.params(), state.grads(), tok.data(), tgt.data(),
                                   1.f / float(tok.size()));
    const double norm = state.grad_norm();
    state.step(h, {1e-4f, s + 1, clip_scale(norm, 1.f)});
    const double dt = t.seconds();
    if (s >= warmup) {
      total += dt;
      best = std::min(best, dt);
    }
  }
  const double tokens = double(bc.B) * bc.T;
  const double mean = total / steps;
  const double flops = train_flops_per_token(bc.gpt, bc.T) * tokens;
  return {{"config", bc.name},
          {"impl", "gpt_hpc"},
          {"n_layer", bc.gpt.n_layer},
          {"n_head", bc.gpt.n_head},
          {"n_embd", bc.gpt.n_embd},
          {"vocab", bc.gpt.vocab_size},
          {"B", bc.B},
          {"T", bc.T},
          {"activation_checkpointing", ckpt},
          {"threads", num_threads()},
          {"steps", steps},
          {"step_time_s", mean},
          {"best_step_time_s", best},
          {"tokens_per_s", tokens / mean},
          {"model_tflops", flops / mean / 1e12},
          {"gemm_peak_gflops", peak / 1e9},
          {"mfu", flops / mean / peak},
          {"loss", loss},
          {"peak_mem_bytes", mem.peak()}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train_throughput: single-rank CPU training throughput and MFU"};
  int steps = 5, warmup = 2, threads = 0;
  std::string configs = "a,b,c", json_path;
  bool ckpt = false;
  app.add_option("--steps", steps, "timed steps")->check(gpt::kPositiveInt);
  app.add_option("--warmup", warmup, "untimed warm-up steps");
  app.add_option("--threads", threads, "threads (0: OpenMP default)");
  app.add_option("--configs", configs, "comma-separated: a, b, c");
  app.add_option("--json", json_path, "also write the JSON lines here");
  app.add_flag("--activation-checkpointing", ckpt, "recompute blocks in backward");
  CLI11_PARSE(app, argc, argv);
  gpt::keep_large_heap_blocks();  // as gpt_train (core/host_heap.hpp)
  gpt::set_num_threads(threads);

  std::vector<BenchConfig> all = {
      {"a", gpt::GPTConfig{4, 4, 256, 256, 256}, 8, 256},
      {"b", [] { auto c = gpt::preset("gpt2-124m"); c.seq_len = 256; return c; }(), 4, 256},
      {"c", gpt::preset("gpt2-124m"), 1, 1024},  // GPT-2's own context
  };
  const double peak = gpt::cpu::measure_gemm_peak(1024, 5);
  std::vector<nlohmann::json> results;
  std::printf("# train_throughput: %d threads, measured fp32 GEMM peak %.1f GFLOP/s (1024^3, best of 5)\n",
              gpt::num_threads(), peak / 1e9);
  std::printf("# %-6s %8s %6s %6s %4s %4s %12s %12s %10s %8s\n", "config", "layers", "width", "vocab", "B", "T",
              "step_s", "tokens/s", "TFLOP/s", "MFU");
  for (const auto& bc : all) {
    if (configs.find(bc.name) == std::string::npos) continue;
    auto r = run(bc, warmup, steps, ckpt, peak);
    std::printf("  %-6s %8d %6d %6d %4d %4d %12.4f %12.1f %10.3f %7.1f%%\n", bc.name.c_str(), bc.gpt.n_layer,
                bc.gpt.n_embd, bc.gpt.vocab_size, bc.B, bc.T, r["step_time_s"].get<double>(),
                r["tokens_per_s"].get<double>(), r["model_tflops"].get<double>(), 100 * r["mfu"].get<double>());
    results.push_back(r);
  }
  gpt::bench::print_json_lines(results, json_path);
  return 0;
}
