// The tensor-core attention kernels (model/cuda/attention_tc_kernels.cuh),
// compiled as host C++ and run thread by thread by emulated_cuda.hpp, against
// the CPU attention: forward output and log-sum-exp, then dQ/dK/dV. This
// runs without a GPU (in CI), so the kernels' indexing, causal masking,
// partial tiles, tile streaming, shared-memory layout (out-of-bounds writes
// and reads of unwritten shared memory are caught), barriers and the
// register fragments of mma.sync and ldmatrix (by the PTX ISA's lane layout,
// with ldmatrix's alignment rule) are tested everywhere; test_cuda_ops runs
// the same kernels on a GPU.
#include "emulated_cuda.hpp"
// (must precede the kernel header)
#include "model/cuda/attention_tc_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <random>
#include <sstream>
#include <vector>

#include "gpu/kernel_test_util.hpp"
#include "model/cpu/attention.hpp"

namespace gpt::cuda::detail::tc {
namespace {

// Normalised error bound against fp32: the outputs' own bf16 rounding is
// about 2^-9/sqrt(3) = 1.1e-3 rms, and P and dS are rounded to bf16 before
// their products (as on the GPU); measured 1.8e-3 (out) to 2.6e-3 (dq).
constexpr double kTolerance = 5e-3;
constexpr int kGuard = 64;  // elements each side of every output that must stay untouched
constexpr float kSentinel = 12345.f;

// A device-like buffer: n elements between two guard bands.
template <typename T>
struct Guarded {
  explicit Guarded(size_t n) : v(n + 2 * kGuard, T(kSentinel)) {}
  T* data() { return v.data() + kGuard; }
  std::vector<float> values() const {
    std::vector<float> out;
    for (size_t i = kGuard; i + kGuard < v.size(); ++i) out.push_back(float(v[i]));
    return out;
  }
  bool guards_intact() const {
    const float sentinel = float(T(kSentinel));  // as stored (bf16 rounds it)
    for (size_t i = 0; i < kGuard; ++i)
      if (float(v[i]) != sentinel || float(v[v.size() - 1 - i]) != sentinel) return false;
    return true;
  }
  std::vector<T> v;
};

using test::attention_diagonal;
using test::diagonal_from_lse;
using test::rel_error;

template <typename Body>
void run(dim3 grid, int smem_bytes, Body body) {
  emulated_cuda::launch(grid, kThreads, size_t(smem_bytes), body);
}

struct Case {
  int B, T, C, NH;
};
void PrintTo(const Case& k, std::ostream* os) { *os << "B=" << k.B << " T=" << k.T << " C=" << k.C << " NH=" << k.NH; }

class EmulatedTensorCoreAttention : public ::testing::TestWithParam<Case> {};

template <int HS>
void check(const Case& k) {
  const int B = k.B, Tn = k.T, C = k.C, NH = k.NH;
  const size_t n_qkv = size_t(B) * Tn * 3 * C, n_out = size_t(B) * Tn * C, n_rows = size_t(B) * NH * Tn;
  std::mt19937 rng(uint32_t(Tn * 131 + NH));
  std::normal_distribution<float> nd(0.f, 1.f);
  Guarded<bf16> qkv(n_qkv), dy(n_out), out(n_out), dqkv(n_qkv);
  Guarded<float> lse(n_rows);
  for (size_t i = 0; i < n_qkv; ++i) qkv.data()[i] = __float2bfloat16_rn(nd(rng));
  for (size_t i = 0; i < n_out; ++i) dy.data()[i] = __float2bfloat16_rn(nd(rng));
  const std::vector<float> qkv_f = qkv.values(), dy_f = dy.values();

  // CPU reference in fp32 on the same (bf16-representable) inputs.
  std::vector<float> out_ref(n_out), att(size_t(B) * NH * Tn * Tn), dqkv_ref(n_qkv);
  cpu::attention_forward(out_ref.data(), att.data(), qkv_f.data(), {B, Tn, C, NH});
  const int kScratchThreads = 256;
  std::vector<float> scratch(size_t(cpu::attention_scratch_per_thread(Tn)) * kScratchThreads);
  cpu::attention_backward(dqkv_ref.data(), dy_f.data(), qkv_f.data(), att.data(), scratch.data(), kScratchThreads,
                          {B, Tn, C, NH});

  const dim3 grid = tile_grid(B, Tn, NH);
  const float scale = 1.f / std::sqrt(float(HS));
  run(grid, forward_smem<HS>(), [&] { forward_kernel<HS>(out.data(), lse.data(), qkv.data(), Tn, C, NH, scale); });
  const std::vector<float> out_f = out.values();
  EXPECT_LE(rel_error(out_f, out_ref), kTolerance) << "out";

  // log-sum-exp: exp(s_ii - lse_i) is the CPU's diagonal probability.
  EXPECT_LE(rel_error(diagonal_from_lse(qkv_f, lse.values(), B, Tn, C, NH), attention_diagonal(att, B * NH, Tn)), 1e-4)
      << "log-sum-exp";

  // delta = rowsum(dout * out), as the backward's first kernel computes it.
  std::vector<float> delta(n_rows);
  for (size_t bh = 0; bh < size_t(B) * NH; ++bh)
    for (int i = 0; i < Tn; ++i) {
      const size_t b = bh / NH, h = bh % NH, off = (b * Tn + i) * C + h * HS;
      float s = 0.f;
      for (int d = 0; d < HS; ++d) s += dy_f[off + d] * out_f[off + d];
      delta[bh * Tn + i] = s;
    }
  run(grid, dkv_smem<HS>(), [&] {
    dkv_kernel<HS>(dqkv.data(), dy.data(), qkv.data(), lse.data(), delta.data(), Tn, C, NH, scale);
  });
  run(grid, dq_smem<HS>(), [&] {
    dq_kernel<HS>(dqkv.data(), dy.data(), qkv.data(), lse.data(), delta.data(), Tn, C, NH, scale);
  });
  const std::vector<float> dqkv_f = dqkv.values();
  EXPECT_LE(rel_error(dqkv_f, dqkv_ref), kTolerance) << "dqkv";
  // Each third (dq, dk, dv) on its own, so one wrong part cannot hide in the whole.
  for (int part = 0; part < 3; ++part) {
    std::vector<float> got, want;
    for (size_t row = 0; row < size_t(B) * Tn; ++row)
      for (int c = 0; c < C; ++c) {
        got.push_back(dqkv_f[row * 3 * C + part * C + c]);
        want.push_back(dqkv_ref[row * 3 * C + part * C + c]);
      }
    EXPECT_LE(rel_error(got, want), kTolerance) << "part " << "qkv"[part];
  }
  EXPECT_TRUE(out.guards_intact() && lse.guards_intact() && dqkv.guards_intact()) << "write outside an output";
}

TEST_P(EmulatedTensorCoreAttention, MatchesCpuAttention) {
  const Case k = GetParam();
  if (k.C / k.NH == 64)
    check<64>(k);
  else
    check<32>(k);
}

// T = 75: a partial second tile; 200: four tiles streamed (the last partial);
// 64: exactly one; head sizes 64 and 32.
INSTANTIATE_TEST_SUITE_P(Shapes, EmulatedTensorCoreAttention,
                         ::testing::Values(Case{2, 75, 128, 2}, Case{1, 200, 128, 4}, Case{1, 200, 128, 2},
                                           Case{1, 64, 64, 1}),
                         [](const auto& info) {
                           const Case& k = info.param;
                           std::ostringstream name;
                           name << "T" << k.T << "_hs" << k.C / k.NH << "_B" << k.B;
                           return name.str();
                         });

}  // namespace
}  // namespace gpt::cuda::detail::tc
