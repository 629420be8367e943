#include "core/host_heap.hpp"

#include <limits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gpt {

bool keep_large_heap_blocks() {
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 1 << 30, kTrimThreshold = std::numeric_limits<int>::max();  // 1 GiB, 2 GiB
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace gpt
