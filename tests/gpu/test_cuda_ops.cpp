// Each CUDA op against its CPU reference (model/cpu/) on random inputs, in
// fp32 and bf16: normalised error within tolerance<T>() (gpu_test_util.hpp),
// no NaN/Inf, nothing written outside the outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cuda/device_memory.hpp"
#include "core/error.hpp"
#include "gpu_test_util.hpp"
#include "model/adamw.hpp"
#include "model/cpu/attention.hpp"
#include "model/cpu/classifier.hpp"
#include "model/cpu/embedding.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cpu/layernorm.hpp"
#include "model/cpu/matmul.hpp"
#include "model/cuda/adamw.hpp"
#include "model/cuda/attention.hpp"
#include "model/cuda/attention_cudnn.hpp"
#include "model/cuda/attention_tc.hpp"
#include "model/cuda/bias_grad.hpp"
#include "model/cuda/classifier.hpp"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/embedding.hpp"
#include "model/cuda/gelu.hpp"
#include "model/cuda/gelu_epilogue_check.hpp"
#include "model/cuda/layernorm.hpp"
#include "model/cuda/matmul.hpp"
#include "model/layout.hpp"

namespace gpt::cuda::test {
namespace {

// Random inputs, representable in T.
template <typename T>
std::vector<float> input(size_t n, float std, uint64_t seed) {
  return rounded<T>(randn(n, std, seed));
}

// Normalised error within T's tolerance (gpu_test_util.hpp).
template <typename T>
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  EXPECT_LE(rel_error(got, want), tolerance<T>()) << what;
}

template <typename T>
class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override { GPT_REQUIRE_GPU(); }
};
using Types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(CudaOps, Types);

TYPED_TEST(CudaOps, LinearForwardBiasGeluResidual) {
  using T = TypeParam;
  const int64_t N = 70, C = 96, OC = 136;  // not multiples of the GEMM tiles
  auto x = input<T>(N * C, 1.f, 1), w = input<T>(OC * C, 0.1f, 2), b = input<T>(OC, 0.1f, 3), r = input<T>(N * OC, 1.f, 4);
  std::vector<float> ref(N * OC), ref_gelu(N * OC), ref_res(N * OC);
  cpu::linear_forward(ref.data(), x.data(), w.data(), b.data(), N, C, OC);
  cpu::gelu_forward(ref_gelu.data(), ref.data(), N * OC);
  for (int64_t i = 0; i < N * OC; ++i) ref_res[i] = ref[i] + r[i];
  MemoryTracker tracker;
  DeviceAllocator alloc(&tracker);
  Matmul mm(&alloc);
  Dev<T> dx(x), dw(w), db(b), dr(r);
  for (bool fused : {true, false}) {
    mm.set_fusion(fused);
    Dev<T> out(N * OC), gelu(N * OC), res(N * OC);
    mm.linear_forward(out.data(), dx.data(), dw.data(), db.data(), N, C, OC, nullptr, gelu.data());
    mm.linear_residual_forward(res.data(), dx.data(), dw.data(), db.data(), dr.data(), N, C, OC, nullptr);
    expect_close<T>(out.download(), ref, fused ? "pre-activation (fused)" : "pre-activation");
    expect_close<T>(gelu.download(), ref_gelu, fused ? "gelu (fused)" : "gelu");
    expect_close<T>(res.download(), ref_res, "residual");
    out.check_guards();
    gelu.check_guards();
    res.check_guards();
  }
  EXPECT_GT(mm.unfused_gelu_calls(), 0);
}

TYPED_TEST(CudaOps, LinearBackwardWithGeluGradient) {
  using T = TypeParam;
  const int64_t N = 66, C = 64, OC = 160;
  auto x = input<T>(N * C, 1.f, 5), w = input<T>(OC * C, 0.1f, 6), dy = input<T>(N * OC, 1.f, 7);
  auto pre = input<T>(N * C, 1.f, 8), dw0 = input<T>(OC * C, 0.1f, 9), db0 = input<T>(OC, 0.1f, 10);
  std::vector<float> dx_ref(N * C), dw_ref = dw0, db_ref = db0;
  cpu::linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(), N, C, OC);
  std::vector<float> dx_gelu_ref(N * C);
  cpu::gelu_backward(dx_gelu_ref.data(), pre.data(), dx_ref.data(), N * C);
  MemoryTracker tracker;
  DeviceAllocator alloc(&tracker);
  Matmul mm(&alloc);
  Dev<T> dx_(x), dw_(w), ddy(dy), dpre(pre);
  for (bool fused : {true, false}) {
    mm.set_fusion(fused);
    Dev<T> dx(N * C), dxg(N * C), dw(dw0), db(db0);
    mm.linear_backward(dx.data(), dw.data(), db.data(), ddy.data(), dx_.data(), dw_.data(), N, C, OC, nullptr);
    mm.linear_backward(dxg.data(), static_cast<T*>(nullptr), static_cast<T*>(nullptr), ddy.data(), dx_.data(),
                       dw_.data(), N, C, OC, nullptr, dpre.data());
    expect_close<T>(dx.download(), dx_ref, "dinp");
    expect_close<T>(dxg.download(), dx_gelu_ref, fused ? "dinp * gelu' (fused)" : "dinp * gelu'");
    expect_close<T>(dw.download(), dw_ref, "dw accumulated");
    expect_close<T>(db.download(), db_ref, "dbias accumulated");
    dx.check_guards();
    dxg.check_guards();
    dw.check_guards();
    db.check_guards();
  }
}

