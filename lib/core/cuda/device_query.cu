#include "core/cuda/device_query.hpp"

#include <cuda_runtime.h>

#include <stdexcept>

namespace gpt::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

namespace {
cudaDeviceProp properties(int i) {
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, i);
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err));
  }
  return prop;
}
}  // namespace

std::string device_name(int i) { return properties(i).name; }

int64_t device_memory(int i) { return int64_t(properties(i).totalGlobalMem); }

std::string device_uuid(int i) {
  const cudaDeviceProp prop = properties(i);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char c : prop.uuid.bytes) {
    out += hex[(static_cast<unsigned char>(c) >> 4) & 15];
    out += hex[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

}  // namespace gpt::cuda
