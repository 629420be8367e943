// The CUDA backend's linear layers (model/cuda/matmul.cpp: the row-major to
// column-major mapping, transposes, leading dimensions, the bias, GELU and
// DGELU epilogues, the residual's beta term, dW's accumulation, the plan
// cache and both fallbacks) without a GPU: Matmul's own code against a host
// cuBLASLt that computes what the cuBLASLt documentation specifies and
// refuses what it forbids (host_cuda/host_cublaslt.hpp), a host CUDA runtime
// for the device allocator, and the GELU and bias-gradient kernels run by
// emulated_cuda.hpp. Results against the CPU linear layer and GELU, in fp32
// and bf16. test_cuda_ops runs the same Matmul on a GPU with real cuBLASLt.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/memory.hpp"
#include "gpu/kernel_test_util.hpp"
#include "host_cuda/host_cublaslt.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cpu/matmul.hpp"
#include "model/cuda/gelu_epilogue_check.hpp"
#include "model/cuda/matmul.hpp"

namespace gpt::cuda {
namespace {

using test::randn;
using test::rel_error;
using test::rounded;
using test::tolerance;

// A device buffer from the allocator under test, filled from host values
// rounded to T, read back widened; through cudaMemcpy as on a GPU (the host
// streams run queued work, the allocator's zero fill and the products, only
// when the host needs it).
template <typename T>
struct Buf {
  Buf(DeviceAllocator* a, const std::vector<float>& init) : b(init.size(), MemCategory::kActivations, a) {
    const std::vector<T> v(init.begin(), init.end());
    cudaMemcpy(b.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  Buf(DeviceAllocator* a, size_t n) : b(n, MemCategory::kActivations, a) {}
  T* data() { return b.data(); }
  std::vector<float> values() const {
    std::vector<T> v(b.size());
    cudaMemcpy(v.data(), b.data(), v.size() * sizeof(T), cudaMemcpyDeviceToHost);
    return {v.begin(), v.end()};
  }
  DeviceBuffer<T> b;
};

template <typename T>
class EmulatedMatmul : public ::testing::Test {
 protected:
  void SetUp() override { host_cublaslt::hooks() = {}; }
  MemoryTracker tracker;
  DeviceAllocator alloc{&tracker};
};
using Types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(EmulatedMatmul, Types);

// N rows not a multiple of anything; OC = 40 gives the GELU epilogue an aux
// leading dimension cuBLASLt accepts (divisible by 8), OC = 36 one it
// refuses, so that shape takes the unfused path.
constexpr int64_t kN = 70, kC = 48;

struct Layer {
  std::vector<float> x, w, b;  // inp[N, C], W[OC, C], bias[OC]
};
template <typename T>
Layer layer(int64_t OC, uint64_t seed) {
  return {rounded<T>(randn(kN * kC, 1.f, seed)), rounded<T>(randn(OC * kC, 0.2f, seed + 1)),
          rounded<T>(randn(OC, 0.5f, seed + 2))};
}

std::vector<float> cpu_forward(const Layer& l, int64_t OC, bool bias) {
  std::vector<float> out(kN * OC);
  cpu::linear_forward(out.data(), l.x.data(), l.w.data(), bias ? l.b.data() : nullptr, kN, kC, OC);
  return out;
}

TYPED_TEST(EmulatedMatmul, ForwardWithAndWithoutBias) {
  using T = TypeParam;
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 1);
  Matmul mm(&this->alloc);
  Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), b(&this->alloc, l.b), out(&this->alloc, kN * OC);
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    mm.linear_forward<T>(out.data(), x.data(), w.data(), bias ? b.data() : nullptr, kN, kC, OC, nullptr);
    EXPECT_LE(rel_error(out.values(), cpu_forward(l, OC, bias)), tolerance<T>());
  }
  EXPECT_EQ(mm.cached_plans(), 2u);
}

// out = inp W^T + bias + residual, also with out the residual itself.
TYPED_TEST(EmulatedMatmul, ResidualForward) {
  using T = TypeParam;
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 4);
  const auto res = rounded<T>(randn(kN * OC, 1.f, 7));
  auto want = cpu_forward(l, OC, true);
  for (size_t i = 0; i < want.size(); ++i) want[i] += res[i];
  Matmul mm(&this->alloc);
  Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), b(&this->alloc, l.b), r(&this->alloc, res),
      out(&this->alloc, kN * OC);
  mm.linear_residual_forward<T>(out.data(), x.data(), w.data(), b.data(), r.data(), kN, kC, OC, nullptr);
  EXPECT_LE(rel_error(out.values(), want), tolerance<T>()) << "separate output";
  mm.linear_residual_forward<T>(r.data(), x.data(), w.data(), b.data(), r.data(), kN, kC, OC, nullptr);
  EXPECT_LE(rel_error(r.values(), want), tolerance<T>()) << "in place";
}