// The bias gradient from the dW product's BGRADB epilogue
// (Matmul::set_bias_grad_epilogue): what this GPU's cuBLASLt gives at the
// Matmul's check (printed for the record), the epilogue taken exactly when
// the check finds it exact, and dW and dbias equal to the CPU's either way,
// added into what they held, at a shape off the GEMM tiles and at one on them.
TYPED_TEST(CudaOps, BiasGradientEpilogue) {
  using T = TypeParam;
  using R = Matmul::BiasGradCheck;
  MemoryTracker tracker;
  DeviceAllocator alloc(&tracker);
  Matmul mm(&alloc);
  mm.set_bias_grad_epilogue(true);
  int64_t calls = 0;
  for (const auto [N, C, OC] : {std::array<int64_t, 3>{66, 64, 160}, std::array<int64_t, 3>{256, 128, 384}}) {
    SCOPED_TRACE(testing::Message() << "N " << N << " C " << C << " OC " << OC);
    auto x = input<T>(N * C, 1.f, 11), w = input<T>(OC * C, 0.1f, 12), dy = input<T>(N * OC, 1.f, 13);
    auto dw0 = input<T>(OC * C, 0.1f, 14), db0 = input<T>(OC, 0.1f, 15);
    std::vector<float> dx_ref(N * C), dw_ref = dw0, db_ref = db0;
    cpu::linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(), N, C, OC);
    Dev<T> dx_(x), dw_(w), ddy(dy), dx(N * C), dw(dw0), db(db0);
    mm.linear_backward(dx.data(), dw.data(), db.data(), ddy.data(), dx_.data(), dw_.data(), N, C, OC, nullptr);
    const R verdict = mm.bias_grad_check<T>();
    std::printf("bias-gradient epilogue (%s): %s\n", std::is_same_v<T, float> ? "fp32" : "bf16",
                verdict == R::kExact ? "exact" : verdict == R::kDiffers ? "differs" : "no algorithm");
    EXPECT_NE(verdict, R::kNotRun);
    calls += verdict == R::kExact;
    EXPECT_EQ(mm.epilogue_bias_grads(), calls);
    expect_close<T>(dx.download(), dx_ref, "dinp");
    expect_close<T>(dw.download(), dw_ref, "dw accumulated");
    expect_close<T>(db.download(), db_ref, "dbias accumulated");
    dx.check_guards();
    dw.check_guards();
    db.check_guards();
  }
}

// What this GPU's cuBLASLt computes in its GELU epilogues, judged by the
// Matmul before its first fused GELU (gelu_epilogue_check.hpp) and printed
// for the record: the fused path is taken exactly when the verdict is a
// match, and the layer equals GPT-2's GELU on the CPU either way.
TYPED_TEST(CudaOps, GeluEpilogueVerdict) {
  using T = TypeParam;
  const int64_t N = 64, C = 64, OC = 128;
  auto x = input<T>(N * C, 1.f, 40), w = input<T>(OC * C, 0.2f, 41), b = input<T>(OC, 0.1f, 42);
  std::vector<float> ref(N * OC), ref_gelu(N * OC);
  cpu::linear_forward(ref.data(), x.data(), w.data(), b.data(), N, C, OC);
  cpu::gelu_forward(ref_gelu.data(), rounded<T>(ref).data(), N * OC);
  MemoryTracker tracker;
  DeviceAllocator alloc(&tracker);
  Matmul mm(&alloc);
  Dev<T> dx(x), dw(w), db(b), out(N * OC), gelu(N * OC);
  mm.linear_forward(out.data(), dx.data(), dw.data(), db.data(), N, C, OC, nullptr, gelu.data());
  const GeluEpilogueCheck& c = mm.gelu_check<T>();
  const std::string verdict = describe(c, !std::is_same_v<T, float>);
  std::printf("%s\n", verdict.c_str());
  this->RecordProperty("gelu_epilogue", verdict);
  ASSERT_NE(c.result, GeluEpilogueCheck::Result::kNotRun);
  EXPECT_EQ(mm.fused_gelu_calls() == 1, c.result == GeluEpilogueCheck::Result::kMatches) << verdict;
  expect_close<T>(gelu.download(), ref_gelu, "gelu");
}

// The bias gradient alone (the linear layers' tests run it too): a column
// per lane (OC = 75, not a whole number of 16-byte vectors) and 16-byte
// vectors (OC = 768, GPT-2's width), one part and many; accumulated into a
// non-zero gradient, the same bits on a second run.
TYPED_TEST(CudaOps, BiasGradient) {
  using T = TypeParam;
  for (int64_t OC : {75, 768}) {
    for (int64_t N : {70, 4100}) {
      SCOPED_TRACE(testing::Message() << "OC=" << OC << " N=" << N);
      const auto dout = input<T>(N * OC, 1.f, 60), db0 = input<T>(OC, 1.f, 61);
      std::vector<float> want = db0;
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < OC; ++c) want[c] += dout[r * OC + c];
      Dev<T> d_dout(dout);
      Dev<float> scratch(size_t(bias_grad_scratch(N, OC)));
      // Counters as floats: zero bits, and any count left behind reads non-zero.
      const std::vector<float> zeros(size_t(bias_grad_arrivals(OC)), 0.f);
      Dev<float> arrivals(zeros);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        Dev<T> db(db0);
        bias_grad(db.data(), d_dout.data(), scratch.data(), reinterpret_cast<unsigned*>(arrivals.data()), N, OC,
                  nullptr);
        EXPECT_EQ(arrivals.download(), zeros) << "arrival counters not left at zero";
        arrivals.check_guards();
        const std::vector<float> got = db.download();
        expect_close<T>(got, want, "dbias");
        db.check_guards();
        if (run == 0) {
          first = got;
        } else {
          EXPECT_EQ(got, first) << "not repeatable";
        }
      }
      scratch.check_guards();
    }
  }
}

