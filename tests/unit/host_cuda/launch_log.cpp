#include "launch_log.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace host_cuda {
namespace {

using Key = std::tuple<const void*, unsigned, size_t, size_t>;

struct LaunchLog {
  std::mutex mu;
  std::map<Key, long> launches;

  // Written when the process exits normally; a process that aborts has
  // failed its test anyway.
  ~LaunchLog() {
    const char* dir = std::getenv("GPT_EMULATED_LAUNCH_LOG");
    if (!dir || !*dir || launches.empty()) return;
    const std::string path = std::string(dir) + "/launches." + std::to_string(getpid()) + ".txt";
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "emulated CUDA: cannot write the launch log %s\n", path.c_str());
      std::_Exit(1);
    }
    for (const auto& [key, count] : launches) {
      const auto& [kernel, threads, smem, opt_in] = key;
      Dl_info info{};
      // A kernel dladdr cannot name is written as its address, which the
      // check reports as a kernel it cannot find in the PTX.
      if (dladdr(kernel, &info) && info.dli_sname && info.dli_saddr == kernel)
        std::fprintf(f, "%s %u %zu %zu %ld\n", info.dli_sname, threads, smem, opt_in, count);
      else
        std::fprintf(f, "unnamed@%p %u %zu %zu %ld\n", kernel, threads, smem, opt_in, count);
    }
    if (std::fclose(f) != 0) std::_Exit(1);
  }
};

LaunchLog& log() {
  static LaunchLog instance;
  return instance;
}

}  // namespace

void record_launch(const void* kernel, unsigned threads, size_t smem_bytes, size_t opt_in_bytes) {
  static const bool enabled = std::getenv("GPT_EMULATED_LAUNCH_LOG") != nullptr;
  if (!enabled) return;
  LaunchLog& l = log();
  std::lock_guard lk(l.mu);
  ++l.launches[Key{kernel, threads, smem_bytes, opt_in_bytes}];
}

}  // namespace host_cuda
