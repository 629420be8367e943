// The tensor-core attention backward (attention_tc_kernels.cuh describes the
// design): dK/dV (one block per key tile, query tiles streamed; it may store
// the score gradients dS), dQ (one block per query tile, key tiles
// streamed), and dQ as one product over the stored dS.
#pragma once

#include "model/cuda/attention_tc_tiles.cuh"

namespace gpt::cuda::detail::tc {

// Block k (columns, i.e. queries, 16k..16k+15) of this warp's 16 rows
// (keys) of a dS^T tile (ds_row_offset's layout), from its bf16 A fragment:
// 4-byte stores, a quad's four lanes filling 16 contiguous bytes of a row.
// Masked and padded entries are stored as the zeros they are (p = 0), which
// dq_from_ds_kernel relies on.
__device__ __forceinline__ void store_ds_block(bf16* tile, const uint32_t (&a)[4], int warp, int k) {
  const int g = mma::lane_g(), t = mma::lane_t();
  uint32_t* row = reinterpret_cast<uint32_t*>(tile + (warp * 16 + g) * kTileRows) + 8 * k + t;
  constexpr int kRow8 = 8 * kTileRows / 2;  // 8 rows on, in 4-byte words
  row[0] = a[0];          // row g, columns 16k + 2t, +1
  row[kRow8] = a[1];      // row g + 8
  row[4] = a[2];          // row g, columns 16k + 8 + 2t, +1
  row[kRow8 + 4] = a[3];  // row g + 8
}

// Blocks per SM the dK/dV kernel is compiled for. On sm_90, 3 (12 warps per
// SM) holds it to 168 registers, which ptxas meets without spilling by
// computing S^T's probabilities and packing them before dP^T's; with 2 it
// takes 228. The build sets it (CMake GPT_DKV_MIN_BLOCKS) so that both can
// be measured on a GPU (bench/gpu_attention_variants.sh). Before sm_90 an
// SM's shared memory (164 KiB on sm_80) holds 2 of its 55 KiB blocks at
// most, and 168 registers would spill there: 2. On sm_100 (B200) ptxas
// (CUDA 13.0) spills 24 to 76 bytes at 168 registers, so 2 there too
// (emulated.launch_resources fails a spill); which is faster on a B200 is
// unmeasured.
#ifndef GPT_DKV_MIN_BLOCKS
#define GPT_DKV_MIN_BLOCKS 3
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 900 || __CUDA_ARCH__ >= 1000)
constexpr int kDkvMinBlocks = 2;
#else
constexpr int kDkvMinBlocks = GPT_DKV_MIN_BLOCKS;
#endif
// At head size 128, 2 everywhere: the 103 KiB of shared memory hold no more
// than 2 on an H100, and dK, dV (16 x 128 fp32 each per warp) take 128
// registers alone. At 80, 96 and 112 (67 to 91 KiB; dK and dV 80 to 112
// registers) 2 as well.
template <int HS>
constexpr int kDkvMinBlocksFor = HS > 64 ? 2 : kDkvMinBlocks;

