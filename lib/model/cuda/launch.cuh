// Every kernel launch of the CUDA backend goes through launch_kernel: nvcc's
// <<<grid, block, smem, stream>>> on the GPU, checked at once (see
// check.hpp). Compiled as host C++ under tests/unit/emulated_cuda.hpp
// (GPT_EMULATED_CUDA), the same call runs the same kernel with the same grid,
// block and shared memory on the CPU, so the launchers, not only the
// kernels, are tested without a GPU. The arguments convert to the kernel's
// parameters as in any call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "model/cuda/check.hpp"

namespace gpt::cuda::detail {

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args... args) {
#ifdef GPT_EMULATED_CUDA
  // Queued on the host runtime's stream: the arguments are copied, as a launch copies them.
  emulated_cuda::launch_kernel(reinterpret_cast<const void*>(kernel), grid, block, smem, stream,
                               [=] { kernel(args...); });
#else
  kernel<<<grid, block, smem, stream>>>(args...);
#endif
  GPT_CUDA_LAUNCHED();
}

}  // namespace gpt::cuda::detail
