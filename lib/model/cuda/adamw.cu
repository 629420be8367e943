#include <algorithm>
#include <cmath>

#include "model/cuda/adamw.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/dtype.cuh"

namespace gpt::cuda {
namespace {

struct AdamWArgs {
  float beta1, beta2, eps, decay, step_size, inv_sqrt_bc2, grad_scale;
};

template <typename G, typename T>
__global__ void adamw_kernel(float* master, T* param, const G* g, float* m, float* v, int64_t n, AdamWArgs a) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = f32(g[i]) * a.grad_scale;
    const float mi = a.beta1 * m[i] + (1.f - a.beta1) * gi;
    const float vi = a.beta2 * v[i] + (1.f - a.beta2) * gi * gi;
    const float denom = sqrtf(vi) * a.inv_sqrt_bc2 + a.eps;
    const float p = master[i] * a.decay - a.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    if (param) param[i] = store<T>(p);
  }
}

}  // namespace

template <typename G, typename T>
void adamw_update(const UnitSpec& unit, int64_t begin, int64_t end, float* master, T* param, const G* g, float* m,
                  float* v, const AdamWHyper& h, const AdamWStep& s, cudaStream_t stream) {
  // Same scalar arithmetic as the CPU update, so fp32 runs agree to rounding.
  const double bc1 = 1.0 - std::pow(double(h.beta1), double(s.t));
  const double bc2 = 1.0 - std::pow(double(h.beta2), double(s.t));
  AdamWArgs a{h.beta1, h.beta2, h.eps, 1.f, float(s.lr / bc1), float(1.0 / std::sqrt(bc2)), s.grad_scale};
  for (const TensorSpec& t : unit.tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    a.decay = t.decay ? 1.f - s.lr * h.weight_decay : 1.f;
    const int64_t o = lo - begin, n = hi - lo;
    const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 4096));
    adamw_kernel<G, T><<<blocks, 256, 0, stream>>>(master + o, param ? param + o : nullptr, g + o, m + o, v + o, n, a);
    GPT_CUDA_LAUNCHED();
  }
}

template void adamw_update<float, float>(const UnitSpec&, int64_t, int64_t, float*, float*, const float*, float*,
                                         float*, const AdamWHyper&, const AdamWStep&, cudaStream_t);
template void adamw_update<bf16, bf16>(const UnitSpec&, int64_t, int64_t, float*, bf16*, const bf16*, float*, float*,
                                       const AdamWHyper&, const AdamWStep&, cudaStream_t);
template void adamw_update<bf16, float>(const UnitSpec&, int64_t, int64_t, float*, float*, const bf16*, float*,
                                        float*, const AdamWHyper&, const AdamWStep&, cudaStream_t);
template void adamw_update<float, bf16>(const UnitSpec&, int64_t, int64_t, float*, bf16*, const float*, float*,
                                        float*, const AdamWHyper&, const AdamWStep&, cudaStream_t);

}  // namespace gpt::cuda
