// What --recompute costs and saves on the CPU, side by side in one process:
// one model per mode (none, gelu, gelu-ln) on the same parameters and
// tokens, their forward+backward passes interleaved (mode after mode, every
// repetition), so the shared machine's noise falls on all of them alike.
// Reports each mode's activation bytes (exact: the allocator's count) and
// the median forward+backward time, relative to none. The gradients are
// checked equal bit for bit to none's, so the timing compares the same
// computation. Prints a '#'-commented table, then one JSON line per row.
//   recompute_cost [--reps N] [--threads N] [--configs a,b,c] [--json FILE]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>

#include <nlohmann/json.hpp>

#include "../apps/command_line.hpp"  // kPositiveInt: the ranges named as integers
#include "json_lines.hpp"

#include "core/host_heap.hpp"
#include "core/memory.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "model/gpt.hpp"
#include "model/init.hpp"

namespace {

using namespace gpt;

struct BenchConfig {
  std::string name;
  GPTConfig gpt;
  int B, T;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<nlohmann::json> run(const BenchConfig& bc, int reps) {
  const ParamLayout layout(bc.gpt);
  std::vector<std::vector<float>> params;
  std::vector<const float*> P;
  for (const UnitSpec& u : layout.units()) {
    params.emplace_back(size_t(u.numel));
    init_unit(u, 1, params.back().data());
    P.push_back(params.back().data());
  }
  std::vector<int32_t> tok(size_t(bc.B) * bc.T), tgt(tok.size());
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = int32_t((i * 2654435761u) % uint32_t(bc.gpt.vocab_size));
    tgt[i] = int32_t((i * 40503u + 7) % uint32_t(bc.gpt.vocab_size));
  }
  const Recompute modes[] = {Recompute::kNone, Recompute::kGelu, Recompute::kGeluLn};
  constexpr int kModes = 3;
  std::vector<std::unique_ptr<MemoryTracker>> trackers;
  std::vector<std::unique_ptr<GPT<float>>> models;
  for (Recompute r : modes) {
    trackers.push_back(std::make_unique<MemoryTracker>());
    models.push_back(std::make_unique<GPT<float>>(layout, GPTOptions{bc.B, bc.T, false, 0, r}, trackers.back().get()));
  }
  std::vector<std::vector<float>> grads[kModes];
  std::vector<double> times[kModes];
  for (int rep = 0; rep <= reps; ++rep) {  // repetition 0 warms up
    for (int k = 0; k < kModes; ++k) {
      grads[k].clear();
      std::vector<float*> G;
      for (const UnitSpec& u : layout.units()) grads[k].emplace_back(size_t(u.numel), 0.f);
      for (auto& g : grads[k]) G.push_back(g.data());
      Timer t;
      forward_backward<float>(*models[k], P, G, tok.data(), tgt.data(), 1.f / float(tok.size()));
      if (rep > 0) times[k].push_back(t.seconds());
    }
    for (int k = 1; k < kModes; ++k)
      if (grads[k] != grads[0]) {
        std::fprintf(stderr, "error: %s: --recompute %s changed the gradients\n", bc.name.c_str(),
                     to_string(modes[k]));
        std::exit(1);
      }
  }
  std::vector<nlohmann::json> rows;
  const double base_s = median(times[0]);
  const auto act0 = double(trackers[0]->bytes(MemCategory::kActivations));
  for (int k = 0; k < kModes; ++k) {
    const double s = median(times[k]);
    const auto act = double(trackers[k]->bytes(MemCategory::kActivations));
    rows.push_back({{"config", bc.name},
                     {"n_layer", bc.gpt.n_layer},
                     {"n_embd", bc.gpt.n_embd},
                     {"vocab", bc.gpt.vocab_size},
                     {"B", bc.B},
                     {"T", bc.T},
                     {"threads", num_threads()},
                     {"recompute", to_string(modes[k])},
                     {"reps", reps},
                     {"activation_bytes", act},
                     {"activation_ratio", act / act0},
                     {"fwd_bwd_s", s},
                     {"time_ratio", s / base_s},
                     {"tokens_per_s", double(bc.B) * bc.T / s}});
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recompute_cost: activation memory and time of --recompute on the CPU, side by side"};
  int reps = 5, threads = 0;
  std::string configs = "a,b,c", json_path;
  app.add_option("--reps", reps, "timed repetitions per mode (median; one more warms up)")->check(gpt::kPositiveInt);
  app.add_option("--threads", threads, "threads (0: OpenMP default)");
  app.add_option("--configs", configs, "comma-separated: a, b, c");
  app.add_option("--json", json_path, "also write the JSON lines here");
  CLI11_PARSE(app, argc, argv);
  keep_large_heap_blocks();  // as gpt_train (core/host_heap.hpp)
  set_num_threads(threads);
  const auto gpt2_at = [](int T) {
    GPTConfig c = preset("gpt2-124m");
    c.seq_len = T;
    return c;
  };
  const std::vector<BenchConfig> all = {
      {"a", GPTConfig{4, 4, 256, 256, 256}, 8, 256},  // train_throughput's (a)
      {"b", gpt2_at(256), 4, 256},                    // train_throughput's (b)
      {"c", gpt2_at(1024), 1, 1024},                  // gpt2-124m at its full context
  };
  std::printf("# recompute_cost: %d threads, medians of %d interleaved forward+backward passes\n", num_threads(), reps);
  std::printf("# %-6s %6s %6s %5s %5s %-8s %14s %8s %10s %8s\n", "config", "layers", "width", "B", "T", "recompute",
              "activ. MiB", "vs none", "fwd+bwd s", "vs none");
  std::vector<nlohmann::json> results;
  for (const auto& bc : all) {
    if (configs.find(bc.name) == std::string::npos) continue;
    for (auto& r : run(bc, reps)) {
      std::printf("  %-6s %6d %6d %5d %5d %-8s %14.1f %7.1f%% %10.3f %7.1f%%\n", bc.name.c_str(), bc.gpt.n_layer,
                  bc.gpt.n_embd, bc.B, bc.T, r["recompute"].get<std::string>().c_str(),
                  r["activation_bytes"].get<double>() / 1048576.0, 100 * r["activation_ratio"].get<double>(),
                  r["fwd_bwd_s"].get<double>(), 100 * r["time_ratio"].get<double>());
      results.push_back(r);
    }
  }
  bench::print_json_lines(results, json_path);
  return 0;
}
