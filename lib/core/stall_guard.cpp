// Bounds on progress through blocking library calls (stall_guard.hpp).
#include "core/stall_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace gpt {

using Clock = std::chrono::steady_clock;

struct StallGuard::State {
  double timeout_s;
  std::string what;
  std::string last;  // what the last note_progress said was done
  Clock::time_point deadline;
  bool fired = false;
  State* outer;  // the thread's enclosing guard
};

namespace {

thread_local StallGuard::State* t_innermost = nullptr;

// One thread watches every armed guard; it sleeps until the nearest
// deadline or a change.
class Monitor {
 public:
  static Monitor& get() {
    static Monitor m;
    return m;
  }

  void add(StallGuard::State* s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    armed_.push_back(s);
    cv_.notify_all();
  }

  void remove(StallGuard::State* s) {
    std::lock_guard<std::mutex> lock(mu_);
    armed_.erase(std::remove(armed_.begin(), armed_.end(), s), armed_.end());
  }

  void renew(StallGuard::State* s, const std::string& done) {
    std::lock_guard<std::mutex> lock(mu_);
    s->last = done;
    s->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s->timeout_s));
  }

  void set_handler(std::function<void(const std::string&)> h) {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(h);
  }

  ~Monitor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const Clock::time_point now = Clock::now();
      Clock::time_point next = Clock::time_point::max();
      for (StallGuard::State* s : armed_) {
        if (s->fired) continue;
        if (s->deadline <= now) {
          s->fired = true;
          const std::string message = fmt::format(
              "no progress for {:g} s in {}{}{}: another rank stopped, or the file system or network hangs; "
              "--comm-timeout sets the limit",
              s->timeout_s, s->what, s->last.empty() ? "" : " (last done: ", s->last.empty() ? "" : s->last + ")");
          std::function<void(const std::string&)> h = handler_;
          lock.unlock();  // the handler may take long, or never return
          if (h) {
            h(message);
          } else {
            std::fprintf(stderr, "error: %s\n", message.c_str());
            std::fflush(stderr);
            std::_Exit(1);
          }
          lock.lock();
          next = now;  // the list may have changed: look again
          break;
        }
        next = std::min(next, s->deadline);
      }
      if (next == Clock::time_point::max())
        cv_.wait(lock);
      else if (next > now)
        cv_.wait_until(lock, next);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StallGuard::State*> armed_;
  std::function<void(const std::string&)> handler_;
  std::thread thread_;
  bool stop_ = false;
};

}  // namespace

StallGuard::StallGuard(double timeout_s, std::string what) {
  if (timeout_s <= 0) return;
  state_ = new State{timeout_s, std::move(what), {}, {}, false, t_innermost};
  Monitor::get().renew(state_, "");
  t_innermost = state_;
  Monitor::get().add(state_);
}

StallGuard::~StallGuard() {
  if (!state_) return;
  Monitor::get().remove(state_);
  t_innermost = state_->outer;
  delete state_;
}

void note_progress(const std::string& done) {
  // Progress inside a nested stretch is progress of the enclosing ones too.
  for (StallGuard::State* s = t_innermost; s; s = s->outer) Monitor::get().renew(s, done);
}

void set_stall_handler(std::function<void(const std::string& message)> handler) {
  Monitor::get().set_handler(std::move(handler));
}

}  // namespace gpt
