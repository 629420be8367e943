// Kernels of the CUDA-core (SIMT) causal attention: the fp32 path, the
// reference the tensor-core kernels are timed against, and the delta kernel
// both backward paths use. attention.cu launches them. A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_attention_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::simt {

constexpr int kTile = 32;        // rows per tile = lanes per warp
constexpr int kFwdWarps = 4;     // forward: query tiles per block, sharing each key/value tile

// Forward. Block: kFwdWarps warps, 32 query rows each (lane = query row), of
// one (b, h). Key/value tiles of 32 rows are loaded to shared memory by the
// whole block; each lane runs the online softmax over the keys <= its row.
template <typename T, int HS>
__global__ void __launch_bounds__(32 * kFwdWarps)
    attention_forward_kernel(T* out, float* lse, const T* qkv, int Tn, int C, int NH, float scale) {
  __shared__ float ks[kTile][HS];
  __shared__ float vs[kTile][HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int block_q0 = blockIdx.x * kTile * kFwdWarps;
  const int i = block_q0 + warp * kTile + lane;  // this lane's query row
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;

  float q[HS], o[HS];
  const bool active = i < Tn;
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = active ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
    o[d] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int last_row = min(Tn - 1, block_q0 + kTile * kFwdWarps - 1);
  for (int j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * HS; e += blockDim.x) {
      const int r = e / HS, d = e % HS, j = j0 + r;
      ks[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
      vs[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
    }
    __syncthreads();
    if (!active) continue;
    const int jmax = min(kTile, i - j0 + 1);  // keys j0 .. min(i, j0+31)
    for (int r = 0; r < jmax; ++r) {
      float s = 0.f;
#pragma unroll
      for (int d = 0; d < HS; ++d) s += q[d] * ks[r][d];
      if (s > m) {
        const float corr = expf(m - s);  // 0 on the first key (m = -inf)
        l = l * corr + 1.f;
#pragma unroll
        for (int d = 0; d < HS; ++d) o[d] = o[d] * corr + vs[r][d];
        m = s;
      } else {
        const float p = expf(s - m);
        l += p;
#pragma unroll
        for (int d = 0; d < HS; ++d) o[d] += p * vs[r][d];
      }
    }
  }
  if (!active) return;
  const float inv = 1.f / l;
  T* dst = out + (int64_t(b) * Tn + i) * C + int64_t(h) * HS;
#pragma unroll
  for (int d = 0; d < HS; ++d) dst[d] = store<T>(o[d] * inv);
  lse[int64_t(bh) * Tn + i] = m + logf(l);
}

// Lanes per row of attention_delta_kernel: one 16-byte vector of the row each
// (up to a warp).
template <typename T, int HS>
constexpr int kDeltaLanes = HS / kVec<T> < 32 ? HS / kVec<T> : 32;

// delta[b, h, i] = sum_d dout[i, d] * out[i, d] (the softmax backward's
// row term). kDeltaLanes consecutive lanes per (b, h, i) row, so a row's
// bytes are read together (coalesced), 16 bytes per lane when vec (rows
// 16-byte aligned: the launcher's vector_width), else one element at a time;
// the lanes' sums are added by xor shuffles within the group (a fixed order).
// One thread per row reading 2-byte elements took 104 us per call at
// gpt2-124m's B=16, T=1024 on an H200 (ncu), 8x the bytes' time.
template <typename T, int HS>
__global__ void attention_delta_kernel(float* delta, const T* dout, const T* out, int Tn, int C, int NH, int64_t n,
                                       bool vec) {
  constexpr int G = kDeltaLanes<T, HS>, W = kVec<T>;
  const int64_t idx = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int g = threadIdx.x % G;
  float s = 0.f;
  if (idx < n) {
    const int64_t i = idx % Tn, bh = idx / Tn, b = bh / NH, h = bh % NH;
    const T* a = dout + (b * Tn + i) * C + h * HS;
    const T* o = out + (b * Tn + i) * C + h * HS;
    if (vec) {
      for (int d = g * W; d < HS; d += G * W) {
        float av[W], ov[W];
        load_n<W>(av, a + d);
        load_n<W>(ov, o + d);
#pragma unroll
        for (int k = 0; k < W; ++k) s += av[k] * ov[k];
      }
    } else {
      for (int d = g; d < HS; d += G) s += f32(a[d]) * f32(o[d]);
    }
  }
  for (int m = G / 2; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);  // whole warps: no early return
  if (idx < n && g == 0) delta[idx] = s;
}

// dk, dv. Block: one warp, 32 key rows of one (b, h) (lane = key row).
// Query tiles from the key tile's start to the end of the sequence.
template <typename T, int HS>
__global__ void __launch_bounds__(32) attention_dkv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                           const float* delta, int Tn, int C, int NH, float scale) {
  __shared__ float kown[kTile][HS + 1];  // this lane's k and v rows (padded: lanes read different rows)
  __shared__ float vown[kTile][HS + 1];
  __shared__ float qs[kTile][HS];  // query tile (broadcast reads)
  __shared__ float dos[kTile][HS];
  __shared__ float lse_s[kTile], delta_s[kTile];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, lane = threadIdx.x;
  const int j0 = blockIdx.x * kTile, j = j0 + lane;
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;
  const T* dbase = dout + int64_t(b) * Tn * C + int64_t(h) * HS;
  const bool active = j < Tn;
  for (int d = 0; d < HS; ++d) {
    kown[lane][d] = active ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
    vown[lane][d] = active ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
  }
  float dk[HS], dv[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) dk[d] = dv[d] = 0.f;
  for (int i0 = j0; i0 < Tn; i0 += kTile) {
    __syncwarp();
    for (int e = lane; e < kTile * HS; e += 32) {
      const int r = e / HS, d = e % HS, i = i0 + r;
      qs[r][d] = i < Tn ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
      dos[r][d] = i < Tn ? f32(dbase[int64_t(i) * C + d]) : 0.f;
    }
    if (i0 + lane < Tn) {
      lse_s[lane] = lse[int64_t(bh) * Tn + i0 + lane];
      delta_s[lane] = delta[int64_t(bh) * Tn + i0 + lane];
    }
    __syncwarp();
    if (!active) continue;
    const int rmax = min(kTile, Tn - i0);
    for (int r = 0; r < rmax; ++r) {
      if (i0 + r < j) continue;  // causal: query i sees key j only if j <= i
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        s += qs[r][d] * kown[lane][d];
        dp += dos[r][d] * vown[lane][d];
      }
      const float p = expf(s - lse_s[r]);
      const float ds = p * (dp - delta_s[r]);
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        dv[d] += p * dos[r][d];
        dk[d] += ds * qs[r][d];  // qs already carries the 1/sqrt(hs) scale
      }
    }
  }
  if (!active) return;
  T* dst = dqkv + (int64_t(b) * Tn + j) * row_stride + int64_t(h) * HS;
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    dst[C + d] = store<T>(dk[d]);
    dst[2 * C + d] = store<T>(dv[d]);
  }
}

