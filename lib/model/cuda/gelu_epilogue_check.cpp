// The judgement of the GELU epilogue check (gelu_epilogue_check.hpp).
#include "model/cuda/gelu_epilogue_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/bf16.hpp"
#include "core/error.hpp"

namespace gpt::cuda {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654, kCoeff = 0.044715;

// The candidate formulas, value and derivative, in double.
struct Formula {
  const char* name;
  double (*value)(double);
  double (*grad)(double);
};
double tanh_value(double x) { return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + kCoeff * x * x * x))); }
double tanh_grad(double x) {
  const double th = std::tanh(kSqrt2OverPi * (x + kCoeff * x * x * x));
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * kSqrt2OverPi * (1 + 3 * kCoeff * x * x);
}
double erf_value(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double erf_grad(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
double sigmoid_value(double x) { return x / (1 + std::exp(-1.702 * x)); }
double sigmoid_grad(double x) {
  const double s = 1 / (1 + std::exp(-1.702 * x));
  return s + 1.702 * x * s * (1 - s);
}
constexpr std::array<Formula, 3> kFormulas{{{"tanh", tanh_value, tanh_grad},
                                            {"erf", erf_value, erf_grad},
                                            {"sigmoid(1.702x)", sigmoid_value, sigmoid_grad}}};

constexpr double kAbsTol = 3e-3, kRelTol = 1.0 / 128;

double stored(double v, bool bf16) { return bf16 ? bf16_to_f32(f32_to_bf16(float(v))) : double(float(v)); }

}  // namespace

const char* to_string(GeluEpilogueCheck::Result r) {
  using R = GeluEpilogueCheck::Result;
  switch (r) {
    case R::kNotRun:
      return "not_run";
    case R::kMatches:
      return "matches";
    case R::kDiffers:
      return "differs";
    case R::kNoAlgorithm:
      return "no_algorithm";
  }
  return "?";
}

std::vector<float> gelu_check_inputs() {
  std::vector<float> x(384);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((double(i) - 192) / 32);
  return x;
}

GeluEpilogueCheck judge_gelu_epilogue(const std::vector<float>& x, const std::vector<float>& pre,
                                      const std::vector<float>& fwd, const std::vector<float>& bwd, bool bf16) {
  GPT_CHECK(pre.size() == x.size() && fwd.size() == x.size() && bwd.size() == x.size(),
            "GELU epilogue check: outputs of the wrong size");
  GeluEpilogueCheck c;
  bool within = true;
  double best = INFINITY;
  for (const Formula& f : kFormulas) {
    double fe = 0, be = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double vf = stored(f.value(x[i]), bf16), vb = stored(f.grad(x[i]), bf16);
      const double df = std::abs(fwd[i] - vf), db = std::abs(bwd[i] - vb);
      fe = std::max(fe, std::isnan(df) ? INFINITY : df);
      be = std::max(be, std::isnan(db) ? INFINITY : db);
      if (&f == &kFormulas[0] && !(df <= kAbsTol + kRelTol * std::abs(vf) && db <= kAbsTol + kRelTol * std::abs(vb)))
        within = false;
    }
    if (&f == &kFormulas[0]) c.forward_error = fe, c.backward_error = be;
    if (std::max(fe, be) < best) best = std::max(fe, be), c.closest = f.name;
  }
  for (size_t i = 0; i < x.size(); ++i) c.pre_activation_exact = c.pre_activation_exact && pre[i] == x[i];
  c.result = within && c.pre_activation_exact ? GeluEpilogueCheck::Result::kMatches
                                              : GeluEpilogueCheck::Result::kDiffers;
  return c;
}

std::string describe(const GeluEpilogueCheck& c, bool bf16) {
  const char* type = bf16 ? "bf16" : "fp32";
  using R = GeluEpilogueCheck::Result;
  switch (c.result) {
    case R::kNotRun:
      return fmt::format("cuBLASLt GELU epilogues ({}): not checked yet", type);
    case R::kNoAlgorithm:
      return fmt::format("cuBLASLt GELU epilogues ({}): no fused algorithm for the check's product; GELU runs as "
                         "its own kernel",
                         type);
    case R::kMatches:
    case R::kDiffers:
      break;
  }
  const std::string errors =
      fmt::format("max error against GPT-2's tanh GELU {:.2g} (value), {:.2g} (gradient); closest formula: {}{}",
                  c.forward_error, c.backward_error, c.closest,
                  c.pre_activation_exact ? "" : "; the saved pre-activation is wrong");
  if (c.result == R::kMatches) return fmt::format("cuBLASLt GELU epilogues ({}) checked: {}; fused", type, errors);
  return fmt::format("cuBLASLt GELU epilogues ({}) do not compute GPT-2's GELU: {}; GELU runs as its own kernel "
                     "instead",
                     type, errors);
}

}  // namespace gpt::cuda
