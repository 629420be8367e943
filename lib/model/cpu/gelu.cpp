#include "model/cpu/gelu.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

namespace gpt::cpu {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCoeff = 0.044715;

// Elements per stack block: tanh's values for the backward, no heap.
constexpr int64_t kBlock = 512;

// float: Eigen's vectorised tanh (a rational approximation, within a few
// ulp of std::tanh), in blocks on each thread. std::tanh is a scalar libm
// call; it made GELU forward and backward a fifth of a small model's step,
// and --recompute gelu's recomputation cost as much again (bench/recompute_cost).
// double (the finite-difference tests) keeps std::tanh.
using ArrayF = Eigen::Array<float, Eigen::Dynamic, 1>;
using MapF = Eigen::Map<ArrayF>;
using CMapF = Eigen::Map<const ArrayF>;

template <typename F>
void blocks(int64_t n, F&& f) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < (n + kBlock - 1) / kBlock; ++b) f(b * kBlock, std::min(kBlock, n - b * kBlock));
}
}  // namespace

template <>
void gelu_forward<float>(float* out, const float* inp, int64_t n) {
  const float a = float(kSqrt2OverPi), c = float(kCoeff);
  blocks(n, [&](int64_t i, int64_t m) {
    const CMapF x(inp + i, m);
    MapF(out + i, m) = 0.5f * x * (1.f + (a * (x + c * x.cube())).tanh());
  });
}

template <>
void gelu_backward<float>(float* dinp, const float* inp, const float* dout, int64_t n) {
  const float a = float(kSqrt2OverPi), c = float(kCoeff);
  blocks(n, [&](int64_t i, int64_t m) {
    alignas(64) float buf[kBlock];
    const CMapF x(inp + i, m);
    MapF th(buf, m);
    th = (a * (x + c * x.cube())).tanh();
    MapF(dinp + i, m) = (0.5f * (1.f + th) + 0.5f * a * x * (1.f - th.square()) * (1.f + 3.f * c * x.square())) *
                        CMapF(dout + i, m);
  });
}

template <>
void gelu_forward<double>(double* out, const double* inp, int64_t n) {
  const double a = kSqrt2OverPi, c = kCoeff;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = 0.5 * x * (1 + std::tanh(a * (x + c * x * x * x)));
  }
}

template <>
void gelu_backward<double>(double* dinp, const double* inp, const double* dout, int64_t n) {
  const double a = kSqrt2OverPi, c = kCoeff;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double th = std::tanh(a * (x + c * x * x * x));
    const double grad = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * a * (1 + 3 * c * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace gpt::cpu