// dq. Block: one warp, 32 query rows of one (b, h) (lane = query row).
// Key tiles from 0 to the query tile's end.
template <typename T, int HS>
__global__ void __launch_bounds__(32) attention_dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                          const float* delta, int Tn, int C, int NH, float scale) {
  __shared__ float qown[kTile][HS + 1];
  __shared__ float doown[kTile][HS + 1];
  __shared__ float ks[kTile][HS];
  __shared__ float vs[kTile][HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, lane = threadIdx.x;
  const int i0 = blockIdx.x * kTile, i = i0 + lane;
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;
  const T* dbase = dout + int64_t(b) * Tn * C + int64_t(h) * HS;
  const bool active = i < Tn;
  for (int d = 0; d < HS; ++d) {
    qown[lane][d] = active ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
    doown[lane][d] = active ? f32(dbase[int64_t(i) * C + d]) : 0.f;
  }
  const float my_lse = active ? lse[int64_t(bh) * Tn + i] : 0.f;
  const float my_delta = active ? delta[int64_t(bh) * Tn + i] : 0.f;
  float dq[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) dq[d] = 0.f;
  const int last = min(Tn - 1, i0 + kTile - 1);
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncwarp();
    for (int e = lane; e < kTile * HS; e += 32) {
      const int r = e / HS, d = e % HS, j = j0 + r;
      ks[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
      vs[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
    }
    __syncwarp();
    if (!active) continue;
    const int rmax = min(kTile, i - j0 + 1);
    for (int r = 0; r < rmax; ++r) {
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        s += qown[lane][d] * ks[r][d];
        dp += doown[lane][d] * vs[r][d];
      }
      const float ds = expf(s - my_lse) * (dp - my_delta);
#pragma unroll
      for (int d = 0; d < HS; ++d) dq[d] += ds * ks[r][d];
    }
  }
  if (!active) return;
  T* dst = dqkv + (int64_t(b) * Tn + i) * row_stride + int64_t(h) * HS;
#pragma unroll
  for (int d = 0; d < HS; ++d) dst[d] = store<T>(dq[d] * scale);
}

// Launch shapes, shared by attention.cu and the emulated test.
inline dim3 forward_grid(int64_t B, int64_t T, int64_t NH) {
  const int64_t rows_per_block = kTile * kFwdWarps;
  return dim3(unsigned((T + rows_per_block - 1) / rows_per_block), unsigned(B * NH));
}
inline dim3 backward_grid(int64_t B, int64_t T, int64_t NH) {
  return dim3(unsigned((T + kTile - 1) / kTile), unsigned(B * NH));
}
constexpr int kDeltaThreads = 256;
template <typename T, int HS>
inline dim3 delta_grid(int64_t rows) {
  return dim3(blocks_for(rows, kDeltaThreads / kDeltaLanes<T, HS>));
}

}  // namespace gpt::cuda::detail::simt
