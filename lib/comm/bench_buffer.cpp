#include "comm/bench_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/bf16.hpp"
#include "core/error.hpp"
#ifdef GPT_HAVE_NCCL
#include <cuda_runtime.h>
#endif

namespace gpt {

namespace {
std::vector<char> to_bytes(const std::vector<float>& src, DType t) {
  std::vector<char> out(src.size() * dtype_size(t));
  if (t == DType::kF32) {
    std::memcpy(out.data(), src.data(), out.size());
  } else {
    auto* p = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < src.size(); ++i) p[i] = f32_to_bf16(src[i]);
  }
  return out;
}
}  // namespace

BenchBuffers::BenchBuffers(bool device, size_t bytes) : device_(device) {
  if (device_) {
#ifdef GPT_HAVE_NCCL
    if (cudaMalloc(&send_, bytes) != cudaSuccess || cudaMalloc(&recv_, bytes) != cudaSuccess)
      throw Error(fmt::format("cudaMalloc of 2 x {} bytes failed", bytes));
#else
    throw ConfigError("device buffers need a CUDA build");
#endif
  } else {
    send_ = std::malloc(bytes);
    recv_ = std::malloc(bytes);
    if (!send_ || !recv_) throw std::bad_alloc();
    std::memset(send_, 0, bytes);
    std::memset(recv_, 0, bytes);
  }
}

BenchBuffers::~BenchBuffers() {
#ifdef GPT_HAVE_NCCL
  if (device_) {
    cudaFree(send_);
    cudaFree(recv_);
    return;
  }
#endif
  std::free(send_);
  std::free(recv_);
}

void BenchBuffers::upload(void* dst, const std::vector<float>& src, DType t) {
  const auto bytes = to_bytes(src, t);
#ifdef GPT_HAVE_NCCL
  if (device_) {
    cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    return;
  }
#endif
  std::memcpy(dst, bytes.data(), bytes.size());
}

std::vector<float> BenchBuffers::download(const void* src, size_t count, DType t) {
  std::vector<char> bytes(count * dtype_size(t));
#ifdef GPT_HAVE_NCCL
  if (device_) {
    cudaDeviceSynchronize();
    cudaMemcpy(bytes.data(), src, bytes.size(), cudaMemcpyDeviceToHost);
  } else {
    std::memcpy(bytes.data(), src, bytes.size());
  }
#else
  std::memcpy(bytes.data(), src, bytes.size());
#endif
  std::vector<float> out(count);
  if (t == DType::kF32) {
    std::memcpy(out.data(), bytes.data(), bytes.size());
  } else {
    const auto* p = reinterpret_cast<const uint16_t*>(bytes.data());
    for (size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(p[i]);
  }
  return out;
}

void BenchBuffers::synchronize() {
#ifdef GPT_HAVE_NCCL
  if (device_) cudaDeviceSynchronize();
#endif
}

}  // namespace gpt
