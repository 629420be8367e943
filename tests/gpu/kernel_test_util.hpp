// Host-side helpers of the kernel tests, shared by the GPU tests
// (gpu_test_util.hpp) and the CPU-emulated ones (tests/unit/*_emulated.cpp):
// random inputs rounded as the device stores them, the normalised error
// measure and its tolerance, and the attention log-sum-exp check. No CUDA
// runtime: only the bf16 type.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "model/cuda/types.hpp"

namespace gpt::cuda::test {

inline std::vector<float> randn(size_t n, float std, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, std);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Values as the device stores them: bf16 rounding applied on the host, so
// the CPU reference sees exactly the device's inputs.
template <typename T>
std::vector<float> rounded(std::vector<float> v) {
  if constexpr (std::is_same_v<T, bf16>)
    for (float& x : v) x = __bfloat162float(__float2bfloat16(x));
  return v;
}

// Normalised error ||got - want|| / max(||want||, tiny); fails on NaN/Inf.
inline double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << "non-finite value " << got[i] << " at " << i;
      return INFINITY;
    }
    num += double(got[i] - want[i]) * (got[i] - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// Tolerance of the normalised error. fp32: the device and Eigen sum in
// different orders, so a few ulps per element, ~1e-6 relative; 1e-5 leaves
// room for reductions over a few thousand terms. bf16: every stored value
// carries a relative rounding error of at most 2^-9 (~2e-3), and an output
// computed from rounded inputs and then rounded itself is off by ~2-3 such
// errors in the norm; 1.5e-2 is ~5x that, while any indexing or math error
// gives O(1).
template <typename T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1.5e-2;
}

// exp(s_ii / sqrt(hs) - lse_i) for every (b, h, i): the probability a
// query gives its own key, from a kernel's log-sum-exp lse[B, NH, T] and
// the inputs qkv[B, T, 3C]. Two ops' lse are compared through it: an error
// of e in lse is a relative error of e in the probability.
inline std::vector<float> diagonal_from_lse(const std::vector<float>& qkv, const std::vector<float>& lse, int64_t B,
                                            int64_t T, int64_t C, int64_t NH) {
  const int64_t hs = C / NH;
  std::vector<float> p(size_t(B * NH * T));
  for (int64_t bh = 0; bh < B * NH; ++bh)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t row = ((bh / NH) * T + i) * 3 * C + (bh % NH) * hs;
      float s = 0.f;
      for (int64_t d = 0; d < hs; ++d) s += qkv[size_t(row + d)] * qkv[size_t(row + C + d)];
      p[size_t(bh * T + i)] = std::exp(s / std::sqrt(float(hs)) - lse[size_t(bh * T + i)]);
    }
  return p;
}

// A device-like host buffer for the CPU-emulated kernel tests: n elements
// between two bands of kGuard sentinels a kernel must leave untouched.
template <typename T>
struct Guarded {
  static constexpr int kGuard = 64;
  static constexpr float kSentinel = 12345.f;
  explicit Guarded(size_t n) : v(n + 2 * kGuard, T(kSentinel)) {}
  template <typename U>
  explicit Guarded(const std::vector<U>& init) : Guarded(init.size()) {
    for (size_t i = 0; i < init.size(); ++i) v[kGuard + i] = T(float(init[i]));
  }
  T* data() { return v.data() + kGuard; }
  size_t size() const { return v.size() - 2 * kGuard; }
  std::vector<float> values() const {
    std::vector<float> out;
    for (size_t i = kGuard; i + kGuard < v.size(); ++i) out.push_back(float(v[i]));
    return out;
  }
  bool guards_intact() const {
    const float sentinel = float(T(kSentinel));  // as stored (bf16 rounds it)
    for (size_t i = 0; i < kGuard; ++i)
      if (float(v[i]) != sentinel || float(v[v.size() - 1 - i]) != sentinel) return false;
    return true;
  }
  std::vector<T> v;
};

}  // namespace gpt::cuda::test
