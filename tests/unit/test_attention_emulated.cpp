// The causal attention kernels, compiled as host C++ and run thread by
// thread by emulated_cuda.hpp, against the CPU attention: forward output and
// log-sum-exp, the delta row term, then dQ/dK/dV. Five kernel families:
// tensor cores (attention_tc_kernels.cuh, bf16; dQ recomputed or from the
// stored dS; the forward on 64- or 128-query tiles) and CUDA cores
// (attention_simt_kernels.cuh, fp32 and bf16). This runs without a GPU (in
// CI), so the kernels' indexing, causal masking, partial tiles, tile
// streaming, shared-memory layout (out-of-bounds writes and reads of
// unwritten shared memory are caught), barriers, the register fragments of
// mma.sync and ldmatrix (by the PTX ISA's lane layout, with ldmatrix's
// alignment rule) and cp.async's wait discipline are tested everywhere;
// test_cuda_ops runs the same kernels on a GPU.
#include "emulated_cuda.hpp"
// (must precede the kernel headers)
#include "model/cuda/attention_simt_kernels.cuh"
#include "model/cuda/attention_tc_kernels.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <sstream>
#include <type_traits>
#include <vector>

#include "gpu/kernel_test_util.hpp"
#include "model/attention_ds.hpp"
#include "model/cpu/attention.hpp"

