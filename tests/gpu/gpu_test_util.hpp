// Helpers for the GPU tests: skipping without a device and host <-> device
// copies in either storage type; the inputs, the error measure and its
// tolerance come from kernel_test_util.hpp (shared with the emulated tests).
#pragma once

#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "core/cuda/device_query.hpp"
#include "kernel_test_util.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda::test {

// Every GPU test starts with this: ctest reports the test as skipped (its
// SKIP_REGULAR_EXPRESSION matches gtest's "[  SKIPPED ]"), never as passed.
#define GPT_REQUIRE_GPU()                                                                 \
  do {                                                                                    \
    if (::gpt::cuda::device_count() == 0) GTEST_SKIP() << ::gpt::cuda::no_device_reason(); \
  } while (0)

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

}  // namespace gpt::cuda::test
