// Kernels of the tensor-core causal attention (FlashAttention-2 structure on
// mma.sync bf16 products with fp32 accumulation); attention_tc.cu launches
// them. A header so that the kernel code also compiles as host C++ against
// tests/unit/emulated_cuda.hpp, which runs it thread by thread on the CPU,
// register fragments included (test_attention_emulated): indexing,
// masking, tiling, fragment layout and synchronisation are tested without a
// GPU.
//
// Tiles are 64 rows; a block has 4 warps and each warp owns 16 rows of the
// block's tile for the whole kernel. Scores, probabilities and all
// accumulators live in registers (mma_bf16.cuh's fragments): a warp computes
// its 16 x 64 score block into C fragments, applies the mask and softmax
// there (a row's values are spread over the 4 lanes of a quad, so row
// reductions take two shuffles), packs them to bf16 A fragments in place and
// multiplies on. Shared memory holds only the streamed bf16 tiles, which
// every warp reads; block-wide barriers guard just those.
//
// The streamed tiles are double-buffered: the next tile's copies (cp.async)
// are issued before the current tile's products, so loads overlap compute.
// At head size 128 the backward kernels also come single-buffered (kBufs =
// 1: a tile's copies are issued once the previous tile is done with its
// buffer, then waited for), for GPUs whose blocks cannot have the
// double-buffered ones' 103 KiB (8.6, 8.9, 12.0: 99 KiB).
//
// Forward: online softmax, O in fp32 registers, only the log-sum-exp saved.
// Backward: dK/dV (one block per key tile, query tiles streamed) and dQ (one
// block per query tile, key tiles streamed) are separate kernels, so no
// output has two writers and the result is deterministic; the dK/dV kernel
// can also store the score gradients dS so that dQ is one product over them
// (dq_from_ds_kernel) instead of recomputing S and dP. Fully masked
// 16-column score blocks and 16-row product blocks of the diagonal tile are
// skipped. Grids start with the heaviest (most tiles) blocks.
//
// The loops are kept lean because, with 4 warps of 16 rows, a tile's
// products are a few hundred instructions per warp and everything else
// competes with them for issue slots: only the diagonal tile is masked
// (Diagonal / OffDiagonal below), exponentials are base 2 with the scale
// folded into one FFMA, tile copies are unrolled from one base address and
// probabilities are packed two per cvt. Per off-diagonal tile (sm_90 PTX of
// the HS = 64 loops; bench/kernel_loop_ptx.py counts them) that took dK/dV
// from 2001 to 643 instructions around its 128 mma.sync, dQ from 1692 to
// 517 around 96 and the forward from 1439 to 481 around 64.
#pragma once

#include <cstdint>
#include <type_traits>

#include "model/cuda/cp_async.cuh"
#include "model/cuda/dtype.cuh"
#include "model/cuda/mma_bf16.cuh"
#include "model/cuda/types.hpp"

