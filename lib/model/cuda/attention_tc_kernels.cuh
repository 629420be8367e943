// Kernels of the tensor-core causal attention (FlashAttention-2 structure
// on WMMA); attention_tc.cu launches them. A header so that the kernel code
// also compiles as host C++ against tests/unit/emulated_cuda.hpp, which runs
// it thread by thread on the CPU (test_attention_tc_emulated): the indexing,
// masking, tiling and synchronisation are tested without a GPU.
//
// Tiles are 64 rows; a block has 4 warps and each warp owns 16 rows of the
// block's tile for the whole kernel, so the products, the softmax and the
// accumulation of one warp touch only its own rows of shared memory and need
// __syncwarp, not __syncthreads. Block-wide barriers only guard the shared
// tiles that every warp reads (the streamed K/V or Q/dO tiles).
//
// Per-row element-wise work: lane l of a warp handles row l/2 of the warp's
// 16 and the columns of parity l%2 (interleaved, so the 32 lanes fall on
// at most 2-way conflicting banks); the two lanes of a row combine with one
// shuffle (xor 1).
//
// Forward: O and the row statistics stay in shared memory (O in fp32) so
// the online-softmax rescale is an ordinary per-row multiply; S = QK^T and
// O += PV run on tensor cores. Backward: dK/dV (one block per key tile,
// query tiles streamed) and dQ (one block per query tile, key tiles
// streamed) are separate kernels with their accumulators in WMMA fragments,
// so no output has two writers. Fully masked 16x16 blocks of the diagonal
// tile are skipped. Grids start with the heaviest (most tiles) blocks.
#pragma once

#ifndef GPT_EMULATED_CUDA
#include <mma.h>
#endif

#include <cstdint>

#include "model/cuda/types.hpp"

