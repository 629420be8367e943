// The device allocator (core/cuda/device_memory.hpp) on the host CUDA
// runtime (host_cuda/host_cuda_runtime.hpp): its cache, its per-category
// accounting, and out of memory: a retry after returning the cache, then a
// one-line error naming the request. No GPU needed: the allocator's logic
// is host code around cudaMalloc/cudaFree.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/cuda/device_memory.hpp"
#include "host_cuda/host_cuda_runtime.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda {
namespace {

class HostDeviceMemory : public ::testing::Test {
 protected:
  void TearDown() override { host_cuda::set_device_memory(size_t(-1)); }
};

TEST_F(HostDeviceMemory, CachesBlocksAndCountsCategories) {
  MemoryTracker t;
  DeviceAllocator alloc(&t);
  {
    DeviceBuffer<float> a(1000, MemCategory::kParams, &alloc);
    DeviceBuffer<bf16> b(3000, MemCategory::kActivations, &alloc);
    EXPECT_EQ(t.bytes(MemCategory::kParams), 4000);
    EXPECT_EQ(t.bytes(MemCategory::kActivations), 6000);
    EXPECT_EQ(alloc.malloc_calls(), 2);
  }
  EXPECT_EQ(t.total(), 0) << "freed blocks are not live";
  EXPECT_GT(alloc.cached(), 0);
  for (int i = 0; i < 10; ++i) {  // the steady state of a training loop: no cudaMalloc
    DeviceBuffer<float> a(1000, MemCategory::kBuffers, &alloc, false);
    DeviceBuffer<bf16> b(3000, MemCategory::kBuffers, &alloc, false);
  }
  EXPECT_EQ(alloc.malloc_calls(), 2);
  EXPECT_EQ(t.peak(), 10000);
  alloc.release_cached();
  EXPECT_EQ(alloc.reserved(), 0);
  EXPECT_EQ(host_cuda::device_memory_used(), 0u) << "every block went back to CUDA";
}

// A request that fits only once the cache is returned gets it (one failed
// cudaMalloc, the cache released, a second cudaMalloc).
TEST_F(HostDeviceMemory, ReturnsTheCacheBeforeGivingUp) {
  host_cuda::set_device_memory(10 * 1024);
  MemoryTracker t;
  DeviceAllocator alloc(&t);
  { DeviceBuffer<float> small(1024, MemCategory::kScratch, &alloc); }  // 4 KiB, now cached
  EXPECT_EQ(alloc.cached(), 4096);
  DeviceBuffer<float> big(2048, MemCategory::kActivations, &alloc);  // 8 KiB: does not fit beside the cache
  EXPECT_EQ(alloc.cached(), 0);
  EXPECT_EQ(alloc.reserved(), 8192);
  EXPECT_EQ(alloc.malloc_calls(), 2);
  EXPECT_EQ(t.bytes(MemCategory::kActivations), 8192);
}

// A request that does not fit at all: gpt::Error naming the size, the
// category, the bytes in use and CUDA's error, and nothing leaked or
// counted.
TEST_F(HostDeviceMemory, OutOfMemoryNamesTheRequest) {
  host_cuda::set_device_memory(64 * 1024);
  MemoryTracker t;
  DeviceAllocator alloc(&t);
  DeviceBuffer<float> live(4096, MemCategory::kParams, &alloc);  // 16 KiB in use
  try {
    DeviceBuffer<bf16> huge(size_t(1) << 20, MemCategory::kActivations, &alloc);
    FAIL() << "allocated 2 MiB on a 64 KiB device";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of device memory"), std::string::npos) << m;
    EXPECT_NE(m.find("2.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("activations"), std::string::npos) << m;
    EXPECT_NE(m.find("16.0 KiB in use"), std::string::npos) << m;
    EXPECT_NE(m.find("out of memory"), std::string::npos) << "CUDA's own error: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_EQ(t.total(), 16384);
  EXPECT_EQ(alloc.reserved(), 16384);
}

}  // namespace
}  // namespace gpt::cuda