template <typename T>
void check_layernorm(int64_t N, int64_t C) {
  auto x = input<T>(N * C, 2.f, 11), w = input<T>(C, 1.f, 12), b = input<T>(C, 0.5f, 13);
  const auto dy = input<T>(N * C, 1.f, 14);
  for (int64_t i = 0; i < N * C; ++i) x[i] += 3.f;  // a large mean: the two-pass variance must hold up
  x = rounded<T>(x);
  auto dx0 = input<T>(N * C, 1.f, 15), dw0 = input<T>(C, 1.f, 16), db0 = input<T>(C, 1.f, 17);
  std::vector<float> out(N * C), mean(N), rstd(N), dx = dx0, dw = dw0, db = db0;
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  Dev<T> gx(x), gw(w), gb(b), gdy(dy), gout(N * C), gdx(dx0), gdw(dw0), gdb(db0);
  Dev<float> gmean(N), grstd(N), scratch(size_t(layernorm_backward_scratch(C)));
  layernorm_forward(gout.data(), gmean.data(), grstd.data(), gx.data(), gw.data(), gb.data(), N, C, nullptr);
  layernorm_backward(gdx.data(), gdw.data(), gdb.data(), scratch.data(), gdy.data(), gx.data(), gw.data(),
                     gmean.data(), grstd.data(), N, C, nullptr);
  expect_close<T>(gout.download(), out, "out");
  EXPECT_LE(rel_error(gmean.download(), mean), 1e-5);
  EXPECT_LE(rel_error(grstd.download(), rstd), 1e-5);
  expect_close<T>(gdx.download(), dx, "dinp accumulated");
  expect_close<T>(gdw.download(), dw, "dw");
  expect_close<T>(gdb.download(), db, "db");
  gout.check_guards();
  gdx.check_guards();
  gdw.check_guards();
}

// Every backward kernel: C / 32 / W rounded up is the rows kernel's chunks
// per lane (1 to 4), where W is 8 (bf16) or 4 (fp32) when W divides C, else
// 1. bf16: 200, 512, 768 and 1000 take 1 to 4 chunks of 16 bytes; 21, 37,
// 70 and 101 (and 100) 1 to 4 scalar chunks; 1040 (16-byte) and 300 and
// 301 (scalar) are too wide for registers and take the kernel that
// accumulates in scratch. fp32: 100, 200, 300 and 512 take 1 to 4 chunks
// of 16 bytes, 21, 37, 70 and 101 scalar ones; 768, 1000, 1040 and 301 the
// scratch kernel. N = 2085 rows is more than two per warp of the backward's
// grid (1024 warps), whose rows kernel loads a warp's next row while it
// computes one; N = 37 leaves most warps without a row.
TYPED_TEST(CudaOps, LayerNormForwardBackward) {
  for (int64_t N : {37, 2085})
    for (int64_t C : {21, 37, 70, 100, 101, 200, 300, 301, 512, 768, 1000, 1040}) {
      SCOPED_TRACE(testing::Message() << "N = " << N << ", C = " << C);
      check_layernorm<TypeParam>(N, C);
    }
}

// Both kernels in bf16 (tensor cores and CUDA cores), the CUDA-core kernels
// in fp32. T = 75 leaves a partial last tile of 32 and of 64 rows; T = 200
// streams several K/V (forward, dQ) and Q/dO (dK/dV) tiles. Head sizes 64,
// 32, 128, 96, 80, 48 and 112 (above 64 the CUDA-core kernels with two
// lanes per row, the tensor-core dK/dV kernel with K's and V's fragments
// read from shared memory; at 48, 80, 96 and 112 the tiles loaded by two or
// three column segments); the wide forward refuses all but 32 and 64.
// (C, NH) of each head size.
struct HeadShape {
  int64_t C, NH;
};
constexpr HeadShape kHeadShapes[] = {{128, 2}, {128, 4}, {128, 1}, {192, 2}, {160, 2}, {96, 2}, {224, 2}};
TYPED_TEST(CudaOps, AttentionForwardBackward) {
  using T = TypeParam;
  // Tensor cores: dQ recomputed (no room for stored score gradients), from
  // stored ones for all (b, h) pairs in one launch, and with room for 3
  // pairs (4 pairs in chunks of 2 + 2, 8 in 3 + 3 + 2: the (b, h) offsets);
  // and the forward on 128-query tiles.
  struct Variant {
    AttentionKernel kernel;
    int64_t ds_pairs;
  };
  std::vector<Variant> variants = {{AttentionKernel::kSimt, 0}};
  if constexpr (std::is_same_v<T, bf16>)
    variants.insert(variants.end(), {{AttentionKernel::kTensorCore, 0}, {AttentionKernel::kTensorCore, -1},
                                     {AttentionKernel::kTensorCore, 3}, {AttentionKernel::kTensorCoreWide, -1}});
  for (int64_t Tn : {75, 200}) {
    for (const auto [C, NH] : kHeadShapes) {
      const int64_t B = 2;
      auto qkv = input<T>(B * Tn * 3 * C, 1.f, 20 + NH + Tn), dy = input<T>(B * Tn * C, 1.f, 30 + NH + Tn);
      std::vector<float> out(B * Tn * C), lse_ref(B * NH * Tn), dqkv(B * Tn * 3 * C);
      const int kThreads = 256;  // at least OpenMP's thread count (the CPU op checks)
      std::vector<float> scratch(cpu::attention_scratch_per_thread(Tn) * kThreads);
      cpu::attention_forward(out.data(), lse_ref.data(), qkv.data(), scratch.data(), kThreads, {B, Tn, C, NH});
      cpu::attention_backward(dqkv.data(), dy.data(), qkv.data(), lse_ref.data(), scratch.data(), kThreads,
                              {B, Tn, C, NH});
      Dev<T> gqkv(qkv), gdy(dy);
      for (const auto [kernel, ds_pairs] : variants) {
        if (C / NH != 32 && C / NH != 64 && kernel == AttentionKernel::kTensorCoreWide) {
          Dev<T> o(B * Tn * C);
          Dev<float> l(B * NH * Tn);
          EXPECT_THROW(attention_forward(o.data(), l.data(), gqkv.data(), {B, Tn, C, NH}, nullptr, kernel),
                       gpt::Error)
              << "the wide forward at head size " << C / NH;
          continue;
        }
        SCOPED_TRACE(::testing::Message() << "T=" << Tn << " C=" << C << " NH=" << NH
                                          << (kernel == AttentionKernel::kSimt ? " simt" : " tensor cores")
                                          << (kernel == AttentionKernel::kTensorCoreWide ? ", wide forward" : "")
                                          << " stored dS pairs " << ds_pairs);
        const AttentionShape shape{B, Tn, C, NH};
        const int64_t pairs = ds_pairs < 0 ? B * NH : ds_pairs;
        const int64_t scratch_floats =
            attention_backward_scratch(shape) + pairs * attention_ds_bytes_per_pair(Tn) / int64_t(sizeof(float));
        if (ds_pairs < 0) {
          EXPECT_EQ(scratch_floats, attention_backward_scratch(shape, int64_t(1) << 30));
        }
        Dev<T> gout(B * Tn * C), gdqkv(B * Tn * 3 * C), again(B * Tn * 3 * C);
        Dev<float> lse(B * NH * Tn), sc(static_cast<size_t>(scratch_floats));
        attention_forward(gout.data(), lse.data(), gqkv.data(), shape, nullptr, kernel);
        attention_backward(gdqkv.data(), sc.data(), scratch_floats, gdy.data(), gqkv.data(), gout.data(), lse.data(),
                           shape, nullptr, kernel);
        attention_backward(again.data(), sc.data(), scratch_floats, gdy.data(), gqkv.data(), gout.data(), lse.data(),
                           shape, nullptr, kernel);
        expect_close<T>(gout.download(), out, "attention out");
        expect_close<T>(gdqkv.download(), dqkv, "attention dqkv");
        EXPECT_EQ(gdqkv.download(), again.download()) << "attention backward is not deterministic";
        // lse against the CPU's, as the diagonal probabilities exp(s_ii - lse_i) they give.
        EXPECT_LE(rel_error(diagonal_from_lse(qkv, lse.download(), B, Tn, C, NH),
                            diagonal_from_lse(qkv, lse_ref, B, Tn, C, NH)),
                  1e-4)
            << "log-sum-exp";
        gout.check_guards();
        gdqkv.check_guards();
        lse.check_guards();
        sc.check_guards();
      }
    }
  }
}