namespace gpt::cuda::detail::tc {

namespace wmma = nvcuda::wmma;

constexpr int kTileRows = 64;  // rows of every Q/K/V/dO tile
constexpr int kWarps = 4;      // 16 rows per warp
constexpr int kThreads = 32 * kWarps;
constexpr int kLdS = kTileRows + 4;  // fp32 64x64 score tiles (row stride, floats; multiple of 4 for WMMA)
constexpr int kLdP = kTileRows + 8;  // bf16 64x64 probability tiles (multiple of 8 for WMMA)

template <int HS>
constexpr int kLdTile = HS + 8;  // bf16 64xHS tiles: padded against bank conflicts
template <int HS>
constexpr int kLdOut = HS + 4;  // fp32 64xHS output tile (forward)

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Shared-memory carving: each array starts on a 128-byte boundary (WMMA
// needs 32), which every size below is a multiple of. Carve hands out the
// arrays of a kernel's dynamic shared memory in order.
template <int HS>
constexpr int kTileBytes = kTileRows * kLdTile<HS> * 2;
constexpr int kScoreBytes = kTileRows * kLdS * 4;
constexpr int kProbBytes = kTileRows * kLdP * 2;
template <int HS>
constexpr int forward_smem() { return 3 * kTileBytes<HS> + kScoreBytes + kProbBytes + kTileRows * kLdOut<HS> * 4; }
template <int HS>
constexpr int dkv_smem() { return 4 * kTileBytes<HS> + 2 * kScoreBytes + 2 * kProbBytes + 2 * kTileRows * 4; }
template <int HS>
constexpr int dq_smem() { return 4 * kTileBytes<HS> + 2 * kScoreBytes + kProbBytes; }

// Every kernel's grid: x = 64-row tiles of the sequence, y = (b, h).
inline dim3 tile_grid(int64_t B, int64_t T, int64_t NH) {
  return dim3(unsigned((T + kTileRows - 1) / kTileRows), unsigned(B * NH));
}
#ifndef GPT_EMULATED_CUDA
// The launch's dynamic shared memory (emulated_cuda.hpp provides its own).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(128) unsigned char smem[];
  return smem;
}
#endif

template <int HS>
struct Carve {
  unsigned char* at;
  template <typename E>
  __device__ E* take(int bytes) {
    E* p = reinterpret_cast<E*>(at);
    at += bytes;
    return p;
  }
  __device__ bf16* tile() { return take<bf16>(kTileBytes<HS>); }   // 64 x HS bf16, stride kLdTile
  __device__ float* scores() { return take<float>(kScoreBytes); }  // 64 x 64 fp32, stride kLdS
  __device__ bf16* probs() { return take<bf16>(kProbBytes); }      // 64 x 64 bf16, stride kLdP
};

// Where a thread stands: its (b, h), warp, and the row (r within the tile)
// and column parity it handles in element-wise work; the head's q/k/v and
// dout columns.
struct Place {
  int bh, b, h, warp, lane, r, half;
  const bf16* qkv;   // q of row 0 of this (b, h); k at +C, v at +2C; row stride 3C
  const bf16* dout;  // row 0 of this (b, h) in dout; row stride C
  __device__ Place(const bf16* qkv_all, const bf16* dout_all, int Tn, int C, int NH, int HS)
      : bh(blockIdx.y), b(bh / NH), h(bh % NH), warp(threadIdx.x / 32), lane(threadIdx.x % 32),
        r(warp * 16 + lane / 2), half(lane % 2),
        qkv(qkv_all + int64_t(b) * Tn * 3 * C + int64_t(h) * HS),
        dout(dout_all ? dout_all + int64_t(b) * Tn * C + int64_t(h) * HS : nullptr) {}
};

static_assert(kTileBytes<32> % 128 == 0 && kTileBytes<64> % 128 == 0 && kScoreBytes % 128 == 0 &&
              kProbBytes % 128 == 0 && (kTileRows * kLdOut<32> * 4) % 128 == 0 &&
              (kTileRows * kLdOut<64> * 4) % 128 == 0);
// Fragment pointers (row 16*w, column 16*k) stay 32-byte aligned.
static_assert((16 * kLdTile<32> * 2) % 32 == 0 && (16 * kLdTile<64> * 2) % 32 == 0 && (16 * kLdS * 4) % 32 == 0 &&
              (16 * kLdP * 2) % 32 == 0 && (16 * kLdOut<32> * 4) % 32 == 0 && (16 * kLdOut<64> * 4) % 32 == 0);

// rows [row0, row0 + 64) x HS columns of a [T, stride] bf16 matrix into a
// padded shared tile, 16 bytes per load; rows at or past Tn read as zero.
template <int HS>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, int row0, int Tn, int64_t stride) {
  constexpr int kChunks = HS / 8;
  for (int e = threadIdx.x; e < kTileRows * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks, row = row0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < Tn) v = *reinterpret_cast<const uint4*>(src + int64_t(row) * stride + c * 8);
    *reinterpret_cast<uint4*>(dst + r * kLdTile<HS> + c * 8) = v;
  }
}

// n (a multiple of 8) fp32 values times `scale`, rounded to bf16 and stored
// as 16-byte vectors (dst 16-byte aligned).
__device__ __forceinline__ void store_row(bf16* dst, const float* src, int n, float scale) {
  for (int c = 0; c < n; c += 8) {
    alignas(16) bf16 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = __float2bfloat16_rn(src[c + k] * scale);
    *reinterpret_cast<uint4*>(dst + c) = *reinterpret_cast<const uint4*>(v);
  }
}

// dst (16 x 64 fp32, stride kLdS) = A B^T: A is 16 x HS (rows of a), B the
// 64 rows of b. Column blocks n > n_last are skipped and stored as zero
// (fully masked).
template <int HS>
__device__ __forceinline__ void score_tile(float* dst, const bf16* a, const bf16* b, int n_last) {
  FragAcc acc[4];
#pragma unroll
  for (int n = 0; n < 4; ++n) wmma::fill_fragment(acc[n], 0.f);
#pragma unroll
  for (int k = 0; k < HS / 16; ++k) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + k * 16, kLdTile<HS>);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      if (n > n_last) continue;
      FragBCol fb;  // B^T(d, j) = b[j][d]: column-major view of b
      wmma::load_matrix_sync(fb, b + n * 16 * kLdTile<HS> + k * 16, kLdTile<HS>);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < 4; ++n) wmma::store_matrix_sync(dst + n * 16, acc[n], kLdS, wmma::mem_row_major);
}

