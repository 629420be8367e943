// The job's bound on waiting for other ranks (watchdog.hpp).
#include "core/watchdog.hpp"

#include <fmt/format.h>

#include <thread>

#include "core/error.hpp"

namespace gpt {
namespace {

Watchdog& the_watchdog() {
  static Watchdog w;
  return w;
}

constexpr int kSpins = 1000;     // polls before the loop starts sleeping
constexpr int kCheckEvery = 64;  // polls between two checks of the communicators

}  // namespace

void set_watchdog(Watchdog w) { the_watchdog() = std::move(w); }
const Watchdog& watchdog() { return the_watchdog(); }

void wait_until(const std::function<bool()>& ready, const Watchdog& w, WaitName name,
                const std::function<std::chrono::steady_clock::time_point()>& now) {
  const auto start = now();
  for (long polls = 0;; ++polls) {
    if (ready()) return;
    if (w.check && polls % kCheckEvery == 0) w.check();
    if (w.timeout_s > 0) {
      const double waited = std::chrono::duration<double>(now() - start).count();
      if (waited > w.timeout_s)
        throw StuckError(fmt::format("waited {:.0f} s for {}{}{}{} without it finishing: a collective is stuck "
                                     "(another rank failed or hangs?); --comm-timeout sets the limit",
                                     waited, name.what, name.detail ? " (" : "", name.detail ? name.detail : "",
                                     name.detail ? ")" : ""));
    }
    if (polls < kSpins)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace gpt
