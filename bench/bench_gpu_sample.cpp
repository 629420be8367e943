// Sampling on the GPU: each new token by a whole pass over the context
// (nanoGPT's generate, and the trainer's fallback past the decode kernel's
// reach) against one cached position per token (DeviceGPT::set_decode and
// its one-query attention kernel). Both draw the same K greedy tokens after a
// prompt of P random tokens, side by side in one process; every token waits
// for its logits on the host, as the trainer's sample() does, so the times
// are what a user waits. Prints a table row and one JSON line, with how many
// greedy tokens agree and, at the second new token (the first the decode
// kernel computes), the two paths' largest logit difference beside the gap
// between the two largest logits: a randomly initialised model's logits
// nearly tie, so rounding may pick either token.
//   bench_gpu_sample [--model gpt2-124m] [--seq 1024] [--prompt 512] [--tokens 64] [--precision bf16|fp32]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "gpu_bench.hpp"
#include "core/cuda/device_memory.hpp"
#include "core/cuda/device_query.hpp"
#include "core/cuda/stream.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "model/config.hpp"
#include "model/cuda/device_state.hpp"
#include "model/cuda/gpt_cuda.hpp"
#include "model/init.hpp"
#include "model/layout.hpp"

namespace {

using namespace gpt;

struct Args {
  std::string model = "gpt2-124m", precision = "bf16";
  int seq = 1024, prompt = 512, tokens = 64;
};

template <typename T>
nlohmann::json run(const Args& a) {
  const cuda::Stream owner;  // first: destroyed after everything that uses it
  const cudaStream_t stream = owner.get();
  const GPTConfig cfg = preset(a.model);
  if (a.seq > cfg.seq_len)
    throw ConfigError(fmt::format("invalid seq = {}: {}'s context is {}", a.seq, a.model, cfg.seq_len));
  if (a.prompt + a.tokens > a.seq)
    throw ConfigError(fmt::format("invalid prompt = {}: with --tokens {} the sample exceeds --seq {}", a.prompt,
                                  a.tokens, a.seq));
  const ParamLayout layout(cfg);
  MemoryTracker tracker;
  cuda::DeviceAllocator alloc(&tracker);
  cuda::Matmul mm(&alloc);
  cuda::DeviceReplicatedState<T> st = bench::initial_state<T>(layout, &alloc, stream);
  GPTOptions opt;
  opt.max_batch = 1;
  opt.max_seq = a.seq;
  cuda::DeviceGPT<T> m(layout, opt, &alloc, &mm, stream);
  const auto& P = st.params();
  std::vector<float> logits(size_t(cfg.padded_vocab()));

  // K greedy tokens after ctx (which gains them); seconds taken. second_logits (if given) gets the logits
  // of the second new token: the first the cached path computes with the decode kernel.
  const auto generate = [&](std::vector<int32_t>& ctx, int K, bool cached,
                            std::vector<float>* second_logits = nullptr) {
    Timer t;
    if (cached && !m.set_decode(0))
      throw ConfigError(fmt::format("invalid seq = {}: beyond the decode kernel's reach", a.seq));
    for (int i = 0; i < K; ++i) {
      const int len = int(ctx.size());
      const int first = cached && i > 0 ? len - 1 : 0;  // this pass's positions: [first, len)
      if (cached && i > 0) m.set_decode(first);
      m.set_shape(1, len - first);
      m.set_batch(ctx.data() + first, nullptr);
      m.forward_embedding(P[layout.embedding_unit()]);
      for (int l = 0; l < cfg.n_layer; ++l) m.forward_block(l, P[layout.block_unit(l)]);
      m.logits_row(P[layout.final_unit()], P[layout.embedding_unit()], len - first - 1, logits.data());
      if (i == 1 && second_logits) *second_logits = logits;
      ctx.push_back(int32_t(std::max_element(logits.begin(), logits.begin() + cfg.vocab_size) - logits.begin()));
    }
    const double s = t.seconds();
    m.set_decode(-1);
    return s;
  };
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, cfg.vocab_size - 1);
  std::vector<int32_t> prompt(size_t(a.prompt));
  for (auto& t : prompt) t = tok(rng);
  std::vector<int32_t> whole = prompt, cached = prompt;
  generate(whole, 2, false);  // warm-up: cuBLASLt's algorithms, first touches of both paths
  generate(cached, 2, true);
  whole = cached = prompt;
  // Sized up front, so the copy inside the timed loop allocates nothing.
  std::vector<float> whole_second(logits.size()), cached_second(logits.size());
  const double whole_s = generate(whole, a.tokens, false, &whole_second);
  const double cached_s = generate(cached, a.tokens, true, &cached_second);
  // Greedy on logits that agree to rounding: the same tokens unless two logits nearly tie.
  int same = 0;
  while (same < a.tokens && whole[size_t(a.prompt + same)] == cached[size_t(a.prompt + same)]) ++same;
  // How far the two paths' logits are apart where they first differ in method (the second new token, after the
  // same first one), against the gap between the whole pass's two largest logits there: a gap below the
  // difference lets rounding pick the token. null where the first tokens already differ or there is no second.
  nlohmann::json decode_diff = nullptr, top2_gap = nullptr;
  if (same >= 1 && a.tokens >= 2) {
    float diff = 0, top1 = -INFINITY, top2 = -INFINITY;
    for (int v = 0; v < cfg.vocab_size; ++v) {
      diff = std::max(diff, std::fabs(whole_second[size_t(v)] - cached_second[size_t(v)]));
      const float x = whole_second[size_t(v)];
      if (x > top1) {
        top2 = top1;
        top1 = x;
      } else if (x > top2) {
        top2 = x;
      }
    }
    decode_diff = diff;
    top2_gap = top1 - top2;
  }
  const std::string dev = cuda::device_name(0);
  std::printf("# %-10s %-5s prompt %d + %d tokens: whole passes %.1f tok/s, cached %.1f tok/s (%.1fx), %d/%d same "
              "(%s)\n",
              a.model.c_str(), a.precision.c_str(), a.prompt, a.tokens, a.tokens / whole_s, a.tokens / cached_s,
              whole_s / cached_s, same, a.tokens, dev.c_str());
  return {{"impl", "ours-sample"},
          {"device", dev},
          {"model", a.model},
          {"precision", a.precision},
          {"seq", a.seq},
          {"prompt_tokens", a.prompt},
          {"new_tokens", a.tokens},
          {"whole_s", whole_s},
          {"cached_s", cached_s},
          {"whole_tokens_per_s", a.tokens / whole_s},
          {"cached_tokens_per_s", a.tokens / cached_s},
          {"speedup", whole_s / cached_s},
          {"same_tokens", same},
          {"decode_logits_max_diff", decode_diff},
          {"decode_top2_gap", top2_gap},
          {"cache_bytes", decode_cache_elems(cfg, a.seq) * int64_t(sizeof(T))}};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Sampling on the GPU: the key/value cache against whole passes"};
  app.add_option("--model", a.model, "model preset");
  app.add_option("--seq", a.seq, "the model's context as the trainer allocates it (GPTOptions::max_seq)")
      ->check(gpt::kPositiveInt);
  app.add_option("--precision", a.precision, "bf16 or fp32")->check(CLI::IsMember({"bf16", "fp32"}));
  app.add_option("--prompt", a.prompt, "prompt tokens")->check(gpt::kPositiveInt);
  app.add_option("--tokens", a.tokens, "new tokens (greedy)")->check(gpt::kPositiveInt);
  CLI11_PARSE(app, argc, argv);
  return bench::run_on_gpu([&] { return a.precision == "bf16" ? run<cuda::bf16>(a) : run<float>(a); });
}