namespace gpt::cuda::detail::tc {

constexpr int kTileRows = 64;  // rows of every Q/K/V/dO tile
constexpr int kWarps = 4;      // 16 rows per warp
constexpr int kThreads = 32 * kWarps;
constexpr int kKeyBlocks = kTileRows / 8;  // 8-column score fragments per warp row block

// bf16 64 x HS tiles with rows padded by 8 elements (16 bytes): the 8 rows
// one ldmatrix phase reads then start on distinct 4-bank groups (row stride
// an odd number of 16-byte chunks: 20 words for HS = 32, 28 for 48, 36 for
// 64, ... 68 for 128), so fragment loads are free of bank conflicts.
template <int HS>
constexpr int kLd = HS + 8;
template <int HS>
constexpr int kTileElems = kTileRows * kLd<HS>;
template <int HS>
constexpr int kTileBytes = kTileElems<HS> * 2;
// Forward: Q, 2 x (K, V). dK/dV: K, V, kBufs x (Q, dO), kBufs x (lse, delta)
// rows, dS^T's pointer. dQ: Q, dO, kBufs x (K, V).
template <int HS>
constexpr int forward_smem() { return 5 * kTileBytes<HS>; }
template <int HS, int kBufs = 2>
constexpr int dkv_smem() { return (2 + 2 * kBufs) * kTileBytes<HS> + 2 * kBufs * kTileRows * 4 + 16; }
template <int HS, int kBufs = 2>
constexpr int dq_smem() { return (2 + 2 * kBufs) * kTileBytes<HS>; }

// cp.async for the streamed tiles; false turns them into ordinary 16-byte
// copies (same double buffering and barriers), a switch for checking on a
// GPU whether the asynchronous copies pay.
constexpr bool kAsyncTileLoads = true;

// Every kernel's grid: x = 64-row tiles of the sequence, y = (b, h) (or a
// chunk of `pairs` of them, from Place's bh0).
inline dim3 tile_grid(int64_t B, int64_t T, int64_t NH) {
  return dim3(unsigned((T + kTileRows - 1) / kTileRows), unsigned(B * NH));
}
inline dim3 tile_grid_pairs(int64_t T, int64_t pairs) { return tile_grid(1, T, pairs); }

// The stored score gradients (dS = P (dP - delta), bf16) that the dK/dV
// kernel can leave for dq_from_ds_kernel, so that dQ = dS K takes one
// product instead of recomputing S and dP (three). Per (b, h) of a launch's
// chunk, one dense 64 x 64 tile per pair of query tile i and key tile
// j <= i, in dS^T's layout (row = key, column = query, as the dK/dV kernel
// holds it), tiles in the order (0, 0), (1, 0), (1, 1), (2, 0), ...
// (model/attention_ds.hpp sizes it: attention_ds_bytes_per_pair.)
constexpr int kDsTileElems = kTileRows * kTileRows;
// Tile (i, 0) of the launch's pair blockIdx.y; (i, j) follows at j tiles.
__device__ __forceinline__ int64_t ds_row_offset(int Tn, int i) {
  const int64_t n = (Tn + kTileRows - 1) / kTileRows;
  return (int64_t(blockIdx.y) * (n * (n + 1) / 2) + int64_t(i) * (i + 1) / 2) * kDsTileElems;
}
#ifndef GPT_EMULATED_CUDA
// The launch's dynamic shared memory (emulated_cuda.hpp provides its own).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(128) unsigned char smem[];
  return smem;
}
#endif

// Where a thread stands: its (b, h) (bh0 + blockIdx.y: a launch may cover a
// chunk of the pairs), warp, fragment coordinates (g, t), and the head's
// q/k/v and dout columns.
struct Place {
  int bh, b, h, warp, g, t;
  const bf16* qkv;   // q of row 0 of this (b, h); k at +C, v at +2C; row stride 3C
  const bf16* dout;  // row 0 of this (b, h) in dout; row stride C
  __device__ Place(const bf16* qkv_all, const bf16* dout_all, int Tn, int C, int NH, int HS, int bh0 = 0)
      : bh(bh0 + int(blockIdx.y)), b(bh / NH), h(bh % NH), warp(threadIdx.x / 32), g(mma::lane_g()),
        t(mma::lane_t()),
        qkv(qkv_all + int64_t(b) * Tn * 3 * C + int64_t(h) * HS),
        dout(dout_all ? dout_all + int64_t(b) * Tn * C + int64_t(h) * HS : nullptr) {}
};

// Issues the copies of rows [row0, row0 + 64) x HS columns of a [T, stride]
// bf16 matrix into a padded shared tile, 16 bytes each (cp.async with
// kAsyncTileLoads: the tile is there after cp_async_wait and a barrier);
// rows at or past Tn are zeroed directly.
//
// A row is HS / 8 16-byte chunks, stored kLd<HS> / 8 chunks apart (an odd
// count: 5, 7, 9, ... 17). The copies go by column segments of W chunks: a
// multiple of 8, then 4, then 2 (32: 4; 48: 4 + 2; 64: 8; 80: 8 + 2; 96:
// 8 + 4; 112: 8 + 4 + 2; 128: 16). Copy e of a segment
// (0 <= e < 64 W) fills the row and chunk segment_chunk gives. A quarter
// warp's eight 16-byte stores are one shared-memory wavefront when they land
// on distinct 4-bank groups ((byte offset / 16) mod 8). At W a multiple of 8
// a quarter fills 8 consecutive chunks of one row. At W < 8 it fills W
// chunks of 8 / W rows, W rows apart within a block of 8 rows: with S the
// odd row stride in chunks, those rows start S W k apart (k < 8 / W), and
// S W k mod 8 = W (S k mod 8 / W) takes each multiple of W once (S is odd,
// so invertible mod 8 / W), so the quarter's groups are disjoint. (HS = 32:
// rows r and r + 4, 5 groups apart per row.) The emulator counts these
// stores' conflicts (test_attention_emulated).
struct TileChunk {
  int row, chunk;
};
template <int W>
__device__ __forceinline__ TileChunk segment_chunk(int e) {
  if constexpr (W % 8 == 0) {
    return {e / W, e % W};
  } else {
    static_assert(W == 2 || W == 4, "segments of 2, 4 or a multiple of 8 chunks");
    const int j = e % 8, quarter = e / 8;  // lane within the quarter warp; the quarter
    return {quarter / W * 8 + quarter % W + W * (j / W), j % W};
  }
}

