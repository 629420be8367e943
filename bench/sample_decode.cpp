// Sampling cost on the CPU: each new token by a whole pass over the context
// (what the trainer did before the key/value cache, and nanoGPT's generate)
// against one cached position per token (GPT::set_decode). Both draw the
// same K tokens greedily after a prompt of P tokens, in one process, side by
// side; prints a '#'-commented table, then one JSON line per configuration
// (--json FILE also writes them to a file).
//   sample_decode [--configs tiny,gpt2-124m] [--prompt P] [--tokens K] [--threads N] [--json FILE]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <vector>

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

struct Model {
  ParamLayout layout;
  std::vector<std::vector<float>> units;
  explicit Model(const GPTConfig& c) : layout(c) {
    for (const UnitSpec& u : layout.units()) {
      std::vector<double> p(size_t(u.numel));
      init_unit(u, 1337, p.data());
      units.emplace_back(p.begin(), p.end());
    }
  }
  const float* emb() const { return units.front().data(); }
  const float* fin() const { return units.back().data(); }
};

// Greedy: the first largest logit.
int argmax(const std::vector<float>& logits, int V) {
  return int(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
}

// K greedy tokens after ctx; cached: set_decode, else a whole pass per token.
// Returns the seconds taken; ctx gains the tokens.
double generate(GPT<float>& m, const Model& w, std::vector<int32_t>& ctx, int K, bool cached) {
  const GPTConfig& c = w.layout.config();
  std::vector<float> logits(size_t(c.padded_vocab()));
  Timer t;
  for (int i = 0; i < K; ++i) {
    const int len = int(ctx.size());
    const int first = cached && i > 0 ? len - 1 : 0;
    if (cached) m.set_decode(first);
    m.set_shape(1, len - first);
    m.forward_embedding(w.emb(), ctx.data() + first);
    for (int l = 0; l < c.n_layer; ++l) m.forward_block(l, w.units[size_t(1 + l)].data());
    m.logits_row(w.fin(), w.emb(), len - first - 1, logits.data());
    ctx.push_back(argmax(logits, c.vocab_size));
  }
  const double s = t.seconds();
  m.set_decode(-1);
  return s;
}

nlohmann::json run(const std::string& name, const GPTConfig& c, int P, int K) {
  Model w(c);
  MemoryTracker mem;
  GPT<float> m(w.layout, {1, P + K, false, 0}, &mem);
  std::vector<int32_t> prompt(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) prompt[size_t(i)] = int32_t((uint32_t(i) * 2654435761u) % uint32_t(c.vocab_size));
  std::vector<int32_t> a = prompt, b = prompt;
  generate(m, w, a, 1, false);  // warm-up: first touch of the activations
  a = prompt;
  const double whole = generate(m, w, a, K, false);
  const double cached = generate(m, w, b, K, true);
  // Greedy on logits that agree to ~1e-6: the same tokens unless two logits tie that closely.
  int same = 0;
  while (same < K && a[size_t(P + same)] == b[size_t(P + same)]) ++same;
  return {{"config", name},        {"n_layer", c.n_layer},         {"n_embd", c.n_embd},
          {"vocab", c.vocab_size}, {"prompt_tokens", P},           {"new_tokens", K},
          {"threads", num_threads()}, {"whole_s", whole},          {"cached_s", cached},
          {"whole_tokens_per_s", K / whole}, {"cached_tokens_per_s", K / cached}, {"speedup", whole / cached},
          {"same_tokens", same}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sample_decode: sampling with the key/value cache against whole passes (CPU)"};
  int P = 256, K = 16, threads = 0;
  std::string configs = "tiny,gpt2-124m", json_path;
  app.add_option("--prompt", P, "prompt tokens (at most the context less --tokens)")->check(gpt::kPositiveInt);
  app.add_option("--tokens", K, "new tokens")->check(gpt::kPositiveInt);
  app.add_option("--threads", threads, "threads (0: OpenMP default)");
  app.add_option("--configs", configs, "comma-separated presets");
  app.add_option("--json", json_path, "also write the JSON lines here");
  CLI11_PARSE(app, argc, argv);
  keep_large_heap_blocks();  // as gpt_train (core/host_heap.hpp)
  set_num_threads(threads);
  std::printf("# sample_decode: %d threads, %d new tokens (greedy) after a prompt of up to %d\n", num_threads(), K,
              P);
  std::printf("# %-10s %7s %6s %7s %12s %12s %8s %6s\n", "config", "layers", "width", "prompt", "whole tok/s",
              "cached tok/s", "speedup", "same");
  std::vector<nlohmann::json> results;
  std::string rest = configs;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string name = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    GPTConfig c = preset(name);
    if (c.seq_len <= K) {
      std::fprintf(stderr, "error: %s: --tokens %d leave no room for a prompt in its context %d\n", name.c_str(), K,
                   c.seq_len);
      return 1;
    }
    const int prompt = std::min(P, c.seq_len - K);  // the whole sample within the context
    auto r = run(name, c, prompt, K);
    std::printf("  %-10s %7d %6d %7d %12.2f %12.2f %7.1fx %3d/%d\n", name.c_str(), c.n_layer, c.n_embd, prompt,
                r["whole_tokens_per_s"].get<double>(), r["cached_tokens_per_s"].get<double>(),
                r["speedup"].get<double>(), r["same_tokens"].get<int>(), K);
    results.push_back(r);
  }
  gpt::bench::print_json_lines(results, json_path);
  return 0;
}
