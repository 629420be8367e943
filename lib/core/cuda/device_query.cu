#include "core/cuda/device_query.hpp"

#include "core/cuda_code.hpp"

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

// Compiled like every kernel of the backend, so whether the device runs it
// says whether the build has code for the device.
__global__ void probe_kernel() {}

std::string build_cuda_architectures() {
#ifdef GPT_CUDA_ARCHITECTURES
  return GPT_CUDA_ARCHITECTURES;
#else
  return "unknown";
#endif
}

std::string driver_compiled_code_note(int i) {
  const cudaDeviceProp prop = properties(i);
  const std::string archs = build_cuda_architectures();
  const std::string ptx = driver_compiled_ptx(archs, prop.major, prop.minor);
  if (ptx.empty()) return "";
  return "GPU " + std::to_string(i) + " (" + prop.name + ", compute capability " + std::to_string(prop.major) + "." +
         std::to_string(prop.minor) + ") has no code of its own in this build (CUDA architectures " + archs +
         "): its driver compiles the build's sm_" + ptx +
         " PTX for it as each kernel first loads (the first steps are slower, once: the driver keeps the result, "
         "CUDA_CACHE_PATH); a build configured on a machine with this GPU has its own (scripts/build.sh)";
}

std::string device_unusable_reason(int i) {
  const cudaDeviceProp prop = properties(i);
  const std::string cc = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  const std::string gpu = "GPU " + std::to_string(i) + " (" + prop.name + ", compute capability " + cc + ")";
  if (prop.major < 8)
    return gpu + " is too old for --device cuda, which needs compute capability 8.0 or newer (bf16 tensor cores): "
                 "an A100, A10, L4, L40S, H100, H200, B200 or newer";
  int current = 0;
  cudaGetDevice(&current);
  cudaSetDevice(i);
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(probe_kernel));
  cudaGetLastError();  // not sticky, but clear it for the next caller
  cudaSetDevice(current);
  if (err == cudaSuccess) return "";
  const std::string rebuild = "rebuild with scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=" +
                              std::to_string(prop.major) + std::to_string(prop.minor);
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction)
    return "this build has no CUDA code for " + gpu + " (" + cudaGetErrorName(err) + "): it was built for CUDA " +
           "architectures " + build_cuda_architectures() + "; " + rebuild;
  return "CUDA cannot run this build's code on " + gpu + " (" + cudaGetErrorName(err) + ": " +
         cudaGetErrorString(err) + "; built for CUDA architectures " + build_cuda_architectures() + "); " + rebuild;
}

}  // namespace gpt::cuda