// The MLP's first layer: pre-activation into out, GELU(pre) into gelu_out;
// fused (GELU_AUX_BIAS), unfused by choice (set_fusion(false)), and unfused
// because cuBLASLt refuses: the aux leading dimension (OC = 36), no
// algorithm from the heuristic, or NOT_SUPPORTED from the heuristic's pick.
TYPED_TEST(EmulatedMatmul, ForwardWithGelu) {
  using T = TypeParam;
  struct Case {
    const char* name;
    int64_t OC;
    bool fusion, refuse_heuristic, refuse_matmul, fused;
  };
  for (const Case& k : {Case{"fused", 40, true, false, false, true}, Case{"fusion off", 40, false, false, false, false},
                        Case{"aux ld refused", 36, true, false, false, false},
                        Case{"no algorithm", 40, true, true, false, false},
                        Case{"algorithm refused", 40, true, false, true, false}}) {
    SCOPED_TRACE(k.name);
    host_cublaslt::hooks().refuse_gelu_heuristic = k.refuse_heuristic;
    host_cublaslt::hooks().refuse_gelu_matmul = k.refuse_matmul;
    const Layer l = layer<T>(k.OC, 10);
    const auto pre = cpu_forward(l, k.OC, true);
    std::vector<float> act(pre.size());
    cpu::gelu_forward(act.data(), rounded<T>(pre).data(), int64_t(pre.size()));
    Matmul mm(&this->alloc);
    mm.set_fusion(k.fusion);
    Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), b(&this->alloc, l.b);
    Buf<T> out(&this->alloc, kN * k.OC), gout(&this->alloc, kN * k.OC);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the plan (or its refusal)
      mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, k.OC, nullptr, gout.data());
      EXPECT_LE(rel_error(out.values(), pre), tolerance<T>()) << "pre-activation, call " << call;
      EXPECT_LE(rel_error(gout.values(), act), tolerance<T>()) << "GELU, call " << call;
    }
    EXPECT_EQ(mm.fused_gelu_calls(), k.fused ? 2 : 0);
    EXPECT_EQ(mm.unfused_gelu_calls(), k.fused ? 0 : 2);
  }
}

// dinp = dout W (=), dW += dout^T inp, dbias += column sums of dout, each
// alone and all together; the accumulators start non-zero.
TYPED_TEST(EmulatedMatmul, Backward) {
  using T = TypeParam;
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 20);
  const auto dout = rounded<T>(randn(kN * OC, 1.f, 23));
  const auto dw0 = rounded<T>(randn(OC * kC, 1.f, 24)), db0 = rounded<T>(randn(OC, 1.f, 25));
  std::vector<float> dx(kN * kC), dw = dw0, db = db0;
  cpu::linear_backward(dx.data(), dw.data(), db.data(), dout.data(), l.x.data(), l.w.data(), kN, kC, OC);
  for (int which = 0; which < 4; ++which) {  // 0: all, 1: dinp, 2: dW, 3: dbias
    SCOPED_TRACE(testing::Message() << "outputs " << which);
    Matmul mm(&this->alloc);
    Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), go(&this->alloc, dout), gdx(&this->alloc, kN * kC);
    Buf<T> gdw(&this->alloc, dw0), gdb(&this->alloc, db0);
    const bool want_dx = which <= 1, want_dw = which == 0 || which == 2, want_db = which == 0 || which == 3;
    mm.linear_backward<T>(want_dx ? gdx.data() : nullptr, want_dw ? gdw.data() : nullptr,
                          want_db ? gdb.data() : nullptr, go.data(), x.data(), w.data(), kN, kC, OC, nullptr);
    if (want_dx) {
      EXPECT_LE(rel_error(gdx.values(), dx), tolerance<T>()) << "dinp";
    }
    EXPECT_LE(rel_error(gdw.values(), want_dw ? dw : dw0), tolerance<T>()) << "dW";
    EXPECT_LE(rel_error(gdb.values(), want_db ? db : db0), tolerance<T>()) << "dbias";
  }
}

