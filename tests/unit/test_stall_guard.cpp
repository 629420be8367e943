// StallGuard (core/stall_guard.hpp): a stretch with no progress for its
// timeout calls the stall handler once, with what it was doing and what it
// last finished; progress, destruction in time and no timeout keep it quiet.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/stall_guard.hpp"

namespace {

using namespace std::chrono_literals;

// Records every call of the stall handler.
struct Calls {
  std::mutex mu;
  std::vector<std::string> messages;
  Calls() {
    gpt::set_stall_handler([this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      messages.push_back(m);
    });
  }
  ~Calls() { gpt::set_stall_handler(nullptr); }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return messages.size();
  }
  // Waits up to 10 s (a loaded machine) for n calls.
  bool wait_for(size_t n) {
    for (int i = 0; i < 1000 && count() < n; ++i) std::this_thread::sleep_for(10ms);
    return count() >= n;
  }
};

TEST(StallGuard, NoProgressCallsTheHandlerOnceWithWhatAndLastDone) {
  Calls calls;
  gpt::StallGuard guard(0.2, "the checkpoint write of step 7");
  gpt::note_progress("/m/wte");
  ASSERT_TRUE(calls.wait_for(1));
  std::this_thread::sleep_for(500ms);  // more than another timeout: still once
  ASSERT_EQ(calls.count(), 1u);
  EXPECT_EQ(calls.messages[0],
            "no progress for 0.2 s in the checkpoint write of step 7 (last done: /m/wte): another rank stopped, or the "
            "file system or network hangs; --comm-timeout sets the limit");
}

TEST(StallGuard, ProgressKeepsItQuietForLongerThanTheTimeout) {
  Calls calls;
  {
    gpt::StallGuard guard(1.0, "a long stretch");
    for (int i = 0; i < 25; ++i) {  // 2.5 s in all
      std::this_thread::sleep_for(100ms);
      gpt::note_progress("piece " + std::to_string(i));
    }
  }
  std::this_thread::sleep_for(1200ms);  // after its end, the guard is gone
  EXPECT_EQ(calls.count(), 0u);
}

TEST(StallGuard, InnerProgressIsOuterProgressAndTheOuterStillExpires) {
  Calls calls;
  gpt::StallGuard outer(1.0, "the start-up");
  {
    gpt::StallGuard inner(1.0, "the checkpoint read");
    for (int i = 0; i < 25; ++i) {
      std::this_thread::sleep_for(100ms);
      gpt::note_progress("tensor " + std::to_string(i));
    }
  }
  EXPECT_EQ(calls.count(), 0u);
  ASSERT_TRUE(calls.wait_for(1));  // no progress since: the outer one expires
  EXPECT_NE(calls.messages[0].find("in the start-up (last done: tensor 24)"), std::string::npos) << calls.messages[0];
}

TEST(StallGuard, GuardsOnOtherThreadsAreIndependent) {
  Calls calls;
  std::thread stuck([] {
    gpt::StallGuard guard(0.3, "the background writer");
    std::this_thread::sleep_for(1500ms);
  });
  {
    gpt::StallGuard guard(1.0, "the training thread");
    for (int i = 0; i < 15; ++i) {
      std::this_thread::sleep_for(100ms);
      gpt::note_progress("step");  // renews this thread's guard only
    }
  }
  stuck.join();
  ASSERT_EQ(calls.count(), 1u);
  EXPECT_NE(calls.messages[0].find("in the background writer:"), std::string::npos) << calls.messages[0];
}

TEST(StallGuard, NoTimeoutIsNoLimit) {
  Calls calls;
  gpt::StallGuard guard(0, "unbounded");
  gpt::note_progress("x");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(calls.count(), 0u);
}

TEST(StallGuardDeathTest, TheDefaultHandlerPrintsOneErrorLineAndExits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the monitor thread may already run
  EXPECT_EXIT(
      {
        gpt::set_stall_handler(nullptr);
        gpt::StallGuard guard(0.1, "a stretch");
        std::this_thread::sleep_for(10s);
      },
      testing::ExitedWithCode(1), "error: no progress for 0.1 s in a stretch: another rank stopped");
}

}  // namespace
