// How much memory this process's host gives it: the machine's physical
// memory, or less where a control group caps it (a SLURM job's --mem under
// its cgroup plugin, a container's limit). The planner shares it between
// the ranks on the node (--strategy auto on cpu).
#pragma once

#include <cstdint>
#include <string>

namespace gpt {

struct HostMemory {
  int64_t bytes = 0;
  std::string source;  // "this host's physical memory", or "the limit in FILE" (the cgroup file setting it)
};
HostMemory host_memory();

// The least memory limit on the path from this process's cgroup up to its
// hierarchy's root: cgroup v2's memory.max, or v1's memory.limit_in_bytes
// in the `memory` hierarchy. `proc_self_cgroup` is /proc/self/cgroup's text
// and `mount` where the hierarchies are mounted (/sys/fs/cgroup), so tests
// can give both. Directories that are not there (a container that shows
// only its own part of the tree) are skipped; {0, ""} when nothing limits.
HostMemory cgroup_memory_limit(const std::string& proc_self_cgroup, const std::string& mount);

}  // namespace gpt
