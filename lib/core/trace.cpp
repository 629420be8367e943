#include "core/trace.hpp"

#include <atomic>
#include <chrono>
#include <mutex>

namespace gpt::trace {
namespace {

struct Recorder {
  std::mutex mu;
  std::vector<Event> events;
  std::vector<std::string> lanes{"train"};
  size_t cap = 0, dropped = 0;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

Recorder& rec() {
  static Recorder r;
  return r;
}

std::atomic<bool> g_on{false};
std::atomic<uint64_t> g_epoch{0};
std::atomic<DeviceMarks*> g_marks{nullptr};

}  // namespace

void start(size_t max_events) {
  Recorder& r = rec();
  std::lock_guard lk(r.mu);
  r.events.clear();
  r.events.reserve(std::min<size_t>(max_events, 1 << 14));
  r.cap = max_events;
  r.dropped = 0;
  r.t0 = std::chrono::steady_clock::now();
  g_epoch.fetch_add(1, std::memory_order_relaxed);
  g_on.store(true, std::memory_order_release);
}

uint64_t epoch() { return g_epoch.load(std::memory_order_relaxed); }

void set_device_marks(DeviceMarks* marks) { g_marks.store(marks, std::memory_order_release); }
DeviceMarks* device_marks() { return g_marks.load(std::memory_order_acquire); }

void stop() { g_on.store(false, std::memory_order_release); }

bool enabled() { return g_on.load(std::memory_order_relaxed); }

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - rec().t0).count();
}

int lane(const std::string& name) {
  Recorder& r = rec();
  std::lock_guard lk(r.mu);
  for (size_t i = 0; i < r.lanes.size(); ++i)
    if (r.lanes[i] == name) return int(i);
  r.lanes.push_back(name);
  return int(r.lanes.size() - 1);
}

std::vector<std::string> lanes() {
  Recorder& r = rec();
  std::lock_guard lk(r.mu);
  return r.lanes;
}

void record(const Event& e) {
  if (!enabled()) return;
  Recorder& r = rec();
  std::lock_guard lk(r.mu);
  if (r.events.size() >= r.cap) {
    ++r.dropped;
    return;
  }
  r.events.push_back(e);
}

std::vector<Event> events() {
  Recorder& r = rec();
  std::lock_guard lk(r.mu);
  return r.events;
}

size_t dropped() {
  Recorder& r = rec();
  std::lock_guard lk(r.mu);
  return r.dropped;
}

}  // namespace gpt::trace
