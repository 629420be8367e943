// A host implementation of the CUDA runtime calls the CUDA backend makes
// (device queries, memory, copies, streams, events, launch checks), for
// tests without a GPU: link this instead of libcudart. "Device" memory is
// host memory with cudaMalloc's 256-byte alignment, filled with 0xFF (NaN in
// fp32 and bf16) so a read of memory nothing wrote poisons results; streams
// and events are in host_streams.cpp. host_cuda::set_device_memory() gives
// the "device" a capacity, for out-of-memory tests.
#include "host_cuda_runtime.hpp"

#include <cuda_runtime.h>

#include "emulated_cuda.hpp"
#include "api_log.hpp"
#include "host_streams.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

// Thread-safe like the real runtime: the MPI communicator's progress
// thread stages device buffers (pointer queries, copies) while the main
// thread allocates. The last error is per host thread, as in CUDA.
namespace {
thread_local cudaError_t g_last = cudaSuccess;
std::mutex g_mu;  // guards everything below
size_t g_capacity = size_t(-1), g_used = 0;
std::map<void*, size_t> g_blocks, g_pinned;  // start -> bytes

// Whether p lies inside one of `blocks`.
bool inside(const std::map<void*, size_t>& blocks, const void* p) {
  auto it = blocks.upper_bound(const_cast<void*>(p));
  if (it == blocks.begin()) return false;
  --it;
  return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
}
}  // namespace

namespace host_cuda {
void set_device_memory(size_t capacity) {
  std::lock_guard lk(g_mu);
  g_capacity = capacity;
}
size_t device_memory_used() {
  std::lock_guard lk(g_mu);
  return g_used;
}
Memory memory_of(const void* p) {
  std::lock_guard lk(g_mu);
  return inside(g_blocks, p) ? Memory::kDevice : inside(g_pinned, p) ? Memory::kPinned : Memory::kPageable;
}
}  // namespace host_cuda

// Like cudaMalloc, an allocation that does not fit sets the sticky-until-read
// last error too.
cudaError_t cudaMalloc(void** p, size_t bytes) {
  host_cuda::count_call("alloc.cudaMalloc");
  const size_t size = (bytes + 255) / 256 * 256;
  std::lock_guard lk(g_mu);
  *p = size <= g_capacity - g_used ? std::aligned_alloc(256, size) : nullptr;
  if (!*p) return g_last = cudaErrorMemoryAllocation;
  std::memset(*p, 0xFF, bytes);
  g_blocks[*p] = size;
  g_used += size;
  return cudaSuccess;
}
// cudaFree and cudaFreeHost synchronise the device first, as CUDA's do.
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  host_cuda::count_call("alloc.cudaFree");
  host_cuda::synchronize_device("cudaFree");
  std::lock_guard lk(g_mu);
  const auto it = g_blocks.find(p);
  if (it == g_blocks.end()) return g_last = cudaErrorInvalidValue;
  g_used -= it->second;
  g_blocks.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}

