// Device memory with the same per-category accounting as the host side
// (core/memory.hpp), so the mem.* metrics mean the same on --device cuda.
//
// DeviceAllocator is a caching allocator: a freed block goes to a free list
// keyed by its rounded size and is handed out again for the next request of
// that size, so a training loop whose buffers repeat the same sizes every
// step (gathered units, unit gradients, classifier chunks) calls cudaMalloc
// only during the first step and never cudaFree. cudaMalloc synchronises the
// device, which is why a steady-state loop must not call it.
//
// The tracker counts live bytes per category (what the program holds);
// reserved() adds the cached blocks (what the device has given us), the
// number to compare with nvidia-smi.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include <cuda_runtime.h>

#include "core/memory.hpp"

namespace gpt::cuda {

class DeviceAllocator {
 public:
  explicit DeviceAllocator(MemoryTracker* tracker) : tracker_(tracker) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // Throws gpt::Error naming the request, its category and the bytes in use
  // when the device is out of memory (after returning the cache to CUDA once).
  void* allocate(size_t bytes, MemCategory cat);
  void deallocate(void* p, size_t bytes, MemCategory cat);

  int64_t reserved() const { return reserved_; }
  int64_t cached() const { return cached_; }
  int64_t malloc_calls() const { return malloc_calls_; }
  void release_cached();  // cudaFree every cached block
  MemoryTracker* tracker() const { return tracker_; }

 private:
  static size_t rounded(size_t bytes) { return (bytes + 511) / 512 * 512; }
  std::multimap<size_t, void*> free_;
  MemoryTracker* tracker_;
  int64_t reserved_ = 0, cached_ = 0, malloc_calls_ = 0;
};

// An owning device array of n elements of T from a DeviceAllocator. Move-only.
// Zero-initialised by default, synchronously (set-up time); pass
// zeroed = false for a buffer that will be fully overwritten (the hot loop).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t n, MemCategory cat, DeviceAllocator* alloc, bool zeroed = true)
      : size_(n), cat_(cat), alloc_(alloc) {
    if (n == 0) return;
    data_ = static_cast<T*>(alloc_->allocate(n * sizeof(T), cat));
    // The legacy default stream: ordered before later work on any blocking
    // stream (the backend creates its streams blocking for this reason).
    if (zeroed) cudaMemset(data_, 0, bytes());
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cat_ = o.cat_;
      alloc_ = std::exchange(o.alloc_, nullptr);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  // Asynchronous zero fill on `stream` (nullptr: the legacy default stream).
  void zero(cudaStream_t stream) {
    if (data_) cudaMemsetAsync(data_, 0, bytes(), stream);
  }
  void reset() {
    if (data_) alloc_->deallocate(data_, bytes(), cat_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  MemCategory cat_ = MemCategory::kScratch;
  DeviceAllocator* alloc_ = nullptr;
};

}  // namespace gpt::cuda
