// core/memory.hpp: a host Buffer that cannot be allocated throws an error
// that says what it was for, how large it was and what the rank already
// holds (as the device allocator's does), and leaves the tracker as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/memory.hpp"

namespace gpt {
namespace {

TEST(HostBuffer, AnAllocationThatFailsSaysWhatAndHowMuch) {
  MemoryTracker t;
  Buffer<float> held(1024, MemCategory::kParams, &t);
  try {
    Buffer<float> huge(size_t(1) << 60, MemCategory::kOptim, &t);  // 4 EiB: more than any host
    FAIL() << "a 4 EiB buffer was allocated";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "out of host memory: allocating 4294967296.00 GiB for optim with 4.0 KiB in use");
  }
  EXPECT_EQ(t.total(), 4096);
  EXPECT_EQ(t.bytes(MemCategory::kOptim), 0);
}

}  // namespace
}  // namespace gpt
