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

#include <cstdint>
#include <vector>

#include "core/memory.hpp"
#include "gpu/kernel_test_util.hpp"
#include "host_cuda/host_cublaslt.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cpu/matmul.hpp"
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

}  // namespace
}  // namespace gpt::cuda
