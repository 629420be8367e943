#include "core/host_memory.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpt {
namespace fs = std::filesystem;
namespace {

// A limit file's value; 0 for "max" (v2) or v1's "no limit" (the largest
// page-aligned int64, 9223372036854771712), and for anything unreadable.
int64_t read_limit(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    const long long v = std::stoll(text);
    return v > 0 && v < (int64_t(1) << 62) ? int64_t(v) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

HostMemory cgroup_memory_limit(const std::string& proc_self_cgroup, const std::string& mount) {
  HostMemory least;
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    fs::path dir = line.substr(b + 1);
    fs::path base;
    std::string file;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      base = mount;
      file = "memory.max";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      base = fs::path(mount) / "memory";
      file = "memory.limit_in_bytes";
    } else {
      continue;
    }
    for (;;) {
      const fs::path candidate = base / dir.relative_path() / file;
      const int64_t v = read_limit(candidate);
      if (v > 0 && (least.bytes == 0 || v < least.bytes)) least = {v, "the limit in " + candidate.string()};
      if (!dir.has_relative_path()) break;
      dir = dir.parent_path();
    }
  }
  return least;
}

HostMemory host_memory() {
  HostMemory m{int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE)), "this host's physical memory"};
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  const HostMemory limit = cgroup_memory_limit(text.str(), "/sys/fs/cgroup");
  if (limit.bytes > 0 && limit.bytes < m.bytes) m = limit;
  return m;
}

}  // namespace gpt
