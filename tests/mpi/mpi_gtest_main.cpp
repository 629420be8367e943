// GoogleTest main for tests launched under mpirun: every rank runs every
// test; rank 0 prints the usual report, other ranks print only their
// failures (prefixed with the rank). The first failure on any rank aborts
// the whole job (MPI_Abort, non-zero exit): a failed assertion returns early
// on that rank only, and the others would wait forever in their next
// collective.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/mpi_env.hpp"
#include "core/logging.hpp"
#include "core/plural.hpp"
#include "mpi_test_env.hpp"

namespace {

const gpt::MpiEnv* g_env = nullptr;

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n[rank %d] aborting all ranks\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary(), rank_);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  int rank_;
};

}  // namespace

const gpt::MpiEnv& gpt::test::env() { return *g_env; }

int main(int argc, char** argv) {
  gpt::MpiEnv env(&argc, &argv);
  g_env = &env;
  gpt::init_logging(env.rank(), env.size(), "warn");  // tests: warnings and errors only
  ::testing::InitGoogleTest(&argc, argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (env.rank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new FailurePrinter(env.rank()));
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (env.rank() == 0)
    std::printf("[ranks] %s, %s\n", gpt::count_of(env.size(), "rank").c_str(), failed ? "SOME RANK FAILED" : "all passed");
  return failed;
}
