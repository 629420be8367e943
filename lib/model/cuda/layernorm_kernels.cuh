// Kernels of the LayerNorm op (layernorm.cu launches them). A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_cuda_kernels_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::layernorm_impl {

constexpr float kEps = 1e-5f;      // model/cpu/layernorm.hpp's kLayerNormEps
constexpr int kRowsPerBlock = 8;   // one warp per row
// The backward's grid: 128 blocks of 8 warps (an H100 or H200 has 132 SMs),
// fixed, so the order of the dw/db sums does not depend on N.
constexpr int kBackwardWarps = 1024;
constexpr int kBackwardWarpsPerBlock = 8;
// layernorm_backward_rows_kernel keeps a row's columns in registers: up to
// kRowChunks chunks of W elements per lane (C / W <= 32 * kRowChunks: bf16
// rows up to 1024 columns, fp32 up to 512 with 16-byte vectors); wider rows
// take layernorm_backward_kernel.
constexpr int kRowChunks = 4;
// layernorm_param_grad_kernel's block: 32 columns x kParamGradRows lanes
// over the partial rows.
constexpr int kParamGradRows = 16;

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
    for (int k = 0; k < W; ++k) var = fmaf(v[k] - m, v[k] - m, var);
  }
  const float s = rsqrtf(warp_sum(var) / float(C) + kEps);
  T* o = out + row * C;
  for (int64_t c = lane; c < chunks; c += 32) {
    float v[W], wv[W], bv[W];
    load_n<W>(v, x + c * W);
    load_n<W>(wv, w + c * W);
    load_n<W>(bv, bias + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = fmaf((v[k] - m) * s, wv[k], bv[k]);
    store_n<W>(o + c * W, v);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// Rows too wide for layernorm_backward_rows_kernel (below): warp k of the
// grid handles rows k, k + nwarps, ... and accumulates its dw | db partial
// into scratch row k ([kBackwardWarps, 2C]). Vector width W as in the forward.
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

// The forward of rows whose C / W chunks fit kRowChunks per lane: the same
// arithmetic in the same order as layernorm_forward_kernel (so the same
// bits: the products that meet an addition are explicit fmaf in both, so no
// compiler's contraction choices can differ between them), with the row
// read from memory once, into registers, instead of once per pass (three
// times; the later reads mostly hit L1 but still cost issue slots and L1
// bandwidth: 18 us a call against 12 us of bytes for gpt2-124m's
// 16384 x 768 on the H200).
template <typename T, int W>
__global__ void layernorm_forward_rows_kernel(T* out, float* mean, float* rstd, const T* inp, const T* w,
                                              const T* bias, int64_t N, int64_t C) {
  using P = Pack<T, W>;
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= N) return;
  const int64_t chunks = C / W;
  P xv[kRowChunks];
  // body(q, c) for each of this lane's chunks, in layernorm_forward_kernel's order.
  const auto each_chunk = [&](auto body) {
#pragma unroll
    for (int q = 0; q < kRowChunks; ++q)
      if (lane + 32 * q < chunks) body(q, int64_t(lane + 32 * q));
  };
  float sum = 0.f;
  each_chunk([&](int q, int64_t c) {
    xv[q] = load_pack<W>(inp + row * C + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) sum += f32(xv[q].e[k]);
  });
  const float m = warp_sum(sum) / float(C);
  float var = 0.f;
  each_chunk([&](int q, int64_t) {
#pragma unroll
    for (int k = 0; k < W; ++k) var = fmaf(f32(xv[q].e[k]) - m, f32(xv[q].e[k]) - m, var);
  });
  const float s = rsqrtf(warp_sum(var) / float(C) + kEps);
  each_chunk([&](int q, int64_t c) {
    float wv[W], bv[W], v[W];
    load_n<W>(wv, w + c * W);
    load_n<W>(bv, bias + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = fmaf((f32(xv[q].e[k]) - m) * s, wv[k], bv[k]);
    store_n<W>(out + row * C + c * W, v);
  });
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// The backward of rows whose C / W chunks fit kRowChunks per lane (W as in
// the forward), Q = ceil(C / W / 32) chunks per lane (row_chunks(); the
// arrays are sized by it, not by kRowChunks: registers are what limits this
// kernel). Warp k of the grid handles rows k, k + nwarps, ... as
// layernorm_backward_kernel does, with the same arithmetic in the same
// order (so dinp gets the same bits), but:
//  - reads each row once (dout, inp and dinp together, into registers) and
//    w once per kernel;
//  - loads row r + nwarps while it computes row r. A grid of kBackwardWarps
//    warps is one block of 8 warps per SM, and a warp that loads, reduces
//    and stores one row at a time has loads in flight only a part of the
//    time: 44 us a call for gpt2-124m's 16384 x 768 bf16 rows on the H200,
//    about twice their bytes' time;
//  - keeps its dw | db partial sums in registers (no read-modify-write of
//    scratch per row) and at the end adds the block's warps' sums in warp
//    order: scratch row b is block b's, kBackwardBlocks rows in all, every
//    one written, as layernorm_param_grad_kernel requires. (1024 rows, one
//    per warp, took layernorm_param_grad_kernel 10 us a call on the H200:
//    24 blocks for 768 columns, each lane adding 64 rows.)
//  - where rows are not 16-byte aligned (W == 1), is declared one block per
//    SM (__launch_bounds__' second argument), as its grid is: without it
//    ptxas for sm_120 (which runs the sm_100 PTX) holds those instances to
//    64 registers and spills. The vectorised instances are not: declaring
//    it changes the PTX nvcc emits for them too, and gpt2-124m's (8 bf16 a
//    lane, 3 chunks) is the code the H100 and H200 measured.
inline int row_chunks(int64_t chunks) { return int((chunks + 31) / 32); }
constexpr int kBackwardBlocks = kBackwardWarps / kBackwardWarpsPerBlock;
template <typename T, int W, int Q>
__global__ void __launch_bounds__(32 * kBackwardWarpsPerBlock, W == 1 ? 1 : 0)
    layernorm_backward_rows_kernel(T* dinp, float* scratch, const T* dout, const T* inp, const T* w,
                                   const float* mean, const float* rstd, int64_t N, int64_t C) {
  static_assert(Q >= 1 && Q <= kRowChunks);
  using P = Pack<T, W>;
  const int lane = threadIdx.x % 32;
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int nwarps = gridDim.x * (blockDim.x / 32);
  const int64_t chunks = C / W;
  // body(q, c) for each of this lane's chunks (c < chunks: the last may be partial across lanes).
  const auto each_chunk = [&](auto body) {
#pragma unroll
    for (int q = 0; q < Q; ++q)
      if (lane + 32 * q < chunks) body(q, int64_t(lane + 32 * q));
  };
  struct Row {
    P g[Q], xv[Q];
    float m, s;
  };
  const auto load_row = [&](int64_t row, Row& r) {
    each_chunk([&](int q, int64_t c) {
      r.g[q] = load_pack<W>(dout + row * C + c * W);
      r.xv[q] = load_pack<W>(inp + row * C + c * W);
    });
    r.m = mean[row];
    r.s = rstd[row];
  };
  float wv[Q][W], gw[Q][W], gb[Q][W];
#pragma unroll
  for (int q = 0; q < Q; ++q)
#pragma unroll
    for (int k = 0; k < W; ++k) wv[q][k] = gw[q][k] = gb[q][k] = 0.f;
  each_chunk([&](int q, int64_t c) { load_n<W>(wv[q], w + c * W); });
  Row cur{}, next{};
  if (warp < N) load_row(warp, cur);
  for (int64_t row = warp; row < N; row += nwarps) {
    if (row + nwarps < N) load_row(row + nwarps, next);
    P d[Q];  // needed after the row's sums: its loads are in flight during them
    each_chunk([&](int q, int64_t c) { d[q] = load_pack<W>(dinp + row * C + c * W); });
    const float m = cur.m, s = cur.s;
    float dnorm_mean = 0.f, dnorm_norm_mean = 0.f;
    each_chunk([&](int q, int64_t) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float dnorm = wv[q][k] * f32(cur.g[q].e[k]);
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (f32(cur.xv[q].e[k]) - m) * s;
      }
    });
    dnorm_mean = warp_sum(dnorm_mean) / float(C);
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / float(C);
    // At 4 chunks a lane (rows of up to 1024 bf16 columns: gpt2-350m) the
    // widened floats kept from the pass above are what spills on sm_120;
    // fewer chunks (gpt2-124m's 3) keep them, as measured on the H100.
    if constexpr (Q >= 4 && W * sizeof(T) == 16)
      each_chunk([&](int q, int64_t) {
        opaque(cur.g[q]);
        opaque(cur.xv[q]);
      });
    each_chunk([&](int q, int64_t c) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const float gk = f32(cur.g[q].e[k]), norm = (f32(cur.xv[q].e[k]) - m) * s;
        d[q].e[k] = store<T>(f32(d[q].e[k]) + (wv[q][k] * gk - dnorm_mean - norm * dnorm_norm_mean) * s);
        gw[q][k] += gk * norm;
        gb[q][k] += gk;
      }
      store_pack<W>(dinp + row * C + c * W, d[q]);
    });
    cur = next;
  }
  // The running sum of warps 0..w-1, element k of chunk c at k * chunks + c
  // (the lanes of a warp at consecutive addresses: no bank conflicts).
  __shared__ float sums[2][32 * Q * W];
  float* part = scratch + int64_t(blockIdx.x) * 2 * C;
  const int my_turn = threadIdx.x / 32;  // warps add their sums in turn, in warp order
  for (int turn = 0; turn < kBackwardWarpsPerBlock; ++turn) {
    if (my_turn == turn)
      each_chunk([&](int q, int64_t c) {
        float sw[W], sb[W];
#pragma unroll
        for (int k = 0; k < W; ++k) {
          sw[k] = turn == 0 ? gw[q][k] : sums[0][k * chunks + c] + gw[q][k];
          sb[k] = turn == 0 ? gb[q][k] : sums[1][k * chunks + c] + gb[q][k];
          if (turn + 1 < kBackwardWarpsPerBlock) {
            sums[0][k * chunks + c] = sw[k];
            sums[1][k * chunks + c] = sb[k];
          }
        }
        if (turn + 1 == kBackwardWarpsPerBlock)
#pragma unroll
          for (int k = 0; k < W; ++k) {
            part[c * W + k] = sw[k];
            part[C + c * W + k] = sb[k];
          }
      });
    __syncthreads();
  }
}