// The MLP's projection backward as the block calls it: dinp = (dout W) *
// GELU'(pre), with the GELU gradient in the DGELU epilogue or, unfused, by
// the GELU kernel in place.
TYPED_TEST(EmulatedMatmul, BackwardThroughGelu) {
  using T = TypeParam;
  const int64_t OC = 40;  // kC plays the MLP's 4C: dinp[N, kC] from dout[N, OC]
  const Layer l = layer<T>(OC, 30);
  const auto pre = rounded<T>(randn(kN * kC, 1.5f, 33)), dout = rounded<T>(randn(kN * OC, 1.f, 34));
  std::vector<float> dx(kN * kC), dw(OC * kC, 0.f), db(OC, 0.f);  // the device's start zeroed too
  cpu::linear_backward(dx.data(), dw.data(), db.data(), dout.data(), l.x.data(), l.w.data(), kN, kC, OC);
  cpu::gelu_backward(dx.data(), pre.data(), rounded<T>(dx).data(), kN * kC);
  for (bool fusion : {true, false}) {
    SCOPED_TRACE(fusion ? "DGELU epilogue" : "GELU kernel");
    Matmul mm(&this->alloc);
    mm.set_fusion(fusion);
    Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), go(&this->alloc, dout), gp(&this->alloc, pre);
    Buf<T> gdx(&this->alloc, kN * kC), gdw(&this->alloc, dw.size()), gdb(&this->alloc, db.size());
    mm.linear_backward<T>(gdx.data(), gdw.data(), gdb.data(), go.data(), x.data(), w.data(), kN, kC, OC, nullptr,
                          gp.data());
    EXPECT_LE(rel_error(gdx.values(), dx), tolerance<T>()) << "dinp";
    EXPECT_LE(rel_error(gdw.values(), dw), tolerance<T>()) << "dW";
    EXPECT_LE(rel_error(gdb.values(), db), tolerance<T>()) << "dbias";
    EXPECT_EQ(mm.fused_gelu_calls(), fusion ? 1 : 0);
    EXPECT_EQ(mm.unfused_gelu_calls(), fusion ? 0 : 1);
  }
}

