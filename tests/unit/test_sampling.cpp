// TokenSampler: greedy, temperature and top-k against their definitions, and
// the defaults against the draw the trainer made before they existed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/sampling.hpp"

namespace gpt {
namespace {

// The trainer's draw before SamplingParams existed (temperature 1, all tokens).
int reference_draw(const std::vector<float>& logits, std::mt19937_64& rng) {
  const int V = int(logits.size());
  const float mx = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (int j = 0; j < V; ++j) total += std::exp(double(logits[j] - mx));
  const double u = double(rng() >> 11) * 0x1p-53 * total;
  double acc = 0;
  for (int j = 0; j < V; ++j) {
    acc += std::exp(double(logits[j] - mx));
    if (acc >= u) return j;
  }
  return V - 1;
}

// Frequencies of `draws` samples against softmax(logits / t) over `kept`
// tokens (the others must never come): each within 5 standard deviations.
void expect_distribution(const std::vector<float>& logits, SamplingParams p, const std::vector<bool>& kept) {
  TokenSampler s(p);
  std::mt19937_64 rng(42);
  const int draws = 40000, V = int(logits.size());
  std::vector<int> count(size_t(V), 0);
  for (int i = 0; i < draws; ++i) ++count[size_t(s.next(logits.data(), V, rng))];
  double z = 0;
  for (int j = 0; j < V; ++j)
    if (kept[size_t(j)]) z += std::exp(logits[size_t(j)] / p.temperature);
  for (int j = 0; j < V; ++j) {
    const double prob = kept[size_t(j)] ? std::exp(logits[size_t(j)] / p.temperature) / z : 0.0;
    const double sd = std::sqrt(draws * prob * (1 - prob));
    EXPECT_NEAR(count[size_t(j)], draws * prob, 5 * sd + 1e-9)
        << "token " << j << ", T " << p.temperature << ", k " << p.top_k;
  }
}

TEST(Sampling, DefaultsDrawExactlyWhatTheTrainerDrewBefore) {
  std::mt19937_64 gen(7);
  std::normal_distribution<float> n(0.f, 3.f);
  TokenSampler s({});
  std::mt19937_64 a(1), b(1);
  for (int row = 0; row < 2000; ++row) {
    std::vector<float> logits(257);
    for (float& l : logits) l = n(gen);
    ASSERT_EQ(s.next(logits.data(), int(logits.size()), a), reference_draw(logits, b)) << "row " << row;
  }
  EXPECT_EQ(a(), b());  // one draw per token, as before
}

TEST(Sampling, ZeroTemperatureAndTopOneAreGreedyWithoutADraw) {
  const std::vector<float> logits{0.5f, 2.f, -1.f, 2.f, 1.9f};
  std::mt19937_64 rng(3), untouched(3);
  EXPECT_EQ(TokenSampler({0.f, 0}).next(logits.data(), 5, rng), 1);  // the first of the largest
  EXPECT_EQ(TokenSampler({1.f, 1}).next(logits.data(), 5, rng), 1);
  EXPECT_EQ(rng(), untouched());
}

TEST(Sampling, TemperatureSharpensOrFlattensTheSoftmax) {
  const std::vector<float> logits{1.f, 0.f, -1.f, 0.5f};
  const std::vector<bool> all(4, true);
  expect_distribution(logits, {1.f, 0}, all);
  expect_distribution(logits, {0.5f, 0}, all);
  expect_distribution(logits, {2.f, 0}, all);
}

TEST(Sampling, TopKDrawsOnlyFromTheKLargestWithTheirRenormalisedSoftmax) {
  const std::vector<float> logits{0.1f, 2.f, -3.f, 1.5f, 0.f, 1.f, -0.5f};
  expect_distribution(logits, {1.f, 3}, {false, true, false, true, false, true, false});
  expect_distribution(logits, {0.7f, 2}, {false, true, false, true, false, false, false});
  expect_distribution(logits, {1.f, 7}, std::vector<bool>(7, true));   // k = V: every token
  expect_distribution(logits, {1.f, 50}, std::vector<bool>(7, true));  // k > V too
}

TEST(Sampling, TiesAtTheTopKThresholdStayIn) {
  const std::vector<float> logits{1.f, 0.f, 1.f, 1.f, -2.f};  // top 2 cuts through a tie of three
  expect_distribution(logits, {1.f, 2}, {true, false, true, true, false});
}

}  // namespace
}  // namespace gpt
