#include "core/cuda/device_memory.hpp"

#include <fmt/format.h>

#include "core/bytes.hpp"
#include "core/error.hpp"

namespace gpt::cuda {

DeviceAllocator::~DeviceAllocator() { release_cached(); }

void* DeviceAllocator::allocate(size_t bytes, MemCategory cat) {
  const size_t size = rounded(bytes);
  void* p = nullptr;
  if (auto it = free_.find(size); it != free_.end()) {
    p = it->second;
    free_.erase(it);
    cached_ -= int64_t(size);
  } else {
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation && cached_ > 0) {
      cudaGetLastError();
      release_cached();  // blocks of other sizes may make room
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      const int64_t live = tracker_ ? tracker_->total() : 0;
      throw Error(fmt::format("out of device memory: allocating {} for {} with {} in use ({} reserved): {}",
                              format_bytes(int64_t(bytes)), to_string(cat), format_bytes(live),
                              format_bytes(reserved_), cudaGetErrorString(e)));
    }
    reserved_ += int64_t(size);
    ++malloc_calls_;
  }
  if (tracker_) tracker_->add(cat, int64_t(bytes));
  return p;
}

void DeviceAllocator::deallocate(void* p, size_t bytes, MemCategory cat) {
  if (!p) return;
  const size_t size = rounded(bytes);
  free_.emplace(size, p);
  cached_ += int64_t(size);
  if (tracker_) tracker_->add(cat, -int64_t(bytes));
}

void DeviceAllocator::release_cached() {
  if (free_.empty()) return;
  // Cached blocks may still be read by queued kernels of a stream that
  // released them; finish all device work before handing them back.
  cudaDeviceSynchronize();
  for (auto& [size, p] : free_) {
    cudaFree(p);
    reserved_ -= int64_t(size);
  }
  free_.clear();
  cached_ = 0;
}

}  // namespace gpt::cuda