// Before its first fused GELU in a type, the Matmul checks what cuBLASLt's
// GELU epilogues compute and fuses only if it is GPT-2's GELU: a library
// whose forward or gradient epilogue uses another formula gets the GELU
// kernel, so the layers still equal the CPU's; one within tolerance (erf)
// is fused. Always fusing fails the sigmoid cases; never fusing fails the
// counts.
TYPED_TEST(EmulatedMatmul, GeluEpilogueChecked) {
  using T = TypeParam;
  using F = host_cublaslt::GeluFormula;
  using R = GeluEpilogueCheck::Result;
  constexpr bool is_fp32 = std::is_same_v<T, float>;
  struct Case {
    const char* name;
    F gelu, dgelu;
    R want;
    const char* closest;  // checked in fp32 (bf16 rounding hides erf's difference)
  };
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 50);
  const auto pre = cpu_forward(l, OC, true);
  std::vector<float> act(pre.size());
  cpu::gelu_forward(act.data(), rounded<T>(pre).data(), int64_t(pre.size()));
  const auto dout = rounded<T>(randn(kN * OC, 1.f, 51)), pre_b = rounded<T>(randn(kN * kC, 1.5f, 52));
  std::vector<float> dx(kN * kC), dw(OC * kC);
  cpu::linear_backward(dx.data(), dw.data(), static_cast<float*>(nullptr), dout.data(), l.x.data(), l.w.data(), kN,
                       kC, OC);
  cpu::gelu_backward(dx.data(), pre_b.data(), rounded<T>(dx).data(), kN * kC);
  for (const Case& k : {Case{"tanh", F::kTanh, F::kTanh, R::kMatches, "tanh"},
                        Case{"erf", F::kErf, F::kErf, R::kMatches, "erf"},
                        Case{"sigmoid forward", F::kSigmoid, F::kTanh, R::kDiffers, nullptr},
                        Case{"sigmoid gradient", F::kTanh, F::kSigmoid, R::kDiffers, nullptr}}) {
    SCOPED_TRACE(k.name);
    host_cublaslt::hooks().gelu = k.gelu;
    host_cublaslt::hooks().dgelu = k.dgelu;
    Matmul mm(&this->alloc);
    EXPECT_EQ(mm.gelu_check<T>().result, R::kNotRun);
    Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), b(&this->alloc, l.b), go(&this->alloc, dout),
        gp(&this->alloc, pre_b);
    Buf<T> out(&this->alloc, kN * OC), gout(&this->alloc, kN * OC), gdx(&this->alloc, kN * kC);
    mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, OC, nullptr, gout.data());
    const GeluEpilogueCheck c = mm.gelu_check<T>();
    EXPECT_EQ(c.result, k.want) << describe(c, !is_fp32);
    EXPECT_TRUE(c.pre_activation_exact);
    if (k.want == R::kMatches) {
      // erf: 4.7e-4 (8.7e-4 in the gradient) off the tanh form, which in
      // bf16 flips some roundings: an ulp, 1/64 at 4.
      const double bound = k.gelu == F::kTanh ? 1e-6 : is_fp32 ? 1e-3 : 1.0 / 32;
      EXPECT_LE(c.forward_error, bound);
      EXPECT_LE(c.backward_error, bound);
      if (is_fp32) {
        EXPECT_EQ(c.closest, k.closest);
      }
    } else {
      EXPECT_GT(std::max(c.forward_error, c.backward_error), 1e-2);
    }
    // The layers as training calls them, forward and through the MLP
    // projection's gradient; the second call answers from the verdict.
    mm.linear_backward<T>(gdx.data(), static_cast<T*>(nullptr), static_cast<T*>(nullptr), go.data(), x.data(),
                          w.data(), kN, kC, OC, nullptr, gp.data());
    mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, OC, nullptr, gout.data());
    const bool fused = k.want == R::kMatches;
    EXPECT_EQ(mm.fused_gelu_calls(), fused ? 3 : 0);
    EXPECT_EQ(mm.unfused_gelu_calls(), fused ? 0 : 3);
    if (k.gelu == F::kTanh || !fused) {  // the exact GELU: the CPU's
      EXPECT_LE(rel_error(out.values(), pre), tolerance<T>()) << "pre-activation";
      EXPECT_LE(rel_error(gout.values(), act), tolerance<T>()) << "GELU";
      EXPECT_LE(rel_error(gdx.values(), dx), tolerance<T>()) << "dinp * GELU'";
    }
  }
}

