// The trainer's state (Trainer::Impl), private to lib/strategies: its
// functions are defined by trainer.cpp (set-up, a micro-batch, the step
// loop), trainer_checkpoint.cpp (resume and checkpoints) and
// trainer_eval.cpp (validation, HellaSwag, samples).
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/mesh.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"
#include "io/checkpoint.hpp"
#include "io/data_loader.hpp"
#include "io/hellaswag.hpp"
#include "io/metrics.hpp"
#include "io/tokenizer.hpp"
#include "model/gpt.hpp"
#include "model/sampling.hpp"
#include "model/schedule.hpp"
#include "strategies/strategy.hpp"
#include "strategies/trainer.hpp"
#include "strategies/unit_model.hpp"

namespace gpt {

struct Trainer::Impl {
  Timer since_start;           // --time-limit counts from here, the trainer's start (MPI's is before it)
  double last_step_s = 0;      // the last step's time: --time-limit's estimate of the next one
  std::string threads_note;    // --threads 0: how the node's cores were shared
  std::string auto_note;       // strategy auto: why the planner chose what runs
  std::string comm_note;       // comm auto: what was chosen and why
  std::optional<RankGpu> gpu;  // --device cuda: this rank's GPU (unless a backend is given)
  RunConfig resolved;          // the config with strategy and comm auto resolved
  const RunConfig& cfg;
  MPI_Comm base;
  int rank = 0, world = 1;
  MemoryTracker mem;
  DType param_dtype;
  std::unique_ptr<DeviceBackend> backend;  // --device cuda; null on the host
  DeviceMesh2D mesh;
  ParamLayout layout;
  std::unique_ptr<Strategy> strategy;
  // Why our bf16 attention runs its CUDA-core kernels, not the tensor-core
  // ones, on some rank ("" where every rank runs them), and on which
  // ("here" on 1 rank); set by resolve_attention, so declared before
  // attention_note.
  std::string tensor_core_note, tensor_core_where;
  std::string attention_note;  // attention auto: what was chosen and why
  std::string code_note;       // a GPU running PTX its driver compiles: resolve_code_note
  std::unique_ptr<UnitModel> model;
  // The training data; none with --steps 0 and no --data (evaluation only), so always one where a step runs.
  std::optional<DataLoader> loader;
  std::optional<DataLoader> val_loader;
  int val_batches = 0;  // micro-batches per rank per validation: --val-batches, or (0) as many as val_loader holds
  // --val-batches 0 and the validation data do not divide into whole batches: each validation reads the partial
  // batch after them too (DataLoader::tail).
  bool val_tail = false;
  // Sequences a validation reads over all ranks: the whole batches and the tail.
  int64_t val_sequences() const {
    return int64_t(val_batches) * cfg.micro_batch * world + (val_tail ? val_loader->tail_windows() : 0);
  }
  std::unique_ptr<Tokenizer> tokenizer;  // decodes samples, encodes --sample-prompt and --hellaswag
  // --hellaswag: this rank's examples (the file's e-th goes to rank e % world),
  // their endings as rows sorted longest first (a pass pads little), and
  // the passes every rank makes (the most any rank needs: with sharded
  // parameters each pass gathers collectively).
  struct ChoiceRowRef {
    int32_t example;  // index into hellaswag
    int32_t ending;
    int32_t score;  // index into hellaswag_losses
    ChoiceRow row;
  };
  std::vector<ChoiceExample> hellaswag;
  std::vector<ChoiceRowRef> hellaswag_rows;
  std::vector<EndingLoss> hellaswag_losses;
  std::vector<int32_t> hellaswag_first;  // example i's endings: hellaswag_losses[first[i], first[i+1])
  int64_t hellaswag_total = 0, hellaswag_passes = 0;
  int64_t last_sample_bytes = 0;  // sent by this rank during the last sample (every communicator)
  int64_t last_eval_bytes = 0;    // sent by this rank during the last validation
  double last_sample_s = 0;
  std::vector<int32_t> sample_context;  // what a sample starts from: a separator, then --sample-prompt's tokens
  TokenSampler sampler{{}};
  std::string resume_path;  // checkpoint to start from, "" for a fresh start
  // AdamW updates applied so far: the steps done less the skipped ones. The
  // bias correction counts these, as PyTorch's GradScaler and DeepSpeed do
  // (a skipped step does not advance the optimizer); checkpoints carry it.
  int64_t optimizer_updates = 0;
  // Steps not applied since the last one that was (--skip-nonfinite limits
  // it); checkpoints carry it, so a resume ends or skips as the run would have.
  int skipped_in_a_row = 0;
  MetricsWriter metrics;
  // Async checkpoints: a snapshot of the owned state written by a background
  // thread over its own duplicate of the communicator, so its collectives
  // never interleave with the trainer's on the same communicator. At most
  // one write is in flight; it is joined before the next one and at the end.
  MPI_Comm ckpt_comm = MPI_COMM_NULL;
  std::thread ckpt_thread;
  std::exception_ptr ckpt_error;
  // The snapshot: the written range of each owned slice (a rank's share
  // under ddp), or nothing where the strategy's slices are copies already
  // (UnitSlice::detached: a GPU's host copies).
  std::vector<Buffer<float>> ckpt_snapshot;
  // The background write's `checkpoint` metrics record, made by its thread
  // (which then sets ckpt_record_ready, and touches neither again) and
  // written by the loop's thread after the next step's record, or at the
  // join (the metrics writer is not shared). Its errors are raised at the
  // join, or after a step once it failed (ckpt_failed).
  std::optional<nlohmann::json> ckpt_record;
  std::atomic<bool> ckpt_record_ready{false};
  // Set by the writer after it stored ckpt_error: the loop raises it after
  // the next step, not at the next checkpoint (steps later, the run
  // training on without one), on the failing rank; its abort ends the
  // others, whose writers may be in a collective write that never ends.
  std::atomic<bool> ckpt_failed{false};
  void write_checkpoint_record();
  // This run's published checkpoints and the loop's time in them (summary).
  int ckpt_count = 0;
  double ckpt_blocked_s = 0;
  LRSchedule sched;
  std::vector<int32_t> tokens, targets;
  double gemm_peak = 0;
  std::vector<int> nan_grad_steps;  // GPT_TEST_NAN_GRAD_STEPS (nan_grad_step)
  // --trace on a GPU: the loop's spans at the compute stream's times too.
  // Unset (by the guard, destroyed first) before the marks go away.
  std::unique_ptr<trace::DeviceMarks> trace_marks;
  struct UnsetMarks {
    ~UnsetMarks() { trace::set_device_marks(nullptr); }
  } unset_marks;
  void check_tokens() const;
  static int rank_of(MPI_Comm c);
  static int size_of(MPI_Comm c);
  Impl(const RunConfig& config, MPI_Comm b, std::unique_ptr<DeviceBackend> given);

