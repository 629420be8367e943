// The AdamW kernel and its launch plan (adamw.cu launches them). A header so
// the kernel code and the per-tensor plan also run on the CPU through
// tests/unit/emulated_cuda.hpp (test_cuda_simple_kernels_emulated).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/adamw.hpp"
#include "model/cuda/dtype.cuh"
#include "model/layout.hpp"

namespace gpt::cuda::detail::adamw_impl {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond: enough blocks to fill any GPU

struct AdamWArgs {
  float beta1, beta2, eps, decay, step_size, inv_sqrt_bc2, grad_scale;
};

// The CPU update's arithmetic (model/adamw.cpp) per element, with the master
// weight in fp32; the new value also goes, rounded, to the compute copy
// param when there is one.
template <typename G, typename T>
__global__ void adamw_kernel(float* master, T* param, const G* g, float* m, float* v, int64_t n, AdamWArgs a) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = f32(g[i]) * a.grad_scale;
    const float mi = a.beta1 * m[i] + (1.f - a.beta1) * gi;
    const float vi = a.beta2 * v[i] + (1.f - a.beta2) * gi * gi;
    const float denom = sqrtf(vi) * a.inv_sqrt_bc2 + a.eps;
    const float p = master[i] * a.decay - a.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    if (param) param[i] = store<T>(p);
  }
}

inline unsigned blocks_for_update(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// Calls launch(offset, n, args) once per tensor of `unit` that overlaps
// [begin, end): elements [offset, offset + n) relative to begin, with that
// tensor's decay. The scalars are computed as the CPU update computes them
// (double bias corrections rounded to float), so fp32 runs agree to rounding.
template <typename Launch>
void for_each_tensor_update(const UnitSpec& unit, int64_t begin, int64_t end, const AdamWHyper& h,
                            const AdamWStep& s, Launch launch) {
  const double bc1 = 1.0 - std::pow(double(h.beta1), double(s.t));
  const double bc2 = 1.0 - std::pow(double(h.beta2), double(s.t));
  AdamWArgs a{h.beta1, h.beta2, h.eps, 1.f, float(s.lr / bc1), float(1.0 / std::sqrt(bc2)), s.grad_scale};
  for (const TensorSpec& t : unit.tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    a.decay = t.decay ? 1.f - s.lr * h.weight_decay : 1.f;
    launch(lo - begin, hi - lo, a);
  }
}

}  // namespace gpt::cuda::detail::adamw_impl
