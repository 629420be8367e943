// JSON-lines metrics writer: one object per line, flushed per line so a
// crashed run keeps every completed step. Only the log rank writes.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpt {

// One training step's record (README, "Metrics"). Keys are written in
// sorted order, as nlohmann::json writes the run's header and summary.
struct StepRecord {
  int step = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, mfu = 0, step_time_s = 0;
  double elapsed_s = 0;  // since the trainer's start (the clock --time-limit reads), at the step's end
  // Largest over ranks, bytes.
  int64_t mem_params = 0, mem_grads = 0, mem_optim = 0, mem_activations = 0, mem_buffers = 0, mem_peak = 0;
  int64_t comm_bytes = 0, comm_calls = 0;
  double comm_time_s = 0, comm_exposed_s = 0;
  std::optional<double> val_loss{};  // on evaluation steps only
  std::optional<double> hellaswag_acc{}, hellaswag_acc_norm{};  // on evaluation steps with --hellaswag
  int64_t hellaswag_examples = 0;
  bool skipped = false;            // not applied: its loss or gradient norm is not finite (--skip-nonfinite)
};

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Empty path: a no-op writer. append: continue an existing file (a resumed
  // run). Throws DataError if the file cannot be created.
  explicit MetricsWriter(const std::string& path, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);  // the run's header and summary
  // Every step: formatted into a buffer kept from step to step, so that
  // once it has grown a step's record allocates nothing.
  void write(const StepRecord& r);

 private:
  // A failed write (a full disk) is a warning, once: the run goes on (the
  // metrics are not the model), and later records are written if they can be.
  void write_line(const char* data, size_t size);
  std::FILE* f_ = nullptr;
  std::string path_;
  bool warned_ = false;  // a write failed and was reported
  fmt::memory_buffer line_;
};

}  // namespace gpt
