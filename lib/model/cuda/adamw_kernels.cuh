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

// The CPU update's arithmetic (model/adamw.cpp) for one element: g the
// gradient, m and v its moments (updated), p its master weight; returns the
// new master weight. Written with explicit fmaf, so that every kernel width
// computes the same bits whatever the compiler would contract.
__device__ __forceinline__ float adamw_element(float g, float& m, float& v, float p, float decay, const AdamWArgs& a) {
  g *= a.grad_scale;
  m = fmaf(a.beta1, m, (1.f - a.beta1) * g);
  v = fmaf(a.beta2, v, (1.f - a.beta2) * g * g);
  const float denom = fmaf(sqrtf(v), a.inv_sqrt_bc2, a.eps);
  return fmaf(p, decay, -(a.step_size * m / denom));
}

// The update of n elements, the master weight in fp32; the new value also
// goes, rounded, to the compute copy param when there is one. W = kAdamWVec:
// thread t takes the groups of W elements t, t + stride, ... with one
// access per array and group (16 bytes of master, m and v; every pointer
// aligned to its W elements), then the n % W elements left one at a time;
// W = 1: every element one at a time. Each element's arithmetic is the
// same either way (the same bits). A thread's elements ascend, so its
// segment only moves forward.
constexpr int kAdamWVec = 4;
template <int W, typename G, typename T>
__global__ void adamw_kernel(float* master, T* param, const G* g, float* m, float* v, int64_t n, AdamWArgs a,
                             Segments seg) {
  int k = 0;
  const auto decay_at = [&](int64_t i) {
    while (k + 1 < seg.count && i >= seg.end[k]) ++k;
    return (seg.decays >> k) & 1u ? a.decay : 1.f;
  };
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t groups = W > 1 ? n / W : 0;
  for (int64_t j = first; j < groups; j += stride) {
    const int64_t i = j * W;
    Pack<float, W> pm = load_pack<W>(master + i), mm = load_pack<W>(m + i), vv = load_pack<W>(v + i);
    const Pack<G, W> gg = load_pack<W>(g + i);
#pragma unroll
    for (int e = 0; e < W; ++e) pm.e[e] = adamw_element(f32(gg.e[e]), mm.e[e], vv.e[e], pm.e[e], decay_at(i + e), a);
    store_pack<W>(m + i, mm);
    store_pack<W>(v + i, vv);
    store_pack<W>(master + i, pm);
    if (param) {
      Pack<T, W> pc;
#pragma unroll
      for (int e = 0; e < W; ++e) pc.e[e] = store<T>(pm.e[e]);
      store_pack<W>(param + i, pc);
    }
  }
  for (int64_t i = groups * W + first; i < n; i += stride) {
    float mi = m[i], vi = v[i];
    const float p = adamw_element(f32(g[i]), mi, vi, master[i], decay_at(i), a);
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    if (param) param[i] = store<T>(p);
  }
}

// kAdamWVec when every array starts aligned to its kAdamWVec elements, else 1.
template <typename G, typename T>
inline int adamw_width(const float* master, const T* param, const G* g, const float* m, const float* v) {
  const auto aligned = [](const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  constexpr size_t W = kAdamWVec;
  return aligned(master, W * 4) && aligned(m, W * 4) && aligned(v, W * 4) && aligned(g, W * sizeof(G)) &&
                 (!param || aligned(param, W * sizeof(T)))
             ? kAdamWVec
             : 1;
}

// The grid for n elements at W per thread and iteration.
inline unsigned blocks_for_update(int64_t n, int W = 1) {
  const int64_t groups = (n + W - 1) / W;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((groups + kThreads - 1) / kThreads, kMaxBlocks)));
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
