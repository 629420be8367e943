// core/host_heap.hpp: after keep_large_heap_blocks(), a product at GPT-2's
// LM head shape (16 rows x 768 times 50304 x 768 transposed, for which
// Eigen packs a 61 MiB block per call) touches no fresh pages on its
// second call. Without it (glibc's defaults) each call faults in the whole
// block again: about 15.7k pages, counted the same way.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <vector>

#include "core/host_heap.hpp"
#include "model/cpu/gemm.hpp"
#include "model/cpu/matmul.hpp"

namespace gpt {
namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

TEST(HostHeap, ALargeProductTouchesNoFreshPagesAfterItsFirstCall) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "glibc's heap only";
#endif
  ASSERT_TRUE(keep_large_heap_blocks());
  cpu::set_cpu_gemm(cpu::CpuGemm::kEigen);  // Eigen's packing blocks are what this is about
  const int64_t N = 16, C = 768, V = 50304;
  std::vector<float> x(size_t(N * C), 0.5f), w(size_t(V * C), 0.25f), y(size_t(N * V));
  cpu::linear_forward<float>(y.data(), x.data(), w.data(), nullptr, N, C, V);  // the first call may fault its block in
  const long before = minor_faults();
  cpu::linear_forward<float>(y.data(), x.data(), w.data(), nullptr, N, C, V);
  const long faults = minor_faults() - before;
  EXPECT_LT(faults, 1000) << "pages faulted in by the second call (its block is about 15.7k pages)";
  EXPECT_EQ(y[0], 0.5f * 0.25f * C);
  cpu::set_cpu_gemm(cpu::CpuGemm::kAuto);
}

}  // namespace
}  // namespace gpt
