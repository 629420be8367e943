// Warp-level bf16 tensor-core products (PTX mma.sync.m16n8k16, sm_80+) with
// their register fragments, as the PTX ISA defines them ("Matrix Fragments
// for mma.m16n8k16 with floating point type"). Lane l of a warp has
// g = l / 4 and t = l % 4, and holds:
//   A (16 x 16, row-major): a[0] = A[g][2t..2t+1],   a[1] = A[g+8][2t..2t+1],
//                           a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]
//   B (16 x 8):             b[0] = B[2t..2t+1][g],   b[1] = B[2t+8..2t+9][g]
//   C/D (16 x 8, fp32):     c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
// two bf16 per 32-bit register, the lower column (or row, for B) in the low
// half. A C fragment of two adjacent 8-column tiles is therefore, packed to
// bf16, the A fragment of the 16 x 16 block they form (a_from_c): scores
// computed into registers feed the next product without leaving them.
//
// Under tests/unit/emulated_cuda.hpp the product is the emulator's, which
// rebuilds the whole tiles from the 32 lanes' registers by this layout, so
// kernels using these helpers run, layout included, on the CPU.
#pragma once

#include <cstdint>

#include "model/cuda/types.hpp"

namespace gpt::cuda::detail::mma {

__device__ __forceinline__ int lane() { return int(threadIdx.x % 32); }
__device__ __forceinline__ int lane_g() { return lane() / 4; }
__device__ __forceinline__ int lane_t() { return lane() % 4; }

__device__ __forceinline__ uint32_t bits(bf16 v) { return static_cast<__nv_bfloat16_raw>(v).x; }
// Two floats rounded to nearest bf16, lo in the low half: one cvt.rn.bf16x2
// instruction on sm_80+ (two conversions, a shift and an or otherwise).
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return bits(__float2bfloat16_rn(lo)) | bits(__float2bfloat16_rn(hi)) << 16;
#endif
}

// d += a b (fp32 accumulation).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::mma_m16n8k16_bf16(d, a, b);
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ldmatrix.m8n8.x4 (.trans): four 8 x 8 bf16 matrices from shared memory;
// lanes 8i..8i+7 give the addresses of matrix i's 8 rows (16 bytes each,
// 16-byte aligned). Lane (g, t) receives in r[i] elements (g, 2t..2t+1) of
// matrix i, or with .trans its transpose's: (2t, g) and (2t+1, g).
// volatile: the compiler must not move a shared-memory read across the
// barriers that guard the tile.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* row) {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::ldmatrix_x4(r, row, false);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(row))));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* row) {
#ifdef GPT_EMULATED_CUDA
  emulated_cuda::ldmatrix_x4(r, row, true);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(row))));
#endif
}

// Shared-memory operands below: p is the block's top-left element, ld the
// row stride in elements (a multiple of 8, p 16-byte aligned).

// The A fragment of the 16 x 16 block at p (row-major). Matrices: rows 0-7 /
// 8-15 x columns 0-7 / 8-15 in the order a[0..3] needs.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* p, int ld) {
  ldmatrix_x4(a, p + (lane() % 16) * ld + (lane() / 16) * 8);
}

// The A fragment of the 16 x 16 block whose transpose is stored row-major
// at p: A[m][k] = p[k * ld + m] (as dS is, stored as dS^T). The transposing
// load gives lane (g, t) elements (2t, g), (2t + 1, g) of a stored 8 x 8
// matrix, i.e. A[g][2t..2t+1]; matrices in a[0..3]'s order: rows 0-7 / 8-15
// of A are stored columns 0-7 / 8-15, A's columns 0-7 / 8-15 stored rows.
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const bf16* p, int ld) {
  ldmatrix_x4_trans(a, p + (lane() % 8 + 8 * (lane() / 16)) * ld + 8 * (lane() / 8 % 2));
}

// The B fragments of two adjacent 16 x 8 blocks (columns n0..n0+7 and
// n0+8..n0+15) stored column-major at p: B[k][n] = p[n * ld + k], the rows
// of a matrix whose transpose is B (as K is for S = Q K^T). b[j] is block j.
__device__ __forceinline__ void load_b_col(uint32_t (&b)[2][2], const bf16* p, int ld) {
  uint32_t r[4];
  ldmatrix_x4(r, p + (lane() % 8 + 8 * (lane() / 16)) * ld + 8 * (lane() / 8 % 2));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

// The same for B stored row-major at p: B[k][n] = p[k * ld + n] (as V is for
// O = P V); the transposing load puts k pairs into one register.
__device__ __forceinline__ void load_b_row(uint32_t (&b)[2][2], const bf16* p, int ld) {
  uint32_t r[4];
  ldmatrix_x4_trans(r, p + (lane() % 16) * ld + 8 * (lane() / 16));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

// The A fragment (bf16) of the 16 x 16 block whose left and right 8 columns
// are the accumulators c0 and c1.
__device__ __forceinline__ void a_from_c(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack(c0[0], c0[1]);
  a[1] = pack(c0[2], c0[3]);
  a[2] = pack(c1[0], c1[1]);
  a[3] = pack(c1[2], c1[3]);
}

}  // namespace gpt::cuda::detail::mma
