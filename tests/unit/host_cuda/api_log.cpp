#include "api_log.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace host_cuda {
namespace {

struct ApiLog {
  std::mutex mu;
  std::map<std::string, long> calls;

  // Written when the process exits normally (after main returns, so the
  // destructors of the program's own objects have run and counted).
  ~ApiLog() {
    const char* dir = std::getenv("GPT_EMULATED_API_LOG");
    if (!dir || !*dir) return;
    const std::string path = std::string(dir) + "/api." + std::to_string(getpid()) + ".txt";
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "emulated CUDA: cannot write the API log %s\n", path.c_str());
      std::_Exit(1);
    }
    for (const auto& [kind, n] : calls) std::fprintf(f, "%s %ld\n", kind.c_str(), n);
    if (std::fclose(f) != 0) std::_Exit(1);
  }
};

ApiLog& log() {
  static ApiLog instance;
  return instance;
}

}  // namespace

void count_call(const char* kind) {
  static const bool enabled = std::getenv("GPT_EMULATED_API_LOG") != nullptr;
  if (!enabled) return;
  ApiLog& l = log();
  std::lock_guard lk(l.mu);
  ++l.calls[kind];
}

}  // namespace host_cuda