// acc[n] (n < HS/16) += P(16 x 64, rows of p) * b (64 x HS), over the
// 16-row blocks k_first..k_last of b only (P is zero outside them).
template <int HS>
__device__ __forceinline__ void accumulate_pb(FragAcc (&acc)[HS / 16], const bf16* p, const bf16* b, int k_first,
                                              int k_last) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (k < k_first || k > k_last) continue;
    FragA fa;
    wmma::load_matrix_sync(fa, p + k * 16, kLdP);
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + k * 16 * kLdTile<HS> + n * 16, kLdTile<HS>);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

template <int HS>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(bf16* out, float* lse, const bf16* qkv, int Tn, int C, int NH, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr int LDT = kLdTile<HS>, LDO = kLdOut<HS>;
  Carve<HS> carve{dynamic_smem()};
  bf16 *qs = carve.tile(), *ks = carve.tile(), *vs = carve.tile();
  float* ss = carve.scores();
  bf16* ps = carve.probs();
  float* os = carve.template take<float>(kTileRows * LDO * 4);

  const Place at(qkv, nullptr, Tn, C, NH, HS);
  const int bh = at.bh, b = at.b, h = at.h, warp = at.warp, r = at.r, half = at.half;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileRows;  // heaviest tiles first
  const int64_t stride = 3 * int64_t(C);
  const bf16* base = at.qkv;
  const int i = q0 + r;  // this lane's query row
  float* srow = ss + r * kLdS;
  bf16* prow = ps + r * kLdP;
  float* orow = os + r * LDO;

  load_tile<HS>(qs, base, q0, Tn, stride);
  for (int d = half; d < HS; d += 2) orow[d] = 0.f;
  float m = -INFINITY, l = 0.f;
  const int j_end = min(Tn, q0 + kTileRows);
  for (int j0 = 0; j0 < j_end; j0 += kTileRows) {
    __syncthreads();  // every warp is done with the previous K/V tile
    load_tile<HS>(ks, base + C, j0, Tn, stride);
    load_tile<HS>(vs, base + 2 * C, j0, Tn, stride);
    __syncthreads();
    const bool diagonal = j0 == q0;
    const int n_last = diagonal ? warp : 3;  // 16-key blocks past the warp's rows are masked
    score_tile<HS>(ss + warp * 16 * kLdS, qs + warp * 16 * LDT, ks, n_last);
    __syncwarp();
    float mx = -INFINITY;
    for (int c = half; c < kTileRows; c += 2) {
      const int j = j0 + c;
      const float s = (j <= i && j < Tn) ? srow[c] * scale : -INFINITY;
      srow[c] = s;
      mx = fmaxf(mx, s);
    }
    // Key j0 <= i is never masked, so m_new is finite.
    const float m_new = fmaxf(m, fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)));
    const float alpha = expf(m - m_new);  // 0 on the first tile
    float sum = 0.f;
    for (int c = half; c < kTileRows; c += 2) {
      const float p = expf(srow[c] - m_new);
      prow[c] = __float2bfloat16_rn(p);
      sum += p;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    for (int d = half; d < HS; d += 2) orow[d] *= alpha;
    __syncwarp();
    FragAcc o[HS / 16];
#pragma unroll
    for (int n = 0; n < HS / 16; ++n)
      wmma::load_matrix_sync(o[n], os + warp * 16 * LDO + n * 16, LDO, wmma::mem_row_major);
    accumulate_pb<HS>(o, ps + warp * 16 * kLdP, vs, 0, n_last);
#pragma unroll
    for (int n = 0; n < HS / 16; ++n)
      wmma::store_matrix_sync(os + warp * 16 * LDO + n * 16, o[n], LDO, wmma::mem_row_major);
    __syncwarp();
  }
  if (i >= Tn) return;
  store_row(out + (int64_t(b) * Tn + i) * C + int64_t(h) * HS + half * (HS / 2), orow + half * (HS / 2), HS / 2,
            1.f / l);
  if (half == 0) lse[int64_t(bh) * Tn + i] = m + logf(l);