// The segment of chunks [c0, c0 + W) of every row (load_tile). A fixed count
// per thread, the copies kRowStep rows apart (segment_chunk maps e and
// e + kThreads so), from one base address: unrolled, each copy is a compare,
// an add and the copy, not a generic loop over e.
template <int HS, int c0, int W, bool kAllRows>
__device__ __forceinline__ void load_segment(bf16* dst, const bf16* src, int row0, int Tn, int64_t stride) {
  constexpr int kCopies = kTileRows * W, kRowStep = kThreads / W;
  static_assert(kCopies % kThreads == 0, "every thread issues the same number of copies");
  const auto [r, c] = segment_chunk<W>(int(threadIdx.x));
  bf16* d = dst + r * kLd<HS> + (c0 + c) * 8;
  const bf16* s = src + int64_t(row0 + r) * stride + (c0 + c) * 8;
#pragma unroll
  for (int k = 0; k < kCopies / kThreads; ++k, d += kRowStep * kLd<HS>, s += kRowStep * stride) {
    if (!kAllRows && row0 + r + k * kRowStep >= Tn)
      cp_async_zero_16(d);
    else if constexpr (kAsyncTileLoads)
      cp_async_16(d, s);
    else
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
  }
}

// The chunks [c0, HS / 8) of every row, by segments (load_tile).
template <int HS, int c0, bool kAllRows>
__device__ __forceinline__ void load_segments(bf16* dst, const bf16* src, int row0, int Tn, int64_t stride) {
  constexpr int kLeft = HS / 8 - c0;
  constexpr int W = kLeft >= 8 ? kLeft / 8 * 8 : kLeft >= 4 ? 4 : kLeft;
  if constexpr (kLeft > 0) {
    load_segment<HS, c0, W, kAllRows>(dst, src, row0, Tn, stride);
    load_segments<HS, c0 + W, kAllRows>(dst, src, row0, Tn, stride);
  }
}

// kAllRows: every row exists (row0 + 64 <= Tn known to the caller): no
// compares.
template <int HS, bool kAllRows = false>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, int row0, int Tn, int64_t stride) {
  static_assert(HS % 16 == 0 && (kLd<HS> / 8) % 2 == 1, "head size a multiple of 16: rows of an odd chunk stride");
  load_segments<HS, 0, kAllRows>(dst, src, row0, Tn, stride);
}

// The K and V tiles of keys [j0, j0 + 64) into buffer b of kv (K at 2b
// tiles, V after it) as one cp.async group; qkv is the head's q column.
template <int HS>
__device__ __forceinline__ void load_kv(bf16* kv, int b, const bf16* qkv, int j0, int Tn, int C) {
  load_tile<HS>(kv + 2 * b * kTileElems<HS>, qkv + C, j0, Tn, 3 * int64_t(C));
  load_tile<HS>(kv + (2 * b + 1) * kTileElems<HS>, qkv + 2 * C, j0, Tn, 3 * int64_t(C));
  cp_async_commit();
}

// Before computing on the tile whose copies were committed last but `next`
// (1 when the following tile's copies are already in flight, else 0): wait
// for this thread's copies, then a barrier for everyone's.
__device__ __forceinline__ void tile_ready(bool next) {
  if (next)
    cp_async_wait<1>();
  else
    cp_async_wait<0>();
  __syncthreads();
}

