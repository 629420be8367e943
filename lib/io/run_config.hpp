// The resolved run configuration: TOML file, then command-line overrides.
//
// Every key is declared once (run_config.cpp) with its flag name, help and a
// parser that validates the value; the TOML file and the command line both
// go through it, so a key means the same thing and is checked the same way
// in both. TOML keys may use '-' or '_' (global_batch = global-batch).
// Unknown keys are an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/adamw.hpp"
#include "model/config.hpp"
#include "model/recompute.hpp"
#include "model/schedule.hpp"

namespace gpt {

enum class DeviceKind { kCpu, kCuda };
enum class Precision { kFp32, kBf16 };

// Sequences per forward/backward on one rank when --micro-batch is not
// given (at most: fit_micro_batch).
inline constexpr int kDefaultMicroBatch = 8;

struct RunConfig {
  // model
  std::string model = "tiny";
  GPTConfig gpt;  // resolved from the preset plus overrides
  int seq_len = 0;  // training sequence length; 0 = the model's context
  // parallelism and placement
  std::string strategy = "ddp";       // ddp | zero1 | zero2 | zero3 | hybrid | auto (resolved by the trainer)
  std::string device_mem;             // strategy auto: memory budget per rank ("" = host memory / ranks per node)
  std::string hybrid_inner = "zero3";  // sharding inside a hybrid shard group
  double bucket_mb = 25;               // ddp gradient bucket
  DeviceKind device = DeviceKind::kCpu;
  std::string comm = "auto";  // collective backend: auto | mpi | nccl (auto resolved by the trainer)
  double comm_timeout_s = 600;  // cuda: longest host wait for the GPU before the job is declared stuck (0: none)
  std::string mesh;          // "RxS"; empty: nodes x ranks per node
  Precision precision = Precision::kFp32;  // default: bf16 on cuda, fp32 on cpu
  std::string reduce_dtype = "fp32";       // gradient reduction: fp32 | bf16 (cuda)
  int threads = 0;  // 0 = OpenMP default
  // The CPU's fp32 products: auto (OpenBLAS on a rank of one thread, else
  // Eigen) | eigen | openblas (model/cpu/gemm.hpp).
  std::string cpu_gemm = "auto";
  // data
  std::string data, val_data;
  std::string tokenizer = "byte", vocab, merges;  // for decoding samples
  // batch and schedule
  int global_batch = 8, micro_batch = kDefaultMicroBatch;
  // --micro-batch given (flag or file). Not given, a training run's micro-batch
  // is fitted to the world size by fit_micro_batch.
  bool micro_batch_given = false;
  // --global-batch given (flag or file): its errors name the default otherwise.
  bool global_batch_given = false;
  // One line for each flag given more than once on the command line (the
  // last value is used), for the log; not part of the configuration.
  std::vector<std::string> repeated_flags;
  int steps = 100;
  float lr = 6e-4f, min_lr = 6e-5f;
  int warmup = 0;
  // After the warm-up: lr, then a decay of this shape to min_lr over the last
  // lr_decay_steps steps, or else the last lr_decay_ratio of the steps after
  // the warm-up (model/schedule.hpp).
  LRDecay lr_decay = LRDecay::kCosine;
  double lr_decay_ratio = 1.0;
  int lr_decay_steps = 0;  // 0: lr_decay_ratio decides
  AdamWHyper adam;
  float clip = 1.0f;
  // A step whose loss or gradient norm is NaN or Inf is never applied; up to
  // this many in a row are skipped (no update), one more ends the run. 0: the
  // first ends it.
  int skip_nonfinite = 0;
  uint64_t seed = 1337;
  bool activation_checkpointing = false;
  Recompute recompute = Recompute::kNone;  // activations recomputed in backward (model/recompute.hpp)
  int gemm_autotune = 0;                   // cuda: time up to N cuBLASLt algorithms per GEMM shape (0: heuristic's)
  // MFU's denominator per rank, in TFLOP/s, and the planner's peak (--strategy
  // auto). 0: the GPU table's for the device's name (model/flops.hpp), or on
  // the CPU the GEMM throughput measured at start-up.
  double peak_tflops = 0;
  int attention_ds_mib = 0;                // cuda, bf16: stored attention score gradients (model/attention_ds.hpp);
                                           // kAttentionDsDefaultBytes (0: recompute) on cuda unless given, 0 on the CPU
  int64_t attention_ds_budget() const { return int64_t(attention_ds_mib) << 20; }  // in bytes
  // cuda, bf16: ours | cudnn (model/cuda/attention_cudnn.hpp) | auto (the
  // trainer resolves it to one of the two on all ranks together). auto by
  // default: cuDNN's was the faster on an H100 (README, "Measured on an H100").
  std::string attention = "auto";
  // checkpoints
  std::string ckpt_dir;  // empty: no checkpoints
  int ckpt_every = 0;    // 0: only at the end of the run (when ckpt_dir is set)
  int keep_last = 0;     // 0: keep all
  bool ckpt_async = false;  // snapshot, then write in the background while training continues
  // Seconds after the start past which no step may end: the run stops after
  // the last step that ends before it, as on a stop signal (a checkpoint,
  // exit 75; core/stop_signal.hpp). 0: no limit.
  double time_limit_s = 0;
  std::string resume;    // "": fresh start; "auto": newest in ckpt_dir; else a checkpoint directory
  std::string init_from;  // start from these weights (llm.c .bin or HDF5 export) when not resuming
  // output
  std::string metrics;
  std::string trace;  // Chrome trace-event JSON, "" = off
  int eval_every = 0, val_batches = 8;
  std::string hellaswag;        // HellaSwag JSON lines evaluated with the validation ("": none)
  int hellaswag_examples = 0;   // the file's first N examples (0: all)
  int sample_every = 0, sample_tokens = 64;
  std::string sample_prompt;       // samples continue this text ("": from the document separator)
  float sample_temperature = 1.0f;  // 0: greedy
  int sample_top_k = 0;            // 0: every token
  int log_every = 1;
  std::string log_level = "info";

  nlohmann::json to_json() const;
};

// A training run whose --micro-batch is not given takes, instead of
// kDefaultMicroBatch, the largest count up to it that divides a rank's
// share of the global batch (global_batch / world): `mpirun -np 4` with
// the defaults trains micro-batches of 2, as a global batch of 4 on one
// rank trains one micro-batch of 4, where a fixed 8 was an error. Returns
// the log line saying so when it changes micro_batch, else "". A global
// batch that the ranks do not divide is a ConfigError naming both (source:
// the config file, for the message). An evaluation (--steps 0), or a
// micro-batch that was given, is left as it is.
std::string fit_micro_batch(RunConfig& cfg, int world, const std::string& source = {});

// Parses argv (and the TOML file named by --config). Returns false if the
// program should exit successfully (--help printed). Throws ConfigError with a
// one-line message naming the key and value for anything invalid.
bool parse_run_config(int argc, const char* const* argv, RunConfig& cfg);
// A run's config from gpt_train's arguments (without the program name; a
// --config among them is read as gpt_train reads it), checked as gpt_train
// checks them except that they may name no data: plan's view of a run.
// Throws ConfigError.
RunConfig run_config_from_args(const std::vector<std::string>& args);
// run_config_from_args({"--config", path}).
RunConfig run_config_from_file(const std::string& path);


}  // namespace gpt
