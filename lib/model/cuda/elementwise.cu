#include "model/cuda/check.hpp"
#include "model/cuda/dtype.cuh"
#include "model/cuda/elementwise.hpp"

namespace gpt::cuda {
namespace {

constexpr int kSumBlocks = 512;
constexpr int kSumThreads = 256;

__device__ __forceinline__ double f64(float x) { return x; }
__device__ __forceinline__ double f64(bf16 x) { return __bfloat162float(x); }

template <typename To, typename From>
__global__ void convert_kernel(To* dst, const From* src, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = store<To>(f32(src[i]));
}

template <typename Acc, typename Src>
__global__ void accumulate_kernel(Acc* acc, const Src* src, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] = store<Acc>(f32(acc[i]) + f32(src[i]));
}

template <typename T, bool kSquare>
__global__ void sum_kernel(const T* x, int64_t n, double* partial) {
  __shared__ double part[kSumThreads];
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double v = f64(x[i]);
    s += kSquare ? v * v : v;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kSumThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

__global__ void sum_partials_kernel(const double* partial, int n, double* out) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += partial[i];
  *out += s;
}

unsigned grid_for(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return unsigned(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

}  // namespace

template <typename To, typename From>
void convert(To* dst, const From* src, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  convert_kernel<<<grid_for(n), 256, 0, s>>>(dst, src, n);
  GPT_CUDA_LAUNCHED();
}

template <typename Acc, typename Src>
void accumulate(Acc* acc, const Src* src, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n), 256, 0, s>>>(acc, src, n);
  GPT_CUDA_LAUNCHED();
}

int64_t sum_squares_scratch() { return kSumBlocks; }

namespace {

// *out += sum of x[i] (squared with kSquare): per-block partials, then one
// thread adds them in block order.
template <typename T, bool kSquare>
void sum_into(const T* x, int64_t n, double* out, double* scratch, cudaStream_t s) {
  if (n == 0) return;
  sum_kernel<T, kSquare><<<kSumBlocks, kSumThreads, 0, s>>>(x, n, scratch);
  GPT_CUDA_LAUNCHED();
  sum_partials_kernel<<<1, 1, 0, s>>>(scratch, kSumBlocks, out);
  GPT_CUDA_LAUNCHED();
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
template void convert<bf16, bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void accumulate<float, float>(float*, const float*, int64_t, cudaStream_t);
template void accumulate<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void accumulate<bf16, bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void accumulate<bf16, float>(bf16*, const float*, int64_t, cudaStream_t);
template void sum_squares<float>(const float*, int64_t, double*, double*, cudaStream_t);
template void sum_squares<bf16>(const bf16*, int64_t, double*, double*, cudaStream_t);

}  // namespace gpt::cuda
