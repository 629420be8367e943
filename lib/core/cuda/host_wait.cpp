// Bounded host waits for the GPU (host_wait.hpp).
#include "core/cuda/host_wait.hpp"

#include <fmt/format.h>

#include <thread>

#include "core/error.hpp"

namespace gpt::cuda {
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

void wait_until(const std::function<bool()>& ready, const Watchdog& w, const char* what,
                const std::function<std::chrono::steady_clock::time_point()>& now) {
  const auto start = now();
  for (long polls = 0;; ++polls) {
    if (ready()) return;
    if (w.check && polls % kCheckEvery == 0) w.check();
    if (w.timeout_s > 0) {
      const double waited = std::chrono::duration<double>(now() - start).count();
      if (waited > w.timeout_s)
        throw Error(fmt::format("waited {:.0f} s for the GPU ({}) without it finishing: a collective is stuck "
                                "(another rank failed or hangs?); --comm-timeout sets the limit",
                                waited, what));
    }
    if (polls < kSpins)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void wait_stream(cudaStream_t s, const char* what) {
  const Watchdog& w = the_watchdog();
  if (w.timeout_s <= 0 && !w.check) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) throw Error(fmt::format("CUDA error waiting for the GPU ({}): {}", what, cudaGetErrorString(e)));
    return;
  }
  wait_until(
      [&] {
        const cudaError_t e = cudaStreamQuery(s);
        if (e == cudaErrorNotReady) return false;
        if (e != cudaSuccess)
          throw Error(fmt::format("CUDA error waiting for the GPU ({}): {}", what, cudaGetErrorString(e)));
        return true;
      },
      w, what);
}

}  // namespace gpt::cuda
