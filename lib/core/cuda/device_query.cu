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

std::string no_device_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  cudaGetLastError();
  const std::string what = std::string("no CUDA device is visible on this node (") + cudaGetErrorName(err) + ": " +
                           cudaGetErrorString(err);
  if (err == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);  // 0 without a driver
    cudaRuntimeGetVersion(&runtime);
    const auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    return what + "; " +
           (driver > 0 ? "the NVIDIA driver supports CUDA " + version(driver) + ", older than"
                       : std::string("no NVIDIA driver found here for")) +
           " this build's CUDA runtime " + version(runtime) + ")";
  }
  return what + "; check CUDA_VISIBLE_DEVICES)";
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

DeviceInfo device_info(int i) {
  const cudaDeviceProp prop = properties(i);
  static const char* hex = "0123456789abcdef";
  DeviceInfo d{prop.name, int64_t(prop.totalGlobalMem), {}, prop.multiProcessorCount};
  for (char c : prop.uuid.bytes) {
    d.uuid += hex[(static_cast<unsigned char>(c) >> 4) & 15];
    d.uuid += hex[static_cast<unsigned char>(c) & 15];
  }
  return d;
}

}  // namespace gpt::cuda