// The verdict itself, on outputs made up on the host: GPT-2's GELU with a
// hardware tanh's error (2^-11 relative on tanh) passes; one wrong saved
// pre-activation, one NaN or a sign error in the gradient fails.
TEST(GeluEpilogueJudge, ToleranceAndFailures) {
  const std::vector<float> x = gelu_check_inputs();
  ASSERT_EQ(x.size(), 384u);
  EXPECT_EQ(x.front(), -6.f);
  EXPECT_EQ(x.back(), 6.f - 1.f / 32);
  std::vector<float> fwd(x.size()), bwd(x.size()), fast(x.size()), one(x.size(), 1.f);
  cpu::gelu_forward(fwd.data(), x.data(), int64_t(x.size()));
  cpu::gelu_backward(bwd.data(), x.data(), one.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double k = 0.7978845608028654, u = k * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    fast[i] = float(0.5 * x[i] * (1 + std::tanh(u) * (1 + ((i % 2) ? 1 : -1) * std::ldexp(1.0, -11))));
  }
  for (bool is_bf16 : {false, true}) {
    SCOPED_TRACE(is_bf16 ? "bf16" : "fp32");
    const std::vector<float> f = is_bf16 ? rounded<bf16>(fwd) : fwd, b = is_bf16 ? rounded<bf16>(bwd) : bwd;
    GeluEpilogueCheck c = judge_gelu_epilogue(x, x, f, b, is_bf16);
    EXPECT_EQ(c.result, GeluEpilogueCheck::Result::kMatches) << describe(c, is_bf16);
    EXPECT_EQ(c.closest, "tanh");
    EXPECT_LE(c.forward_error, is_bf16 ? 0.05 : 1e-6);  // bf16: at most an ulp (0.03 at 6) of rounding
    c = judge_gelu_epilogue(x, x, is_bf16 ? rounded<bf16>(fast) : fast, b, is_bf16);
    EXPECT_EQ(c.result, GeluEpilogueCheck::Result::kMatches) << describe(c, is_bf16);
    if (!is_bf16) {
      EXPECT_GT(c.forward_error, 1e-4);
    }
    std::vector<float> wrong = x;
    wrong[100] += 1.f / 32;
    c = judge_gelu_epilogue(x, wrong, f, b, is_bf16);
    EXPECT_EQ(c.result, GeluEpilogueCheck::Result::kDiffers);
    EXPECT_FALSE(c.pre_activation_exact);
    EXPECT_NE(describe(c, is_bf16).find("pre-activation is wrong"), std::string::npos) << describe(c, is_bf16);
    wrong = f;
    wrong[7] = std::nanf("");
    EXPECT_EQ(judge_gelu_epilogue(x, x, wrong, b, is_bf16).result, GeluEpilogueCheck::Result::kDiffers);
    wrong = b;
    for (float& v : wrong) v = -v;
    c = judge_gelu_epilogue(x, x, f, wrong, is_bf16);
    EXPECT_EQ(c.result, GeluEpilogueCheck::Result::kDiffers);
    EXPECT_NE(describe(c, is_bf16).find("do not compute GPT-2's GELU"), std::string::npos) << describe(c, is_bf16);
  }
}