#else
  __trap();
#endif
}

// dK, dV for the 64 keys [j0, j0 + 64) of one (b, h); query tiles from j0
// to the end. Per query tile, with this warp's 16 keys as rows:
//   S^T = K Q^T, dP^T = V dO^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - delta)
//   dV += P^T dO, dK += dS^T Q (times scale at the end).
template <int HS>
__global__ void __launch_bounds__(kThreads) dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                                       const float* delta, int Tn, int C, int NH, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr int LDT = kLdTile<HS>;
  Carve<HS> carve{dynamic_smem()};
  bf16 *ks = carve.tile(), *vs = carve.tile(), *qs = carve.tile(), *dos = carve.tile();
  float *st = carve.scores(), *dpt = carve.scores();
  bf16 *pt = carve.probs(), *dst_t = carve.probs();
  float* lse_s = carve.template take<float>(kTileRows * 4);
  float* delta_s = carve.template take<float>(kTileRows * 4);

  const Place at(qkv, dout, Tn, C, NH, HS);
  const int bh = at.bh, b = at.b, h = at.h, warp = at.warp, r = at.r, half = at.half;
  const int j0 = blockIdx.x * kTileRows;  // block 0 has the most query tiles
  const int64_t stride = 3 * int64_t(C);
  const bf16 *base = at.qkv, *dbase = at.dout;
  const int j = j0 + r;  // this lane's key row

  load_tile<HS>(ks, base + C, j0, Tn, stride);
  load_tile<HS>(vs, base + 2 * C, j0, Tn, stride);
  FragAcc dk[HS / 16], dv[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.f);
    wmma::fill_fragment(dv[n], 0.f);
  }
  for (int i0 = j0; i0 < Tn; i0 += kTileRows) {
    __syncthreads();  // every warp is done with the previous Q/dO tile
    load_tile<HS>(qs, base, i0, Tn, stride);
    load_tile<HS>(dos, dbase, i0, Tn, C);
    if (threadIdx.x < kTileRows) {
      const int i = i0 + threadIdx.x;
      lse_s[threadIdx.x] = i < Tn ? lse[int64_t(bh) * Tn + i] : 0.f;
      delta_s[threadIdx.x] = i < Tn ? delta[int64_t(bh) * Tn + i] : 0.f;
    }
    __syncthreads();
    // On the diagonal tile, queries below the warp's first key see none of its keys.
    const int k_first = i0 == j0 ? warp : 0;
    score_tile<HS>(st + warp * 16 * kLdS, ks + warp * 16 * LDT, qs, 3);
    score_tile<HS>(dpt + warp * 16 * kLdS, vs + warp * 16 * LDT, dos, 3);
    __syncwarp();
    for (int c = half; c < kTileRows; c += 2) {
      const int i = i0 + c;
      const bool seen = i < Tn && i >= j;
      const float p = seen ? expf(st[r * kLdS + c] * scale - lse_s[c]) : 0.f;
      const float ds = p * (dpt[r * kLdS + c] - delta_s[c]);
      pt[r * kLdP + c] = __float2bfloat16_rn(p);
      dst_t[r * kLdP + c] = __float2bfloat16_rn(ds);
    }
    __syncwarp();
    accumulate_pb<HS>(dv, pt + warp * 16 * kLdP, dos, k_first, 3);
    accumulate_pb<HS>(dk, dst_t + warp * 16 * kLdP, qs, k_first, 3);
  }
  // Fragments -> this warp's rows of st (dk) and dpt (dv) -> global.
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
    wmma::store_matrix_sync(st + warp * 16 * kLdS + n * 16, dk[n], kLdS, wmma::mem_row_major);
    wmma::store_matrix_sync(dpt + warp * 16 * kLdS + n * 16, dv[n], kLdS, wmma::mem_row_major);
  }
  __syncwarp();
  if (j >= Tn) return;
  bf16* dstk = dqkv + (int64_t(b) * Tn + j) * stride + int64_t(h) * HS + half * (HS / 2);
  store_row(dstk + C, st + r * kLdS + half * (HS / 2), HS / 2, scale);
  store_row(dstk + 2 * C, dpt + r * kLdS + half * (HS / 2), HS / 2, 1.f);
