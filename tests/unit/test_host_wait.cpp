// Bounded host waits for the GPU (core/cuda/host_wait.hpp): the polling
// loop with a fake readiness test and clock (a stuck collective cannot be
// staged on the emulated backend, whose streams run when asked), and
// wait_stream on the host CUDA runtime.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cuda/host_wait.hpp"
#include "core/error.hpp"

namespace gpt::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// A clock that moves `step` further at every reading.
struct FakeClock {
  explicit FakeClock(std::chrono::milliseconds step) : step(step) {}
  Clock::time_point operator()() { return t += step; }
  std::chrono::milliseconds step;
  Clock::time_point t{};
};

TEST(HostWait, ReturnsWhenReadyAndPollsTheCheckMeanwhile) {
  int polls = 0, checks = 0;
  const Watchdog w{60, [&] { ++checks; }};
  wait_until([&] { return ++polls == 3000; }, w, "test");  // past the spinning polls, into the sleeping ones
  EXPECT_EQ(polls, 3000);
  EXPECT_GE(checks, 3000 / 64);
}

TEST(HostWait, ACommunicatorFailureEndsTheWait) {
  int checks = 0;
  const Watchdog w{0, [&] {
                     if (++checks == 3) throw Error("NCCL failed on rank 1: remote process exited");
                   }};
  try {
    wait_until([] { return false; }, w, "gradient norm");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "NCCL failed on rank 1: remote process exited");
  }
  EXPECT_EQ(checks, 3);
}

TEST(HostWait, TimesOutWithTheWaitNamed) {
  FakeClock clock(std::chrono::milliseconds(1000));
  const Watchdog w{30, {}};
  try {
    wait_until([] { return false; }, w, "gradient norm", std::ref(clock));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("waited 31 s for the GPU (gradient norm)"), std::string::npos) << m;
    EXPECT_NE(m.find("--comm-timeout"), std::string::npos) << m;
  }
}

TEST(HostWait, NoLimitWaitsAsLongAsItTakes) {
  FakeClock clock(std::chrono::milliseconds(3'600'000));  // an hour per poll
  int polls = 0;
  wait_until([&] { return ++polls == 50; }, Watchdog{0, {}}, "test", std::ref(clock));
  EXPECT_EQ(polls, 50);
}

// wait_stream on a stream: the queued work has run when it returns, with
// the watchdog polling (the trainer's set-up) and without one.
TEST(HostWait, WaitStreamRunsTheStreamsWork) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  std::vector<unsigned char> h(64);
  int checks = 0;
  for (bool with_watchdog : {true, false}) {
    SCOPED_TRACE(with_watchdog ? "watchdog" : "plain");
    set_watchdog(with_watchdog ? Watchdog{10, [&] { ++checks; }} : Watchdog{});
    const int value = with_watchdog ? 7 : 9;
    ASSERT_EQ(cudaMemsetAsync(d, value, 64, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(h.data(), d, 64, cudaMemcpyDeviceToHost, s), cudaSuccess);
    wait_stream(s, "test");
    EXPECT_EQ(h, std::vector<unsigned char>(64, static_cast<unsigned char>(value)));
  }
  set_watchdog({});
  cudaFree(d);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace gpt::cuda
