// Trainer::Impl's resume (--resume, --init-from) and checkpoints (--ckpt-dir,
// --ckpt-async): what a checkpoint holds besides the owned state, and the
// background writer.
#include <algorithm>
#include <optional>

#include "core/build_info.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/plural.hpp"
#include "core/stall_guard.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/model_import.hpp"
#include "strategies/trainer_impl.hpp"

namespace gpt {

std::string Trainer::Impl::resolve_resume(const RunConfig& c) {
  if (c.resume.empty()) return "";
  if (c.resume == "auto") return latest_checkpoint(c.ckpt_dir);  // "" when there is none yet
  // Every rank sees the same path: one line, from rank 0.
  if (const std::string why = not_a_checkpoint(c.resume); !why.empty())
    throw ConfigError(fmt::format("invalid resume = '{}': {}{}", c.resume, why,
                                  c.ckpt_dir.empty() && why.find("directory of checkpoints") != std::string::npos
                                      ? fmt::format(" (or --ckpt-dir {} --resume auto)", c.resume)
                                      : ""));
  return c.resume;
}

std::vector<UnitSlice> Trainer::Impl::owned_slices(OwnedFor use) {
  std::vector<UnitSlice> s;
  for (size_t u = 0; u < layout.num_units(); ++u) s.push_back(strategy->owned(u, use));
  return s;
}

void Trainer::Impl::warn_if_data_stream_changed(const CheckpointMeta& meta) const {
  const auto saved_seed = meta.config.value("seed", cfg.seed);
  if (saved_seed != cfg.seed)
    warn0(
        "resume: --seed is {} here, {} in the checkpoint's run: the data order (and the samples) after step {} "
        "differ from that run's",
        cfg.seed, saved_seed, meta.step);
  const int saved_seq_len = meta.config.value("seq_len", cfg.seq_len);
  if (saved_seq_len != cfg.seq_len || (meta.data_sequences > 0 && meta.data_sequences != loader->num_windows()))
    warn0(
        "resume: the training data are {} sequences of {} tokens here, {} of {} in the checkpoint's run: its "
        "data position (epoch {}, sequence {}) counts those, so the data after step {} are not the ones that run "
        "would have read next",
        loader->num_windows(), cfg.seq_len, meta.data_sequences > 0 ? fmt::format("{}", meta.data_sequences) : "?",
        saved_seq_len, meta.data.epoch, meta.data.offset, meta.step);
}

int Trainer::Impl::restore() {
  std::optional<CheckpointMeta> meta;
  h5::CollectiveIo io;
  Timer t;
  // HDF5's collective reads block until every rank arrives; each tensor is
  // progress. The guard also covers after_load's gathers.
  std::optional<StallGuard> guard;
  // --steps 0 keeps no optimizer state (StrategyOptions::trains): its parameters alone are read.
  const CheckpointPart part = cfg.steps > 0 ? CheckpointPart::kAll : CheckpointPart::kParams;
  std::optional<trace::Span> read;
  if (cfg.resume == "auto" || !resume_path.empty()) read.emplace("checkpoint read", "checkpoint");
  if (cfg.resume == "auto") {
    guard.emplace(cfg.comm_timeout_s, fmt::format("the checkpoint read in {}", cfg.ckpt_dir));
    // A rank whose read failed alone ends the job well before the StallGuard would.
    const double vote_wait_s = cfg.comm_timeout_s > 0 ? std::min(60.0, cfg.comm_timeout_s / 2) : 60.0;
    NewestCheckpoint newest =
        load_newest_checkpoint(cfg.ckpt_dir, base, layout, owned_slices(OwnedFor::kLoad), vote_wait_s, part, &io);
    for (const NewestCheckpoint::Damaged& d : newest.damaged)
      warn0("resume auto: passing over {}, which cannot be read: {}; {}", d.path, d.error,
            d.moved_to.empty() ? "renaming it aside failed" : fmt::format("renamed it {}", d.moved_to));
    resume_path = newest.path;
    if (!resume_path.empty()) meta = std::move(newest.meta);
  } else if (!resume_path.empty()) {
    guard.emplace(cfg.comm_timeout_s, fmt::format("the checkpoint read of {}", resume_path));
    meta = load_checkpoint(resume_path, base, layout, owned_slices(OwnedFor::kLoad), part, &io);
  }
  read.reset();
  if (!meta) {
    guard.reset();
    strategy->discard_load();  // the slices --resume auto had ready for a checkpoint there was none of
    if (cfg.resume == "auto" && cfg.steps == 0 && cfg.init_from.empty())  // likely not the model meant
      warn0("resume auto: no checkpoint in {}: --steps 0 evaluates the seed's initialisation", cfg.ckpt_dir);
    else if (cfg.resume == "auto")
      log0("resume auto: no checkpoint in {} yet, starting fresh", cfg.ckpt_dir);
    {
      // Here rather than when the strategy was made, so that a resume does not compute values its read replaces.
      StallGuard guard(cfg.comm_timeout_s, "the parameters' initial values");
      trace::Span span("initial values", "startup");
      strategy->initialise();
    }
    if (!cfg.init_from.empty()) {
      StallGuard guard(cfg.comm_timeout_s, fmt::format("the initialisation from {}", cfg.init_from));
      strategy->settle();  // zero1's and zero2's gathers of the initial values end before the import reads them
      const std::string what = import_params(cfg.init_from, base, layout, owned_slices(OwnedFor::kImport));
      strategy->after_load();
      log0("initialised from {}: {}", cfg.init_from, what);
    }
    return 0;
  }
  strategy->after_load();
  if (meta->step < cfg.steps) {  // training follows (so there is data): from the checkpoint's data position
    warn_if_data_stream_changed(*meta);
    loader->seek(meta->data);
  }
  optimizer_updates = meta->optimizer_updates;
  skipped_in_a_row = int(meta->skipped_in_a_row);
  log0("resumed from {} (step {}, written by {} on {}, mesh {}{}) in {:.2f} s, rank 0 reading {}", resume_path,
       meta->step, meta->strategy, count_of(meta->world_size, "rank"), meta->mesh,
       meta->build.empty() ? "" : ", by a build of " + meta->build, t.seconds(), format_bytes(double(io.bytes)));
  return int(meta->step);
}

void Trainer::Impl::join_checkpoint() {
  if (ckpt_thread.joinable()) {
    Timer wait;  // the training loop waits here for a background write still going
    ckpt_thread.join();
    ckpt_blocked_s += wait.seconds();
  }
  if (ckpt_error) std::rethrow_exception(std::exchange(ckpt_error, nullptr));
  write_checkpoint_record();
}

void Trainer::Impl::write_checkpoint_record() {
  if (ckpt_failed.exchange(false, std::memory_order_acquire)) join_checkpoint();  // rethrows
  if (!ckpt_record_ready.exchange(false, std::memory_order_acquire)) return;
  metrics.write(*ckpt_record);
  ckpt_record.reset();
}

// The published checkpoint's metrics record and log line (rank 0 sizes the
// directory; the others log nothing and write no metrics).
nlohmann::json Trainer::Impl::published(int step, const std::string& path, double write_s, double blocked_s,
                                        int64_t snapshot_bytes, const h5::CollectiveIo& io) {
  ++ckpt_count;
  const uintmax_t bytes = rank == 0 ? checkpoint_bytes(path) : 0;
  log0("checkpoint {} written in {:.2f} s ({:.1f} MiB, {:.0f} MiB/s){}", path, write_s, double(bytes) / 1048576.0,
       write_s > 0 ? double(bytes) / 1048576.0 / write_s : 0.0, cfg.ckpt_async ? " (background)" : "");
  return {{"type", "checkpoint"},
          {"step", step},
          {"path", path},
          {"bytes", bytes},
          {"seconds", write_s},
          {"blocked_s", blocked_s},
          {"async", cfg.ckpt_async},
          {"snapshot_bytes", snapshot_bytes},
          {"independent_io", io.independent},
          {"elapsed_s", since_start.seconds()}};
}

void Trainer::Impl::checkpoint(int steps_done) {
  join_checkpoint();
  trace::Span span(cfg.ckpt_async ? "checkpoint snapshot" : "checkpoint write", "checkpoint");
  Timer t;
  CheckpointMeta meta;
  meta.step = steps_done;
  meta.optimizer_updates = optimizer_updates;
  meta.skipped_in_a_row = skipped_in_a_row;
  meta.data = loader->position();  // a checkpoint is written after a step, which needs the data
  meta.data_sequences = loader->num_windows();
  meta.seed = cfg.seed;
  meta.strategy = cfg.strategy;
  meta.mesh = to_string(mesh.shape());
  meta.world_size = world;
  meta.config = cfg.to_json();
  meta.build = program_build().revision;
  if (!cfg.ckpt_async) {
    // HDF5's collective writes block until every rank arrives; each tensor is progress.
    StallGuard guard(cfg.comm_timeout_s, fmt::format("the checkpoint write of step {}", steps_done));
    h5::CollectiveIo io;
    const std::string path =
        save_checkpoint(cfg.ckpt_dir, base, layout, owned_slices(OwnedFor::kSave), meta, cfg.keep_last, &io);
    const double s = t.seconds();
    ckpt_blocked_s += s;
    metrics.write(published(steps_done, path, s, s, 0, io));
    return;
  }
  std::vector<UnitSlice> slices = owned_slices(OwnedFor::kSave);
  if (ckpt_comm == MPI_COMM_NULL) {
    StallGuard guard(cfg.comm_timeout_s, "the background writer's communicator");  // MPI_Comm_dup, blocking
    MPI_Comm_dup(base, &ckpt_comm);
  }
  // The background write reads the written ranges alone: those are copied
  // (once allocated, the same sizes every time), unless the slices are
  // copies already, which training leaves alone until the next owned call,
  // after this write's join.
  for (UnitSlice& s : slices) s = s.written_part();
  const bool copy = std::any_of(slices.begin(), slices.end(), [](const UnitSlice& s) { return !s.detached; });
  if (copy && ckpt_snapshot.empty())
    for (const UnitSlice& s : slices)
      for (int g = 0; g < 3; ++g)
        ckpt_snapshot.emplace_back(size_t(std::max<int64_t>(s.end - s.begin, 1)), MemCategory::kBuffers, &mem);
  int64_t snapshot_bytes = 0;  // what the write reads: the written ranges
  for (size_t u = 0; u < slices.size(); ++u) {
    UnitSlice& s = slices[u];
    snapshot_bytes += 3 * (s.end - s.begin) * int64_t(sizeof(float));
    if (!copy) continue;
    for (int g = 0; g < 3; ++g) {
      float* dst = ckpt_snapshot[3 * u + g].data();
      std::copy(s.state[g], s.state[g] + (s.end - s.begin), dst);
      s.state[g] = dst;
    }
  }
  const double snapshot_s = t.seconds();
  ckpt_blocked_s += snapshot_s;
  log0("checkpoint step {}: state snapshot ({:.1f} MiB) in {:.3f} s, writing in the background", steps_done,
       double(snapshot_bytes) / 1048576.0, snapshot_s);
  ckpt_thread = std::thread([this, slices, meta, snapshot_s, snapshot_bytes] {
    try {
      trace::Span span("checkpoint write", "checkpoint", -1, trace::lane("checkpoint writer"));
      Timer w;
      StallGuard guard(cfg.comm_timeout_s, fmt::format("the checkpoint write of step {} (background)", meta.step));
      h5::CollectiveIo io;
      const std::string path = save_checkpoint(cfg.ckpt_dir, ckpt_comm, layout, slices, meta, cfg.keep_last, &io);
      ckpt_record = published(int(meta.step), path, w.seconds(), snapshot_s, snapshot_bytes, io);
      ckpt_record_ready.store(true, std::memory_order_release);
    } catch (...) {
      ckpt_error = std::current_exception();
      ckpt_failed.store(true, std::memory_order_release);
    }
  });
}

}  // namespace gpt