// cuDNN's fused attention (bf16) against the CPU, at the shapes above, and
// paired with our kernels both ways: its lse is ours (the statistics of its
// softmax), so our backward runs from its forward and its backward from
// ours. Its dQ is accumulated with atomics, so two runs are not compared
// bit for bit. The workspaces start as Dev's sentinels and the backward's
// is used twice, so a dQ accumulator not zeroed on every call shows.
// Skipped, with the reason, where cuDNN cannot be opened.
TEST(CudnnAttentionGpu, ForwardBackwardMatchCpuAndOurs) {
  GPT_REQUIRE_GPU();
  const std::string why = cudnn_attention_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  std::printf("%s\n", cudnn_attention_library().c_str());
  for (int64_t Tn : {75, 200}) {
    for (const auto [C, NH] : kHeadShapes) {
      SCOPED_TRACE(::testing::Message() << "T=" << Tn << " C=" << C << " NH=" << NH);
      const int64_t B = 2;
      const AttentionShape shape{B, Tn, C, NH};
      auto qkv = input<bf16>(B * Tn * 3 * C, 1.f, 20 + NH + Tn), dy = input<bf16>(B * Tn * C, 1.f, 30 + NH + Tn);
      std::vector<float> out(B * Tn * C), lse_ref(B * NH * Tn), dqkv(B * Tn * 3 * C);
      const int kThreads = 256;
      std::vector<float> scratch(cpu::attention_scratch_per_thread(Tn) * kThreads);
      cpu::attention_forward(out.data(), lse_ref.data(), qkv.data(), scratch.data(), kThreads, {B, Tn, C, NH});
      cpu::attention_backward(dqkv.data(), dy.data(), qkv.data(), lse_ref.data(), scratch.data(), kThreads,
                              {B, Tn, C, NH});
      const int64_t fwd_ws = cudnn_attention_forward_workspace(shape);
      const int64_t bwd_ws = cudnn_attention_backward_workspace(shape);
      Dev<bf16> gqkv(qkv), gdy(dy), gout(B * Tn * C), gdqkv(B * Tn * 3 * C), ours_out(B * Tn * C);
      Dev<bf16> mixed(B * Tn * 3 * C);
      Dev<float> lse(B * NH * Tn), ours_lse(B * NH * Tn);
      Dev<float> fws(size_t(std::max<int64_t>(fwd_ws, 4) / 4)), bws(size_t(bwd_ws / 4));
      cudnn_attention_forward(gout.data(), lse.data(), gqkv.data(), shape, fws.data(), fwd_ws, nullptr);
      cudnn_attention_backward(gdqkv.data(), gdy.data(), gqkv.data(), gout.data(), lse.data(), shape, bws.data(),
                               bwd_ws, nullptr);
      expect_close<bf16>(gout.download(), out, "cuDNN attention out");
      expect_close<bf16>(gdqkv.download(), dqkv, "cuDNN attention dqkv");
      EXPECT_LE(rel_error(diagonal_from_lse(qkv, lse.download(), B, Tn, C, NH),
                          diagonal_from_lse(qkv, lse_ref, B, Tn, C, NH)),
                1e-4)
          << "cuDNN's softmax statistics as our log-sum-exp";
      // Our backward from cuDNN's forward ...
      const int64_t sc_floats = attention_backward_scratch(shape);
      Dev<float> sc{size_t(sc_floats)};
      attention_backward(mixed.data(), sc.data(), sc_floats, gdy.data(), gqkv.data(), gout.data(), lse.data(), shape,
                         nullptr);
      expect_close<bf16>(mixed.download(), dqkv, "our backward from cuDNN's forward");
      // ... and cuDNN's backward from ours.
      attention_forward(ours_out.data(), ours_lse.data(), gqkv.data(), shape, nullptr);
      cudnn_attention_backward(mixed.data(), gdy.data(), gqkv.data(), ours_out.data(), ours_lse.data(), shape,
                               bws.data(), bwd_ws, nullptr);
      expect_close<bf16>(mixed.download(), dqkv, "cuDNN's backward from our forward");
      for (auto* d : {&gout, &gdqkv, &mixed}) d->check_guards();
      lse.check_guards();
      bws.check_guards();
    }
  }
}