// The bias gradient through cuBLASLt's BGRADB epilogue of the dW product
// (set_bias_grad_epilogue): dbias and dW equal the CPU's and the kernel
// path's, added into what they held (the epilogue overwrites its vector),
// with the epilogue taking every bias gradient after its check passes
// (twice: dbias accumulates over micro-batches), and nothing changing where
// only one of dW and dbias is wanted. A library whose epilogue adds to its
// vector, sums the wrong operand or has no algorithm fails the check (a
// check that always passed would fail those dbias values), as does one
// whose call refuses the epilogue's arguments, and the kernel computes the
// same values.
TYPED_TEST(EmulatedMatmul, BiasGradientEpilogue) {
  using T = TypeParam;
  using R = Matmul::BiasGradCheck;
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 60);
  const auto dout = rounded<T>(randn(kN * OC, 1.f, 63));
  const auto dw0 = rounded<T>(randn(OC * kC, 1.f, 64)), db0 = rounded<T>(randn(OC, 1.f, 65));
  std::vector<float> dx(kN * kC), dw = dw0, db = db0;
  for (int micro = 0; micro < 2; ++micro)
    cpu::linear_backward(dx.data(), dw.data(), db.data(), dout.data(), l.x.data(), l.w.data(), kN, kC, OC);
  struct Case {
    const char* name;
    bool adds, sums_a, refused, refused_at_call;
    R want;
  };
  for (const Case& k : {Case{"as documented", false, false, false, false, R::kExact},
                        Case{"adds to its vector", true, false, false, false, R::kDiffers},
                        Case{"sums A", false, true, false, false, R::kDiffers},
                        Case{"no algorithm", false, false, true, false, R::kNoAlgorithm},
                        Case{"refused at the call", false, false, false, true, R::kNoAlgorithm}}) {
    SCOPED_TRACE(k.name);
    host_cublaslt::hooks() = {};
    host_cublaslt::hooks().bgradb_adds = k.adds;
    host_cublaslt::hooks().bgradb_sums_a = k.sums_a;
    host_cublaslt::hooks().refuse_bgradb_heuristic = k.refused;
    host_cublaslt::hooks().refuse_bgradb_matmul = k.refused_at_call;
    Matmul mm(&this->alloc);
    mm.set_bias_grad_epilogue(true);
    EXPECT_EQ(mm.bias_grad_check<T>(), R::kNotRun);
    Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), go(&this->alloc, dout), gdx(&this->alloc, kN * kC);
    Buf<T> gdw(&this->alloc, dw0), gdb(&this->alloc, db0), only_dw(&this->alloc, dw0), only_db(&this->alloc, db0);
    for (int micro = 0; micro < 2; ++micro)
      mm.linear_backward<T>(gdx.data(), gdw.data(), gdb.data(), go.data(), x.data(), w.data(), kN, kC, OC, nullptr);
    EXPECT_EQ(mm.bias_grad_check<T>(), k.want);
    EXPECT_EQ(mm.epilogue_bias_grads(), k.want == R::kExact ? 2 : 0);
    EXPECT_LE(rel_error(gdx.values(), dx), tolerance<T>()) << "dinp";
    EXPECT_LE(rel_error(gdw.values(), dw), tolerance<T>()) << "dW";
    EXPECT_LE(rel_error(gdb.values(), db), tolerance<T>()) << "dbias";
    // One of the two: no epilogue (it needs the dW product), the same values as the kernel path.
    mm.linear_backward<T>(nullptr, only_dw.data(), nullptr, go.data(), x.data(), w.data(), kN, kC, OC, nullptr);
    mm.linear_backward<T>(nullptr, nullptr, only_db.data(), go.data(), x.data(), w.data(), kN, kC, OC, nullptr);
    EXPECT_EQ(mm.epilogue_bias_grads(), k.want == R::kExact ? 2 : 0);
    std::vector<float> dw1 = dw0, db1 = db0;
    cpu::linear_backward(static_cast<float*>(nullptr), dw1.data(), db1.data(), dout.data(), l.x.data(), l.w.data(),
                         kN, kC, OC);
    EXPECT_LE(rel_error(only_dw.values(), dw1), tolerance<T>()) << "dW alone";
    EXPECT_LE(rel_error(only_db.values(), db1), tolerance<T>()) << "dbias alone";
  }
}

// After the first call of a shape no descriptor is built and the heuristic
// is not asked again; a new shape or pointer alignment gets its own plan.
TYPED_TEST(EmulatedMatmul, PlansAreCached) {
  using T = TypeParam;
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 40);
  Matmul mm(&this->alloc);
  Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), b(&this->alloc, l.b), out(&this->alloc, kN * OC + 8);
  mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, OC, nullptr);
  const long asked = host_cublaslt::hooks().heuristic_calls;
  for (int i = 0; i < 3; ++i) mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, OC, nullptr);
  EXPECT_EQ(host_cublaslt::hooks().heuristic_calls, asked);
  EXPECT_EQ(mm.cached_plans(), 1u);
  mm.linear_forward<T>(out.data() + 1, x.data(), w.data(), b.data(), kN, kC, OC, nullptr);  // 2- or 4-byte aligned
  mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN - 1, kC, OC, nullptr);
  EXPECT_EQ(mm.cached_plans(), 3u);
  EXPECT_EQ(host_cublaslt::hooks().heuristic_calls, asked + 2);
}

