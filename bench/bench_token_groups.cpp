// The host work between a GPU step's loss read and its first kernel: the
// embedding backward's token groups (TokenGroups::build, model/cuda/
// embedding.hpp), built for each micro-batch on the host while, for the
// first micro-batch of a step, the GPU waits. Times the counting sort the
// backend uses against a stable sort of the rows by token (what it replaced)
// on micro-batches of B x 1024 GPT-2 token ids, drawn to repeat the way text
// does (id = 50257 u^3, u uniform: small ids are frequent).
//   bench_token_groups [--benchmark_format=json | --benchmark_out=FILE.json]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/cuda/embedding.hpp"

namespace {

std::vector<int32_t> tokens(int64_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = int32_t(50257 * std::pow(u(rng), 3));
  return t;
}

void counting_sort(benchmark::State& state) {
  const auto tok = tokens(state.range(0));
  gpt::cuda::TokenGroups g;
  for (auto _ : state) {
    g.build(tok.data(), int64_t(tok.size()));
    benchmark::DoNotOptimize(g.packed.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["groups"] = g.num_groups;
}

// The same packed layout from std::stable_sort of the row indices by token,
// with the group boundaries collected into fresh vectors each time.
void stable_sort_baseline(benchmark::State& state) {
  const auto tok = tokens(state.range(0));
  const int64_t n = int64_t(tok.size());
  std::vector<int32_t> packed;
  for (auto _ : state) {
    packed.resize(size_t(3 * n + 1));
    int32_t* order = packed.data();
    std::iota(order, order + n, 0);
    std::stable_sort(order, order + n, [&](int32_t a, int32_t b) { return tok[size_t(a)] < tok[size_t(b)]; });
    std::vector<int32_t> starts, ids;
    starts.reserve(size_t(n) + 1);
    ids.reserve(size_t(n));
    for (int64_t k = 0; k < n; ++k) {
      if (k == 0 || tok[size_t(order[k])] != tok[size_t(order[k - 1])]) {
        starts.push_back(int32_t(k));
        ids.push_back(tok[size_t(order[k])]);
      }
    }
    starts.push_back(int32_t(n));
    std::copy(starts.begin(), starts.end(), packed.begin() + n);
    std::copy(ids.begin(), ids.end(), packed.begin() + n + int64_t(starts.size()));
    packed.resize(size_t(n) + starts.size() + ids.size());
    benchmark::DoNotOptimize(packed.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// Micro-batches of 4, 16 and 64 sequences of 1024 tokens.
BENCHMARK(counting_sort)->Arg(4 << 10)->Arg(16 << 10)->Arg(64 << 10)->Unit(benchmark::kMicrosecond);
BENCHMARK(stable_sort_baseline)->Arg(4 << 10)->Arg(16 << 10)->Arg(64 << 10)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