namespace gpt::cuda::detail {
namespace {

using test::Guarded;
using test::diagonal_from_lse;
using test::rel_error;

// kTensorCoreDsBf16: the tensor-core kernels with dQ from the score
// gradients the dK/dV kernel stored (dq_from_ds_kernel), the (b, h) pairs
// in two launches of each kernel (bh0) when there are several.
// kTensorCoreWideBf16: the forward on 128-query tiles (forward_wide_kernel).
// kTensorCoreSingleBf16 / kTensorCoreSingleDsBf16: the backward's streamed
// tiles single-buffered (kBufs = 1, what GPUs of 99 KiB a block run at head
// size 128), without and with the stored dS.
enum class Family {
  kTensorCoreBf16,
  kTensorCoreDsBf16,
  kTensorCoreWideBf16,
  kTensorCoreSingleBf16,
  kTensorCoreSingleDsBf16,
  kSimtFp32,
  kSimtBf16
};
bool tensor_cores(Family f) { return f != Family::kSimtFp32 && f != Family::kSimtBf16; }
bool single_buffered(Family f) { return f == Family::kTensorCoreSingleBf16 || f == Family::kTensorCoreSingleDsBf16; }
bool stored_ds(Family f) { return f == Family::kTensorCoreDsBf16 || f == Family::kTensorCoreSingleDsBf16; }

struct Case {
  Family family;
  int B, T, C, NH;
};
const char* name(Family f) {
  return f == Family::kTensorCoreBf16           ? "tc_bf16"
         : f == Family::kTensorCoreDsBf16       ? "tc_ds_bf16"
         : f == Family::kTensorCoreWideBf16     ? "tc_wide_bf16"
         : f == Family::kTensorCoreSingleBf16   ? "tc_single_bf16"
         : f == Family::kTensorCoreSingleDsBf16 ? "tc_single_ds_bf16"
         : f == Family::kSimtFp32               ? "simt_fp32"
                                                : "simt_bf16";
}
void PrintTo(const Case& k, std::ostream* os) {
  *os << name(k.family) << " B=" << k.B << " T=" << k.T << " C=" << k.C << " NH=" << k.NH;
}

// Normalised error bounds against the fp32 CPU attention on the same
// (T-representable) inputs. Tensor cores: the outputs' own bf16 rounding
// (about 2^-9/sqrt(3) = 1.1e-3 rms) plus P and dS rounded to bf16 before
// their products, as on the GPU; measured 1.8e-3 (out) to 2.6e-3 (dq). CUDA
// cores in bf16: fp32 arithmetic, only the outputs rounded; measured 1.5e-3
// to 2.0e-3. In fp32: only the order of additions differs from the CPU;
// measured 1.8e-7 to 3.7e-7.
double tolerance(Family f) { return f == Family::kSimtFp32 ? 2e-6 : 5e-3; }

template <typename T, int HS>
void forward(Family f, T* out, float* lse, const T* qkv, const Case& k) {
  const float scale = 1.f / std::sqrt(float(HS));
  if constexpr (std::is_same_v<T, bf16>) {
    if (f == Family::kTensorCoreWideBf16) {
      if constexpr (HS == 32 || HS == 64)  // the wide forward's head sizes (cases() has no other)
        emulated_cuda::launch(tc::wide_grid(k.B, k.T, k.NH), tc::kThreads, size_t(tc::forward_wide_smem<HS>()),
                              [&] { tc::forward_wide_kernel<HS>(out, lse, qkv, k.T, k.C, k.NH, scale); });
      return;
    }
    if (tensor_cores(f)) {
      emulated_cuda::launch(tc::tile_grid(k.B, k.T, k.NH), tc::kThreads, size_t(tc::forward_smem<HS>()),
                            [&] { tc::forward_kernel<HS>(out, lse, qkv, k.T, k.C, k.NH, scale); });
      return;
    }
  }
  emulated_cuda::launch(simt::forward_grid<HS>(k.B, k.T, k.NH), 32 * simt::kFwdWarps, 0,
                        [&] { simt::attention_forward_kernel<T, HS>(out, lse, qkv, k.T, k.C, k.NH, scale); });
}

template <typename T, int HS, int kBufs = 2>
void backward(Family f, T* dqkv, const T* dy, const T* qkv, const float* lse, const float* delta, const Case& k) {
  const float scale = 1.f / std::sqrt(float(HS));
  if constexpr (std::is_same_v<T, bf16> && kBufs == 2)
    if (single_buffered(f)) return backward<T, HS, 1>(f, dqkv, dy, qkv, lse, delta, k);
  if constexpr (std::is_same_v<T, bf16>) {
    if (stored_ds(f)) {
      const int pairs = k.B * k.NH, chunk = (pairs + 1) / 2;
      Guarded<bf16> ds(size_t(chunk * attention_ds_bytes_per_pair(k.T)) / sizeof(bf16));
      for (int bh0 = 0; bh0 < pairs; bh0 += chunk) {
        const dim3 grid = tc::tile_grid_pairs(k.T, std::min(chunk, pairs - bh0));
        emulated_cuda::launch(grid, tc::kThreads, size_t(tc::dkv_smem<HS, kBufs>()), [&] {
          tc::dkv_kernel<HS, true, kBufs>(dqkv, dy, qkv, lse, delta, k.T, k.C, k.NH, scale, ds.data(), bh0);
        });
        emulated_cuda::launch(grid, tc::kThreads, size_t(tc::dq_from_ds_smem<HS>()), [&] {
          tc::dq_from_ds_kernel<HS>(dqkv, ds.data(), qkv, k.T, k.C, k.NH, scale, bh0);
        });
      }
      EXPECT_TRUE(ds.guards_intact()) << "dS written outside its chunk";
      return;
    }
    if (tensor_cores(f)) {
      const dim3 grid = tc::tile_grid(k.B, k.T, k.NH);
      emulated_cuda::launch(grid, tc::kThreads, size_t(tc::dkv_smem<HS, kBufs>()), [&] {
        tc::dkv_kernel<HS, false, kBufs>(dqkv, dy, qkv, lse, delta, k.T, k.C, k.NH, scale);
      });
      emulated_cuda::launch(grid, tc::kThreads, size_t(tc::dq_smem<HS, kBufs>()), [&] {
        tc::dq_kernel<HS, kBufs>(dqkv, dy, qkv, lse, delta, k.T, k.C, k.NH, scale);
      });
      return;
    }
  }
  const dim3 grid = simt::backward_grid<HS>(k.B, k.T, k.NH);
  emulated_cuda::launch(grid, 32, 0, [&] {
    simt::attention_dkv_kernel<T, HS>(dqkv, dy, qkv, lse, delta, k.T, k.C, k.NH, scale);
  });
  emulated_cuda::launch(grid, 32, 0, [&] {
    simt::attention_dq_kernel<T, HS>(dqkv, dy, qkv, lse, delta, k.T, k.C, k.NH, scale);
  });
}

template <typename T, int HS>
void check(const Case& k) {
  const int B = k.B, Tn = k.T, C = k.C, NH = k.NH;
  const size_t n_qkv = size_t(B) * Tn * 3 * C, n_out = size_t(B) * Tn * C, n_rows = size_t(B) * NH * Tn;
  const double tol = tolerance(k.family);
  std::mt19937 rng(uint32_t(Tn * 131 + NH));
  std::normal_distribution<float> nd(0.f, 1.f);
  Guarded<T> qkv(n_qkv), dy(n_out), out(n_out), dqkv(n_qkv);
  Guarded<float> lse(n_rows), delta(n_rows);
  for (size_t i = 0; i < n_qkv; ++i) qkv.data()[i] = T(nd(rng));
  for (size_t i = 0; i < n_out; ++i) dy.data()[i] = T(nd(rng));
  const std::vector<float> qkv_f = qkv.values(), dy_f = dy.values();

  // CPU reference in fp32 on the same (T-representable) inputs.
  std::vector<float> out_ref(n_out), lse_ref(n_rows), dqkv_ref(n_qkv);
  const int kScratchThreads = 256;
  std::vector<float> scratch(size_t(cpu::attention_scratch_per_thread(Tn)) * kScratchThreads);
  cpu::attention_forward(out_ref.data(), lse_ref.data(), qkv_f.data(), scratch.data(), kScratchThreads,
                         {B, Tn, C, NH});
  cpu::attention_backward(dqkv_ref.data(), dy_f.data(), qkv_f.data(), lse_ref.data(), scratch.data(),
                          kScratchThreads, {B, Tn, C, NH});

  // The tensor-core kernels' padded tiles make every ldmatrix conflict-free
  // (attention_tc_tiles.cuh, kLd): one wavefront per 8 x 8 matrix; and
  // the order the tile loads give rows to lanes (segment_chunk) makes every
  // cp.async store conflict-free: one wavefront per quarter warp.
  auto expect_no_bank_conflicts = [&](const char* pass) {
    if (!tensor_cores(k.family)) return;
    const auto st = emulated_cuda::g_ldmatrix_stats;
    EXPECT_GT(st.matrices, 0u) << pass;
    EXPECT_EQ(st.extra_wavefronts, 0u) << pass << ": bank conflicts in " << st.matrices << " ldmatrix matrices";
    const auto cp = emulated_cuda::g_cp_async_stats;
    EXPECT_GT(cp.requests, 0u) << pass;
    EXPECT_EQ(cp.extra_wavefronts, 0u) << pass << ": bank conflicts, " << cp.extra_wavefronts
                                       << " extra wavefronts in " << cp.requests << " quarter-warp cp.async stores";
  };
  auto reset_stats = [] {
    emulated_cuda::reset_ldmatrix_stats();
    emulated_cuda::reset_cp_async_stats();
  };
  reset_stats();
  forward<T, HS>(k.family, out.data(), lse.data(), qkv.data(), k);
  expect_no_bank_conflicts("forward");
  const std::vector<float> out_f = out.values();
  EXPECT_LE(rel_error(out_f, out_ref), tol) << "out";
  // log-sum-exp, compared as the diagonal probabilities exp(s_ii - lse_i) it gives.
  EXPECT_LE(rel_error(diagonal_from_lse(qkv_f, lse.values(), B, Tn, C, NH),
                      diagonal_from_lse(qkv_f, lse_ref, B, Tn, C, NH)),
            1e-4)
      << "log-sum-exp";

  // delta = rowsum(dout * out) by the backward's first kernel (both paths use it).
  // Both forms: 16-byte vectors (the buffers here are aligned) and one element per access.
  Guarded<float> delta_scalar(n_rows);
  for (bool vec : {true, false})
    emulated_cuda::launch(simt::delta_grid<T, HS>(int64_t(n_rows)), simt::kDeltaThreads, 0, [&] {
      simt::attention_delta_kernel<T, HS>((vec ? delta : delta_scalar).data(), dy.data(), out.data(), Tn, C, NH,
                                          int64_t(n_rows), vec);
    });
  std::vector<float> delta_ref(n_rows);
  for (size_t bh = 0; bh < size_t(B) * NH; ++bh)
    for (int i = 0; i < Tn; ++i) {
      const size_t b = bh / NH, h = bh % NH, off = (b * Tn + i) * C + h * HS;
      float s = 0.f;
      for (int d = 0; d < HS; ++d) s += dy_f[off + d] * out_f[off + d];
      delta_ref[bh * Tn + i] = s;
    }
  // The same products, added in another order (lanes, then a shuffle tree): fp32 rounding.
  EXPECT_LE(rel_error(delta.values(), delta_ref), 1e-6) << "delta";
  EXPECT_LE(rel_error(delta_scalar.values(), delta_ref), 1e-6) << "delta, one element per access";
  EXPECT_TRUE(delta.guards_intact() && delta_scalar.guards_intact());

  reset_stats();
  backward<T, HS>(k.family, dqkv.data(), dy.data(), qkv.data(), lse.data(), delta.data(), k);
  expect_no_bank_conflicts("backward");
  const std::vector<float> dqkv_f = dqkv.values();
  EXPECT_LE(rel_error(dqkv_f, dqkv_ref), tol) << "dqkv";
  // Each third (dq, dk, dv) on its own, so one wrong part cannot hide in the whole.
  for (int part = 0; part < 3; ++part) {
    std::vector<float> got, want;
    for (size_t row = 0; row < size_t(B) * Tn; ++row)
      for (int c = 0; c < C; ++c) {
        got.push_back(dqkv_f[row * 3 * C + part * C + c]);
        want.push_back(dqkv_ref[row * 3 * C + part * C + c]);
      }
    EXPECT_LE(rel_error(got, want), tol) << "part " << "qkv"[part];
  }
  EXPECT_TRUE(out.guards_intact() && lse.guards_intact() && delta.guards_intact() && dqkv.guards_intact())
      << "write outside an output";
}

class EmulatedAttention : public ::testing::TestWithParam<Case> {};

template <typename T>
void check_hs(const Case& k) {
  switch (k.C / k.NH) {
    case 32: return check<T, 32>(k);
    case 48: return check<T, 48>(k);
    case 64: return check<T, 64>(k);
    case 80: return check<T, 80>(k);
    case 96: return check<T, 96>(k);
    case 112: return check<T, 112>(k);
    case 128: return check<T, 128>(k);
    default: FAIL() << "head size " << k.C / k.NH;
  }
}

TEST_P(EmulatedAttention, MatchesCpuAttention) {
  const Case k = GetParam();
  if (k.family == Family::kSimtFp32)
    check_hs<float>(k);
  else
    check_hs<bf16>(k);
}

// T = 75: a partial second tile; 200: several tiles streamed (the last
// partial); 64: exactly one tensor-core tile; head sizes 64 and 32. Also
// head sizes 48, 80, 96, 112 and 128, for every family but the wide forward
// (which takes 32 and 64): their rows are 6, 10, 12, 14 and 16 16-byte
// chunks, loaded by segments of 4 + 2, 8 + 2, 8 + 4, 8 + 4 + 2 and 16
// (load_tile). At 128 T = 75
// streams a second tile, and on CUDA cores (two lanes per row,
// kLanesPerRow) ends in a partial warp of query rows and leaves the
// forward's last block three warps with none, so the grouped lanes' sums
// run with inactive rows. The single-buffered backward (launched at head
// size 128 only) at 128 and 64, on one tile and on several.
std::vector<Case> cases() {
  std::vector<Case> all;
  for (Family f : {Family::kTensorCoreSingleBf16, Family::kTensorCoreSingleDsBf16})
    for (Case shape : {Case{f, 2, 75, 256, 2}, Case{f, 1, 200, 256, 2}, Case{f, 1, 200, 128, 2}, Case{f, 1, 64, 64, 1}})
      all.push_back(shape);
  for (Family f : {Family::kTensorCoreBf16, Family::kTensorCoreDsBf16, Family::kTensorCoreWideBf16,
                   Family::kSimtFp32, Family::kSimtBf16}) {
    for (Case shape : {Case{f, 2, 75, 128, 2}, Case{f, 1, 200, 128, 4}, Case{f, 1, 200, 128, 2}, Case{f, 1, 64, 64, 1}})
      all.push_back(shape);
    if (f != Family::kTensorCoreWideBf16)
      for (Case shape : {Case{f, 2, 75, 256, 2}, Case{f, 1, 200, 256, 2}, Case{f, 1, 40, 128, 1},
                         Case{f, 2, 75, 192, 2}, Case{f, 1, 200, 96, 1}, Case{f, 1, 75, 160, 2},
                         Case{f, 1, 200, 80, 1}, Case{f, 2, 75, 96, 2}, Case{f, 1, 200, 48, 1},
                         Case{f, 1, 75, 224, 2}, Case{f, 1, 200, 112, 1}})
        all.push_back(shape);
  }
  return all;
}
INSTANTIATE_TEST_SUITE_P(Shapes, EmulatedAttention, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& k = info.param;
  std::ostringstream n;
  n << name(k.family) << "_T" << k.T << "_hs" << k.C / k.NH << "_B" << k.B;
  return n.str();
});

}  // namespace
}  // namespace gpt::cuda::detail