// GPT_EMULATED_DEVICES devices (default 1: more lets several ranks of a
// node use NCCL, one per device; 0 none, as on a machine without a GPU),
// each "emulated CUDA device" of compute capability 9.0 (so the tensor-core paths run) with the H100's shared
// memory per block, all sharing the host's memory. What the devices report
// as their name, memory (totalGlobalMem) and multiprocessors may be set for
// tests of what is derived from them (the planner's memory and peak per
// rank, MFU's peak): GPT_EMULATED_DEVICE_NAME, GPT_EMULATED_DEVICE_MEMORY in
// bytes (only reported: host_cuda::set_device_memory is what caps
// allocations) and GPT_EMULATED_DEVICE_SMS (default 132, an H100's); and
// which physical GPU a device is (its UUID): GPT_EMULATED_GPU_PER_RANK.
// Another GPU's kind, read on every query (a test may change it between
// calls): GPT_EMULATED_COMPUTE_CAPABILITY as "8.9" (what the device
// reports; the kernels run all the same) and GPT_EMULATED_SMEM_OPTIN, the
// shared memory a block may opt into in bytes (101376 on compute
// capability 8.6, 8.9 and 12.0): cudaFuncSetAttribute refuses more, as a
// GPU does. GPT_EMULATED_NO_KERNEL_IMAGE=1: the build has no code for the
// device (cudaFuncGetAttributes fails as CUDA's does).
namespace {
// An integer environment variable, or `fallback` where it is unset or empty.
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
int device_count() {
  static const int n = std::max(0, env_int("GPT_EMULATED_DEVICES", 1));
  return n;
}
// The driver's CUDA version (cudaDriverGetVersion): GPT_EMULATED_DRIVER_VERSION,
// e.g. 12040 (0: no driver), else this runtime's. One older than the runtime
// makes cudaGetDeviceCount fail as CUDA's does.
int driver_version() { return env_int("GPT_EMULATED_DRIVER_VERSION", CUDART_VERSION); }
const char* device_name() {
  const char* v = std::getenv("GPT_EMULATED_DEVICE_NAME");
  return v && *v ? v : "emulated CUDA device";
}
size_t reported_memory(size_t capacity) {
  const char* v = std::getenv("GPT_EMULATED_DEVICE_MEMORY");
  const unsigned long long bytes = v ? std::strtoull(v, nullptr, 10) : 0;
  return bytes > 0 ? size_t(bytes) : capacity;
}
struct ComputeCapability {
  int major = 9, minor = 0;
};
ComputeCapability compute_capability() {
  ComputeCapability cc;
  const char* v = std::getenv("GPT_EMULATED_COMPUTE_CAPABILITY");
  if (v && *v && std::sscanf(v, "%d.%d", &cc.major, &cc.minor) != 2) cc = {};
  return cc;
}
size_t smem_optin() {
  const int v = env_int("GPT_EMULATED_SMEM_OPTIN", 0);
  return v > 0 ? std::min(size_t(v), emulated_cuda::kSmemCapacity) : emulated_cuda::kSmemCapacity;
}
thread_local int g_device = 0;
bool valid_device(int d) { return d >= 0 && d < device_count(); }
}  // namespace
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 0;
  if (driver_version() < CUDART_VERSION) return g_last = cudaErrorInsufficientDriver;
  if (device_count() == 0) return g_last = cudaErrorNoDevice;
  *n = device_count();
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = driver_version();
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = g_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (!valid_device(d)) return g_last = cudaErrorInvalidDevice;
  g_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int d) {
  if (!valid_device(d)) return g_last = cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "%s", device_name());
  // Each device its own UUID; with GPT_EMULATED_GPU_PER_RANK=1 each rank's
  // device 0 is another physical GPU (the node-local rank in the UUID), as
  // under srun --gpus-per-task=1, where every rank sees one GPU of its own.
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
  const int physical = d + (env_int("GPT_EMULATED_GPU_PER_RANK", 0) == 1 && local >= 0 ? 1000 * (1 + local) : 0);
  std::snprintf(prop->uuid.bytes, sizeof(prop->uuid.bytes), "emu-gpu-%07u", unsigned(physical) % 10000000u);
  const ComputeCapability cc = compute_capability();
  prop->major = cc.major;
  prop->minor = cc.minor;
  const int sms = env_int("GPT_EMULATED_DEVICE_SMS", 132);
  prop->multiProcessorCount = sms > 0 ? sms : 132;
  {
    std::lock_guard lk(g_mu);
    prop->totalGlobalMem = reported_memory(g_capacity);
  }
  prop->sharedMemPerBlockOptin = smem_optin();
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int d) {
  if (!valid_device(d)) return g_last = cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = compute_capability().major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = compute_capability().minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(smem_optin()); return cudaSuccess;
    case cudaDevAttrL2CacheSize: *value = 50 << 20; return cudaSuccess;  // an H100's
    default: return g_last = cudaErrorInvalidValue;
  }
}
cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return g_last = cudaErrorInvalidValue;
  if (value < 0 || size_t(value) > smem_optin()) return g_last = cudaErrorInvalidValue;
  std::lock_guard lk(g_mu);
  emulated_cuda::g_smem_opt_in[kernel] = size_t(value);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void*) {
  *attr = cudaFuncAttributes{};
  if (env_int("GPT_EMULATED_NO_KERNEL_IMAGE", 0) == 1) return g_last = cudaErrorNoKernelImageForDevice;
  const ComputeCapability cc = compute_capability();
  attr->binaryVersion = attr->ptxVersion = 10 * cc.major + cc.minor;
  attr->maxThreadsPerBlock = 1024;
  attr->maxDynamicSharedSizeBytes = 48 * 1024;  // before an opt-in
  return cudaSuccess;
}

// Pinned host memory is host memory, remembered as pinned.
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  host_cuda::count_call("alloc.cudaMallocHost");
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return g_last = cudaErrorMemoryAllocation;
  std::lock_guard lk(g_mu);
  g_pinned[*p] = bytes ? bytes : 1;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  host_cuda::count_call("alloc.cudaFreeHost");
  host_cuda::synchronize_device("cudaFreeHost");
  std::lock_guard lk(g_mu);
  if (!g_pinned.erase(p)) return g_last = cudaErrorInvalidValue;
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  *a = cudaPointerAttributes{};
  std::lock_guard lk(g_mu);
  a->type = inside(g_blocks, p)   ? cudaMemoryTypeDevice
            : inside(g_pinned, p) ? cudaMemoryTypeHost
                                  : cudaMemoryTypeUnregistered;
  a->device = g_device;
  return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution on the device";
    default: return "host CUDA runtime error";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    default: return "cudaErrorUnknown";
  }
}