// One step of a double-buffered stream of tiles over rows [0, end): when a
// tile follows the one at `pos`, load(b ^ 1, pos + 64) issues its copies
// into the other buffer (free since the previous step's closing barrier) as
// one group; then the tile at `pos` (buffer b) is waited for.
template <typename Load>
__device__ __forceinline__ void stream_step(int b, int pos, int end, Load load) {
  const bool next = pos + kTileRows < end;
  if (next) load(b ^ 1, pos + kTileRows);
  tile_ready(next);
}

// stream_step over K/V tiles (load_kv) for keys [0, j_end); returns the K
// tile of keys j0 (buffer b), V follows it.
template <int HS>
__device__ __forceinline__ const bf16* kv_step(bf16* kv, int b, const bf16* qkv, int j0, int j_end, int Tn, int C) {
  stream_step(b, j0, j_end, [=](int nb, int nj) { load_kv<HS>(kv, nb, qkv, nj, Tn, C); });
  return kv + 2 * b * kTileElems<HS>;
}

// s[m][n] = A_m B^T for M m-tiles of 16 rows (a[m]: their A fragments, 16 x
// HS, in registers) and the 8-column blocks n, in pairs, from the pair
// holding n_first to the one holding n_last[m] (the others are zero); B^T's
// columns are the rows of the shared tile `rows` (64 rows; kN / 8 of them
// for fewer blocks). Each B fragment loaded feeds all M m-tiles' products.
template <int HS, int kN, int M>
__device__ __forceinline__ void scores_m(float (&s)[M][kN][4], const uint32_t (&a)[M][HS / 16][4], const bf16* rows,
                                         int n_first, const int (&n_last)[M]) {
  int last = n_last[0];
#pragma unroll
  for (int m = 1; m < M; ++m) last = max(last, n_last[m]);
#pragma unroll
  for (int n = 0; n < kN; n += 2) {
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[m][n][e] = s[m][n + 1][e] = 0.f;
    if (n + 1 < n_first || n > last) continue;
#pragma unroll
    for (int k = 0; k < HS / 16; ++k) {
      uint32_t b[2][2];
      mma::load_b_col(b, rows + n * 8 * kLd<HS> + k * 16, kLd<HS>);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (n > n_last[m]) continue;
        mma::mma(s[m][n], a[m][k], b[0]);
        mma::mma(s[m][n + 1], a[m][k], b[1]);
      }
    }
  }
}

// acc[m] (16 x HS) += P_m (16 x 64, bf16 A fragments p[m][k] for its
// 16-column blocks; kK of them for fewer) times the shared tile `rows` (64 x
// HS) for M m-tiles, over the blocks k_first..k_last[m] only (P_m is zero
// outside them). Each B fragment loaded feeds all M m-tiles' products.
template <int HS, int kK, int M>
__device__ __forceinline__ void accumulate_m(float (&acc)[M][HS / 8][4], const uint32_t (&p)[M][kK][4],
                                             const bf16* rows, int k_first, const int (&k_last)[M]) {
  int last = k_last[0];
#pragma unroll
  for (int m = 1; m < M; ++m) last = max(last, k_last[m]);
#pragma unroll
  for (int k = 0; k < kK; ++k) {
    if (k < k_first || k > last) continue;
#pragma unroll
    for (int n = 0; n < HS / 8; n += 2) {
      uint32_t b[2][2];
      mma::load_b_row(b, rows + k * 16 * kLd<HS> + n * 8, kLd<HS>);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (k > k_last[m]) continue;
        mma::mma(acc[m][n], p[m][k], b[0]);
        mma::mma(acc[m][n + 1], p[m][k], b[1]);
      }
    }
  }
}

// scores_m and accumulate_m for one m-tile, the warp's 16 rows (an array of
// one m-tile has the layout of the m-tile's own array).
template <int HS, int kN = kKeyBlocks>
__device__ __forceinline__ void scores(float (&s)[kN][4], const uint32_t (&a)[HS / 16][4], const bf16* rows,
                                       int n_first, int n_last) {
  const int last[1] = {n_last};
  scores_m<HS, kN, 1>(reinterpret_cast<float(&)[1][kN][4]>(s), reinterpret_cast<const uint32_t(&)[1][HS / 16][4]>(a),
                      rows, n_first, last);
}
template <int HS, int kK = kTileRows / 16>
__device__ __forceinline__ void accumulate(float (&acc)[HS / 8][4], const uint32_t (&p)[kK][4], const bf16* rows,
                                           int k_first, int k_last) {
  const int last[1] = {k_last};
  accumulate_m<HS, kK, 1>(reinterpret_cast<float(&)[1][HS / 8][4]>(acc),
                          reinterpret_cast<const uint32_t(&)[1][kK][4]>(p), rows, k_first, last);
}

