// Bounded waits (core/watchdog.hpp, core/cuda/host_wait.hpp): the polling
// loop with a fake readiness test and clock, and wait_stream and
// wait_event on the host CUDA runtime. The trainer's waits against a
// collective that never finishes: tests/gpu/comm_fault.sh.
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
    wait_until([] { return false; }, w, {"the GPU", "gradient norm"}, std::ref(clock));
    FAIL() << "no error";
  } catch (const StuckError& e) {  // gpt_train must not tear down GPU state after it
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

// wait_event waits for the work before the record, not for later work.
TEST(HostWait, WaitEventRunsTheWorkBeforeTheRecord) {
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  for (bool with_watchdog : {true, false}) {
    SCOPED_TRACE(with_watchdog ? "watchdog" : "plain");
    set_watchdog(with_watchdog ? Watchdog{10, [] {}} : Watchdog{});
    std::vector<unsigned char> before(16, 0), after(16, 0);
    const std::vector<unsigned char> ones(16, 1);
    ASSERT_EQ(cudaMemcpyAsync(before.data(), ones.data(), 16, cudaMemcpyHostToHost, s), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(after.data(), ones.data(), 16, cudaMemcpyHostToHost, s), cudaSuccess);
    wait_event(e, "test");
    EXPECT_EQ(before, ones);
    EXPECT_EQ(after, std::vector<unsigned char>(16, 0));  // lazy: the later copy has not run
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(after, ones);
  }
  set_watchdog({});
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace gpt::cuda
