// Writes the input of the PyTorch reference: a small model's initial
// parameters (from our own seeded init, wte without its padded rows), a batch
// of tokens and the optimizer settings. make_golden.py turns it into
// golden.bin. Usage: write_reference_input OUT.bin
#include <cstdio>
#include <random>

#include "model/init.hpp"
#include "model/layout.hpp"
#include "ref_file.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
    return 2;
  }
  // vocab 65 (Shakespeare's characters) is padded to 128: padding exercised.
  const gpt::GPTConfig cfg{2, 2, 16, 16, 65};
  const int B = 2, T = 12;
  const uint64_t seed = 20240520;
  gpt::ParamLayout layout(cfg);
  gpt::ref::RefFile r;
  r.meta = {{"n_layer", cfg.n_layer}, {"n_head", cfg.n_head}, {"n_embd", cfg.n_embd}, {"n_ctx", cfg.seq_len},
            {"vocab_size", cfg.vocab_size}, {"B", B}, {"T", T}, {"seed", seed},
            // Large lr and a clip below the gradient norm: every step moves the
            // weights visibly and clipping is active on each of them.
            {"lr", 1e-2}, {"weight_decay", 0.1}, {"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8}, {"clip", 0.5},
            {"steps", 5}};
  std::mt19937 rng(1);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (auto& t : tok) t = int32_t(rng() % cfg.vocab_size);
  for (auto& t : tgt) t = int32_t(rng() % cfg.vocab_size);
  r.arrays["tokens"] = {"i32", {B, T}, {}, tok};
  r.arrays["targets"] = {"i32", {B, T}, {}, tgt};
  for (const auto& u : layout.units()) {
    std::vector<float> buf(u.numel);
    gpt::init_unit(u, seed, buf.data());
    // LayerNorm parameters and biases start at 1 and 0; perturb them so the
    // reference checks their gradients at a generic point.
    std::normal_distribution<float> nd(0.f, 0.05f);
    for (const auto& t : u.tensors) {
      std::vector<int64_t> shape = t.shape;
      if (t.name == "transformer.wte.weight") shape[0] = cfg.vocab_size;
      int64_t n = 1;
      for (auto d : shape) n *= d;
      std::vector<float> v(buf.begin() + t.offset, buf.begin() + t.offset + n);
      if (t.init != gpt::InitKind::kNormal)
        for (auto& x : v) x += nd(rng);
      r.arrays["param." + t.name] = {"f32", shape, v, {}};
    }
  }
  gpt::ref::write_ref(argv[1], r);
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