  // --attention auto: cuDNN's fused attention where every rank can run it
  // at the training shape (cuda, bf16, cuDNN 9.8+, an engine for both
  // graphs on its GPU: the plans are built here and kept for the model),
  // else our kernels. Decided on all ranks together, so they agree; returns
  // the log line saying which and why (the first rank that cannot names
  // its reason). Other choices pass through. Where ours runs in bf16 and a
  // rank's GPU cannot take its tensor-core kernels at the model's head size,
  // that rank runs the CUDA-core ones (each rank by its own GPU), the log
  // names the first such rank and its reason (tensor_core_note, on rank 0
  // too: ranks may hold different GPUs), and no rank stores score
  // gradients (the CUDA-core kernels store none; one budget on all ranks).
  std::string resolve_attention();
  // Where a rank's GPU has no code of its own in this build, rank 0 says so
  // once, naming the first such rank (ranks may hold different GPUs).
  std::string resolve_code_note();
  std::string resolve_attention_auto();
  GPTOptions model_options() const;

  // GPU communicators order their collectives against the compute stream.
  DeviceMesh2D& set_streams();
  static std::string resolve_resume(const RunConfig& c);
  std::vector<UnitSlice> owned_slices(OwnedFor use);

  // A resume continues the run that wrote the checkpoint exactly only if the
  // data stream is the same: the seed orders the sequences (and draws the
  // samples), and the data position counts sequences of seq-len tokens of
  // the data set. Changing either is legitimate (another seed to step past
  // a loss spike's batches, a longer context, a new data mixture), so it
  // is a warning that says what follows from it, not an error.
  void warn_if_data_stream_changed(const CheckpointMeta& meta) const;

