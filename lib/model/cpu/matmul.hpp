// Linear layer y = x W^T + b with nn.Linear's weight layout W[OC, C].
//
// Convention for every backward in this directory: gradients of parameters
// are accumulated (+=) so micro-batches add up without a separate buffer;
// gradients of inputs are overwritten (=) because each activation has one
// consumer per backward pass (residual sums are handled by the caller).
#pragma once

#include <cstdint>

namespace gpt::cpu {

// out[N, OC] = inp[N, C] * W[OC, C]^T (+ bias[OC] if non-null). N = 1 (a
// decoding pass) goes through matvec_rows.
template <typename T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int64_t N, int64_t C, int64_t OC);

// y[rows] = W[rows, cols] x[cols], on every thread: Eigen runs its
// matrix-vector products (and a matrix product with one row) on one thread,
// which left a decoding pass's products, all of them matrix-vector, on one
// core. W is cut into fixed slices of kMatvecSlice rows (the last one
// takes a remainder under 8 rows), one thread's each; a slice's product is
// Eigen's own, so y does not depend on the thread count, and equals Eigen's
// one product over all rows bit for bit (the slices start on multiples of
// its 8-row blocks; tests/unit/test_cpu_matvec.cpp holds it to that).
inline constexpr int64_t kMatvecSlice = 256;
template <typename T>
void matvec_rows(T* y, const T* W, const T* x, int64_t rows, int64_t cols);

// dinp[N, C] = dout W;  dw[OC, C] += dout^T inp;  dbias[OC] += column sums of dout.
// dinp may be null (not needed), dbias null when the layer has no bias.
template <typename T>
void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int64_t N,
                     int64_t C, int64_t OC);

}  // namespace gpt::cpu
