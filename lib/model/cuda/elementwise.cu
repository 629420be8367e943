// Launchers of the small device ops (elementwise_kernels.cuh).
#include "model/cuda/launch.cuh"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/elementwise_kernels.cuh"

namespace gpt::cuda {

using namespace detail::elementwise_impl;

template <typename To, typename From>
void convert(To* dst, const From* src, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  detail::launch_kernel(convert_kernel<To, From>, grid_for(n), kThreads, 0, s, dst, src, n);
}

template <typename Acc, typename Src>
void accumulate(Acc* acc, const Src* src, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  detail::launch_kernel(accumulate_kernel<Acc, Src>, grid_for(n), kThreads, 0, s, acc, src, n);
}

int64_t sum_squares_scratch() { return kSumBlocks; }

namespace {

// *out += sum of x[i] (squared with kSquare): per-block partials, then one
// block adds them in a fixed order.
template <typename T, bool kSquare>
void sum_into(const T* x, int64_t n, double* out, double* scratch, cudaStream_t s) {
  if (n == 0) return;
  const bool vec = vector_width<T>(kVec<T>, {x}) > 1;
  detail::launch_kernel(sum_kernel<T, kSquare>, kSumBlocks, kSumThreads, 0, s, x, n, scratch, vec);
  detail::launch_kernel(sum_partials_kernel, 1, kSumThreads, 0, s, scratch, kSumBlocks, out);
}

}  // namespace

template <typename T>
void sum_squares(const T* x, int64_t n, double* out, double* scratch, cudaStream_t s) {
  sum_into<T, true>(x, n, out, scratch, s);
}

void sum_values(const float* x, int64_t n, double* out, double* scratch, cudaStream_t s) {
  sum_into<float, false>(x, n, out, scratch, s);
}

template void convert<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void convert<bf16, float>(bf16*, const float*, int64_t, cudaStream_t);
template void convert<float, float>(float*, const float*, int64_t, cudaStream_t);
template void convert<float, double>(float*, const double*, int64_t, cudaStream_t);
template void accumulate<float, float>(float*, const float*, int64_t, cudaStream_t);
template void accumulate<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void sum_squares<float>(const float*, int64_t, double*, double*, cudaStream_t);
template void sum_squares<bf16>(const bf16*, int64_t, double*, double*, cudaStream_t);

}  // namespace gpt::cuda
