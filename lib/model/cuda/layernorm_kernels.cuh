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
// like the CPU reference.
template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* bias,
                                         int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= N) return;
  const T* x = inp + row * C;
  float sum = 0.f;
  for (int64_t j = lane; j < C; j += 32) sum += f32(x[j]);
  const float m = warp_sum(sum) / float(C);
  float var = 0.f;
  for (int64_t j = lane; j < C; j += 32) {
    const float d = f32(x[j]) - m;
    var += d * d;
  }
  const float s = rsqrtf(warp_sum(var) / float(C) + kEps);
  T* o = out + row * C;
  for (int64_t j = lane; j < C; j += 32) o[j] = store<T>((f32(x[j]) - m) * s * f32(w[j]) + f32(bias[j]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// Warp k of the grid handles rows k, k + W, k + 2W, ... and accumulates its
// dw | db partial into scratch row k ([W, 2C]).
template <typename T>
__global__ void layernorm_backward_kernel(T* dinp, float* scratch, const T* dout, const T* inp, const T* w,
                                          const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int nwarps = gridDim.x * (blockDim.x / 32);
  float* part = scratch + int64_t(warp) * 2 * C;
  for (int64_t j = lane; j < 2 * C; j += 32) part[j] = 0.f;
  for (int64_t row = warp; row < N; row += nwarps) {
    const T* dy = dout + row * C;
    const T* x = inp + row * C;
    const float m = mean[row], s = rstd[row];
    float dnorm_mean = 0.f, dnorm_norm_mean = 0.f;
    for (int64_t j = lane; j < C; j += 32) {
      const float dnorm = f32(w[j]) * f32(dy[j]);
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * (f32(x[j]) - m) * s;
    }
    dnorm_mean = warp_sum(dnorm_mean) / float(C);
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / float(C);
    T* dx = dinp + row * C;
    for (int64_t j = lane; j < C; j += 32) {
      const float g = f32(dy[j]);
      const float norm = (f32(x[j]) - m) * s;
      dx[j] = store<T>(f32(dx[j]) + (f32(w[j]) * g - dnorm_mean - norm * dnorm_norm_mean) * s);
      part[j] += g * norm;
      part[C + j] += g;
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