// The backward kernel for rows of C columns at width W, and the partial
// rows it leaves in scratch: the rows kernel with as many chunks per lane as
// the row needs (one partial row per block), or, for wider rows, the
// scratch kernel (one per warp).
template <typename T>
using LayerNormBackwardKernel = void (*)(T*, float*, const T*, const T*, const T*, const float*, const float*,
                                         int64_t, int64_t);
template <typename T>
struct LayerNormBackwardPlan {
  LayerNormBackwardKernel<T> kernel;
  int parts;
};
template <typename T, int W>
LayerNormBackwardPlan<T> layernorm_backward_plan(int64_t C) {
  static_assert(kRowChunks == 4, "one case per chunk count");
  switch (row_chunks(C / W)) {
    case 1: return {layernorm_backward_rows_kernel<T, W, 1>, kBackwardBlocks};
    case 2: return {layernorm_backward_rows_kernel<T, W, 2>, kBackwardBlocks};
    case 3: return {layernorm_backward_rows_kernel<T, W, 3>, kBackwardBlocks};
    case 4: return {layernorm_backward_rows_kernel<T, W, 4>, kBackwardBlocks};
    default: return {layernorm_backward_kernel<T, W>, kBackwardWarps};
  }
}

// dw, db += the sums of scratch's nparts partial rows. Block (32 columns,
// kParamGradRows lanes): lane y adds rows y, y + kParamGradRows, ... in
// order, then lane 0 adds the lanes' sums in lane order: a fixed order, so
// deterministic, with kParamGradRows loads in flight per column instead of
// one chain of nparts.
inline dim3 param_grad_grid(int64_t C) { return dim3(blocks_for(C, 32)); }
inline dim3 param_grad_block() { return dim3(32, kParamGradRows); }
template <typename T>
__global__ void layernorm_param_grad_kernel(T* dw, T* db, const float* scratch, int nparts, int64_t C) {
  __shared__ float acc[2][kParamGradRows][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float gw = 0.f, gb = 0.f;
  if (j < C)
    for (int k = threadIdx.y; k < nparts; k += kParamGradRows) {
      gw += scratch[int64_t(k) * 2 * C + j];
      gb += scratch[int64_t(k) * 2 * C + C + j];
    }
  acc[0][threadIdx.y][threadIdx.x] = gw;
  acc[1][threadIdx.y][threadIdx.x] = gb;
  __syncthreads();
  if (threadIdx.y == 0 && j < C) {
    float sw = 0.f, sb = 0.f;
    for (int y = 0; y < kParamGradRows; ++y) {
      sw += acc[0][y][threadIdx.x];
      sb += acc[1][y][threadIdx.x];
    }
    dw[j] = store<T>(f32(dw[j]) + sw);
    db[j] = store<T>(f32(db[j]) + sb);
  }
}

}  // namespace gpt::cuda::detail::layernorm_impl
