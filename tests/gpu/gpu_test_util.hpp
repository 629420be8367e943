// Helpers for the GPU tests: skipping without a device, host <-> device
// copies in either storage type, and the error measure with its tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "core/cuda/device_query.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda::test {

// Every GPU test starts with this: ctest reports the test as skipped (its
// SKIP_REGULAR_EXPRESSION matches gtest's "[  SKIPPED ]"), never as passed.
#define GPT_REQUIRE_GPU()                                                                 \
  do {                                                                                    \
    if (::gpt::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

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

// A device array of n elements of T with `guard` sentinel elements on each
// side; check_guards() fails the test if a kernel wrote outside [0, n).
template <typename T>
class Dev {
 public:
  static constexpr int kGuard = 64;
  explicit Dev(size_t n) : n_(n) {
    GPT_CUDA_OK(cudaMalloc(&base_, (n + 2 * kGuard) * sizeof(T)));
    std::vector<T> fill(n + 2 * kGuard, sentinel());
    GPT_CUDA_OK(cudaMemcpy(base_, fill.data(), fill.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit Dev(const std::vector<float>& v) : Dev(v.size()) { upload(v); }
  ~Dev() { cudaFree(base_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* data() { return base_ + kGuard; }
  size_t size() const { return n_; }
  void upload(const std::vector<float>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = from_float(v[i]);
    GPT_CUDA_OK(cudaMemcpy(data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    GPT_CUDA_OK(cudaDeviceSynchronize());
    std::vector<T> h(n_);
    GPT_CUDA_OK(cudaMemcpy(h.data(), base_ + kGuard, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> v(n_);
    for (size_t i = 0; i < n_; ++i) v[i] = to_float(h[i]);
    return v;
  }
  void check_guards() const {
    GPT_CUDA_OK(cudaDeviceSynchronize());
    std::vector<T> h(n_ + 2 * kGuard);
    GPT_CUDA_OK(cudaMemcpy(h.data(), base_, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kGuard; ++i) {
      ASSERT_EQ(to_float(h[i]), to_float(sentinel())) << "write before the buffer at " << i - kGuard;
      ASSERT_EQ(to_float(h[n_ + kGuard + i]), to_float(sentinel())) << "write past the buffer at " << n_ + i;
    }
  }

 private:
  static T from_float(float x) {
    if constexpr (std::is_same_v<T, bf16>) return __float2bfloat16(x);
    else return T(x);
  }
  static float to_float(T x) {
    if constexpr (std::is_same_v<T, bf16>) return __bfloat162float(x);
    else return float(x);
  }
  static T sentinel() { return from_float(-1234.5f); }
  T* base_ = nullptr;
  size_t n_;
};

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

}  // namespace gpt::cuda::test