#else
  __trap();
#endif
}

// dQ for the 64 queries [q0, q0 + 64) of one (b, h); key tiles from 0 to the
// diagonal. Per key tile, with this warp's 16 queries as rows:
//   S = Q K^T, dP = dO V^T, dS = exp(scale S - lse) (dP - delta), dQ += dS K.
template <int HS>
__global__ void __launch_bounds__(kThreads) dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                                      const float* delta, int Tn, int C, int NH, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr int LDT = kLdTile<HS>;
  Carve<HS> carve{dynamic_smem()};
  bf16 *qs = carve.tile(), *dos = carve.tile(), *ks = carve.tile(), *vs = carve.tile();
  float *ss = carve.scores(), *dps = carve.scores();
  bf16* dss = carve.probs();

  const Place at(qkv, dout, Tn, C, NH, HS);
  const int bh = at.bh, b = at.b, h = at.h, warp = at.warp, r = at.r, half = at.half;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileRows;  // heaviest tiles first
  const int64_t stride = 3 * int64_t(C);
  const bf16 *base = at.qkv, *dbase = at.dout;
  const int i = q0 + r;  // this lane's query row
  const float my_lse = i < Tn ? lse[int64_t(bh) * Tn + i] : 0.f;
  const float my_delta = i < Tn ? delta[int64_t(bh) * Tn + i] : 0.f;

  load_tile<HS>(qs, base, q0, Tn, stride);
  load_tile<HS>(dos, dbase, q0, Tn, C);
  FragAcc dq[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) wmma::fill_fragment(dq[n], 0.f);
  const int j_end = min(Tn, q0 + kTileRows);
  for (int j0 = 0; j0 < j_end; j0 += kTileRows) {
    __syncthreads();  // every warp is done with the previous K/V tile
    load_tile<HS>(ks, base + C, j0, Tn, stride);
    load_tile<HS>(vs, base + 2 * C, j0, Tn, stride);
    __syncthreads();
    const int n_last = j0 == q0 ? warp : 3;
    score_tile<HS>(ss + warp * 16 * kLdS, qs + warp * 16 * LDT, ks, n_last);
    score_tile<HS>(dps + warp * 16 * kLdS, dos + warp * 16 * LDT, vs, n_last);
    __syncwarp();
    for (int c = half; c < kTileRows; c += 2) {
      const bool seen = i < Tn && j0 + c <= i;
      const float p = seen ? expf(ss[r * kLdS + c] * scale - my_lse) : 0.f;
      dss[r * kLdP + c] = __float2bfloat16_rn(p * (dps[r * kLdS + c] - my_delta));
    }
    __syncwarp();
    accumulate_pb<HS>(dq, dss + warp * 16 * kLdP, ks, 0, n_last);
  }
#pragma unroll
  for (int n = 0; n < HS / 16; ++n)
    wmma::store_matrix_sync(ss + warp * 16 * kLdS + n * 16, dq[n], kLdS, wmma::mem_row_major);
  __syncwarp();
  if (i >= Tn) return;
  store_row(dqkv + (int64_t(b) * Tn + i) * stride + int64_t(h) * HS + half * (HS / 2), ss + r * kLdS + half * (HS / 2),
            HS / 2, scale);
#else
  __trap();
#endif
}

}  // namespace gpt::cuda::detail::tc
