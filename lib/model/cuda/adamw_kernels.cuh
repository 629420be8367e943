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

// decay: the factor of a decaying element's master weight (1 - lr * wd).
struct AdamWArgs {
  float beta1, beta2, eps, decay, step_size, inv_sqrt_bc2, grad_scale;
};

// What one launch updates: the tensors it covers, consecutive ones with the
// same decay merged into one segment. Segment k ends at element end[k]
// (relative to the launch's first element; the last ends at n) and decays
// when bit k of `decays` is set. One launch per unit rather than per
// tensor: a GPT-2 block has 12 tensors, 8 of them vectors of C elements,
// each of which would otherwise be a launch of its own (148 launches per
// step for gpt2-124m, 14 now).
constexpr int kMaxSegments = 16;
struct Segments {
  int64_t end[kMaxSegments];
  uint32_t decays;
  int count;
};

// One segment of n elements.
inline Segments one_segment(int64_t n, bool decays) {
  Segments s{};
  s.end[0] = n;
  s.decays = decays ? 1u : 0u;
  s.count = 1;
  return s;
}

// The CPU update's arithmetic (model/adamw.cpp) per element, with the master
// weight in fp32; the new value also goes, rounded, to the compute copy
// param when there is one.
template <typename G, typename T>
__global__ void adamw_kernel(float* master, T* param, const G* g, float* m, float* v, int64_t n, AdamWArgs a,
                             Segments seg) {
  int k = 0;  // a thread's elements ascend, so its segment only moves forward
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    while (k + 1 < seg.count && i >= seg.end[k]) ++k;
    const float decay = (seg.decays >> k) & 1u ? a.decay : 1.f;
    const float gi = f32(g[i]) * a.grad_scale;
    const float mi = a.beta1 * m[i] + (1.f - a.beta1) * gi;
    const float vi = a.beta2 * v[i] + (1.f - a.beta2) * gi * gi;
    const float denom = sqrtf(vi) * a.inv_sqrt_bc2 + a.eps;
    const float p = master[i] * decay - a.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    if (param) param[i] = store<T>(p);
  }
}

inline unsigned blocks_for_update(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// Calls launch(offset, n, args, segments) for the elements [begin, end) of
// `unit`: once, unless they span more than kMaxSegments segments of equal
// decay; elements [offset, offset + n) relative to begin. The scalars are
// computed as the CPU update computes them (double bias corrections rounded
// to float), so fp32 runs agree to rounding.
template <typename Launch>
void for_each_update_launch(const UnitSpec& unit, int64_t begin, int64_t end, const AdamWHyper& h,
                            const AdamWStep& s, Launch launch) {
  const double bc1 = 1.0 - std::pow(double(h.beta1), double(s.t));
  const double bc2 = 1.0 - std::pow(double(h.beta2), double(s.t));
  const AdamWArgs a{h.beta1, h.beta2, h.eps, 1.f - s.lr * h.weight_decay, float(s.lr / bc1),
                    float(1.0 / std::sqrt(bc2)), s.grad_scale};
  int64_t first = -1, last = -1;  // the pending launch's elements (absolute), -1: none
  Segments seg{};
  auto flush = [&] {
    if (first < 0) return;
    for (int k = 0; k < seg.count; ++k) seg.end[k] -= first;
    launch(first - begin, last - first, a, seg);
    first = -1;
    seg = Segments{};
  };
  for (const TensorSpec& t : unit.tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    const bool joins = first >= 0 && lo == last;  // contiguous with the pending launch
    if (joins && bool((seg.decays >> (seg.count - 1)) & 1u) == t.decay) {
      seg.end[seg.count - 1] = hi;  // same decay: the segment grows
      last = hi;
      continue;
    }
    if (!joins || seg.count == kMaxSegments) flush();
    if (first < 0) first = lo;
    seg.end[seg.count] = hi;
    if (t.decay) seg.decays |= 1u << seg.count;
    ++seg.count;
    last = hi;
  }
  flush();
}

}  // namespace gpt::cuda::detail::adamw_impl
