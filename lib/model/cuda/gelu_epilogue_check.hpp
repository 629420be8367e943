// Whether cuBLASLt's GELU epilogues compute the GELU this model is defined
// with. GPT-2 (and our CPU reference and GELU kernel, model/cpu/gelu.hpp)
// uses the tanh approximation; cuBLASLt documents GELU_AUX_BIAS and DGELU
// without saying which formula they evaluate, and a library version or GPU
// could change it. So before the first fused GELU of each storage type, the
// Matmul (matmul.hpp) runs both epilogues on pre-activations x that sweep
// [-6, 6) in steps of 1/32 (exact in bf16 and fp32, so the products are exact
// and only the epilogue is measured) and judges the results here. Fusion is
// used only if they match; otherwise the GELU kernel does the work and a
// warning says how far cuBLASLt's GELU was and which known formula it is
// closest to.
//
// "Match" is a tolerance, not bit equality: |got - gelu_tanh(x)| at most
// 3e-3 + 2^-7 |gelu_tanh(x)|, forward and gradient alike. It admits a
// hardware tanh (tanh.approx.f32: relative error 2^-11, up to 1.5e-3 in GELU
// on this range), the exact erf form (4.7e-4 from the tanh form, 8.7e-4 in
// the gradient; below bf16's rounding, 2^-9) and one bf16 ulp (2^-7 relative
// at most) of rounding; it rejects x sigmoid(1.702 x) (2.1e-2 off near
// x = -2.5, 2.9e-2 in the gradient), a wrong sign, scale or layout. The
// forward's saved pre-activation must equal x exactly.
#pragma once

#include <string>
#include <vector>

namespace gpt::cuda {

struct GeluEpilogueCheck {
  enum class Result {
    kNotRun,       // no fused GELU asked for in this type yet
    kMatches,      // within tolerance of GPT-2's GELU: fusion on
    kDiffers,      // fusion off, the GELU kernel runs instead
    kNoAlgorithm,  // cuBLASLt has no fused algorithm at the check's shape: fusion off
  };
  Result result = Result::kNotRun;
  double forward_error = 0, backward_error = 0;  // max |got - tanh form| over the sweep
  bool pre_activation_exact = true;              // aux == x everywhere
  std::string closest;                           // "tanh", "erf" or "sigmoid(1.702x)"
};

// "not_run", "matches", "differs", "no_algorithm" (for JSON).
const char* to_string(GeluEpilogueCheck::Result r);

// The pre-activations of the check: -6 to 6 - 1/32 in steps of 1/32 (384).
std::vector<float> gelu_check_inputs();

// The verdict on cuBLASLt's outputs for x = gelu_check_inputs(): pre (the
// saved pre-activation), fwd (GELU(x)) and bwd (GELU'(x), the DGELU epilogue
// with an incoming gradient of 1), read back widened from storage type bf16
// or fp32 (the references are rounded the same way).
GeluEpilogueCheck judge_gelu_epilogue(const std::vector<float>& x, const std::vector<float>& pre,
                                      const std::vector<float>& fwd, const std::vector<float>& bwd, bool bf16);

// One line for the log: the verdict, both errors, the closest formula.
std::string describe(const GeluEpilogueCheck& c, bool bf16);

}  // namespace gpt::cuda
