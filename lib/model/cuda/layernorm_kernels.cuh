// Kernels of the LayerNorm op (layernorm.cu launches them). A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_cuda_kernels_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::layernorm_impl {

constexpr float kEps = 1e-5f;      // model/cpu/layernorm.hpp's kLayerNormEps
constexpr int kRowsPerBlock = 8;   // one warp per row
constexpr int kBackwardWarps = 1024;  // partial dw/db rows: 128 blocks fill an H100; fixed, so the summation order does not depend on N
constexpr int kBackwardWarpsPerBlock = 8;

// One warp per row; two passes over the row (mean, then centred variance)
// like the CPU reference. W elements per access (dtype.cuh's vector_width:
// W divides C and every row is 16-byte aligned when W > 1); lane l handles
// the W-element chunks l, l + 32, ...
template <typename T, int W>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* bias,
                                         int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= N) return;
  const T* x = inp + row * C;
  const int64_t chunks = C / W;
  float sum = 0.f;
  for (int64_t c = lane; c < chunks; c += 32) {
    float v[W];
    load_n<W>(v, x + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) sum += v[k];
  }
  const float m = warp_sum(sum) / float(C);
  float var = 0.f;
  for (int64_t c = lane; c < chunks; c += 32) {
    float v[W];
    load_n<W>(v, x + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) var += (v[k] - m) * (v[k] - m);
  }
  const float s = rsqrtf(warp_sum(var) / float(C) + kEps);
  T* o = out + row * C;
  for (int64_t c = lane; c < chunks; c += 32) {
    float v[W], wv[W], bv[W];
    load_n<W>(v, x + c * W);
    load_n<W>(wv, w + c * W);
    load_n<W>(bv, bias + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = (v[k] - m) * s * wv[k] + bv[k];
    store_n<W>(o + c * W, v);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// Warp k of the grid handles rows k, k + W, k + 2W, ... and accumulates its
// dw | db partial into scratch row k ([kBackwardWarps, 2C]). Vector width
// W as in the forward.
template <typename T, int W>
__global__ void layernorm_backward_kernel(T* dinp, float* scratch, const T* dout, const T* inp, const T* w,
                                          const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int nwarps = gridDim.x * (blockDim.x / 32);
  const int64_t chunks = C / W;
  float* part = scratch + int64_t(warp) * 2 * C;
  // Each lane zeroes and then accumulates the same columns (its chunks), so
  // no other lane's write can interleave.
  for (int64_t c = lane; c < chunks; c += 32)
#pragma unroll
    for (int k = 0; k < W; ++k) part[c * W + k] = part[C + c * W + k] = 0.f;
  for (int64_t row = warp; row < N; row += nwarps) {
    const T* dy = dout + row * C;
    const T* x = inp + row * C;
    const float m = mean[row], s = rstd[row];
    float dnorm_mean = 0.f, dnorm_norm_mean = 0.f;
    for (int64_t c = lane; c < chunks; c += 32) {
      float wv[W], g[W], xv[W];
      load_n<W>(wv, w + c * W);
      load_n<W>(g, dy + c * W);
      load_n<W>(xv, x + c * W);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float dnorm = wv[k] * g[k];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (xv[k] - m) * s;
      }
    }
    dnorm_mean = warp_sum(dnorm_mean) / float(C);
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / float(C);
    T* dx = dinp + row * C;
    for (int64_t c = lane; c < chunks; c += 32) {
      float wv[W], g[W], xv[W], d[W];
      load_n<W>(wv, w + c * W);
      load_n<W>(g, dy + c * W);
      load_n<W>(xv, x + c * W);
      load_n<W>(d, dx + c * W);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float norm = (xv[k] - m) * s;
        d[k] += (wv[k] * g[k] - dnorm_mean - norm * dnorm_norm_mean) * s;
        part[c * W + k] += g[k] * norm;
        part[C + c * W + k] += g[k];
      }
      store_n<W>(dx + c * W, d);
    }
  }
}

template <typename T>
__global__ void layernorm_param_grad_kernel(T* dw, T* db, const float* scratch, int nparts, int64_t C) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= C) return;
  float gw = 0.f, gb = 0.f;
  for (int k = 0; k < nparts; ++k) {
    gw += scratch[int64_t(k) * 2 * C + j];
    gb += scratch[int64_t(k) * 2 * C + C + j];
  }
  dw[j] = store<T>(f32(dw[j]) + gw);
  db[j] = store<T>(f32(db[j]) + gb);
}

}  // namespace gpt::cuda::detail::layernorm_impl
