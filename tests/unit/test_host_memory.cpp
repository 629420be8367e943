// The host memory the planner shares between a node's ranks: a cgroup's
// limit (a SLURM job's --mem, a container's) wins over the physical memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/host_memory.hpp"

namespace gpt {
namespace {
namespace fs = std::filesystem;

constexpr int64_t GiB = int64_t(1) << 30;

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpt_cgroup_" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text << "\n";
  }
  HostMemory limit(const std::string& proc_self_cgroup) { return cgroup_memory_limit(proc_self_cgroup, root_.string()); }
  fs::path root_;
};

TEST_F(CgroupTree, V2TakesTheLeastLimitUpToTheRoot) {
  write("slurm/job_7/step_0/memory.max", "max");
  write("slurm/job_7/memory.max", std::to_string(16 * GiB));
  write("slurm/memory.max", std::to_string(64 * GiB));
  const HostMemory m = limit("0::/slurm/job_7/step_0\n");
  EXPECT_EQ(m.bytes, 16 * GiB);
  EXPECT_EQ(m.source, "the limit in " + (root_ / "slurm/job_7/memory.max").string());
  write("slurm/job_7/step_0/memory.max", std::to_string(4 * GiB));
  EXPECT_EQ(limit("0::/slurm/job_7/step_0\n").bytes, 4 * GiB);
}

TEST_F(CgroupTree, V1ReadsTheMemoryHierarchyOnly) {
  write("memory/docker/abc/memory.limit_in_bytes", "9223372036854771712");  // v1's "no limit"
  write("memory/docker/memory.limit_in_bytes", std::to_string(8 * GiB));
  write("cpu/docker/abc/memory.limit_in_bytes", std::to_string(1 * GiB));  // not the memory hierarchy
  EXPECT_EQ(limit("5:cpu:/docker/abc\n4:memory:/docker/abc\n0::/\n").bytes, 8 * GiB);
  EXPECT_EQ(limit("4:cpuacct,memory:/docker/abc\n").bytes, 8 * GiB);
  EXPECT_EQ(limit("5:cpu:/docker/abc\n").bytes, 0);
}

TEST_F(CgroupTree, NoLimitUnreadableOrMissingIsNone) {
  write("memory.max", "max");
  write("a/memory.max", "garbage");
  const HostMemory m = limit("0::/a/b/c\n");  // a/b/c is not there (a container's partial view)
  EXPECT_EQ(m.bytes, 0);
  EXPECT_EQ(m.source, "");
  EXPECT_EQ(limit("").bytes, 0);
  EXPECT_EQ(limit("not a cgroup line\n").bytes, 0);
}

TEST(HostMemory, IsPositiveAndAtMostThePhysicalMemory) {
  const HostMemory m = host_memory();
  EXPECT_GT(m.bytes, 0);
  EXPECT_LE(m.bytes, int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE)));
  EXPECT_FALSE(m.source.empty());
}

}  // namespace
}  // namespace gpt
