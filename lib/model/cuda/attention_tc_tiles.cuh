// The building blocks of the tensor-core attention kernels
// (attention_tc_kernels.cuh describes the design): tile geometry and shared
// memory sizes, the streamed tile loads, a warp's products on register
// fragments, quad reductions, and the split between the diagonal tile and
// the others.
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

}  // namespace gpt::cuda::detail::tc
