// Does an async all-reduce overlap compute? Measures, per rank:
//   compute   a fixed GEMM workload alone
//   comm      an all-reduce of --mb MiB alone
//   serial    compute, then the all-reduce
//   thread    MpiCommunicator: all-reduce issued async (progress thread), compute, wait
//   mpi_test  MPI_Iallreduce, compute in chunks calling MPI_Test between them, wait
// overlap = (serial - t) / min(compute, comm): 1 = fully hidden, 0 = none.
// Times are the max over ranks of the median of --reps repetitions.
// Kept as a benchmark, not a test: on a 2-core machine shared by several
// ranks and their progress threads, the result depends on the load.
//   mpirun -np 2 overlap_comm [--mb 32] [--reps 5] [--gemm 384] [--iters N]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>

#include <nlohmann/json.hpp>

#include "comm/mpi_communicator.hpp"
#include "comm/mpi_env.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "model/cpu/eigen_maps.hpp"

using namespace gpt;

int main(int argc, char** argv) {
  MpiEnv env(&argc, &argv);
  CLI::App app{"overlap_comm"};
  int mb = 32, reps = 5, n = 384, iters = 0;
  app.add_option("--mb", mb, "all-reduce size in MiB");
  app.add_option("--reps", reps, "repetitions (median)");
  app.add_option("--gemm", n, "GEMM size of one compute chunk");
  app.add_option("--iters", iters, "compute chunks (0: calibrate to the all-reduce time)");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(1);  // one compute thread per rank

  const size_t count = size_t(mb) << 18;  // floats
  std::vector<float> buf(count, 1.f);
  cpu::MatR<float> a = cpu::MatR<float>::Random(n, n), b = cpu::MatR<float>::Random(n, n), c(n, n);
  auto chunk = [&] { c.noalias() = a * b; };
  MpiCommunicator comm(MPI_COMM_WORLD);

  auto median_max = [&](const std::function<void()>& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      Timer tm;
      f();
      t.push_back(tm.seconds());
    }
    std::sort(t.begin(), t.end());
    double m = t[t.size() / 2];
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
  };
  auto allreduce = [&] { comm.all_reduce(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum); };
  const double t_comm = median_max(allreduce);
  if (iters == 0) {  // calibrate compute to take about as long as the all-reduce
    Timer tm;
    for (int i = 0; i < 5; ++i) chunk();
    double per = tm.seconds() / 5;
    MPI_Allreduce(MPI_IN_PLACE, &per, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    iters = std::max(1, int(t_comm / per));
  }
  auto compute = [&] {
    for (int i = 0; i < iters; ++i) chunk();
  };
  const double t_compute = median_max(compute);
  const double t_serial = median_max([&] {
    compute();
    allreduce();
  });
  const double t_thread = median_max([&] {
    auto w = comm.all_reduce_async(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum);
    compute();
    w->wait();
  });
  const double t_test = median_max([&] {
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, buf.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    int done = 0;
    for (int i = 0; i < iters; ++i) {
      chunk();
      if (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  });
  const double hide = std::min(t_compute, t_comm);
  auto overlap = [&](double t) { return (t_serial - t) / hide; };
  if (env.rank() == 0) {
    std::printf("# overlap_comm: %d ranks, all-reduce %d MiB, %d GEMM chunks of %d^3 (1 thread per rank), median of %d\n",
                env.size(), mb, iters, n, reps);
    std::printf("# %-10s %10s %10s\n", "mode", "time(ms)", "overlap");
    std::printf("  %-10s %10.1f %10s\n  %-10s %10.1f %10s\n  %-10s %10.1f %10s\n", "compute", 1e3 * t_compute, "-",
                "comm", 1e3 * t_comm, "-", "serial", 1e3 * t_serial, "0");
    std::printf("  %-10s %10.1f %9.0f%%\n  %-10s %10.1f %9.0f%%\n", "thread", 1e3 * t_thread, 100 * overlap(t_thread),
                "mpi_test", 1e3 * t_test, 100 * overlap(t_test));
    nlohmann::json j = {{"ranks", env.size()}, {"mb", mb}, {"compute_s", t_compute}, {"comm_s", t_comm},
                        {"serial_s", t_serial}, {"thread_s", t_thread}, {"mpi_test_s", t_test},
                        {"overlap_thread", overlap(t_thread)}, {"overlap_mpi_test", overlap(t_test)}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}
