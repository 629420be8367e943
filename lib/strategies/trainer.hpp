// The training loop: data -> model (unit by unit) -> gradient clipping ->
// AdamW -> metrics, evaluation and samples. One rank in this build; the
// strategies that split state over ranks plug in where ReplicatedState is.
#pragma once

#include <memory>

#include "comm/mpi_env.hpp"
#include "io/run_config.hpp"

namespace gpt {

struct TrainSummary {
  double first_loss = 0, final_loss = 0, final_val_loss = -1;
  double tokens_per_s = 0;  // steady state: warm-up steps excluded
  double mfu = 0;
  int steps = 0;
};

class Trainer {
 public:
  Trainer(const RunConfig& cfg, const MpiEnv& env);
  ~Trainer();
  TrainSummary run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt
