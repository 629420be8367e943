#include "strategies/trainer_impl.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "comm/agree.hpp"
#include "comm/mpi_wait.hpp"
#include "comm/thread_share.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/host_heap.hpp"
#include "core/logging.hpp"
#include "core/plural.hpp"
#include "core/stall_guard.hpp"
#include "core/stop_signal.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"
#include "io/same_on_ranks.hpp"
#include "io/trace_writer.hpp"
#include "model/attention_ds.hpp"
#include "model/cpu/gemm.hpp"
#include "model/cpu/gemm_peak.hpp"
#include "model/flops.hpp"
#include "strategies/launch_choices.hpp"

namespace gpt {
namespace {

constexpr int kWarmupSteps = 2;  // excluded from the run's throughput summary

std::vector<int> nan_grad_steps_for_test() {
  std::vector<int> steps;
  const char* v = std::getenv("GPT_TEST_NAN_GRAD_STEPS");
  for (char* p = const_cast<char*>(v); p && *p;) {
    char* end = nullptr;
    const long step = std::strtol(p, &end, 10);
    if (end == p) break;
    steps.push_back(int(step));
    p = *end == ',' ? end + 1 : end;
  }
  return steps;
}

std::string format_eta(double s) {
  const int t = static_cast<int>(s);
  return t >= 3600 ? fmt::format("{}h{:02d}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02d}s", t / 60, t % 60);
}

}  // namespace

int Trainer::Impl::rank_of(MPI_Comm c) {
  int r;
  MPI_Comm_rank(c, &r);
  return r;
}

int Trainer::Impl::size_of(MPI_Comm c) {
  int s;
  MPI_Comm_size(c, &s);
  return s;
}

Trainer::Impl::Impl(const RunConfig& config, MPI_Comm b, std::unique_ptr<DeviceBackend> given)
    : gpu(config.device == DeviceKind::kCuda && !given ? rank_gpu(b) : std::nullopt),
      resolved(resolve_comm(resolve_strategy(config, b, gpu, &auto_note), b, gpu, &comm_note)),
      cfg(resolved),
      base(b),
      rank(rank_of(b)),
      world(size_of(b)),
      param_dtype(cfg.precision == Precision::kBf16 ? DType::kBF16 : DType::kF32),
      backend(given ? std::move(given)
              : cfg.device == DeviceKind::kCuda
                  // MPI collectives stage device buffers through host memory: ranks may share a GPU.
                  ? make_device_backend(gpu, cfg.comm == "mpi", param_dtype, &mem)
                  : nullptr),
      mesh(b, resolve_mesh(cfg, b), parse_comm_backend(cfg.comm), backend ? backend->device_index() : 0),
      layout(cfg.gpt),
      strategy(make_strategy(
          {parse_strategy(cfg.strategy), parse_strategy(cfg.hybrid_inner), cfg.bucket_mb, cfg.seed, param_dtype,
           cfg.reduce_dtype == "bf16" ? DType::kBF16 : DType::kF32, backend ? backend->arena() : nullptr,
           /*trains=*/cfg.steps > 0},  // --steps 0: parameters only, no gradients or optimizer state
          layout, set_streams(), &mem)),
      attention_note(resolve_attention()),
      code_note(resolve_code_note()),
      model(backend ? backend->make_model(layout, model_options()) : make_host_model(layout, model_options(), &mem)),
      // --steps 0 reads no training data (and has no global batch), though a training config's --data may be
      // given; a run that trains without any fails in expand_globs ("empty data pattern").
      loader(cfg.steps == 0
                 ? std::nullopt
                 : std::optional<DataLoader>(
                       std::in_place, LoaderOptions{expand_globs(cfg.data), cfg.seq_len, cfg.global_batch,
                                                    cfg.micro_batch, rank, world, cfg.seed, true, cfg.gpt.vocab_size})),
      resume_path(resolve_resume(cfg)),
      metrics(rank == 0 ? cfg.metrics : std::string(), !resume_path.empty()),
      sched{cfg.lr, cfg.min_lr, cfg.warmup, cfg.steps, cfg.lr_decay, cfg.lr_decay_ratio, cfg.lr_decay_steps},
      nan_grad_steps(nan_grad_steps_for_test()) {
  note_progress("the model and the data");
  if (!cfg.val_data.empty()) {
    val_loader.emplace(LoaderOptions{expand_globs(cfg.val_data), cfg.seq_len, cfg.micro_batch * world, cfg.micro_batch,
                                     rank, world, cfg.seed, false, cfg.gpt.vocab_size});
    // 0: every whole batch of micro-batches on all ranks the data hold (the loader makes sure of one).
    val_batches =
        cfg.val_batches > 0
            ? cfg.val_batches
            : int(std::min<int64_t>(INT32_MAX, val_loader->num_windows() / (int64_t(cfg.micro_batch) * world)));
    val_tail = cfg.val_batches == 0 && val_loader->tail_windows() > 0;
  }
  // Made even where nothing samples or encodes, so that a --vocab or --merges that cannot be read, or a
  // tokenizer for another model, is an error now rather than in a later run that samples (or in ckpt_tool's
  // Hugging Face export, which copies the files).
  tokenizer = make_tokenizer(cfg.tokenizer, cfg.vocab, cfg.merges);
  if (tokenizer->eot() >= cfg.gpt.vocab_size)  // samples would start from a token the model does not have
    throw ConfigError(fmt::format("invalid tokenizer = '{}': its {} tokens do not fit the model's vocab-size {}",
                                  cfg.tokenizer, tokenizer->vocab_size(), cfg.gpt.vocab_size));
  check_tokens();
  if (!cfg.hellaswag.empty()) load_hellaswag();
  if (cfg.sample_tokens > 0) {
    sample_context = {tokenizer->eot() >= 0 ? tokenizer->eot() : int32_t('\n')};
    for (int id : tokenizer->encode(cfg.sample_prompt)) {
      if (id >= cfg.gpt.vocab_size)
        throw ConfigError(
            fmt::format("invalid sample-prompt = '{}': token id {} is outside the model's vocabulary "
                        "(vocab_size {})",
                        cfg.sample_prompt, id, cfg.gpt.vocab_size));
      sample_context.push_back(id);
    }
    sampler = TokenSampler({cfg.sample_temperature, cfg.sample_top_k});
  }
  // A wait for other ranks (a collective, or the GPU waiting for one)
  // that outlasts --comm-timeout, or a communicator failing while the host
  // waits, is an error (and so ends every rank), not a hang.
  set_watchdog({cfg.comm_timeout_s, [this] { mesh.check_health(); }});
  tokens.resize(size_t(cfg.micro_batch) * cfg.seq_len);
  targets.resize(tokens.size());
  // MFU's denominator is the aggregate peak of all ranks: each measures its
  // GEMM throughput at the same time as the others, so ranks sharing cores
  // (oversubscription) share the peak too.
  MPI_Barrier(base);
  if (cfg.peak_tflops > 0) {
    gemm_peak = cfg.peak_tflops * 1e12;  // --peak-tflops: the user's figure, per rank
  } else if (backend) {
    // A GPU: the datasheet's dense peak for its name (model/flops.hpp),
    // or a MIG instance's share of it, shared by the ranks on it (tests
    // run several on one GPU).
    const bool bf16 = param_dtype == DType::kBF16;
    gemm_peak = gpu ? gpu->peak_flops(bf16) : gpu_peak_flops(backend->device_name(), bf16);
    if (gemm_peak == 0)
      warn0("no peak FLOP/s known for '{}': MFU is reported as 0 (--peak-tflops gives it)", backend->device_name());
  } else {
    gemm_peak = cpu::measure_gemm_peak();
  }
  MPI_Allreduce(MPI_IN_PLACE, &gemm_peak, 1, MPI_DOUBLE, MPI_SUM, base);
}

// Every token of the data is checked against the model's vocabulary before
// any rank reads a batch (an id past the embedding would read outside it).
// Each rank checks its own part of the data, and every rank ends with the
// first bad token's error: the job reads its data once at start-up, not
// once per node (2 ranks on 2 GB of shards outside the page cache started
// in 27-29 s here, against 42-47 s when each checked all of it). The same
// scan gives the data's largest id, which tells a tokenizer that cannot
// decode them (GPT-2's ids read as bytes). The loaders check each window
// they read as well: the bytes a rank reads may not be those checked.
void Trainer::Impl::check_tokens() const {
  int max_id = -1;
  for (const std::optional<DataLoader>* l : {&loader, &val_loader}) {
    if (!*l) continue;
    // The parts below, the shuffle and every rank's rows of each batch are
    // computed from the shards: every rank must have the same ones.
    check_same_shards(**l, l == &loader ? "--data" : "--val-data", base);
    const TokenShard::Scan part = (*l)->scan_tokens(cfg.gpt.vocab_size, rank, world);
    const FirstNote bad = first_note(part.error, base);
    if (!bad.text.empty()) throw DataError(bad.text);
    max_id = std::max(max_id, part.max_id);
  }
  MPI_Allreduce(MPI_IN_PLACE, &max_id, 1, MPI_INT, MPI_MAX, base);
  const bool decodes = cfg.sample_tokens > 0, encodes = !cfg.hellaswag.empty();
  if (max_id >= tokenizer->vocab_size() && (decodes || encodes))
    warn0(
        "the data's token ids go up to {}, past the {} tokens of tokenizer {}: {} with the wrong tokenizer; give "
        "the one the data were made with (--tokenizer gpt2 --vocab encoder.json --merges vocab.bpe){}",
        max_id, tokenizer->vocab_size(), cfg.tokenizer,
        decodes && encodes ? "samples would be decoded, and HellaSwag's examples encoded,"
        : decodes          ? "samples would be decoded"
                           : "HellaSwag's examples would be encoded",
        decodes ? ", or --sample-tokens 0" : "");
}

std::string Trainer::Impl::resolve_attention() {
  std::string note = resolve_attention_auto();
  if (backend && resolved.attention == "ours") {
    const FirstNote cannot = first_note(
        backend->tensor_core_attention_unavailable(cfg.micro_batch, cfg.seq_len, cfg.gpt.n_embd, cfg.gpt.n_head), base);
    if (cannot.where.count > 0) {
      tensor_core_note = cannot.text;
      tensor_core_where =
          world == 1 ? "here"
                     : fmt::format("on {} of {} ranks (rank {}'s GPU)", cannot.where.count, world, cannot.where.first);
      resolved.attention_ds_mib = 0;
    }
  }
  return note;
}

std::string Trainer::Impl::resolve_code_note() {
  if (!backend) return "";  // the same on every rank: --device
  const FirstNote on = first_note(backend->driver_compiled_code_note(), base);
  if (on.where.count == 0 || world == 1) return on.text;
  return fmt::format("{} (on {} of {} ranks; rank {}'s GPU)", on.text, on.where.count, world, on.where.first);
}

std::string Trainer::Impl::resolve_attention_auto() {
  if (resolved.attention != "auto") return "";
  resolved.attention = "ours";
  if (!backend) return "";  // the host has one attention
  // An evaluation (--steps 0) is forward passes only: the backward's plan is neither needed nor built.
  const bool trains = cfg.steps > 0;
  std::string why =
      backend->cudnn_attention_unavailable(cfg.micro_batch, cfg.seq_len, cfg.gpt.n_embd, cfg.gpt.n_head, trains);
  note_progress("cuDNN's attention plans");  // built, or not: seconds, on every rank
  const FirstNote cannot = first_note(std::move(why), base);
  if (cannot.where.count == 0) {
    resolved.attention = "cudnn";
    resolved.attention_ds_mib = 0;  // our kernels' budget: nothing stored
    return fmt::format("attention auto: cudnn (every rank has cuDNN engines for {} at B={} T={})",
                       trains ? "both directions" : "the forward (--steps 0: evaluation only)", cfg.micro_batch,
                       cfg.seq_len);
  }
  return fmt::format("attention auto: ours (cuDNN's attention cannot run{}: {})",
                     world > 1 ? fmt::format(" on rank {}", cannot.where.first) : "", cannot.text);
}

GPTOptions Trainer::Impl::model_options() const {
  GPTOptions o{cfg.micro_batch, cfg.seq_len, cfg.activation_checkpointing, 0, cfg.recompute, cfg.gemm_autotune};
  // --steps 0 runs forward passes only: one block's activations serve them all, and no backward buffers.
  o.forward_only = cfg.steps == 0;
  o.attention_ds_budget = cfg.attention_ds_budget();
  o.attention_cudnn = cfg.attention == "cudnn";
  return o;
}

DeviceMesh2D& Trainer::Impl::set_streams() {
  note_progress("the communicators");  // the start-up's StallGuard (Trainer::Trainer)
  if (backend)
    for (Communicator* c : {&mesh.world(), &mesh.shard_group(), &mesh.replicate_group()})
      c->set_compute_stream(backend->stream());
  return mesh;
}

Trainer::Impl::~Impl() {
  if (ckpt_thread.joinable()) ckpt_thread.join();
  set_watchdog({});  // the check refers to the mesh
  if (ckpt_comm != MPI_COMM_NULL) MPI_Comm_free(&ckpt_comm);
}

void Trainer::Impl::forward_blocks() {
  Strategy& S = *strategy;
  const int L = cfg.gpt.n_layer;
  S.prefetch(E());
  S.prefetch(B(0));
  const void* wte = S.params(E());
  {
    trace::Span t("forward embedding", "compute");
    model->forward_embedding(wte);
  }
  for (int l = 0; l < L; ++l) {
    S.prefetch(l + 1 < L ? B(l + 1) : F());
    const void* p = S.params(B(l));
    {
      trace::Span t("forward h", "compute", l);
      model->forward_block(l, p);
    }
    S.release(B(l));
  }
}

void Trainer::Impl::skip_or_end(int step, double loss, double norm, int in_a_row) const {
  const std::string what = !std::isfinite(loss) && !std::isfinite(norm)
                               ? fmt::format("loss {} and gradient norm {}", loss, norm)
                           : !std::isfinite(loss) ? fmt::format("loss {} (gradient norm {:.4g})", loss, norm)
                                                  : fmt::format("gradient norm {} (loss {:.4f})", norm, loss);
  if (in_a_row > cfg.skip_nonfinite)
    throw DivergedError(fmt::format(
        "training diverged: {} at step {}{}; the step was not applied, so the parameters and checkpoints are "
        "those of earlier steps. Resume from the last checkpoint with a lower --lr or a warm-up, or let up to N "
        "such steps in a row be skipped with --skip-nonfinite N",
        what, step,
        cfg.skip_nonfinite > 0 ? fmt::format(", {} steps in a row (--skip-nonfinite {})", in_a_row, cfg.skip_nonfinite)
                               : ""));
  if (is_log_rank())
    spdlog::warn("step {}: {}: update skipped ({} of at most {} in a row, --skip-nonfinite)", step, what, in_a_row,
                 cfg.skip_nonfinite);
}

void Trainer::Impl::micro_step(const int32_t* tok, const int32_t* tgt, float loss_scale) {
  Strategy& S = *strategy;
  const int L = cfg.gpt.n_layer;
  model->set_batch(tok, tgt);
  forward_blocks();
  const void* fin = S.params(F());
  // The tied LM head's backward runs inside forward_head: wte's gradient
  // buffer must exist now and stays until the embedding's own backward.
  const void* wte = S.params(E());
  void* dwte = S.grads(E());
  {
    trace::Span t("head and loss", "compute");
    model->forward_head(fin, wte, dwte, loss_scale);
  }
  S.prefetch(B(L - 1));
  void* dfin = S.grads(F());
  {
    trace::Span t("backward final", "compute");
    model->backward_final(fin, dfin);
  }
  S.grads_done(F());
  S.release(F());
  for (int l = L - 1; l >= 0; --l) {
    if (l > 0) S.prefetch(B(l - 1));
    const void* p = S.params(B(l));
    void* g = S.grads(B(l));
    {
      trace::Span t("backward h", "compute", l);
      model->backward_block(l, p, g);
    }
    S.grads_done(B(l));
    S.release(B(l));
  }
  {
    trace::Span t("backward embedding", "compute");
    model->backward_embedding(S.grads(E()));
  }
  S.grads_done(E());
  S.release(E());
}

double Trainer::Impl::mean_over_ranks(double x, const char* what) {
  bounded_allreduce(&x, 1, MPI_DOUBLE, MPI_SUM, base, what);
  return x / world;
}

void Trainer::Impl::release_ends() {
  strategy->release(F());
  strategy->release(E());
}

void Trainer::Impl::reset_comm_stats() {
  for (Communicator* c : comms()) c->stats().reset();
}

CommTotals Trainer::Impl::comm_since_reset() {
  CommTotals sum;
  for (Communicator* c : comms()) {
    c->update_stats();  // NCCL: the collectives (and waits) whose events have completed
    const CommTotals x = c->stats().totals();
    sum.bytes += x.bytes;
    sum.calls += x.calls;
    sum.time_s += x.time_s;
    sum.exposed_s += x.exposed_s;
  }
  return sum;
}

std::array<int64_t, 6> Trainer::Impl::mem_max() {
  std::array<int64_t, 6> m = {mem.bytes(MemCategory::kParams),  mem.bytes(MemCategory::kGrads),
                              mem.bytes(MemCategory::kOptim),   mem.bytes(MemCategory::kActivations),
                              mem.bytes(MemCategory::kBuffers), mem.peak()};
  bounded_allreduce(m.data(), int(m.size()), MPI_INT64_T, MPI_MAX, base, "the memory maximum over ranks");
  return m;
}

// The run's metrics header and start-up log: what runs, on what, and the
// flags that change nothing as given. m0: mem_max() before the first step.
void Trainer::Impl::announce(const std::array<int64_t, 6>& m0) {
  const int accum = loader ? loader->accum_steps() : 0;  // 0: --steps 0 takes no optimizer step
  nlohmann::json header = {{"type", "run"},
                           {"config", cfg.to_json()},
                           {"strategy", cfg.strategy},
                           {"world_size", world},
                           {"mesh", to_string(mesh.shape())},
                           {"comm_backend", cfg.comm},
                           {"device", backend ? backend->device_name() : "cpu"},
                           {"precision", param_dtype == DType::kBF16 ? "bf16" : "fp32"},
                           {"params", layout.model_numel()},
                           {"params_stored", layout.total_numel()},
                           {"model_state_bytes", m0[0] + m0[1] + m0[2]},
                           {"train_tokens", loader ? loader->num_tokens() : 0},
                           {"accum_steps", accum},
                           {"threads", num_threads()},
                           {"gemm_peak_flops", gemm_peak},
                           {"flops_per_token", train_flops_per_token(cfg.gpt, cfg.seq_len)},
                           {"build",
                            {{"revision", program_build().revision},
                             {"build_type", program_build().build_type},
                             {"cuda_architectures", program_build().cuda_architectures}}}};
  if (!auto_note.empty()) header["strategy_auto"] = auto_note;  // why the planner chose it
  if (!comm_note.empty()) header["comm_auto"] = comm_note;
  if (!attention_note.empty()) header["attention_auto"] = attention_note;
  metrics.write(header);
  log0("model {}: {:.2f}M parameters, {} layers, {} heads, width {}, vocab {} (padded {}), T={}",
       model_name(cfg.model, cfg.gpt), layout.model_numel() / 1e6, cfg.gpt.n_layer, cfg.gpt.n_head, cfg.gpt.n_embd,
       cfg.gpt.vocab_size, cfg.gpt.padded_vocab(), cfg.seq_len);
  if (!comm_note.empty()) log0("{}", comm_note);
  log0("strategy {} on {}, mesh {}, comm {}; model state {:.1f} MiB per rank{}", cfg.strategy, count_of(world, "rank"),
       to_string(mesh.shape()), cfg.comm, (m0[0] + m0[1] + m0[2]) / 1048576.0,
       cfg.steps == 0 ? " (the parameters only: --steps 0 keeps no gradients or optimizer state)" : "");
  if (backend)
    log0("device {} ({}), precision {}, gradient reduction in {}; MFU against {:.4g} TFLOP/s per rank{}",
         backend->device_name(), cfg.comm == "mpi" ? "MPI staged through host memory" : "NCCL",
         param_dtype == DType::kBF16 ? "bf16 (fp32 master weights)" : "fp32", cfg.reduce_dtype,
         gemm_peak / world / 1e12, cfg.peak_tflops > 0 ? " (--peak-tflops)" : "");
  if (!code_note.empty()) log0("{}", code_note);
  if (!attention_note.empty()) log0("{}", attention_note);
  if (backend && param_dtype == DType::kBF16 && cfg.attention == "cudnn")
    log0(
        "attention: cuDNN's fused attention at B={} T={} (plans built and compiled at start-up), our kernels at "
        "other shapes",
        cfg.micro_batch, cfg.seq_len);
  else if (backend && param_dtype == DType::kBF16 && !tensor_core_note.empty())
    warn0(
        "attention: our CUDA-core kernels (on an H100 14-22x slower than the tensor-core ones), as the "
        "tensor-core ones cannot run {}: {}; cuDNN's (--attention cudnn) may",
        tensor_core_where, tensor_core_note);
  else if (backend && param_dtype == DType::kBF16)  // the tensor-core backward's dS (model/attention_ds.hpp)
    log0("{}", describe_attention_ds(cfg.micro_batch, cfg.seq_len, cfg.gpt.n_head, cfg.attention_ds_budget()));
  const std::string batch =
      loader ? fmt::format(
                   "{} tokens, {} sequences, {} an epoch ({}: {:.3g} epochs); global batch {} = "
                   "micro {} x accum {} x ranks {}",
                   loader->num_tokens(), loader->num_windows(), count_of(loader->steps_per_epoch(), "step"),
                   count_of(cfg.steps, "step"), double(cfg.steps) / double(loader->steps_per_epoch()), cfg.global_batch,
                   cfg.micro_batch, accum, world)
             : fmt::format("none (--steps 0: evaluation only{}); batches of micro {} x ranks {}",
                           cfg.data.empty() ? "" : fmt::format("; --data {} is not read", cfg.data), cfg.micro_batch,
                           world);
  log0("data: {}; {}; GEMM peak {:.1f} GFLOP/s{}", batch, count_of(num_threads(), "thread"), gemm_peak / 1e9,
       cfg.peak_tflops > 0 ? " (--peak-tflops)"
       : backend           ? ""
                           : fmt::format(" ({})", cpu::cpu_gemm_name()));
  if (cfg.steps == 0)
    log0("learning rate: none (--steps 0: evaluation only)");
  else
    log0("learning rate: {}", sched.describe());
  if (cfg.time_limit_s > 0)
    log0(
        "time limit: {:.0f} s ({}) after the start (--time-limit): the run stops after the last step that ends "
        "within it, as on SIGUSR1 (its checkpoint, exit 75)",
        cfg.time_limit_s, format_eta(cfg.time_limit_s));
  if (cfg.warmup > cfg.steps && cfg.steps > 0)
    warn0("--warmup {} is longer than --steps {}: the learning rate never reaches --lr {}", cfg.warmup, cfg.steps,
          cfg.lr);
  if (!threads_note.empty()) log0("threads: {}", threads_note);
  // Asked for, but switched off by another flag (a config file's value and a command line's, say).
  if (cfg.eval_every > 0 && !val_loader && hellaswag_total == 0)
    warn0("--eval-every {} without --val-data or --hellaswag: there is no validation", cfg.eval_every);
  if (cfg.steps == 0 && !val_loader && hellaswag_total == 0 && cfg.sample_tokens == 0)
    warn0("--steps 0 without --val-data, --hellaswag or --sample-tokens: there is nothing to evaluate");
  if (cfg.sample_every > 0 && cfg.sample_tokens == 0)
    warn0("--sample-every {} with --sample-tokens 0: there are no samples", cfg.sample_every);
  if (cfg.steps == 0 && (cfg.activation_checkpointing || cfg.recompute != Recompute::kNone))
    warn0("--{} with --steps 0: an evaluation keeps one block's activations already, so it changes nothing",
          cfg.activation_checkpointing ? std::string("activation-checkpointing")
                                       : fmt::format("recompute {}", to_string(cfg.recompute)));
  else if (cfg.activation_checkpointing && cfg.recompute != Recompute::kNone)
    warn0("--recompute {} with --activation-checkpointing: whole blocks are recomputed, so it changes nothing",
          to_string(cfg.recompute));
  // Flags of one strategy given to another (strategy auto sets them itself).
  if (auto_note.empty() && cfg.strategy != "hybrid") {
    if (!cfg.mesh.empty())
      warn0("--mesh {} applies to --strategy hybrid: {} uses all {} ranks as one group", cfg.mesh, cfg.strategy, world);
    if (cfg.hybrid_inner != RunConfig{}.hybrid_inner)
      warn0("--hybrid-inner {} applies to --strategy hybrid: it changes nothing for {}", cfg.hybrid_inner,
            cfg.strategy);
  }
  if (cfg.strategy != "ddp" && cfg.bucket_mb != RunConfig{}.bucket_mb)
    warn0("--bucket-mb {} applies to --strategy ddp's gradient all-reduce: it changes nothing for {}", cfg.bucket_mb,
          cfg.strategy);
  if (val_loader) {
    // The validation reads the same sequences at every evaluation; more
    // than the data hold wrap around and count some twice.
    const int64_t read = val_sequences(), held = val_loader->num_windows();
    if (cfg.val_batches == 0)
      log0("validation: all {} sequences (--val-batches 0): {} batches of {} x {}{}", held, val_batches,
           cfg.micro_batch, count_of(world, "rank"),
           val_tail ? fmt::format(" and the last {} (up to {} a rank)", val_loader->tail_windows(), cfg.micro_batch)
                    : std::string());
    else
      log0("validation: {} batches of {} x {} = {} sequences; the validation data hold {}", val_batches,
           cfg.micro_batch, count_of(world, "rank"), read, held);
    if (read > held)
      warn0(
          "validation: --val-batches {} reads {} sequences, but the validation data hold {}: some count more "
          "than once in the validation loss; --val-batches {} reads each at most once",
          cfg.val_batches, read, held, held / (int64_t(cfg.micro_batch) * world));
  }
}

TrainSummary Trainer::Impl::run() {
  const int64_t tokens_per_step = int64_t(cfg.global_batch) * cfg.seq_len;
  const double flops_per_step = train_flops_per_token(cfg.gpt, cfg.seq_len) * double(tokens_per_step);
  const auto m0 = mem_max();
  announce(m0);
  // A directory that cannot hold checkpoints fails now, not at the first checkpoint.
  if (!cfg.ckpt_dir.empty()) check_ckpt_dir(cfg.ckpt_dir, base);
  if (!cfg.trace.empty()) {
    check_trace_path(cfg.trace, base);                   // a bad path fails now, not after training
    bounded_barrier(base, "the trace's clock barrier");  // every rank's clock starts together
    trace::start();
    if (backend && (trace_marks = backend->make_trace_marks())) trace::set_device_marks(trace_marks.get());
  }
  const int start_step = restore();
  TrainSummary sum;
  evaluate_start(start_step, sum);
  if (start_step >= cfg.steps) {
    // A model evaluated, not trained: its validation loss above, its sample below.
    if (start_step > 0)
      log0("nothing to train: the checkpoint is at step {} and --steps is {}; validation and sample only", start_step,
           cfg.steps);
    else
      log0("nothing to train: --steps is 0; validation and sample only");
    if (cfg.sample_tokens > 0) report_sample(start_step, sample(start_step));
  }

  sum.losses.reserve(std::max(cfg.steps - start_step, 0));  // no allocation in the loop
  sum.grad_norms.reserve(std::max(cfg.steps - start_step, 0));
  const float loss_scale = 1.f / float(tokens_per_step);
  double steady_time = 0, steady_comm = 0, steady_exposed = 0;
  int steady_steps = 0;
  int64_t comm_bytes = 0, comm_calls = 0;
  Timer run_timer;
  for (int step = start_step; step < cfg.steps; ++step) {
    std::optional<trace::Span> step_span(std::in_place, "step", "step", step + 1);
    Timer t;
    reset_comm_stats();
    double loss = 0;
    for (int m = 0; m < loader->accum_steps(); ++m) {
      strategy->begin_micro_batch(m + 1 == loader->accum_steps());
      {
        trace::Span d("data", "data");
        loader->micro_batch(m, tokens.data(), targets.data());
      }
      micro_step(tokens.data(), targets.data(),
                 nan_grad_step(step + 1) ? std::numeric_limits<float>::quiet_NaN() : loss_scale);
    }
    {
      trace::Span g("gradient sync", "comm");
      strategy->finish_gradient_sync();
    }
    double norm;
    {
      trace::Span g("grad norm", "optimizer");
      norm = strategy->grad_norm();
    }
    // Read now, while the device has just finished the backward pass for
    // the norm: read after the optimizer step, it would make the host wait
    // for the step too, and the device would then idle through the
    // metrics and the next micro-batch's host work. So those overlap the
    // optimizer's kernels instead.
    const double local_loss = model->take_loss();
    const float lr = sched.at(step);
    // The logged loss is the mean over the whole global batch: every rank's
    // micro-batches hold the same number of tokens. The same all-reduce
    // counts the ranks that have received a stop signal
    // (core/stop_signal.hpp), so that all of them stop after the same step.
    // It comes before the update: a step whose loss or gradient norm is not
    // finite is never applied, and every rank decides that alike from
    // these two global values.
    // --time-limit: ranks past it are counted the same way. The next step is
    // taken to last as long as this one (nearly done here) or the last one.
    const double step_s = std::max(t.seconds(), last_step_s);
    const bool out_of_time = cfg.time_limit_s > 0 && since_start.seconds() + step_s > cfg.time_limit_s;
    double loss_and_stops[3] = {local_loss, stop_signal() != 0 ? 1.0 : 0.0, out_of_time ? 1.0 : 0.0};
    bounded_allreduce(loss_and_stops, 3, MPI_DOUBLE, MPI_SUM, base, "the loss mean over ranks");
    loss = loss_and_stops[0] / world;
    const bool skipped = !std::isfinite(loss) || !std::isfinite(norm);
    if (skipped) {
      skip_or_end(step + 1, loss, norm, ++skipped_in_a_row);  // throws past --skip-nonfinite
      strategy->discard_gradients();
      ++sum.skipped_steps;
    } else {
      skipped_in_a_row = 0;
      trace::Span o("optimizer step", "optimizer");
      strategy->step(cfg.adam, {lr, ++optimizer_updates, clip_scale(norm, cfg.clip)});
    }
    loader->advance();
    const bool last = step + 1 == cfg.steps;
    const bool stopping = (loss_and_stops[1] > 0 || loss_and_stops[2] > 0) && !last;
    const double dt = t.seconds();
    last_step_s = dt;
    step_span.reset();
    const CommTotals comm = comm_since_reset();
    comm_bytes = comm.bytes;
    comm_calls = comm.calls;
    if (step >= start_step + kWarmupSteps || cfg.steps - start_step <= kWarmupSteps) {
      steady_time += dt;
      steady_comm += comm.time_s;
      steady_exposed += comm.exposed_s;
      ++steady_steps;
    }
    const double tps = tokens_per_step / dt;
    const double mfu = gemm_peak > 0 ? flops_per_step / dt / gemm_peak : 0.0;  // 0: peak unknown
    sum.losses.push_back(loss);
    sum.grad_norms.push_back(norm);
    const auto mm = mem_max();
    StepRecord rec;
    rec.step = step + 1;
    rec.loss = loss;
    rec.lr = lr;
    rec.grad_norm = norm;
    rec.tokens_per_s = tps;
    rec.mfu = mfu;
    rec.step_time_s = dt;
    rec.mem_params = mm[0];
    rec.mem_grads = mm[1];
    rec.mem_optim = mm[2];
    rec.mem_activations = mm[3];
    rec.mem_buffers = mm[4];
    rec.mem_peak = mm[5];
    rec.comm_bytes = comm.bytes;
    rec.comm_calls = comm.calls;
    rec.comm_time_s = comm.time_s;
    rec.comm_exposed_s = comm.exposed_s;
    rec.skipped = skipped;
    const bool eval_now = (cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0) || last;
    if (eval_now) evaluate_all(step + 1, rec, sum);
    rec.elapsed_s = since_start.seconds();  // after the validation, which the wall clock includes
    metrics.write(rec);
    write_checkpoint_record();  // a background write published since the last step's
    if ((step + 1) % cfg.log_every == 0 || last) {
      const double eta = run_timer.seconds() / (step + 1 - start_step) * (cfg.steps - step - 1);
      // A run that --time-limit will stop before its end says when.
      const double left = cfg.time_limit_s - since_start.seconds();
      log0(
          "step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} tok/s | mfu {:.1f}% | {:.0f} ms | "
          "comm {:.1f} MiB | eta {}{}",
          step + 1, cfg.steps, loss, lr, norm, tps, 100 * mfu, 1000 * dt, comm.bytes / 1048576.0, format_eta(eta),
          cfg.time_limit_s > 0 && eta > left ? fmt::format(" (--time-limit in {})", format_eta(std::max(left, 0.0)))
                                             : std::string());
    }
    if (stopping) {  // once per run
      const std::string then = cfg.ckpt_dir.empty() ? "no --ckpt-dir, so nothing is saved"
                                                    : fmt::format("the checkpoint of step {} follows", step + 1);
      if (loss_and_stops[1] > 0) {  // a signal, whether or not the time is up too
        int sig = stop_signal();
        bounded_allreduce(&sig, 1, MPI_INT, MPI_MAX, base, "the stop signal over ranks");
        sum.stop_signal = signal_name(sig);
        log0("stopping after step {} of {}: {} on {} of {} ranks; {}", step + 1, cfg.steps, sum.stop_signal,
             int(loss_and_stops[1]), world, then);
      } else {
        sum.stop_signal = kTimeLimitStop;
        log0(
            "stopping after step {} of {}: the next step would end past --time-limit ({:.1f} s after the start; "
            "{:.2f} s now, a step {:.3f} s) on {} of {} ranks; {}",
            step + 1, cfg.steps, cfg.time_limit_s, since_start.seconds(), step_s, int(loss_and_stops[2]), world, then);
      }
    }
    if (!cfg.ckpt_dir.empty() && ((cfg.ckpt_every > 0 && (step + 1) % cfg.ckpt_every == 0) || last || stopping))
      checkpoint(step + 1);
    if (stopping) break;  // no sample: the time before the scheduler's limit is short
    if (cfg.sample_tokens > 0 && ((cfg.sample_every > 0 && (step + 1) % cfg.sample_every == 0) || last)) {
      report_sample(step + 1, sample(step + 1));
    }
  }
  strategy->settle();  // the last step's parameter all-gathers (zero1, zero2)
  join_checkpoint();   // the run is not done until its last checkpoint is published
  sum.steps_done = start_step + int(sum.losses.size());
  sum.checkpoints = ckpt_count;
  sum.checkpoint_blocked_s = ckpt_blocked_s;
  if (!cfg.trace.empty()) {
    for (Communicator* c : comms()) c->update_stats(/*finish=*/true);  // NCCL: the last collectives' slices
    if (trace_marks) trace_marks->finish();
    trace::set_device_marks(nullptr);
    trace::stop();
    StallGuard guard(cfg.comm_timeout_s, "the trace's gather to rank 0");  // MPI_Gatherv, blocking
    write_trace(cfg.trace, base);
    log0("trace written to {} (open in ui.perfetto.dev)", cfg.trace);
  }
  const auto mm = mem_max();
  sum.model_state_bytes = mm[0] + mm[1] + mm[2];
  sum.activation_bytes = mm[3];
  sum.buffer_bytes = mm[4];
  sum.strategy = cfg.strategy;
  sum.mesh = to_string(mesh.shape());
  sum.hybrid_inner = cfg.hybrid_inner;
  sum.peak_bytes = mm[5];
  sum.comm_bytes_per_step = comm_bytes;
  sum.comm_calls_per_step = comm_calls;
  sum.sample_comm_bytes = last_sample_bytes;
  sum.eval_comm_bytes = last_eval_bytes;
  if (steady_steps > 0) {
    sum.step_time_s = steady_time / steady_steps;
    sum.tokens_per_s = tokens_per_step / sum.step_time_s;
    sum.mfu = gemm_peak > 0 ? flops_per_step / sum.step_time_s / gemm_peak : 0.0;
    sum.comm_s_per_step = steady_comm / steady_steps;
    sum.exposed_s_per_step = steady_exposed / steady_steps;
  }
  // Waiting includes the progress thread's wake-up, so exposed time can
  // slightly exceed the collectives' own time when nothing is hidden: clamp.
  const double overlap =
      sum.comm_s_per_step > 0 ? std::clamp(1 - sum.exposed_s_per_step / sum.comm_s_per_step, 0.0, 1.0) : 0;
  metrics.write({{"type", "summary"},
                 {"strategy", cfg.strategy},
                 {"mesh", to_string(mesh.shape())},
                 {"world_size", world},
                 {"steps", cfg.steps},
                 {"steps_done", sum.steps_done},
                 {"stop_signal", sum.stop_signal.empty() ? nlohmann::json() : nlohmann::json(sum.stop_signal)},
                 {"skipped_steps", sum.skipped_steps},
                 {"checkpoints", sum.checkpoints},
                 {"checkpoint_blocked_s", sum.checkpoint_blocked_s},
                 {"warmup_steps_excluded", kWarmupSteps},
                 {"tokens_per_s", sum.tokens_per_s},
                 {"tokens_per_s_per_rank", sum.tokens_per_s / world},
                 {"mfu", sum.mfu},
                 {"step_time_s", sum.step_time_s},
                 {"model_state_bytes", sum.model_state_bytes},
                 {"peak_bytes", sum.peak_bytes},
                 {"comm_bytes_per_step", sum.comm_bytes_per_step},
                 {"comm_calls_per_step", sum.comm_calls_per_step},
                 {"comm_time_s", sum.comm_s_per_step},
                 {"exposed_comm_s", sum.exposed_s_per_step},
                 {"overlap", overlap},
                 {"final_loss", sum.losses.empty() ? -1.0 : sum.losses.back()},  // -1: no step trained
                 {"final_val_loss", sum.final_val_loss},
                 {"final_hellaswag_acc", sum.final_hellaswag_acc},
                 {"final_hellaswag_acc_norm", sum.final_hellaswag_acc_norm}});
  log0("summary ({}, {}, mesh {}{}):", count_of(world, "rank"), cfg.strategy, to_string(mesh.shape()),
       sum.losses.empty() ? std::string() : fmt::format("; steps after {} warm-up", kWarmupSteps));
  const std::string evaluated =
      (sum.final_val_loss >= 0 ? fmt::format(" | val loss {:.4f}", sum.final_val_loss) : "") +
      (sum.final_hellaswag_acc_norm >= 0 ? fmt::format(" | hellaswag acc_norm {:.4f}", sum.final_hellaswag_acc_norm)
                                         : "");
  if (sum.losses.empty()) {  // evaluated only: no step's time or communication to report
    log0("  no step trained | peak mem/rank {:.1f} MiB | model state/rank {:.1f} MiB{}", sum.peak_bytes / 1048576.0,
         sum.model_state_bytes / 1048576.0, evaluated);
    return sum;
  }
  log0("  tokens/s {:.0f} | MFU {:.1f}% | step {:.3f} s | peak mem/rank {:.1f} MiB | model state/rank {:.1f} MiB",
       sum.tokens_per_s, 100 * sum.mfu, sum.step_time_s, sum.peak_bytes / 1048576.0, sum.model_state_bytes / 1048576.0);
  log0("  comm/step {:.2f} MiB | comm time {:.3f} s | exposed {:.3f} s | overlap {:.0f}% | final loss {:.4f}{}",
       sum.comm_bytes_per_step / 1048576.0, sum.comm_s_per_step, sum.exposed_s_per_step, 100 * overlap,
       sum.losses.back(), evaluated);
  if (sum.checkpoints > 0)
    log0("  {} | the training loop spent {:.2f} s in them{}", count_of(sum.checkpoints, "checkpoint"),
         sum.checkpoint_blocked_s, cfg.ckpt_async ? " (snapshots and waits for the background writer)" : "");
  return sum;
}

Trainer::Trainer(const RunConfig& cfg, const MpiEnv& env) : Trainer(cfg, env.world()) {}

Trainer::Trainer(const RunConfig& cfg, MPI_Comm base) : Trainer(cfg, base, nullptr) {}

Trainer::Trainer(const RunConfig& cfg, MPI_Comm base, std::unique_ptr<DeviceBackend> backend) {
  // The start-up's collectives (the mesh's communicators, NCCL's set-up,
  // the GEMM peak's sum) block inside MPI and NCCL until every rank arrives;
  // each phase (communicators, each unit's initial values, model and data)
  // is progress.
  StallGuard guard(cfg.comm_timeout_s, "the start-up (communicators, data, model)");
  // Before any collective whose sizes or presence depend on the
  // configuration: a rank given another one ends the job here, in one line
  // naming the key (io/same_on_ranks.hpp), not in a hang.
  check_same_config(cfg, base);
  keep_large_heap_blocks();  // Eigen's per-call packing blocks reuse the heap's pages (core/host_heap.hpp)
  // --threads 0: OMP_NUM_THREADS if it is set (OpenMP reads it), else this
  // rank's share of the cores it may run on (comm/thread_share.hpp).
  // The share is collective: every rank computes it, whatever its own
  // environment or --threads says (a rank may be given its own), so that
  // no rank can leave the others waiting.
  std::string threads_note;
  const ThreadShare share = share_cores(base);
  if (cfg.threads > 0) {
    set_num_threads(cfg.threads);
  } else {
    if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
      threads_note = fmt::format("{} per rank (OMP_NUM_THREADS)", count_of(num_threads(), "thread"));
    } else {
      set_num_threads(share.threads);
      threads_note = describe(share) + "; --threads or OMP_NUM_THREADS to choose";
    }
  }
  // After the threads: OpenBLAS's pool is sized by them (model/cpu/gemm.hpp).
  try {
    cpu::set_cpu_gemm(cfg.cpu_gemm == "openblas" ? cpu::CpuGemm::kOpenBlas
                      : cfg.cpu_gemm == "eigen"  ? cpu::CpuGemm::kEigen
                                                 : cpu::CpuGemm::kAuto);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(fmt::format("invalid {}", e.what()));
  }
  impl_ = std::make_unique<Impl>(cfg, base, std::move(backend));
  impl_->threads_note = std::move(threads_note);
}

Trainer::~Trainer() = default;

TrainSummary Trainer::run() { return impl_->run(); }

std::vector<std::vector<float>> Trainer::full_params() {
  std::vector<std::vector<float>> out;
  for (size_t u = 0; u < impl_->layout.num_units(); ++u) {
    out.emplace_back(impl_->layout.unit(u).numel);
    impl_->strategy->gather_full(u, out.back().data());
  }
  return out;
}

}  // namespace gpt