// dK, dV for the 64 keys [j0, j0 + 64) of one (b, h); query tiles from j0
// (the diagonal tile) to the end. Per query tile, with this warp's 16 keys
// as rows:
//   S^T = K Q^T, dP^T = V dO^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - delta)
//   dV += P^T dO, dK += dS^T Q (times scale at the end).
// kStoreDs: dS^T's tiles also go to ds (ds_row_offset's layout; the launch
// covers pairs bh0 + blockIdx.y), for dq_from_ds_kernel. kBufs: buffers of
// the streamed Q/dO tiles (2, or 1 where a block cannot have 2's memory).
template <int HS, bool kStoreDs = false, int kBufs = 2>
__global__ void __launch_bounds__(kThreads, kDkvMinBlocksFor<HS>)
    dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta, int Tn, int C,
               int NH, float scale, bf16* ds = nullptr, int bh0 = 0) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  bf16* ks = reinterpret_cast<bf16*>(dynamic_smem());
  bf16 *vs = ks + kTileElems<HS>, *qdo = vs + kTileElems<HS>;  // buffer b: Q at qdo + 2b tiles, dO after it
  static_assert(kBufs == 1 || kBufs == 2, "single or double buffering");
  // buffer b: -lse * log2(e) at rows_s + 2b * 64, delta after it
  float* rows_s = reinterpret_cast<float*>(qdo + 2 * kBufs * kTileElems<HS>);
  // kStoreDs: tile (i, j) of the stored dS^T is at this pointer + i (i + 1) / 2 tiles; kept in shared memory
  // and read (volatile) at each store, so that no register holds it through the loop.
  bf16** ds_base_s = reinterpret_cast<bf16**>(rows_s + 2 * kBufs * kTileRows);
  // Above head size 64 the kernel without stores is this code too, the stores skipped where ds is null: at 128
  // ptxas (CUDA 13.0) keeps it within 255 registers so, and spills 4 to 36 bytes for every other form tried.
  constexpr bool kStoreCode = kStoreDs || HS > 64;
  const bool store = kStoreDs || ds != nullptr;
  if (kStoreCode && store && threadIdx.x == 0)
    *ds_base_s = ds + ds_row_offset(Tn, 0) + int64_t(blockIdx.x) * kDsTileElems;
  const Place at(qkv, dout, Tn, C, NH, HS, bh0);
  const int warp = at.warp, g = at.g, t = at.t;
  const int j0 = blockIdx.x * kTileRows;  // block 0 has the most query tiles
  const int64_t stride = 3 * int64_t(C);
  const float scale2 = scale * kLog2e;
  auto load_qdo = [&](int b, int i0) {
    load_tile<HS>(qdo + 2 * b * kTileElems<HS>, at.qkv, i0, Tn, stride);
    load_tile<HS>(qdo + (2 * b + 1) * kTileElems<HS>, at.dout, i0, Tn, C);
    cp_async_commit();
    if (threadIdx.x < kTileRows) {
      const int i = i0 + threadIdx.x;
      rows_s[2 * b * kTileRows + threadIdx.x] = i < Tn ? -lse[int64_t(at.bh) * Tn + i] * kLog2e : -INFINITY;
      rows_s[(2 * b + 1) * kTileRows + threadIdx.x] = i < Tn ? delta[int64_t(at.bh) * Tn + i] : 0.f;
    }
  };

  load_tile<HS>(ks, at.qkv + C, j0, Tn, stride);
  load_tile<HS>(vs, at.qkv + 2 * C, j0, Tn, stride);
  cp_async_commit();
  load_qdo(0, j0);
  tile_ready(true);  // K, V
  // K's and V's A fragments for this warp's keys, in registers (above head size 64 read from the shared
  // tiles as they are needed: scores_a_shared).
  constexpr bool kShared = HS > 64;
  uint32_t ka[kShared ? 1 : HS / 16][4], va[kShared ? 1 : HS / 16][4];
  if constexpr (!kShared) {
    load_rows<HS>(ka, ks, warp * 16);
    load_rows<HS>(va, vs, warp * 16);
  }
  float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};
  // Of query tile i0 (buffer b), the kN 8-query blocks from n0 (queries 8 n0 ..): probabilities and score
  // gradients, packed to bf16 A fragments for their kN / 2 16-query blocks, multiplied into dV and dK, and
  // with kStoreDs stored once multiplied (then fewer registers are live).
  auto queries = [&](auto diagonal, auto n0_c, auto n_c, int i0, int b) {
    constexpr bool kDiagonal = decltype(diagonal)::value;
    constexpr int n0 = decltype(n0_c)::value, kN = decltype(n_c)::value, kK = kN / 2;
    const bf16 *qs = qdo + 2 * b * kTileElems<HS> + n0 * 8 * kLd<HS>, *dos = qs + kTileElems<HS>;
    const float *nlse_s = rows_s + 2 * b * kTileRows + n0 * 8, *delta_s = nlse_s + kTileRows;
    // On the diagonal tile, queries before the warp's first key see none of its keys (skipped).
    const int n_first = kDiagonal ? 2 * warp - n0 : 0;
    float st[kN][4], dpt[kN][4];
    if constexpr (kShared) {
      scores_a_shared<HS, kN>(st, ks + warp * 16 * kLd<HS>, qs, n_first, kN - 1);
      scores_a_shared<HS, kN>(dpt, vs + warp * 16 * kLd<HS>, dos, n_first, kN - 1);
    } else {
      scores<HS, kN>(st, reinterpret_cast<const uint32_t(&)[HS / 16][4]>(ka), qs, n_first, kN - 1);
      scores<HS, kN>(dpt, reinterpret_cast<const uint32_t(&)[HS / 16][4]>(va), dos, n_first, kN - 1);
    }
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      const float2 nl = row_pair(nlse_s, n, t), dl = row_pair(delta_s, n, t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2f(fmaf(st[n][e], scale2, e % 2 ? nl.y : nl.x));
        if constexpr (kDiagonal)
          if (frag_col(n0 + n, t, e) < warp * 16 + frag_row(g, e)) p = 0.f;
        st[n][e] = p;
        dpt[n][e] = p * (dpt[n][e] - (e % 2 ? dl.y : dl.x));
      }
    }
    uint32_t pa[kK][4], dsa[kK][4];
#pragma unroll
    for (int k = 0; k < kK; ++k) {
      mma::a_from_c(pa[k], st[2 * k], st[2 * k + 1]);
      mma::a_from_c(dsa[k], dpt[2 * k], dpt[2 * k + 1]);
    }
    const int k_first = kDiagonal ? warp - n0 / 2 : 0;
    accumulate<HS, kK>(dv, pa, dos, k_first, kK - 1);
    accumulate<HS, kK>(dk, dsa, qs, k_first, kK - 1);
    if (kStoreCode && store) {
      const int i = i0 / kTileRows;
      bf16* tile = *reinterpret_cast<bf16* volatile*>(ds_base_s) + int64_t(i) * (i + 1) / 2 * kDsTileElems;
#pragma unroll
      for (int k = 0; k < kK; ++k) store_ds_block(tile, dsa[k], warp, n0 / 2 + k);
    }
  };
  auto tile = [&](auto diagonal, int i0, int b) {
    if constexpr (kBufs == 2) {
      stream_step(b, i0, Tn, load_qdo);
    } else {  // the first tile's copies were issued with K's and V's
      if (i0 != j0) load_qdo(0, i0);
      tile_ready(false);
    }
    using Zero = std::integral_constant<int, 0>;
    if constexpr (!kStoreDs && (HS == 32 || HS == 64)) {
      queries(diagonal, Zero{}, std::integral_constant<int, kKeyBlocks>{}, i0, b);
    } else {
      // Half the queries at a time: 32 queries' score blocks live at once instead of 64. Whole tiles spilled
      // at 168 registers with the stores (4 to 124 bytes, by where they went), halves do not; nor at head
      // size 128, where dK and dV alone take 128 registers. At 48 whole tiles spill 4 bytes without the
      // stores too (sm_90, 168 registers).
      using Half = std::integral_constant<int, kKeyBlocks / 2>;
      queries(diagonal, Zero{}, Half{}, i0, b);
      queries(diagonal, Half{}, Half{}, i0, b);
    }
    __syncthreads();  // every warp is done with buffer b before it is refilled
  };
  tile(Diagonal{}, j0, 0);
  for (int i0 = j0 + kTileRows, b = kBufs - 1; i0 < Tn; i0 += kTileRows, b = kBufs == 2 ? b ^ 1 : 0)
    tile(OffDiagonal{}, i0, b);
  bf16* base = dqkv + int64_t(at.b) * Tn * 3 * C + int64_t(at.h) * HS;
  store_rows<HS>(base + C, dk, j0 + warp * 16, Tn, stride, scale, scale);
  store_rows<HS>(base + 2 * C, dv, j0 + warp * 16, Tn, stride, 1.f, 1.f);
#else
  __trap();
#endif
}

// Blocks per SM the dQ kernel is compiled for at sm_90: 0 (the default)
// leaves ptxas its choice, 134 registers, so 3 blocks; 4 holds it to 128,
// at which it spills 20 bytes. The build sets it (CMake GPT_DQ_MIN_BLOCKS)
// so that the two can be measured on a GPU (bench/gpu_attention_variants.sh).
// Before sm_90 shared memory holds 3 of its 54 KiB blocks at most.
#ifndef GPT_DQ_MIN_BLOCKS
#define GPT_DQ_MIN_BLOCKS 0
#endif
#if GPT_DQ_MIN_BLOCKS > 0 && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
#define GPT_DQ_LAUNCH_BOUNDS __launch_bounds__(kThreads, GPT_DQ_MIN_BLOCKS)
#else
#define GPT_DQ_LAUNCH_BOUNDS __launch_bounds__(kThreads)
#endif

// dQ for the 64 queries [q0, q0 + 64) of one (b, h); key tiles from 0 to the
// diagonal. Per key tile, with this warp's 16 queries as rows:
//   S = Q K^T, dP = dO V^T, dS = exp(scale S - lse) (dP - delta), dQ += dS K.
// kBufs: buffers of the streamed K/V tiles, as in dkv_kernel.
template <int HS, int kBufs = 2>
__global__ void GPT_DQ_LAUNCH_BOUNDS dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                               const float* delta, int Tn, int C, int NH, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  bf16* qs = reinterpret_cast<bf16*>(dynamic_smem());
  bf16 *dos = qs + kTileElems<HS>, *kv = dos + kTileElems<HS>;  // buffer b: K at kv + 2b tiles, V after it
  const Place at(qkv, dout, Tn, C, NH, HS);
  const int warp = at.warp, g = at.g, t = at.t;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileRows;  // heaviest tiles first
  const int64_t stride = 3 * int64_t(C);
  const int row0 = q0 + warp * 16;
  const float scale2 = scale * kLog2e;
  float nlse[2], row_delta[2];  // rows g and g + 8: -lse * log2(e) (-inf past Tn: probability 0), delta
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + g + 8 * r;
    nlse[r] = i < Tn ? -lse[int64_t(at.bh) * Tn + i] * kLog2e : -INFINITY;
    row_delta[r] = i < Tn ? delta[int64_t(at.bh) * Tn + i] : 0.f;
  }

  const int j_end = min(Tn, q0 + kTileRows);

  load_tile<HS>(qs, at.qkv, q0, Tn, stride);
  load_tile<HS>(dos, at.dout, q0, Tn, C);
  cp_async_commit();
  load_kv<HS>(kv, 0, at.qkv, 0, Tn, C);
  tile_ready(true);  // Q, dO
  uint32_t qa[HS / 16][4], doa[HS / 16][4];
  load_rows<HS>(qa, qs, warp * 16);
  load_rows<HS>(doa, dos, warp * 16);
  float dq[HS / 8][4] = {};
  auto tile = [&](auto diagonal, int j0, int b) {
    constexpr bool kDiagonal = decltype(diagonal)::value;
    const bf16* ks = kv;
    if constexpr (kBufs == 2) {
      ks = kv_step<HS>(kv, b, at.qkv, j0, j_end, Tn, C);
    } else {  // the first tile's copies were issued with Q's and dO's
      if (j0 != 0) load_kv<HS>(kv, 0, at.qkv, j0, Tn, C);
      tile_ready(false);
    }
    const bf16* vs = ks + kTileElems<HS>;
    // On the diagonal tile, keys past the warp's last row are masked (and skipped).
    float s[kKeyBlocks][4], dp[kKeyBlocks][4];
    scores<HS>(s, qa, ks, 0, kDiagonal ? 2 * warp + 1 : kKeyBlocks - 1);
    scores<HS>(dp, doa, vs, 0, kDiagonal ? 2 * warp + 1 : kKeyBlocks - 1);
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2f(fmaf(s[n][e], scale2, nlse[e / 2]));
        if constexpr (kDiagonal)
          if (frag_col(n, t, e) > warp * 16 + frag_row(g, e)) p = 0.f;
        dp[n][e] = p * (dp[n][e] - row_delta[e / 2]);
      }
    uint32_t dsa[kTileRows / 16][4];
#pragma unroll
    for (int k = 0; k < kTileRows / 16; ++k) mma::a_from_c(dsa[k], dp[2 * k], dp[2 * k + 1]);
    accumulate<HS>(dq, dsa, ks, 0, kDiagonal ? warp : kTileRows / 16 - 1);
    __syncthreads();  // every warp is done with buffer b before it is refilled
  };
  int j0 = 0, b = 0;
  for (; j0 < q0; j0 += kTileRows, b = kBufs == 2 ? b ^ 1 : 0) tile(OffDiagonal{}, j0, b);
  tile(Diagonal{}, j0, b);
  store_rows<HS>(dqkv + int64_t(at.b) * Tn * 3 * C + int64_t(at.h) * HS, dq, row0, Tn, stride, scale, scale);
#else
  __trap();
#endif
}

// dQ for the 64 queries [q0, q0 + 64) of one (b, h) from the score
// gradients the dK/dV kernel stored (its `ds`, same bh0): dQ = scale dS K
// over key tiles 0 to the diagonal, streamed with the dS^T tiles. Each warp
// takes its 16 queries' A fragments from the stored transpose (ldmatrix
// .trans). On the diagonal tile, key blocks past the warp's queries hold
// only zeros and are skipped; no other masking: stored masked or padded
// entries are 0, padded key rows of K are zero-filled.
template <int HS>
constexpr int dq_from_ds_smem() { return 2 * (kTileBytes<64> + kTileBytes<HS>); }

template <int HS>
__global__ void __launch_bounds__(kThreads)
    dq_from_ds_kernel(bf16* dqkv, const bf16* ds, const bf16* qkv, int Tn, int C, int NH, float scale, int bh0) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr int kBufElems = kTileElems<64> + kTileElems<HS>;  // buffer b: dS^T at b * kBufElems, K after it
  bf16* buf = reinterpret_cast<bf16*>(dynamic_smem());
  const Place at(qkv, nullptr, Tn, C, NH, HS, bh0);
  const int warp = at.warp;
  const int qi = int(gridDim.x) - 1 - int(blockIdx.x);  // heaviest tiles first
  const int q0 = qi * kTileRows;
  const bf16* ds_row = ds + ds_row_offset(Tn, qi);
  auto load = [&](int b, int j0) {
    bf16* d = buf + b * kBufElems;
    load_tile<64, true>(d, ds_row + int64_t(j0 / kTileRows) * kDsTileElems, 0, kTileRows, kTileRows);
    load_tile<HS>(d + kTileElems<64>, at.qkv + C, j0, Tn, 3 * int64_t(C));
    cp_async_commit();
  };
  load(0, 0);
  float dq[HS / 8][4] = {};
  auto tile = [&](auto diagonal, int j0, int b) {
    constexpr bool kDiagonal = decltype(diagonal)::value;
    stream_step(b, j0, q0 + kTileRows, load);
    const bf16 *dst = buf + b * kBufElems, *ks = dst + kTileElems<64>;
#pragma unroll
    for (int k = 0; k < kTileRows / 16; ++k) {
      if (kDiagonal && k > warp) continue;
      uint32_t a[4];
      mma::load_a_trans(a, dst + k * 16 * kLd<64> + warp * 16, kLd<64>);
#pragma unroll
      for (int n = 0; n < HS / 8; n += 2) {
        uint32_t bb[2][2];
        mma::load_b_row(bb, ks + k * 16 * kLd<HS> + n * 8, kLd<HS>);
        mma::mma(dq[n], a, bb[0]);
        mma::mma(dq[n + 1], a, bb[1]);
      }
    }
    __syncthreads();  // every warp is done with buffer b before it is refilled
  };
  int j0 = 0, b = 0;
  for (; j0 < q0; j0 += kTileRows, b ^= 1) tile(OffDiagonal{}, j0, b);
  tile(Diagonal{}, j0, b);
  store_rows<HS>(dqkv + int64_t(at.b) * Tn * 3 * C + int64_t(at.h) * HS, dq, q0 + warp * 16, Tn, 3 * int64_t(C),
                 scale, scale);
#else
  __trap();
#endif
}

}  // namespace gpt::cuda::detail::tc
