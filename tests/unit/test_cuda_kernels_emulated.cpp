// CUDA kernels of the LayerNorm and fused classifier ops, compiled as host
// C++ and run thread by thread by emulated_cuda.hpp, against the CPU
// reference ops, in fp32 and bf16, each with 16-byte and with scalar
// accesses. Like test_attention_emulated, this
// runs without a GPU (in CI); test_cuda_ops runs the same kernels on one.
#include "emulated_cuda.hpp"
// (must precede the kernel headers)
#include "model/cuda/classifier_kernels.cuh"
#include "model/cuda/layernorm_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "gpu/kernel_test_util.hpp"
#include "model/cpu/layernorm.hpp"

namespace gpt::cuda::detail {
namespace {

template <typename T>
std::vector<T> to(const std::vector<float>& v) {
  std::vector<T> out;
  for (float x : v) out.push_back(T(x));
  return out;
}
template <typename T>
std::vector<float> widen(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T& x : v) out.push_back(float(x));
  return out;
}

using test::randn;
using test::rounded;
using test::rel_error;

// fp32: only the order of additions differs from the CPU; bf16: the
// outputs' own rounding (2^-9 relative, about 1.1e-3 rms) plus rounded
// accumulation into bf16 gradients.
template <typename T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

template <typename T>
class EmulatedKernels : public ::testing::Test {};
using Types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(EmulatedKernels, Types);

// Both instantiations of each kernel: 16-byte accesses (kVec<T>) and 1.
template <typename T, typename Body>
void for_each_width(Body body) {
  body(std::integral_constant<int, kVec<T>>{});
  body(std::integral_constant<int, 1>{});
}

// rows: layernorm_forward_rows_kernel and layernorm_backward_rows_kernel
// (rows in registers; the backward with the launcher's chunks per lane),
// else layernorm_forward_kernel and layernorm_backward_kernel; the
// launchers pick by C / W. The two forward kernels must agree bit for bit
// (same arithmetic, same order).
template <typename T, int W>
void check_layernorm(bool rows) {
  using namespace layernorm_impl;
  SCOPED_TRACE(testing::Message() << "width " << W << (rows ? ", rows in registers" : ", partials in scratch"));
  const int64_t N = 37, C = 200;
  if (rows && C / W > 32 * kRowChunks) return;  // the launcher's rule
  // Inputs representable in T, so CPU and kernel see the same values.
  auto x0 = randn(N * C, 2.f, 1);
  for (float& v : x0) v += 3.f;  // a large mean: the two-pass variance must hold up
  const auto x = rounded<T>(x0), w = rounded<T>(randn(C, 1.f, 2));
  const auto b = rounded<T>(randn(C, 0.5f, 3)), dy = rounded<T>(randn(N * C, 1.f, 4));
  const auto dx0 = rounded<T>(randn(N * C, 1.f, 5)), dw0 = rounded<T>(randn(C, 1.f, 6));
  const auto db0 = rounded<T>(randn(C, 1.f, 7));
  std::vector<float> out(N * C), mean(N), rstd(N), dx = dx0, dw = dw0, db = db0;
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          N, C);

  auto gx = to<T>(x), gw = to<T>(w), gb = to<T>(b), gdy = to<T>(dy), gout = std::vector<T>(N * C);
  auto gdx = to<T>(dx0), gdw = to<T>(dw0), gdb = to<T>(db0);
  // NaN: every partial row the param-grad kernel reads must be written, including those of warps (scratch
  // kernel) or blocks (rows kernel) with no rows.
  std::vector<float> gmean(N), grstd(N), scratch(size_t(kBackwardWarps) * 2 * C, NAN);
  const dim3 forward_grid(unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock));
  emulated_cuda::launch(forward_grid, 32 * kRowsPerBlock, 0, [&] {
    (rows ? layernorm_forward_rows_kernel<T, W> : layernorm_forward_kernel<T, W>)(
        gout.data(), gmean.data(), grstd.data(), gx.data(), gw.data(), gb.data(), N, C);
  });
  if (rows) {
    std::vector<T> other(N * C);
    std::vector<float> other_mean(N), other_rstd(N);
    emulated_cuda::launch(forward_grid, 32 * kRowsPerBlock, 0, [&] {
      layernorm_forward_kernel<T, W>(other.data(), other_mean.data(), other_rstd.data(), gx.data(), gw.data(),
                                     gb.data(), N, C);
    });
    EXPECT_EQ(widen(other), widen(gout)) << "the two forward kernels differ";
    EXPECT_EQ(other_mean, gmean);
    EXPECT_EQ(other_rstd, grstd);
  }
  using Plan = LayerNormBackwardPlan<T>;
  const Plan plan = rows ? layernorm_backward_plan<T, W>(C) : Plan{layernorm_backward_kernel<T, W>, kBackwardWarps};
  emulated_cuda::launch(dim3(kBackwardBlocks), 32 * kBackwardWarpsPerBlock, 0, [&] {
    plan.kernel(gdx.data(), scratch.data(), gdy.data(), gx.data(), gw.data(), gmean.data(), grstd.data(), N, C);
  });
  emulated_cuda::launch(param_grad_grid(C), param_grad_block(), 0, [&] {
    layernorm_param_grad_kernel<T>(gdw.data(), gdb.data(), scratch.data(), plan.parts, C);
  });
  EXPECT_LE(rel_error(widen(gout), out), tolerance<T>()) << "out";
  EXPECT_LE(rel_error(gmean, mean), 1e-5) << "mean";
  EXPECT_LE(rel_error(grstd, rstd), 1e-5) << "rstd";
  EXPECT_LE(rel_error(widen(gdx), dx), tolerance<T>()) << "dinp accumulated";
  EXPECT_LE(rel_error(widen(gdw), dw), tolerance<T>()) << "dw accumulated";
  EXPECT_LE(rel_error(widen(gdb), db), tolerance<T>()) << "db accumulated";
}

