#include "core/stop_signal.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>

#include <atomic>
#include <initializer_list>

namespace gpt {

namespace {

// Lock-free, so reading and writing it is async-signal-safe.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) return;  // the first: stop after this step
  // A second: the default action (the process ends), as if no handler had
  // been installed. signal() and raise() are async-signal-safe.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_stop_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // A system call the signal interrupts (a read of the data, a write of the
  // checkpoint) carries on.
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: {
      thread_local char buf[32];
      std::snprintf(buf, sizeof buf, "signal %d", sig);
      return buf;
    }
  }
}

}  // namespace gpt