// scores() with the A fragments read from this warp's 16 rows of a shared
// tile (a_rows) as each is needed, not held in registers: for the dK/dV
// kernel above head size 64; at 128 its dK and dV accumulators (128
// registers) leave no room for K's and V's fragments (64 more). One ldmatrix more per
// 16 columns of the head than scores() issues, feeding the kN / 2 pairs of
// products.
template <int HS, int kN>
__device__ __forceinline__ void scores_a_shared(float (&s)[kN][4], const bf16* a_rows, const bf16* rows, int n_first,
                                                int n_last) {
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
#pragma unroll
  for (int k = 0; k < HS / 16; ++k) {
    uint32_t a[4];
    mma::load_a(a, a_rows + k * 16, kLd<HS>);
#pragma unroll
    for (int n = 0; n < kN; n += 2) {
      if (n + 1 < n_first || n > n_last) continue;
      uint32_t b[2][2];
      mma::load_b_col(b, rows + n * 8 * kLd<HS> + k * 16, kLd<HS>);
      mma::mma(s[n], a, b[0]);
      mma::mma(s[n + 1], a, b[1]);
    }
  }
}

// The A fragments of this warp's 16 rows (row0 within the tile) of a tile.
template <int HS>
__device__ __forceinline__ void load_rows(uint32_t (&a)[HS / 16][4], const bf16* tile, int row0) {
#pragma unroll
  for (int k = 0; k < HS / 16; ++k) mma::load_a(a[k], tile + row0 * kLd<HS> + k * 16, kLd<HS>);
}

// Stores a 16 x HS fp32 accumulator times `scale` as bf16 to rows row0 + g
// and row0 + g + 8 of dst (row stride `stride`), rows at or past Tn skipped.
template <int HS>
__device__ __forceinline__ void store_rows(bf16* dst, const float (&acc)[HS / 8][4], int row0, int Tn,
                                           int64_t stride, float scale0, float scale1) {
  const int g = mma::lane_g(), t = mma::lane_t();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + g + 8 * half;
    if (row >= Tn) continue;
    const float scale = half ? scale1 : scale0;
    uint32_t* out = reinterpret_cast<uint32_t*>(dst + int64_t(row) * stride + 2 * t);
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) out[n * 4] = mma::pack(acc[n][2 * half] * scale, acc[n][2 * half + 1] * scale);
  }
}

// Reductions over the 4 lanes (one quad) that hold a score row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Score element e of fragment n: row g + 8 (e / 2), column 8 n + 2 t + e % 2
// of the warp's 16 x 64 block.
__device__ __forceinline__ int frag_row(int g, int e) { return g + 8 * (e / 2); }
__device__ __forceinline__ int frag_col(int n, int t, int e) { return 8 * n + 2 * t + e % 2; }

// Exponentials are taken base 2 (dtype.cuh's kLog2e): scores are scaled by
// scale * log2(e) and the natural-log lse that the forward stores and the
// backward reads is converted once per row (lse * log2(e)), so a
// probability costs one FFMA and one ex2.

// Only the diagonal tile (query tile == key tile) needs the causal mask: in
// every other tile all keys precede all queries. Rows and columns past Tn
// need none either: their Q/K/V/dO rows are zero-filled, padded query rows
// get lse = +inf in the backward (held negated, -inf: probability
// exp2(-inf) = 0; delta 0), and padded keys occur only in the diagonal
// tile, where for every stored row i < Tn they lie past i. So the kernels
// run one tile function in two compiled forms, kDiagonal true for the
// diagonal tile only, and the other tiles carry no index arithmetic,
// compares or block skipping at all.
using Diagonal = std::true_type;
using OffDiagonal = std::false_type;

// The two lse values (base 2, negated: the FFMA's addend) and delta values
// of score columns 8n + 2t and 8n + 2t + 1, from a tile's staged rows.
__device__ __forceinline__ float2 row_pair(const float* rows, int n, int t) {
  return *reinterpret_cast<const float2*>(rows + 8 * n + 2 * t);
}

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