// kAuto takes the tensor cores exactly where the device gives a block the
// shared memory they must have at the head size (else the CUDA-core
// kernels: the same bits as asking for those), and asking for the tensor
// cores where they cannot run is an error that says why. At head size 128
// the double-buffered backward takes 103 KiB: a GPU of 99 KiB a block runs
// it single-buffered, with the same bits. On a GPU, as it is and with the
// backward single-buffered (attention_force_single_buffers); on the
// emulator also as a GPU of compute capability 8.9 with 99 KiB a block (an
// L40S, as 8.6 and 12.0: every head size on tensor cores, 128's backward
// single-buffered), as one with 80 KiB (none is so: 128 and 112 fall back,
// 64 does not), and as one of 7.5 (a T4: no tensor-core kernels).
TEST(CudaAttention, TensorCoresWhereTheDeviceGivesTheirSharedMemory) {
  GPT_REQUIRE_GPU();
  EXPECT_EQ(detail::attention_tensor_core_smem(128), 87040);  // the forward's 5 tiles of 64 x (128 + 8) bf16
  EXPECT_EQ(detail::attention_tensor_core_smem(112), 93200);  // dK/dV's 6 tiles of 64 x (112 + 8), + 1040
  EXPECT_EQ(detail::attention_tensor_core_smem(64), 56336);
  struct Kind {
    const char* cc;
    const char* smem_optin;
  };
  std::vector<Kind> kinds = {{nullptr, nullptr}};
#ifdef GPT_EMULATED_BACKEND  // tests/unit/host_cuda/host_cuda_runtime.cpp
  kinds.push_back({"8.9", "101376"});
  kinds.push_back({"8.9", "81920"});
  kinds.push_back({"7.5", "65536"});
#endif
  std::vector<std::vector<float>> as_is(129);  // the device as it is: the tensor cores' results by head size
  for (const Kind& kind : kinds) {
    if (kind.cc) {
      setenv("GPT_EMULATED_COMPUTE_CAPABILITY", kind.cc, 1);
      setenv("GPT_EMULATED_SMEM_OPTIN", kind.smem_optin, 1);
    }
    int device = 0, major = 0, optin = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), cudaSuccess);
    const std::string as = kind.cc ? std::string(kind.cc) + "/" + kind.smem_optin : "";
    for (int64_t hs : {64, 112, 128}) {
      SCOPED_TRACE(::testing::Message() << "compute capability major " << major << ", " << optin
                                        << " bytes a block, head size " << hs);
      const bool fits = major >= 8 && detail::attention_tensor_core_smem(hs) <= optin;
      const AttentionShape s{2, 75, hs, 1};
      const std::string why = attention_tensor_cores_unavailable(s);
      EXPECT_EQ(why.empty(), fits) << why;
      if (as == "8.9/101376") {
        EXPECT_EQ(why, "");
      }
      if (as == "8.9/81920") {
        EXPECT_EQ(why, hs == 64 ? ""
                                : "at head size " + std::to_string(hs) + " their blocks take " +
                                      (hs == 128 ? "85.0" : "91.0") +
                                      " KiB of shared memory, and this GPU (compute capability 8.9) gives a block "
                                      "80.0 KiB");
      }
      if (as == "7.5/65536") {
        EXPECT_EQ(why, "compute capability 7.5 (8.0 or newer needed)");
      }
      auto qkv = input<bf16>(s.B * s.T * 3 * hs, 1.f, 40 + hs), dy = input<bf16>(s.B * s.T * hs, 1.f, 50 + hs);
      Dev<bf16> gqkv(qkv), gdy(dy);
      // out and dqkv, one after the other; dQ from the stored dS where the kernels store it (a budget for all
      // pairs), or recomputed (no budget).
      auto run = [&](AttentionKernel kernel, int64_t ds_budget = int64_t(1) << 30) {
        const int64_t scratch_floats = attention_backward_scratch(s, ds_budget);
        Dev<bf16> out(s.B * s.T * hs), dqkv(s.B * s.T * 3 * hs);
        Dev<float> lse(s.B * s.T), sc{size_t(scratch_floats)};
        attention_forward(out.data(), lse.data(), gqkv.data(), s, nullptr, kernel);
        attention_backward(dqkv.data(), sc.data(), scratch_floats, gdy.data(), gqkv.data(), out.data(), lse.data(),
                           s, nullptr, kernel);
        std::vector<float> r = out.download();
        const std::vector<float> d = dqkv.download();
        r.insert(r.end(), d.begin(), d.end());
        return r;
      };
      const std::vector<float> chosen = run(fits ? AttentionKernel::kTensorCore : AttentionKernel::kSimt);
      EXPECT_EQ(run(AttentionKernel::kAuto), chosen) << "kAuto is not the kernels it should take";
      if (fits && !kind.cc) {
        as_is[size_t(hs)] = chosen;
        const std::vector<float> recomputed = run(AttentionKernel::kTensorCore, 0);
        detail::attention_force_single_buffers(true);
        EXPECT_EQ(run(AttentionKernel::kTensorCore), chosen) << "single buffers, other bits";
        EXPECT_EQ(run(AttentionKernel::kTensorCore, 0), recomputed) << "single buffers, dQ recomputed: other bits";
        detail::attention_force_single_buffers(false);
      }
      if (fits && kind.cc && !as_is[size_t(hs)].empty()) {
        EXPECT_EQ(chosen, as_is[size_t(hs)]) << "the tensor cores as another GPU, other bits";
      }
      if (!fits) {
        Dev<bf16> out(s.B * s.T * hs);
        Dev<float> lse(s.B * s.T);
        try {
          attention_forward(out.data(), lse.data(), gqkv.data(), s, nullptr, AttentionKernel::kTensorCore);
          ADD_FAILURE() << "the tensor cores ran where they cannot";
        } catch (const gpt::Error& e) {
          EXPECT_NE(std::string(e.what()).find("tensor-core attention cannot run: " + why), std::string::npos)
              << e.what();
        }
      }
    }
    unsetenv("GPT_EMULATED_COMPUTE_CAPABILITY");
    unsetenv("GPT_EMULATED_SMEM_OPTIN");
  }
}

