// Per-category accounting of the bytes this rank holds, for the `mem`
// metrics. Every long-lived buffer is allocated through Buffer<T>, which
// registers its bytes with a tracker under one category; the tracker keeps the
// current and peak total.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gpt {

// kBuffers: transient model-state buffers (gathered units, full gradients of
// a unit between its backward and its reduce-scatter), not persistent state.
enum class MemCategory { kParams, kGrads, kOptim, kActivations, kBuffers, kScratch, kCount };

std::string_view to_string(MemCategory c);

class MemoryTracker {
 public:
  void add(MemCategory c, int64_t bytes);
  int64_t bytes(MemCategory c) const { return bytes_[static_cast<size_t>(c)]; }
  int64_t total() const { return total_; }
  int64_t peak() const { return peak_; }
  // Restarts peak tracking from the current total (e.g. after set-up).
  void reset_peak() { peak_ = total_; }

 private:
  std::array<int64_t, static_cast<size_t>(MemCategory::kCount)> bytes_{};
  int64_t total_ = 0;
  int64_t peak_ = 0;
};

// An owning, 64-byte aligned, zero-initialised array of trivially copyable T
// whose bytes are counted in a MemoryTracker for its lifetime. Move-only.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t n, MemCategory cat, MemoryTracker* tracker);
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  void fill(T v);

 private:
  void release();
  T* data_ = nullptr;
  size_t size_ = 0;
  MemCategory cat_ = MemCategory::kScratch;
  MemoryTracker* tracker_ = nullptr;
};

}  // namespace gpt