TYPED_TEST(EmulatedKernels, LayerNormForwardBackward) {
  for (bool rows : {true, false})
    for_each_width<TypeParam>([rows](auto w) { check_layernorm<TypeParam, decltype(w)::value>(rows); });
}

// Loss per row and, in place of the logits, (softmax - onehot) * scale; the
// padded columns [V, Vp) get 0 gradient. V = 1001 ends mid-vector, so the
// last vector mixes real and padded columns. Both kernels:
// softmax_xent_kernel at both widths, and softmax_xent_rows_kernel (the row
// in registers; 16-byte vectors only), which also runs a row of 20001
// columns so that threads hold several vectors (3 in bf16, 5 in fp32) and
// the last one is partial.
enum class Xent { kStreamed, kRowsInRegisters };
template <typename T, int W>
void check_softmax_xent(Xent kernel, int64_t V, int64_t Vp) {
  using namespace classifier_impl;
  SCOPED_TRACE(testing::Message() << "width " << W << (kernel == Xent::kRowsInRegisters ? ", rows kernel" : "")
                                  << ", V " << V);
  const int64_t rows = 5;
  const float scale = 0.125f;
  const auto logits = rounded<T>(randn(rows * Vp, 3.f, 8));
  std::vector<int32_t> targets = {0, int32_t(V - 1), 17, int32_t(V / 2), 3};
  std::vector<float> loss(rows), grad(rows * Vp, 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; ++j) m = std::max(m, double(logits[r * Vp + j]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(logits[r * Vp + j] - m);
    const double lse = m + std::log(s);
    loss[r] = float(lse - logits[r * Vp + targets[r]]);
    for (int64_t j = 0; j < V; ++j)
      grad[r * Vp + j] = float((std::exp(logits[r * Vp + j] - lse) - (j == targets[r] ? 1 : 0)) * scale);
  }
  for (bool with_grad : {false, true}) {
    auto g = to<T>(logits);
    std::vector<float> glosses(rows);
    if (kernel == Xent::kRowsInRegisters) {
      ASSERT_LE(Vp, max_row_columns<T>());
      emulated_cuda::launch(dim3(unsigned(rows)), kRowThreads, 0, [&] {
        softmax_xent_rows_kernel<T>(g.data(), glosses.data(), targets.data(), V, Vp, with_grad, scale);
      });
    } else {
      emulated_cuda::launch(dim3(unsigned(rows)), kThreads, 0, [&] {
        softmax_xent_kernel<T, W>(g.data(), glosses.data(), targets.data(), V, Vp, with_grad, scale);
      });
    }
    EXPECT_LE(rel_error(glosses, loss), 1e-5) << "losses";
    EXPECT_LE(rel_error(widen(g), with_grad ? grad : logits), tolerance<T>()) << (with_grad ? "gradient" : "logits");
  }
}

TYPED_TEST(EmulatedKernels, SoftmaxCrossEntropyKernel) {
  for_each_width<TypeParam>(
      [](auto w) { check_softmax_xent<TypeParam, decltype(w)::value>(Xent::kStreamed, 1001, 1024); });
}

TYPED_TEST(EmulatedKernels, SoftmaxCrossEntropyRowsKernel) {
  constexpr int W = kVec<TypeParam>;
  check_softmax_xent<TypeParam, W>(Xent::kRowsInRegisters, 1001, 1024);
  check_softmax_xent<TypeParam, W>(Xent::kRowsInRegisters, 20001, 20032);
}

// The launchers' choice: 16-byte accesses only when the row length is a
// multiple of the vector and every pointer is 16-byte aligned.
TYPED_TEST(EmulatedKernels, VectorWidthChoice) {
  using T = TypeParam;
  alignas(16) T buf[2 * kVec<T>] = {};
  EXPECT_EQ(vector_width<T>(25 * kVec<T>, {buf, buf + kVec<T>}), kVec<T>);
  EXPECT_EQ(vector_width<T>(25 * kVec<T> + 1, {buf}), 1) << "row length not a multiple";
  EXPECT_EQ(vector_width<T>(25 * kVec<T>, {buf, buf + 1}), 1) << "a misaligned pointer";
}

}  // namespace
}  // namespace gpt::cuda::detail