  // Loads the checkpoint chosen by --resume; returns the optimizer steps it
  // had done and sets optimizer_updates. For auto, what every rank loads is
  // rank 0's choice (resume_path is only this rank's first look).
  int restore();
  // Joins the background write (its wait counts as the loop's time in
  // checkpoints) and writes its metrics record, or rethrows its error.
  void join_checkpoint();
  void checkpoint(int steps_done);
  // snapshot_bytes: rank 0's state held aside for a background write (0 when synchronous).
  nlohmann::json published(int step, const std::string& path, double write_s, double blocked_s, int64_t snapshot_bytes,
                           const h5::CollectiveIo& io);
  ~Impl();
  size_t E() const { return layout.embedding_unit(); }
  size_t F() const { return layout.final_unit(); }
  size_t B(int l) const { return layout.block_unit(l); }

  // Forward through every unit with the strategy's gathers; the model's
  // state then holds the last block's output (for eval and sampling).
  // The batch comes from the preceding model->set_batch().
  void forward_blocks();

  // A step whose loss (meaned over ranks) or gradient norm is NaN or Inf,
  // the `in_a_row`-th such step since the last applied one: skipped with a
  // warning while --skip-nonfinite allows, else the end of the run. Either
  // way it is not applied, so the parameters and any checkpoint stay finite.
  void skip_or_end(int step, double loss, double norm, int in_a_row) const;

  // Test hook: GPT_TEST_NAN_GRAD_STEPS=3,4 makes the last rank's gradient NaN
  // in those optimizer steps (its loss scale is NaN), as an overflow in one
  // rank's backward would; the gradient reductions carry it to every rank.
  bool nan_grad_step(int step) const {
    return rank == world - 1 && std::count(nan_grad_steps.begin(), nan_grad_steps.end(), step) > 0;
  }

  // One micro-batch: forward, loss, backward (the loss is collected by
  // model->take_loss()). Gathers (params) and gradient buffers (grads) are
  // taken before each compute slice, so a trace shows waiting and computing
  // apart. On a GPU the spans time the enqueueing, not the kernels.
  void micro_step(const int32_t* tok, const int32_t* tgt, float loss_scale);
  double mean_over_ranks(double x, const char* what);

  // Passes without a backward (validation, HellaSwag, samples) keep the
  // embedding and final units gathered from their first pass to their last
  // and release them here: every pass needs both, and a pass holds them
  // anyway, so this costs no memory and saves gathering wte again per pass
  // (a third of gpt2-124m's parameters). Blocks are gathered per pass.
  void release_ends();

  // This rank's collectives on every communicator since reset_comm_stats():
  // bytes sent, time on the progress engine, time exposed. The step loop
  // resets them at the start of each step and reads them at its end, so
  // evaluations and samples, which come after that read, may reset them too.
  std::array<Communicator*, 3> comms() { return {&mesh.world(), &mesh.shard_group(), &mesh.replicate_group()}; }
  void reset_comm_stats();
  CommTotals comm_since_reset();
  double evaluate();

  // Every rank reads the whole file (its errors then end every rank alike)
  // and keeps its own examples.
  void load_hellaswag();

  // HellaSwag accuracy (io/hellaswag.hpp): each rank scores its examples'
  // endings, B of them per pass, padded to the pass's longest; the counts
  // are summed over ranks.
  struct ChoiceScore {
    double acc = 0, acc_norm = 0;
  };
  ChoiceScore evaluate_hellaswag();
  void log_hellaswag(int step, const ChoiceScore& h, double seconds) const;
  // Validation and HellaSwag where asked for, at `step`: logged, into rec's
  // fields, and as sum's final values.
  void evaluate_all(int step, StepRecord& rec, TrainSummary& sum);
  // The model as the run starts (initialised, imported or restored at
  // `step`), before any training: its validation loss and HellaSwag
  // accuracy where asked for, logged and written to the metrics as
  // {"type": "eval", "step", "val_loss", "hellaswag", "seconds", "elapsed_s"}; sum's
  // final values hold them until a later evaluation replaces them (a run
  // that trains nothing reports these).
  void evaluate_start(int step, TrainSummary& sum);

  // Every rank generates the same tokens (same seed): sharded parameters are
  // gathered collectively. Only rank 0 prints the result.
  std::string sample(int step);

  // A sample, logged and recorded in the metrics ({"type": "sample", ...}),
  // with what it cost this rank: its time, and the bytes it sent (sharded
  // strategies gather every block per token).
  void report_sample(int step, const std::string& text);

  // Memory of this rank, max over ranks (a few scalars over base, not counted as training traffic).
  std::array<int64_t, 6> mem_max();
  // The run's metrics header and start-up log (m0: mem_max() before the first step).
  void announce(const std::array<int64_t, 6>& m0);
  TrainSummary run();
};

}  // namespace gpt
