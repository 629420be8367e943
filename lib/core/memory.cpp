#include "core/memory.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/bytes.hpp"
#include "core/error.hpp"

namespace gpt {

std::string_view to_string(MemCategory c) {
  switch (c) {
    case MemCategory::kParams: return "params";
    case MemCategory::kGrads: return "grads";
    case MemCategory::kOptim: return "optim";
    case MemCategory::kActivations: return "activations";
    case MemCategory::kBuffers: return "buffers";
    case MemCategory::kScratch: return "scratch";
    case MemCategory::kCount: break;
  }
  return "?";
}

void MemoryTracker::add(MemCategory c, int64_t bytes) {
  bytes_[static_cast<size_t>(c)] += bytes;
  total_ += bytes;
  peak_ = std::max(peak_, total_);
}

template <typename T>
Buffer<T>::Buffer(size_t n, MemCategory cat, MemoryTracker* tracker)
    : size_(n), cat_(cat), tracker_(tracker) {
  if (n == 0) return;
  size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
  data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
  if (!data_)  // what, how much, and what this rank already holds (the device allocator's message, on the host)
    throw Error(fmt::format("out of host memory: allocating {} for {} with {} in use", format_bytes(double(bytes)),
                            to_string(cat), tracker ? format_bytes(double(tracker->total())) : "?"));
  std::memset(static_cast<void*>(data_), 0, bytes);
  if (tracker_) tracker_->add(cat_, static_cast<int64_t>(n * sizeof(T)));
}

template <typename T>
Buffer<T>& Buffer<T>::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    cat_ = o.cat_;
    tracker_ = std::exchange(o.tracker_, nullptr);
  }
  return *this;
}

template <typename T>
void Buffer<T>::release() {
  if (data_) {
    if (tracker_) tracker_->add(cat_, -static_cast<int64_t>(size_ * sizeof(T)));
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
}

template <typename T>
void Buffer<T>::fill(T v) {
  std::fill(data_, data_ + size_, v);
}

template class Buffer<float>;
template class Buffer<double>;
template class Buffer<int32_t>;
template class Buffer<uint16_t>;

}  // namespace gpt
