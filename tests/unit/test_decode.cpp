// Incremental passes with the key/value cache (GPT::set_decode) against
// whole passes: every position's logits agree, in double to 1e-12 and in
// float to 1e-5 relative; a whole pass after decoding is bit for bit the one
// before (the cache changes nothing of training).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/gpt.hpp"
#include "model/init.hpp"

namespace gpt {
namespace {

template <typename T>
struct DecodeCase {
  GPTConfig cfg{3, 4, 32, 16, 50};  // 3 layers, 4 heads of 8, context 16
  ParamLayout layout{cfg};
  std::vector<std::vector<T>> params;
  std::vector<int32_t> tokens;

  DecodeCase() {
    std::mt19937_64 rng(11);
    std::normal_distribution<double> noise(0.0, 0.2);
    for (const UnitSpec& u : layout.units()) {
      std::vector<double> p(size_t(u.numel));
      init_unit(u, 5, p.data());
      for (const TensorSpec& t : u.tensors)
        for (int64_t i = 0; i < t.init_numel; ++i) p[size_t(t.offset + i)] += noise(rng);
      params.emplace_back(p.begin(), p.end());
    }
    for (int i = 0; i < cfg.seq_len; ++i) tokens.push_back(int32_t(rng() % uint64_t(cfg.vocab_size)));
  }
  const T* unit(size_t u) const { return params[u].data(); }
  const T* emb() const { return unit(0); }
  const T* fin() const { return unit(params.size() - 1); }

  // One pass over tokens [first, first + n); the logits of its rows.
  std::vector<std::vector<T>> pass(GPT<T>& m, int first, int n) const {
    m.set_shape(1, n);
    m.forward_embedding(emb(), tokens.data() + first);
    for (int l = 0; l < cfg.n_layer; ++l) m.forward_block(l, unit(size_t(1 + l)));
    std::vector<std::vector<T>> rows;
    for (int r = 0; r < n; ++r) {
      rows.emplace_back(size_t(cfg.padded_vocab()));
      m.logits_row(fin(), emb(), r, rows.back().data());
    }
    return rows;
  }
};

template <typename T>
double max_rel_err(const std::vector<T>& a, const std::vector<T>& b, int V) {
  double num = 0, den = 0;
  for (int j = 0; j < V; ++j) {
    EXPECT_TRUE(std::isfinite(double(a[size_t(j)]))) << "logit " << j;
    num = std::max(num, std::abs(double(a[size_t(j)]) - double(b[size_t(j)])));
    den = std::max(den, std::abs(double(b[size_t(j)])));
  }
  return num / den;
}

template <typename T>
void check_decode(bool checkpointing, double tol, bool forward_only = false) {
  DecodeCase<T> c;
  const int Tn = c.cfg.seq_len, V = c.cfg.vocab_size, prompt = 5;
  MemoryTracker mem;
  GPTOptions opt{2, 0, checkpointing, 0};
  opt.forward_only = forward_only;
  GPT<T> m(c.layout, opt, &mem);
  const auto whole = c.pass(m, 0, Tn);  // causal: row r sees tokens [0, r]
  const int64_t before = mem.total();
  m.set_decode(0);
  EXPECT_EQ(mem.total() - before, int64_t(sizeof(T)) * c.cfg.n_layer * Tn * 2 * c.cfg.n_embd) << "the cache";
  const auto prefill = c.pass(m, 0, prompt);
  for (int r = 0; r < prompt; ++r) EXPECT_LE(max_rel_err(prefill[size_t(r)], whole[size_t(r)], V), tol) << "prompt row " << r;
  for (int pos = prompt; pos < Tn; ++pos) {
    m.set_decode(pos);
    const auto one = c.pass(m, pos, 1);
    EXPECT_LE(max_rel_err(one[0], whole[size_t(pos)], V), tol) << "position " << pos;
  }
  m.set_decode(-1);
  const auto again = c.pass(m, 0, Tn);
  for (int r = 0; r < Tn; ++r) EXPECT_EQ(again[size_t(r)], whole[size_t(r)]) << "whole pass after decoding, row " << r;
}

TEST(Decode, CachedPassesEqualWholePassesDouble) { check_decode<double>(false, 1e-12); }
TEST(Decode, CachedPassesEqualWholePassesFloat) { check_decode<float>(false, 1e-5); }
TEST(Decode, CachedPassesWithActivationCheckpointing) { check_decode<double>(true, 1e-12); }
TEST(Decode, CachedPassesOfAForwardOnlyModel) { check_decode<double>(false, 1e-12, true); }  // --steps 0's

TEST(Decode, RefusesPassesItCannotCache) {
  DecodeCase<double> c;
  MemoryTracker mem;
  GPT<double> m(c.layout, {2, 0, false, 0}, &mem);
  EXPECT_ANY_THROW(m.set_decode(c.cfg.seq_len));  // past the context
  m.set_decode(3);
  m.set_shape(1, 2);  // two new tokens at once: not a decoding pass
  EXPECT_ANY_THROW(m.forward_embedding(c.emb(), c.tokens.data()));
  m.set_decode(0);
  m.set_shape(2, 4);  // two sequences: one cache
  EXPECT_ANY_THROW(m.forward_embedding(c.emb(), c.tokens.data()));
}

}  // namespace
}  // namespace gpt