// Autotuning (set_autotune): the heuristic offers 4 algorithms (the host
// cuBLASLt's all compute the same) and cublasLtMatmul refuses the second.
// Every product a block makes (bias, GELU_AUX_BIAS, the residual in place,
// DGELU, dW accumulated in place, twice each: the second pass untimed) gives exactly the values it
// gives untuned: the trials of an in-place accumulation must not add into
// it. Each plan is tuned once, at its first call, over the 3 algorithms
// that run, and never picks the refused one.
TYPED_TEST(EmulatedMatmul, AutotuneKeepsResults) {
  using T = TypeParam;
  const int64_t OC = 40;
  const Layer l = layer<T>(OC, 50);
  const auto res = rounded<T>(randn(kN * OC, 1.f, 53)), dout = rounded<T>(randn(kN * OC, 1.f, 54));
  const auto pre = rounded<T>(randn(kN * kC, 1.5f, 55)), dw0 = rounded<T>(randn(OC * kC, 1.f, 56));
  host_cublaslt::hooks().algorithms = 4;
  host_cublaslt::hooks().refuse_algorithm = 1;
  std::vector<std::vector<float>> got[2];
  for (int tuned = 0; tuned < 2; ++tuned) {
    Matmul mm(&this->alloc);
    mm.set_autotune(tuned ? 4 : 0);
    Buf<T> x(&this->alloc, l.x), w(&this->alloc, l.w), b(&this->alloc, l.b), r(&this->alloc, res);
    Buf<T> go(&this->alloc, dout), gp(&this->alloc, pre), out(&this->alloc, kN * OC), act(&this->alloc, kN * OC);
    Buf<T> gdx(&this->alloc, kN * kC), gdw(&this->alloc, dw0), gdb(&this->alloc, OC);
    for (int pass = 0; pass < 2; ++pass) {
      mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, OC, nullptr);
      got[tuned].push_back(out.values());
      mm.linear_forward<T>(out.data(), x.data(), w.data(), b.data(), kN, kC, OC, nullptr, act.data());
      got[tuned].push_back(out.values());
      got[tuned].push_back(act.values());
      mm.linear_residual_forward<T>(r.data(), x.data(), w.data(), b.data(), r.data(), kN, kC, OC, nullptr);
      got[tuned].push_back(r.values());
      mm.linear_backward<T>(gdx.data(), gdw.data(), gdb.data(), go.data(), x.data(), w.data(), kN, kC, OC, nullptr,
                            gp.data());
      got[tuned].push_back(gdx.values());
      got[tuned].push_back(gdw.values());
      got[tuned].push_back(gdb.values());
    }
    EXPECT_EQ(mm.fused_gelu_calls(), 4) << "the GELU epilogues stay fused";
    if (!tuned) {
      EXPECT_TRUE(mm.tune_results().empty());
      continue;
    }
    // Plans: bias (the residual's too: beta is the call's, not the plan's),
    // GELU aux, DGELU, dW accumulated in place, and the GELU epilogue
    // check's two small products (gelu_epilogue_check.hpp).
    ASSERT_EQ(mm.tune_results().size(), 6u);
    for (const Matmul::TuneResult& t : mm.tune_results()) {
      SCOPED_TRACE(testing::Message() << "m " << t.m << " n " << t.n << " k " << t.k << " epilogue " << t.epilogue);
      EXPECT_EQ(t.candidates, 4);
      EXPECT_EQ(t.timed, 3);
      EXPECT_NE(t.picked, 1);
      EXPECT_GE(t.picked, 0);
      EXPECT_GE(t.best_ms, 0.f);
      EXPECT_LE(t.best_ms, t.first_ms);
    }
  }
  ASSERT_EQ(got[0].size(), got[1].size());
  for (size_t i = 0; i < got[0].size(); ++i) EXPECT_EQ(got[0][i], got[1][i]) << "product " << i;
}

}  // namespace
}  // namespace gpt::cuda
