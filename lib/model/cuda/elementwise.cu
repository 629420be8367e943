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

int64_t sum_squares_scratch() { return kSumBlocks + 1; }  // the partials, then the arrival counter

namespace {

// *out += sum of the arrays' elements (squared with kSquare): one launch per
// kMaxSegments arrays, in list order; empty arrays are left out.
template <typename T, bool kSquare>
void sum_into(const T* const* xs, const int64_t* ns, int count, double* out, double* scratch, cudaStream_t s) {
  Segments<T> segs{};
  auto launch = [&] {
    if (segs.count == 0) return;
    detail::launch_kernel(sum_kernel<T, kSquare>, kSumBlocks, kSumThreads, 0, s, segs, scratch,
                          reinterpret_cast<unsigned*>(scratch + kSumBlocks), out);
    segs.count = 0;
  };
  for (int i = 0; i < count; ++i) {
    if (ns[i] == 0) continue;
    segs.x[segs.count] = xs[i];
    segs.n[segs.count] = ns[i];
    if (++segs.count == kMaxSegments) launch();
  }
  launch();
}

}  // namespace

template <typename T>
void sum_squares(const T* const* xs, const int64_t* ns, int count, double* out, double* scratch, cudaStream_t s) {
  sum_into<T, true>(xs, ns, count, out, scratch, s);
}

template <typename T>
void sum_squares(const T* x, int64_t n, double* out, double* scratch, cudaStream_t s) {
  sum_into<T, true>(&x, &n, 1, out, scratch, s);
}

void sum_values(const float* x, int64_t n, double* out, double* scratch, cudaStream_t s) {
  sum_into<float, false>(&x, &n, 1, out, scratch, s);
}

template void convert<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void convert<bf16, float>(bf16*, const float*, int64_t, cudaStream_t);
template void convert<float, float>(float*, const float*, int64_t, cudaStream_t);
template void convert<float, double>(float*, const double*, int64_t, cudaStream_t);
template void accumulate<float, float>(float*, const float*, int64_t, cudaStream_t);
template void accumulate<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void accumulate<bf16, bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void sum_squares<float>(const float*, int64_t, double*, double*, cudaStream_t);
template void sum_squares<bf16>(const bf16*, int64_t, double*, double*, cudaStream_t);
template void sum_squares<float>(const float* const*, const int64_t*, int, double*, double*, cudaStream_t);
template void sum_squares<bf16>(const bf16* const*, const int64_t*, int, double*, double*, cudaStream_t);

}  // namespace gpt::cuda
