// The training loop: data -> model (unit by unit, through the strategy's
// hooks) -> gradient sync -> clipping -> AdamW -> metrics, evaluation,
// samples. Every rank runs it; rank 0 writes metrics and logs.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_env.hpp"
#include "io/run_config.hpp"

namespace gpt {

class DeviceBackend;  // strategies/unit_model.hpp

struct TrainSummary {
  std::vector<double> losses, grad_norms;  // per optimizer step
  double final_val_loss = -1;
  double final_hellaswag_acc = -1, final_hellaswag_acc_norm = -1;  // --hellaswag: the last evaluation's
  double tokens_per_s = 0;  // steady state: warm-up steps excluded
  double mfu = 0;
  double step_time_s = 0;
  int64_t model_state_bytes = 0;  // params + grads + optim on this rank (max over ranks)
  int64_t activation_bytes = 0;   // max over ranks
  int64_t buffer_bytes = 0;       // transient gathered units / unit gradients, max over ranks
  int64_t peak_bytes = 0;         // max over ranks
  int64_t comm_bytes_per_step = 0;
  int64_t comm_calls_per_step = 0;  // collectives this rank issued in the last step
  int64_t sample_comm_bytes = 0;  // sent by this rank during the run's last sample (0: none, or nothing to gather)
  int64_t eval_comm_bytes = 0;    // sent by this rank during the run's last validation (the same)
  std::string strategy, mesh, hybrid_inner;  // as run (strategy auto: the planner's choice)
  double comm_s_per_step = 0, exposed_s_per_step = 0;
  int steps_done = 0;        // the optimizer steps done when the run ended (a resume's earlier ones included)
  // "SIGUSR1", ...: the run stopped early on it, or "time-limit" (core/stop_signal.hpp); empty otherwise
  std::string stop_signal;
  int skipped_steps = 0;     // steps of this run not applied: loss or gradient norm not finite (--skip-nonfinite)
  int checkpoints = 0;            // checkpoints this run published
  double checkpoint_blocked_s = 0;  // the training loop's time in them: whole writes, or snapshots and joins (async)
};

class Trainer {
 public:
  // Collective over the world.
  Trainer(const RunConfig& cfg, const MpiEnv& env);
  // Collective over `base` (tests: MPI_COMM_SELF gives a one-rank reference).
  Trainer(const RunConfig& cfg, MPI_Comm base);
  // With a given device backend instead of the one --device selects (tests:
  // an emulated bf16 device on the host exercises the mixed-precision engine
  // without a GPU). The backend's memory must suit cfg.comm's communicator.
  Trainer(const RunConfig& cfg, MPI_Comm base, std::unique_ptr<DeviceBackend> backend);
  ~Trainer();
  TrainSummary run();
  // Every unit's full parameters, layout order (collective).
  std::vector<std::vector<float>> full_params();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt
