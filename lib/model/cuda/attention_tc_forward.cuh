// The tensor-core attention forward (attention_tc_kernels.cuh describes the
// design): online softmax over streamed K/V tiles, O in fp32 registers,
// only the log-sum-exp saved; 64-query tiles (forward_kernel) or 128
// (forward_wide_kernel).
#pragma once

#include "model/cuda/attention_tc_tiles.cuh"

namespace gpt::cuda::detail::tc {

// One online-softmax step of the forward for a warp's 16-row m-tile: its
// scores s against a 64-key tile (raw, scaled here), with kMasked the keys
// past row + d masked (d: how far the m-tile's first row lies past the
// tile's first key), update the running max m and this lane's share of the
// row sum l (rows g and g + 8), rescale the output accumulator o, and pack
// the probabilities into P's A fragments p. m stays finite: every row sees
// key 0 in the first tile, so a later tile whose keys are all masked leaves
// m as it is (alpha 1, probabilities 0).
template <bool kMasked, int HS>
__device__ __forceinline__ void softmax_step(float (&s)[kKeyBlocks][4], float (&m)[2], float (&l)[2],
                                             float (&o)[HS / 8][4], uint32_t (&p)[kTileRows / 16][4], int d,
                                             float scale2, int g, int t) {
  // The max is taken over the raw scores (scale > 0), scaled once per row.
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeyBlocks; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (kMasked)
        if (frag_col(n, t, e) > d + frag_row(g, e)) s[n][e] = -INFINITY;
      mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
    }
  float alpha[2], neg_m[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_new = fmaxf(m[r], quad_max(mx[r]) * scale2);
    alpha[r] = exp2f(m[r] - m_new);  // 0 on the first tile
    m[r] = m_new;
    neg_m[r] = -m_new;
    l[r] *= alpha[r];
  }
#pragma unroll
  for (int n = 0; n < kKeyBlocks; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(fmaf(s[n][e], scale2, neg_m[e / 2]));
      l[e / 2] += s[n][e];
    }
#pragma unroll
  for (int n = 0; n < HS / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
#pragma unroll
  for (int k = 0; k < kTileRows / 16; ++k) mma::a_from_c(p[k], s[2 * k], s[2 * k + 1]);
}

// The forward's end for a warp's 16-row m-tile from row0: the output rows
// (o over the row sums) into out (the head's column 0; rows at or past Tn
// skipped) and, by one lane per quad, the natural-log log-sum-exp of rows
// g and g + 8 into lse (the head's row 0).
template <int HS>
__device__ __forceinline__ void finish_rows(bf16* out, float* lse, const float (&o)[HS / 8][4], const float (&m)[2],
                                            const float (&l)[2], int row0, int Tn, int C, int g, int t) {
  const float l0 = quad_sum(l[0]), l1 = quad_sum(l[1]);
  store_rows<HS>(out, o, row0, Tn, C, 1.f / l0, 1.f / l1);
  if (t == 0) {
    if (row0 + g < Tn) lse[row0 + g] = m[0] * kLn2 + logf(l0);
    if (row0 + g + 8 < Tn) lse[row0 + g + 8] = m[1] * kLn2 + logf(l1);
  }
}

// 4 blocks per SM (128 registers; unbounded, ptxas takes 133 and 3 fit).
// At head size 128 (O and Q's fragments twice the size) 2: 255 registers,
// and the 85 KiB of shared memory hold no more than 2 on an H100. At 80, 96
// and 112 also 2 (ptxas takes 163, 178 and 195 registers on sm_90); at 48 4.
template <int HS>
constexpr int kFwdMinBlocks = HS > 64 ? 2 : 4;
template <int HS>
__global__ void __launch_bounds__(kThreads, kFwdMinBlocks<HS>)
    forward_kernel(bf16* out, float* lse, const bf16* qkv, int Tn, int C, int NH, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  bf16* qs = reinterpret_cast<bf16*>(dynamic_smem());
  bf16* kv = qs + kTileElems<HS>;  // buffer b: K at kv + 2b tiles, V after it
  const Place at(qkv, nullptr, Tn, C, NH, HS);
  const int warp = at.warp, g = at.g, t = at.t;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileRows;  // heaviest tiles first
  const int64_t stride = 3 * int64_t(C);
  const int j_end = min(Tn, q0 + kTileRows);
  const float scale2 = scale * kLog2e;

  load_tile<HS>(qs, at.qkv, q0, Tn, stride);
  cp_async_commit();
  load_kv<HS>(kv, 0, at.qkv, 0, Tn, C);
  tile_ready(true);  // Q
  uint32_t qa[HS / 16][4];
  load_rows<HS>(qa, qs, warp * 16);
  float o[HS / 8][4] = {};
  // Rows g and g + 8: running max of the base-2 scores, and this lane's share of the row sum.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  auto tile = [&](auto diagonal, int j0, int b) {
    constexpr bool kDiagonal = decltype(diagonal)::value;
    const bf16 *ks = kv_step<HS>(kv, b, at.qkv, j0, j_end, Tn, C), *vs = ks + kTileElems<HS>;
    // On the diagonal tile, keys past the warp's last row are masked (and skipped).
    float s[kKeyBlocks][4];
    scores<HS>(s, qa, ks, 0, kDiagonal ? 2 * warp + 1 : kKeyBlocks - 1);
    uint32_t p[kTileRows / 16][4];
    softmax_step<kDiagonal, HS>(s, m, l, o, p, warp * 16, scale2, g, t);
    accumulate<HS>(o, p, vs, 0, kDiagonal ? warp : kTileRows / 16 - 1);
    __syncthreads();  // every warp is done with buffer b before it is refilled
  };
  int j0 = 0, b = 0;
  for (; j0 < q0; j0 += kTileRows, b ^= 1) tile(OffDiagonal{}, j0, b);
  tile(Diagonal{}, j0, b);
  finish_rows<HS>(out + int64_t(at.b) * Tn * C + int64_t(at.h) * HS, lse + int64_t(at.bh) * Tn, o, m, l,
                  q0 + warp * 16, Tn, C, g, t);
#else
  __trap();
#endif
}

// The forward with 128-query tiles (forward_wide_kernel): each warp owns 32
// query rows, two 16-row m-tiles, for the whole kernel, so every K and V
// fragment loaded from shared memory feeds two products instead of one
// (FlashAttention-2's forward layout), and each K/V tile streamed serves
// 128 queries, not 64. More registers (both m-tiles' scores and outputs
// live: 254 registers at sm_90, no spill): 2 blocks of 4 warps per SM, not
// 4. Per off-diagonal tile (sm_90 PTX) 771 instructions around 128 mma.sync
// and 32 ldmatrix, against forward_kernel's 481 around 64 and 32. Selected
// with AttentionKernel::kTensorCoreWide (bench_gpu_attention times both;
// the trainer takes forward_kernel until a GPU says which is faster).
constexpr int kWideRows = 2 * kTileRows;
template <int HS>
constexpr int forward_wide_smem() { return 6 * kTileBytes<HS>; }  // Q (2 tiles), 2 x (K, V)
inline dim3 wide_grid(int64_t B, int64_t T, int64_t NH) {
  return dim3(unsigned((T + kWideRows - 1) / kWideRows), unsigned(B * NH));
}

template <int HS>
__global__ void __launch_bounds__(kThreads, 2)
    forward_wide_kernel(bf16* out, float* lse, const bf16* qkv, int Tn, int C, int NH, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  bf16* qs = reinterpret_cast<bf16*>(dynamic_smem());  // 128 rows: two tiles, contiguous
  bf16* kv = qs + 2 * kTileElems<HS>;                  // buffer b: K at kv + 2b tiles, V after it
  const Place at(qkv, nullptr, Tn, C, NH, HS);
  const int warp = at.warp, g = at.g, t = at.t;
  const int q0 = (int(gridDim.x) - 1 - int(blockIdx.x)) * kWideRows;  // heaviest tiles first
  const int64_t stride = 3 * int64_t(C);
  const int j_end = min(Tn, q0 + kWideRows);
  const float scale2 = scale * kLog2e;
  const int row0 = q0 + warp * 32;  // m-tile mt: rows row0 + 16 mt ..

  load_tile<HS>(qs, at.qkv, q0, Tn, stride);
  load_tile<HS>(qs + kTileElems<HS>, at.qkv, q0 + kTileRows, Tn, stride);
  cp_async_commit();
  load_kv<HS>(kv, 0, at.qkv, 0, Tn, C);
  tile_ready(true);  // Q
  uint32_t qa[2][HS / 16][4];
  load_rows<HS>(qa[0], qs, warp * 32);
  load_rows<HS>(qa[1], qs, warp * 32 + 16);
  float o[2][HS / 8][4] = {};
  // Per m-tile, rows g and g + 8: running max of the base-2 scores, this lane's share of the row sum.
  float m[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}}, l[2][2] = {};
  auto tile = [&](auto masked, int j0, int b) {
    constexpr bool kMasked = decltype(masked)::value;
    const bf16 *ks = kv_step<HS>(kv, b, at.qkv, j0, j_end, Tn, C), *vs = ks + kTileElems<HS>;
    // The two key tiles from q0 on are masked: m-tile mt's rows start d[mt] past the tile's first key, so
    // key column c is masked past row + d; its 8-column blocks past n_last hold only masked keys (none
    // when d < 0, all when d >= 64) and 16-row blocks past k_last likewise.
    int d[2], n_last[2], k_last[2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      d[mt] = row0 + 16 * mt - j0;
      n_last[mt] = !kMasked ? kKeyBlocks - 1 : d[mt] < 0 ? -1 : min(kKeyBlocks - 1, d[mt] / 8 + 1);
      k_last[mt] = !kMasked ? kTileRows / 16 - 1 : d[mt] < 0 ? -1 : min(kTileRows / 16 - 1, d[mt] / 16);
    }
    float s[2][kKeyBlocks][4];
    scores_m<HS, kKeyBlocks, 2>(s, qa, ks, 0, n_last);
    uint32_t p[2][kTileRows / 16][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) softmax_step<kMasked, HS>(s[mt], m[mt], l[mt], o[mt], p[mt], d[mt], scale2, g, t);
    accumulate_m<HS, kTileRows / 16, 2>(o, p, vs, 0, k_last);
    __syncthreads();  // every warp is done with buffer b before it is refilled
  };
  int j0 = 0, b = 0;
  for (; j0 < q0; j0 += kTileRows, b ^= 1) tile(OffDiagonal{}, j0, b);
  for (; j0 < j_end; j0 += kTileRows, b ^= 1) tile(Diagonal{}, j0, b);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
    finish_rows<HS>(out + int64_t(at.b) * Tn * C + int64_t(at.h) * HS, lse + int64_t(at.bh) * Tn, o[mt], m[mt],
                    l[mt], row0 + 16 * mt, Tn, C, g, t);
#else
  __trap();
#endif
}

}  // namespace gpt::cuda::detail::tc
