// Launcher of the AdamW kernel (adamw_kernels.cuh).
#include "model/cuda/adamw.hpp"
#include "model/cuda/adamw_kernels.cuh"
#include "model/cuda/launch.cuh"

namespace gpt::cuda {

using namespace detail::adamw_impl;

template <typename G, typename T>
void adamw_update(const UnitSpec& unit, int64_t begin, int64_t end, float* master, T* param, const G* g, float* m,
                  float* v, const AdamWHyper& h, const AdamWStep& s, cudaStream_t stream) {
  for_each_update_launch(unit, begin, end, h, s, [&](int64_t o, int64_t n, const AdamWArgs& a, const Segments& seg) {
    T* p = param ? param + o : nullptr;
    if (adamw_width(master + o, p, g + o, m + o, v + o) == kAdamWVec)
      detail::launch_kernel(adamw_kernel<kAdamWVec, G, T>, blocks_for_update(n, kAdamWVec), kThreads, 0, stream,
                            master + o, p, g + o, m + o, v + o, n, a, seg);
    else
      detail::launch_kernel(adamw_kernel<1, G, T>, blocks_for_update(n), kThreads, 0, stream, master + o, p, g + o,
                            m + o, v + o, n, a, seg);
  });
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
