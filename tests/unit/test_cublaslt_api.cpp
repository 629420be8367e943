// cuBLASLt opened on first use (model/cuda/cublaslt_api.hpp), with the real
// library: no GPU is needed to open it, resolve its entry points and ask its
// version. Each test runs in its own process (gtest_discover_tests), so
// "not open yet" is a fact about this process.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.hpp"
#include "model/cuda/cublaslt_api.hpp"

namespace {

using gpt::cuda::cublaslt;
using gpt::cuda::cublaslt_opened;
using gpt::cuda::open_cublaslt;

// Whether the process has a file whose name contains `part` mapped.
bool mapped(const std::string& part) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(part) != std::string::npos) return true;
  return false;
}

std::string error_of(const std::vector<std::string>& candidates) {
  try {
    open_cublaslt(candidates);
  } catch (const gpt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CublasLtApi, OpensOnFirstUseOnly) {
  EXPECT_FALSE(cublaslt_opened());
  EXPECT_FALSE(mapped("libcublasLt")) << "linked or opened before it was asked for";
  const gpt::cuda::CublasLtApi& lt = cublaslt();
  EXPECT_TRUE(cublaslt_opened());
  EXPECT_TRUE(mapped("libcublasLt"));
  EXPECT_NE(lt.path.find("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)), std::string::npos) << lt.path;
  // The library answers through the table: the major version we compiled
  // against, and its own name for a status.
  EXPECT_EQ(lt.get_version() / 10000, size_t(CUBLAS_VER_MAJOR));
  EXPECT_NE(std::string(lt.get_status_string(CUBLAS_STATUS_NOT_SUPPORTED)).find("not supported"), std::string::npos);
  EXPECT_EQ(&cublaslt(), &lt) << "opened twice";
}

TEST(CublasLtApi, TheBuildDirectoryIsTheFallback) {
  const std::vector<std::string> c = gpt::cuda::cublaslt_candidates();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(c[1].front(), '/');
  // Found by its full path alone, as on a machine whose loader path lacks it.
  EXPECT_EQ(open_cublaslt({c[1]}).path, c[1]);
}

TEST(CublasLtApi, NoLibraryNamesWhatWasTriedAndTheFix) {
  const std::string msg = error_of({"libcublasLt_absent.so.13", "/nonexistent/libcublasLt.so.13"});
  EXPECT_NE(msg.find("cannot open cuBLASLt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libcublasLt_absent.so.13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent/libcublasLt.so.13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LD_LIBRARY_PATH"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

TEST(CublasLtApi, AnotherLibraryNamesTheMissingEntryPoint) {
  // Opens (it is a real library) but is not cuBLASLt.
  const std::string msg = error_of({"libz.so.1"});
  EXPECT_NE(msg.find("libz.so.1 has no cublasLtGetVersion"), std::string::npos) << msg;
}

}  // namespace
