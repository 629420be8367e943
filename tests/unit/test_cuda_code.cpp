// Which of a build's CUDA code a GPU runs (core/cuda_code.hpp): a cubin of
// its major version at a minor not above its own, else the newest PTX at or
// below it, compiled by the driver.
#include <gtest/gtest.h>

#include "core/cuda_code.hpp"

namespace gpt::cuda {
namespace {

TEST(CudaCode, CubinsRunWithinTheirMajorVersion) {
  const std::string defaults = "80 90 100";
  EXPECT_EQ(driver_compiled_ptx(defaults, 8, 0), "");
  EXPECT_EQ(driver_compiled_ptx(defaults, 8, 6), "");  // A10, RTX 30: the sm_80 cubin
  EXPECT_EQ(driver_compiled_ptx(defaults, 8, 9), "");  // L4, L40S, RTX 40
  EXPECT_EQ(driver_compiled_ptx(defaults, 9, 0), "");
  EXPECT_EQ(driver_compiled_ptx(defaults, 10, 3), "");  // B300: the sm_100 cubin
  EXPECT_EQ(driver_compiled_ptx("86 90", 8, 0), "");   // no cubin for 8.0, and no PTX below it either
}

TEST(CudaCode, OtherwiseTheDriverCompilesTheNewestPtxBelow) {
  EXPECT_EQ(driver_compiled_ptx("80 90 100", 12, 0), "100");  // RTX 50, RTX PRO Blackwell
  EXPECT_EQ(driver_compiled_ptx("80 90 100", 12, 1), "100");  // DGX Spark
  EXPECT_EQ(driver_compiled_ptx("80 90", 10, 0), "90");       // a B200 and a build without sm_100
  EXPECT_EQ(driver_compiled_ptx("80 90 100 120", 12, 0), "");
  EXPECT_EQ(driver_compiled_ptx("80 90 100 121", 12, 0), "100");  // 12.1's cubin is not for 12.0
  EXPECT_EQ(driver_compiled_ptx("90", 8, 0), "");              // nothing runs: the start-up check's error
}

TEST(CudaCode, RealAndVirtualSuffixes) {
  EXPECT_EQ(driver_compiled_ptx("80-real 90-virtual", 9, 0), "90");  // PTX alone
  EXPECT_EQ(driver_compiled_ptx("80-real 90-real", 12, 0), "");      // no PTX: nothing runs
  EXPECT_EQ(driver_compiled_ptx("80-real 90-real", 8, 9), "");
  EXPECT_EQ(driver_compiled_ptx("80-virtual", 8, 9), "80");
  EXPECT_EQ(driver_compiled_ptx("90a", 12, 0), "");  // a special architecture: not ours to reason about
}

}  // namespace
}  // namespace gpt::cuda