TYPED_TEST(CudaOps, GeluForwardBackward) {
  using T = TypeParam;
  const int64_t n = 10007;
  auto x = input<T>(n, 2.f, 40), dy = input<T>(n, 1.f, 41);
  std::vector<float> y(n), dx(n);
  cpu::gelu_forward(y.data(), x.data(), n);
  cpu::gelu_backward(dx.data(), x.data(), dy.data(), n);
  Dev<T> gx(x), gy(n), gdy(dy);
  gelu_forward(gy.data(), gx.data(), n, nullptr);
  gelu_backward(gdy.data(), gx.data(), gdy.data(), n, nullptr);  // in place
  expect_close<T>(gy.download(), y, "gelu");
  expect_close<T>(gdy.download(), dx, "gelu backward in place");
  gy.check_guards();
}

TYPED_TEST(CudaOps, EmbeddingForwardBackwardDeterministic) {
  using T = TypeParam;
  const int64_t B = 3, Tn = 40, C = 48, V = 50;
  std::vector<int32_t> tok(B * Tn);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t((i * 7919) % 13);  // many repeats
  auto wte = input<T>(V * C, 1.f, 50), wpe = input<T>(Tn * C, 1.f, 51), dy = input<T>(B * Tn * C, 1.f, 52);
  std::vector<float> out(B * Tn * C), dwte(V * C, 0.f), dwpe(Tn * C, 0.f);
  cpu::embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, Tn, C);
  cpu::embedding_backward(dwte.data(), dwpe.data(), dy.data(), tok.data(), B, Tn, C);
  TokenGroups groups;
  groups.build(tok.data(), B * Tn);
  int32_t *dtok, *dgroups;
  GPT_CUDA_OK(cudaMalloc(&dtok, tok.size() * 4));
  GPT_CUDA_OK(cudaMalloc(&dgroups, groups.packed.size() * 4));
  GPT_CUDA_OK(cudaMemcpy(dtok, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
  GPT_CUDA_OK(cudaMemcpy(dgroups, groups.packed.data(), groups.packed.size() * 4, cudaMemcpyHostToDevice));
  EXPECT_EQ(groups.num_groups, 13);
  Dev<T> gwte(wte), gwpe(wpe), gout(B * Tn * C), gdy(dy);
  embedding_forward(gout.data(), dtok, gwte.data(), gwpe.data(), B, Tn, C, nullptr);
  expect_close<T>(gout.download(), out, "embedding");
  std::vector<float> first;
  for (int rep = 0; rep < 2; ++rep) {
    Dev<T> gdwte(V * C), gdwpe(Tn * C);
    gdwte.upload(std::vector<float>(V * C, 0.f));
    gdwpe.upload(std::vector<float>(Tn * C, 0.f));
    embedding_backward(gdwte.data(), gdwpe.data(), gdy.data(), dgroups, groups.num_groups, B, Tn, C, nullptr);
    auto got = gdwte.download();
    expect_close<T>(got, dwte, "dwte");
    expect_close<T>(gdwpe.download(), dwpe, "dwpe");
    if (rep == 0) first = got;
    else EXPECT_EQ(got, first) << "embedding backward must be bitwise deterministic";
    gdwte.check_guards();
  }
  cudaFree(dtok);
  cudaFree(dgroups);
}

// Vp = 320: rows of 16-byte vectors; Vp = 322: the scalar kernel.
template <typename T>
void check_classifier(int64_t V, int64_t Vp) {
  const int64_t N = 45, C = 64;
  auto x = input<T>(N * C, 1.f, 60), wte = input<T>(Vp * C, 0.3f, 61), dwte0 = input<T>(Vp * C, 0.01f, 62);
  for (int64_t i = V * C; i < Vp * C; ++i) wte[i] = 0.f;  // padded rows
  std::vector<int32_t> tgt(N);
  for (int64_t i = 0; i < N; ++i) tgt[i] = int32_t((i * 37) % V);
  std::vector<float> losses(N), logits(16 * Vp), dx(N * C), dwte = dwte0;
  cpu::ClassifierArgs<float> a;
  a.inp = x.data(); a.wte = wte.data(); a.targets = tgt.data(); a.losses = losses.data();
  a.logits = logits.data(); a.chunk_rows = 16; a.dinp = dx.data(); a.dwte = dwte.data(); a.loss_scale = 1.f / N;
  cpu::classifier_forward_backward(a, {N, C, V, Vp});

  MemoryTracker tracker;
  DeviceAllocator alloc(&tracker);
  Matmul mm(&alloc);
  int32_t* dtgt;
  GPT_CUDA_OK(cudaMalloc(&dtgt, N * 4));
  GPT_CUDA_OK(cudaMemcpy(dtgt, tgt.data(), N * 4, cudaMemcpyHostToDevice));
  Dev<T> gx(x), gwte(wte), glogits(16 * Vp), gdx(N * C), gdwte(dwte0);
  Dev<float> glosses(N);
  ClassifierArgs<T> g;
  g.inp = gx.data(); g.wte = gwte.data(); g.targets = dtgt; g.losses = glosses.data();
  g.logits = glogits.data(); g.chunk_rows = 16; g.dinp = gdx.data(); g.dwte = gdwte.data(); g.loss_scale = 1.f / N;
  classifier_forward_backward(mm, g, {N, C, V, Vp}, nullptr);
  // Losses are fp32 on the device, from logits stored in T.
  EXPECT_LE(rel_error(glosses.download(), losses), (std::is_same_v<T, float> ? 1e-5 : 1e-2));
  expect_close<T>(gdx.download(), dx, "dinp");
  expect_close<T>(gdwte.download(), dwte, "dwte accumulated");
  auto padded = gdwte.download();
  for (int64_t i = V * C; i < Vp * C; ++i) ASSERT_EQ(padded[i], dwte0[i]) << "padded rows of wte got gradient";
  glosses.check_guards();
  gdx.check_guards();
  gdwte.check_guards();
  cudaFree(dtgt);

  // One row's logits (sampling): the padded columns are -inf.
  const int64_t row = 7;
  std::vector<float> want(Vp);
  cpu::classifier_logits_row(want.data(), x.data() + row * C, wte.data(), {1, C, V, Vp});
  Dev<T> grow(Vp);
  classifier_logits_row(mm, grow.data(), gx.data() + row * C, gwte.data(), {1, C, V, Vp}, nullptr);
  const auto got = grow.download();
  const std::vector<float> got_v(got.begin(), got.begin() + V), want_v(want.begin(), want.begin() + V);
  expect_close<T>(got_v, want_v, "logits row");
  for (int64_t j = V; j < Vp; ++j) ASSERT_EQ(got[j], -INFINITY) << "padded logit " << j;
  grow.check_guards();
}

// The softmax kernel the launcher picks: Vp = 320 rows in registers
// (softmax_xent_rows_kernel), 322 (not a multiple of the vector) one element
// per access, 70016 (past the registers' 65536 bf16 / 32768 fp32 columns)
// 16-byte accesses in three passes.
TYPED_TEST(CudaOps, ClassifierFusedCrossEntropy) {
  for (auto [V, Vp] : {std::pair<int64_t, int64_t>{300, 320}, {300, 322}, {70000, 70016}}) {
    SCOPED_TRACE(testing::Message() << "V = " << V << ", Vp = " << Vp);
    check_classifier<TypeParam>(V, Vp);
  }
}

// The update with gradient type G into the fp32 master and, for T = bf16,
// its bf16 compute copy (T = float: the master is the compute copy). The
// gradient is representable in both types, so one reference serves all.
template <typename G, typename T>
void check_adamw() {
  GPTConfig cfg{2, 2, 32, 16, 64};
  ParamLayout layout(cfg);
  const UnitSpec& unit = layout.unit(layout.block_unit(0));
  const int64_t begin = 100, end = unit.numel - 50;  // a shard that cuts tensors
  const int64_t n = end - begin;
  auto p = randn(n, 0.1f, 70), g = input<bf16>(n, 0.01f, 71), m = randn(n, 0.001f, 72), v = randn(n, 0.001f, 73);
  for (float& x : v) x = x * x;
  std::vector<float> pr = p, mr = m, vr = v;
  AdamWHyper h;
  AdamWStep s{3e-3f, 7, 0.5f};
  gpt::adamw_update(unit, begin, end, pr.data(), g.data(), mr.data(), vr.data(), h, s);
  // shift 0: every array 16-byte aligned, the vectorised kernel; shift 1:
  // one element in, the kernel that takes one element at a time.
  for (int shift : {0, 1}) {
    SCOPED_TRACE(shift ? "unaligned: one element per access" : "aligned: 4 elements per access");
    const auto at = [&](const std::vector<float>& x) {
      std::vector<float> y(size_t(shift), 0.f);
      y.insert(y.end(), x.begin(), x.end());
      return y;
    };
    const auto from = [&](const std::vector<float>& y) { return std::vector<float>(y.begin() + shift, y.end()); };
    Dev<float> gp(at(p)), gm(at(m)), gv(at(v));
    Dev<G> gg(at(g));
    Dev<T> copy(size_t(n + shift));
    adamw_update<G, T>(unit, begin, end, gp.data() + shift, std::is_same_v<T, float> ? nullptr : copy.data() + shift,
                       gg.data() + shift, gm.data() + shift, gv.data() + shift, h, s, nullptr);
    EXPECT_LE(rel_error(from(gp.download()), pr), 1e-6) << "fp32 master";
    EXPECT_LE(rel_error(from(gm.download()), mr), 1e-6);
    EXPECT_LE(rel_error(from(gv.download()), vr), 1e-6);
    if (std::is_same_v<T, bf16>) {
      expect_close<T>(from(copy.download()), pr, "bf16 compute copy");
    }
    gp.check_guards();
    copy.check_guards();
  }
}

// Every pairing the strategies use: gradients reduced in fp32 or bf16 (or
// accumulated in fp32) update fp32 or bf16 compute copies.
TYPED_TEST(CudaOps, AdamWMasterWeightsAndNorm) {
  using T = TypeParam;  // compute-copy type, and the type of the gradient whose norm is taken
  {
    SCOPED_TRACE("fp32 gradient");
    check_adamw<float, T>();
  }
  {
    SCOPED_TRACE("bf16 gradient");
    check_adamw<bf16, T>();
  }

  const int64_t n = 5000;
  const auto g = input<T>(n, 0.01f, 71);
  const double want = gpt::sum_squares(g.data(), n);
  Dev<T> gg(g);
  Dev<double> acc(1);
  Dev<double> scratch{size_t(sum_squares_scratch())};
  GPT_CUDA_OK(cudaMemset(scratch.data(), 0, scratch.size() * sizeof(double)));  // as the contract asks
  GPT_CUDA_OK(cudaMemset(acc.data(), 0, sizeof(double)));
  sum_squares(gg.data(), n, acc.data(), scratch.data(), nullptr);
  double got = 0;
  GPT_CUDA_OK(cudaMemcpy(&got, acc.data(), sizeof got, cudaMemcpyDeviceToHost));
  EXPECT_NEAR(got, want, 1e-9 * want);
  // Rounded to fp32 on the device, for the shard group's all-reduce.
  Dev<float> narrowed(1);
  convert(narrowed.data(), acc.data(), 1, nullptr);
  EXPECT_EQ(narrowed.download()[0], static_cast<float>(got));
  narrowed.check_guards();
  // The list form, as the norm over a rank's units takes it: 70 arrays (two
  // launches), one not 16-byte aligned, one empty; the last block of each
  // launch leaves the arrival counter at zero for the next, so the same
  // list summed again gives the same bits.
  {
    std::vector<const T*> xs;
    std::vector<int64_t> ns;
    double want_list = 0;
    for (int k = 0; k < 70; ++k) {
      const int64_t off = k == 3 ? 1 : 0, len = k == 5 ? 0 : 1 + (k * 37) % 90;
      if (off + len > n) continue;
      xs.push_back(gg.data() + off);
      ns.push_back(len);
      want_list += gpt::sum_squares(g.data() + off, len);
    }
    double twice[2];
    for (double& r : twice) {
      GPT_CUDA_OK(cudaMemset(acc.data(), 0, sizeof(double)));
      sum_squares(xs.data(), ns.data(), int(xs.size()), acc.data(), scratch.data(), nullptr);
      GPT_CUDA_OK(cudaMemcpy(&r, acc.data(), sizeof r, cudaMemcpyDeviceToHost));
    }
    EXPECT_NEAR(twice[0], want_list, 1e-9 * want_list);
    EXPECT_EQ(twice[0], twice[1]);
  }
}

// The casts and the fp32 accumulation the strategies use, through their
// launchers: exact (one rounding to nearest even into bf16, one fp32 add).
TEST(CudaElementwise, ConvertAndAccumulate) {
  GPT_REQUIRE_GPU();
  const int64_t n = 3001;
  const auto x = randn(n, 3.f, 80), xb = rounded<bf16>(x), acc0 = randn(n, 1.f, 81);
  std::vector<float> sum(n), sum_b(n);
  for (int64_t i = 0; i < n; ++i) {
    sum[i] = acc0[i] + x[i];
    sum_b[i] = acc0[i] + xb[i];
  }
  Dev<float> gx(x), to_f(n), to_f_from_b(n), acc(acc0), acc_b(acc0);
  Dev<bf16> gxb(xb), to_b(n);
  convert(to_b.data(), gx.data(), n, nullptr);
  convert(to_f.data(), gx.data(), n, nullptr);
  convert(to_f_from_b.data(), gxb.data(), n, nullptr);
  accumulate(acc.data(), gx.data(), n, nullptr);
  accumulate(acc_b.data(), gxb.data(), n, nullptr);
  EXPECT_EQ(to_b.download(), xb) << "fp32 -> bf16";
  EXPECT_EQ(to_f.download(), x) << "fp32 -> fp32";
  EXPECT_EQ(to_f_from_b.download(), xb) << "bf16 -> fp32";
  EXPECT_EQ(acc.download(), sum) << "fp32 += fp32";
  EXPECT_EQ(acc_b.download(), sum_b) << "fp32 += bf16";
  for (const Dev<float>* d : {&to_f, &to_f_from_b, &acc, &acc_b}) d->check_guards();
  to_b.check_guards();
}

// The device allocator's bookkeeping is tested without a GPU:
// tests/unit/test_device_memory_host.cpp.

// Host-side part of the embedding backward: runs without a GPU.
TEST(TokenGroups, GroupsRowsByTokenInRowOrder) {
  const std::vector<int32_t> tok{5, 2, 5, 9, 2, 5, 0};
  TokenGroups g;
  g.build(tok.data(), int64_t(tok.size()));
  const int64_t n = int64_t(tok.size());
  ASSERT_EQ(g.num_groups, 4);
  const std::vector<int32_t> order(g.packed.begin(), g.packed.begin() + n);
  const std::vector<int32_t> starts(g.packed.begin() + n, g.packed.begin() + n + 5);
  const std::vector<int32_t> ids(g.packed.begin() + n + 5, g.packed.end());
  EXPECT_EQ(order, (std::vector<int32_t>{6, 1, 4, 0, 2, 5, 3}));  // by token, rows ascending inside a token
  EXPECT_EQ(starts, (std::vector<int32_t>{0, 1, 3, 6, 7}));
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 2, 5, 9}));
  g.build(tok.data(), 2);  // rebuilt smaller: no stale tail
  EXPECT_EQ(g.num_groups, 2);
  EXPECT_EQ(g.packed.size(), size_t(2 + 3 + 2));
}

