// Linear layer y = x W^T + b with nn.Linear's weight layout W[OC, C].
//
// Convention for every backward in this directory: gradients of parameters
// are accumulated (+=) so micro-batches add up without a separate buffer;
// gradients of inputs are overwritten (=) because each activation has one
// consumer per backward pass (residual sums are handled by the caller).
#pragma once

#include <cstdint>

namespace gpt::cpu {

// out[N, OC] = inp[N, C] * W[OC, C]^T (+ bias[OC] if non-null).
template <typename T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int64_t N, int64_t C, int64_t OC);

// dinp[N, C] = dout W;  dw[OC, C] += dout^T inp;  dbias[OC] += column sums of dout.
// dinp may be null (not needed), dbias null when the layer has no bias.
template <typename T>
void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int64_t N,
                     int64_t C, int64_t OC);

}  // namespace gpt::cpu
