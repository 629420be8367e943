// The C++ model against PyTorch (tests/reference/make_golden.py): logits,
// loss, every parameter gradient, and 5 AdamW steps with clipping active.
//
// Tolerances (both sides fp32, different summation orders): fp32 has a unit
// round-off of 6e-8 and the longest reductions here have ~64 terms, so
// honest differences are ~1e-6 relative to a tensor's scale. We allow 2e-5
// relative to each tensor's largest magnitude; a wrong formula (a missing
// term, a transposed weight, an off-by-one mask) is off by O(1) of it. The
// AdamW trajectory gets 1e-4 relative on losses and norms. Final parameters
// get 1% of one step (lr) absolute: Adam divides by sqrt(v), which amplifies
// the ~1e-6 gradient noise of small elements (seen: 2.3e-5), while a real
// mistake is larger: dropping weight decay alone moves the biggest weights by
// 5 * lr * wd * |p| ~ 4e-4, a wrong bias correction by O(lr) = 1e-2.
#include <gtest/gtest.h>

#include <cmath>

#include "model/gpt.hpp"
#include "ref_file.hpp"
#include "strategies/model_state.hpp"

namespace gpt {
namespace {

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

// Compares `got` with `want` elementwise within rel * max|want| (+ a tiny floor).
void expect_close(const float* got, const std::vector<float>& want, double rel, const std::string& what) {
  const double tol = rel * std::max(1e-3f, max_abs(want));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "]";
    const double d = std::abs(double(got[i]) - want[i]);
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, tol) << what << ": worst |diff| " << worst << " at " << at << " (got " << got[at] << ", want "
                        << want[at] << ")";
}

class Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    ref = ref::read_ref(GPT_GOLDEN_FILE);
    const auto& m = ref.meta;
    cfg = GPTConfig{m["n_layer"], m["n_head"], m["n_embd"], m["n_ctx"], m["vocab_size"]};
    B = m["B"];
    T = m["T"];
    layout = std::make_unique<ParamLayout>(cfg);
    state = std::make_unique<ReplicatedState>(*layout, 0, &mem);
    for (size_t u = 0; u < layout->num_units(); ++u) {
      float* p = state->params(u);
      std::fill(p, p + layout->unit(u).numel, 0.f);  // wte's padded rows: zero
      for (const TensorSpec& t : layout->unit(u).tensors) {
        const auto& a = ref.arrays.at("param." + t.name).f32;
        std::copy(a.begin(), a.end(), p + t.offset);
      }
    }
    model = std::make_unique<GPT<float>>(*layout, GPTOptions{B, T, false, 7}, &mem);  // 7-row chunks
  }
  double step_loss() {
    return forward_backward<float>(*model, state->params(), state->grads(), ref.arrays["tokens"].i32.data(),
                                   ref.arrays["targets"].i32.data(), 1.f / float(B * T));
  }
  // Each tensor within rel * its max magnitude, or within abs when abs > 0.
  void compare_params(const std::string& prefix, bool grads, double rel, double abs = 0) {
    for (size_t u = 0; u < layout->num_units(); ++u) {
      const float* base = grads ? state->grads(u) : state->params(u);
      for (const TensorSpec& t : layout->unit(u).tensors) {
        const auto& want = ref.arrays.at(prefix + t.name).f32;
        expect_close(base + t.offset, want, abs > 0 ? abs / std::max(1e-3f, max_abs(want)) : rel, prefix + t.name);
      }
    }
  }

  ref::RefFile ref;
  GPTConfig cfg;
  int B = 0, T = 0;
  MemoryTracker mem;
  std::unique_ptr<ParamLayout> layout;
  std::unique_ptr<ReplicatedState> state;
  std::unique_ptr<GPT<float>> model;
};

TEST_F(Golden, LogitsLossAndEveryGradientMatchPyTorch) {
  state->zero_grads();
  const double loss = step_loss();
  EXPECT_NEAR(loss, ref.arrays["loss"].f32[0], 2e-5 * ref.arrays["loss"].f32[0]);
  compare_params("grad.", true, 2e-5);
  std::vector<float> logits(B * T * cfg.vocab_size), row(cfg.padded_vocab());
  for (int r = 0; r < B * T; ++r) {
    model->logits_row(state->params()[layout->final_unit()], state->params()[layout->embedding_unit()], r,
                      row.data());
    std::copy(row.begin(), row.begin() + cfg.vocab_size, logits.begin() + r * cfg.vocab_size);
  }
  expect_close(logits.data(), ref.arrays["logits"].f32, 2e-5, "logits");
}

TEST_F(Golden, FiveAdamWStepsWithClippingMatchPyTorch) {
  const auto& m = ref.meta;
  AdamWHyper h{m["beta1"], m["beta2"], m["eps"], m["weight_decay"]};
  const float lr = m["lr"], clip = m["clip"];
  const auto& want_loss = ref.arrays["step_losses"].f32;
  const auto& want_norm = ref.arrays["step_grad_norms"].f32;
  for (int s = 0; s < int(m["steps"]); ++s) {
    state->zero_grads();
    const double loss = step_loss();
    const double norm = state->grad_norm();
    EXPECT_NEAR(loss, want_loss[s], 1e-4 * want_loss[s]) << "step " << s;
    EXPECT_NEAR(norm, want_norm[s], 1e-4 * want_norm[s]) << "step " << s;
    ASSERT_GT(norm, clip) << "the reference keeps clipping active";
    state->step(h, {lr, s + 1, clip_scale(norm, clip)});
  }
  compare_params("final.", false, 0, 0.01 * lr);
}

}  // namespace
}  // namespace gpt