// The counting sort against the definition (a stable sort of the rows by
// token), at a micro-batch of GPT-2 tokens drawn to repeat (Zipf-like, as
// text does), then rebuilt from fewer rows with smaller ids.
TEST(TokenGroups, EqualsAStableSortByToken) {
  auto reference = [](const std::vector<int32_t>& tok) {
    const int32_t n = int32_t(tok.size());
    std::vector<int32_t> order(tok.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tok[a] < tok[b]; });
    std::vector<int32_t> starts, ids;
    for (int32_t k = 0; k < n; ++k) {
      if (k == 0 || tok[order[k]] != tok[order[k - 1]]) {
        starts.push_back(k);
        ids.push_back(tok[order[k]]);
      }
    }
    starts.push_back(n);
    std::vector<int32_t> packed = order;
    packed.insert(packed.end(), starts.begin(), starts.end());
    packed.insert(packed.end(), ids.begin(), ids.end());
    return std::make_pair(packed, int32_t(ids.size()));
  };
  std::mt19937 rng(7);
  TokenGroups g;
  for (const auto& [n, vocab] : {std::pair{4096, 50257}, std::pair{300, 40}}) {
    std::vector<int32_t> tok(static_cast<size_t>(n));
    for (int32_t& t : tok) t = int32_t(double(vocab) * std::pow(std::uniform_real_distribution<double>(0, 1)(rng), 3));
    g.build(tok.data(), n);
    const auto [packed, groups] = reference(tok);
    EXPECT_EQ(g.num_groups, groups) << n << " rows";
    EXPECT_EQ(g.packed, packed) << n << " rows";
    EXPECT_EQ(g.rows, n);
  }
  const int32_t bad[] = {3, -1, 2};
  EXPECT_THROW(g.build(bad, 3), gpt::Error);
}

}  // namespace
}  // namespace gpt::cuda::test
