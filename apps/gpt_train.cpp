// gpt_train: the main job. mpirun -np N gpt_train [--config FILE.toml] [--key value ...]
// Libraries throw typed errors; this is the one place that catches them,
// logs one line and ends every rank with a non-zero exit.
//
// The trainer lives outside the try block, so an error does not unwind it
// on its way here. After a StuckError (a collective that will never
// finish) it must not be destroyed: its destructors synchronise streams,
// free device memory and destroy NCCL communicators, each of which would
// wait forever for the stuck collective. The process ends with it alive
// (MpiEnv::abort does not return). After any other error it is destroyed
// first, as before: a checkpoint being written in the background finishes.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <thread>

#include "command_line.hpp"
#include "comm/mpi_env.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/plural.hpp"
#include "core/stall_guard.hpp"
#include "core/stop_signal.hpp"
#include "io/run_config.hpp"
#include "strategies/trainer.hpp"

// Test hook: GPT_TEST_END_STALL_RANK=R stops rank R for good after the run,
// outside any StallGuard, so that only the other ranks' guard of the end
// can end the job (tests/cli/stall.sh).
static void stall_at_end_for_test(int rank) {
  const char* v = std::getenv("GPT_TEST_END_STALL_RANK");
  if (v && std::atoi(v) == rank)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

int main(int argc, char** argv) {
  gpt::set_program_build(gpt::this_build());
  // --help and --version need no MPI: they answer on a login node, without a launcher.
  if (gpt::asks_for_help_or_version(argc, argv)) {
    try {
      gpt::RunConfig cfg;
      gpt::parse_run_config(argc, argv, cfg);  // prints the help or the version
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::optional<gpt::MpiEnv> env;
  try {
    env.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  gpt::init_logging(env->rank(), env->size());
  gpt::install_stop_signals();  // SIGTERM, SIGINT, SIGUSR1: stop after the current step, with a checkpoint
  // A stretch of blocking library calls with no progress (core/stall_guard.hpp)
  // ends every rank from the monitor thread; the stuck thread never returns.
  gpt::set_stall_handler([](const std::string& message) { gpt::MpiEnv::abort_now(message, 1); });
  std::optional<gpt::Trainer> trainer;
  double comm_timeout_s = 0;  // --comm-timeout, for the end of the run
  int exit_code = 0;          // kExitStoppedEarly: stopped on a signal (core/stop_signal.hpp)
  try {
    gpt::RunConfig cfg;
    if (!gpt::parse_run_config(argc, argv, cfg)) return 0;
    comm_timeout_s = cfg.comm_timeout_s;
    spdlog::set_level(spdlog::level::from_str(cfg.log_level));
    gpt::log0("{}", gpt::version_line("gpt_train", gpt::program_build()));
    for (const std::string& repeated : cfg.repeated_flags) gpt::log0("{}", repeated);
    gpt::log0("{} on {}, {} per node{}", gpt::count_of(env->size(), "rank"), gpt::count_of(env->num_nodes(), "node"),
              env->local_size(), env->uniform() ? "" : " (uneven)");
    // Every data-parallel strategy spreads the global batch over all ranks.
    if (const std::string fitted = gpt::fit_micro_batch(cfg, env->size()); !fitted.empty()) gpt::log0("{}", fitted);
    if (const std::string slurm = env->slurm_summary(); !slurm.empty()) {
      // Every rank checks its own ids; disagreement is worth a warning, not an error (mpirun inside sbatch).
      if (slurm.find("(agree") != std::string::npos) {
        gpt::log0("{}", slurm);
      } else {
        spdlog::warn("{}", slurm);
      }
    }
    trainer.emplace(cfg, *env);
    const gpt::TrainSummary summary = trainer->run();
    if (!summary.stop_signal.empty()) {
      gpt::log0("stopped early {} after step {} of {}; exit {}{}",
                summary.stop_signal == gpt::kTimeLimitStop ? "at --time-limit" : "on " + summary.stop_signal,
                summary.steps_done, cfg.steps, gpt::kExitStoppedEarly,
                cfg.ckpt_dir.empty() ? "" : " (--resume auto in the same --ckpt-dir continues the run)");
      exit_code = gpt::kExitStoppedEarly;
    }
  } catch (const gpt::StuckError& e) {
    env->abort(e.what(), 1);  // trainer stays alive: see above
  } catch (const gpt::ConfigError& e) {
    trainer.reset();
    env->abort(e.what(), 1, /*same_on_all_ranks=*/true);
  } catch (const gpt::DivergedError& e) {
    trainer.reset();
    env->abort(e.what(), 1, /*same_on_all_ranks=*/true);
  } catch (const gpt::Error& e) {
    trainer.reset();
    env->abort(e.what(), 1);
  } catch (const std::bad_alloc&) {
    trainer.reset();
    env->abort("out of host memory (an allocation failed); `plan` predicts what each strategy needs per rank: a "
               "sharded strategy (--strategy auto picks one that fits), more ranks, --recompute or a smaller "
               "--micro-batch need less",
               1);
  } catch (const std::exception& e) {
    trainer.reset();
    env->abort(fmt::format("unexpected error: {}", e.what()), 1);
  }
  // The end of the run blocks too: the trainer's teardown (NCCL's
  // communicators, the device) and MPI_Finalize, which waits for every rank
  // to reach it. A rank that never does would hold the job until the
  // scheduler's time limit; the ranks' last collective is a moment before.
  stall_at_end_for_test(env->rank());
  {
    gpt::StallGuard guard(comm_timeout_s, "the end of the run: the teardown, then MPI_Finalize's wait for every rank");
    trainer.reset();
    gpt::note_progress("the trainer's teardown");
    env.reset();  // MPI_Finalize
  }
  return exit_code;
}
