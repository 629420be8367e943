#include "io/checkpoint.hpp"

#include "comm/agree.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/logging.hpp"
#include "core/plural.hpp"
#include "core/stall_guard.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include "io/h5.hpp"

namespace gpt {
namespace fs = std::filesystem;

std::vector<int64_t> stored_shape(const TensorSpec& t) {
  std::vector<int64_t> shape = t.shape;
  if (t.init_numel < t.numel) shape[0] = t.init_numel / shape[1];
  return shape;
}

nlohmann::json model_json(const GPTConfig& c) {
  return {{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"n_ctx", c.seq_len},
          {"vocab_size", c.vocab_size}};
}

GPTConfig model_from_json(const nlohmann::json& m) {
  return GPTConfig{m.at("n_layer"), m.at("n_head"), m.at("n_embd"), m.at("n_ctx"), m.at("vocab_size")};
}

uint64_t tensor_checksum(const float* v, int64_t lo, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    s += mix64((uint64_t(lo + i) << 32) ^ bits);
  }
  return s;
}

namespace {

// Calls f(tensor, dataset name, lo, hi, offset in slice) for the part of
// each tensor that slice [begin, end) of the unit covers.
template <typename F>
void for_each_piece(const UnitSpec& u, int64_t begin, int64_t end, F&& f) {
  for (const TensorSpec& t : u.tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.init_numel);
    f(t, std::max<int64_t>(lo - t.offset, 0), std::max<int64_t>(hi - t.offset, lo - t.offset),
      std::max<int64_t>(lo - begin, 0));
  }
}

// Test hook: GPT_TEST_CKPT_WRITE_DELAY_MS slows writing down (per tensor) so
// that a test can kill a rank while a checkpoint is half written.
void test_write_delay() {
  static const int ms = [] {
    const char* v = std::getenv("GPT_TEST_CKPT_WRITE_DELAY_MS");
    return v ? std::atoi(v) : 0;
  }();
  if (ms > 0) ::usleep(useconds_t(ms) * 1000);
}

// Test hook: GPT_TEST_CKPT_STALL_RANK=R stops rank R for good as it starts
// writing tensors (a file system write that never returns), so that a test
// can see the other ranks' StallGuard end the job.
void test_stall(int rank) {
  const char* v = std::getenv("GPT_TEST_CKPT_STALL_RANK");
  if (!v || std::atoi(v) != rank) return;
  for (;;) ::sleep(60);
}

// Test hook: GPT_TEST_CKPT_LOAD_FAIL_RANK=R makes rank R find every
// checkpoint it loads damaged before it opens the file (a read that fails
// on one rank only), so that a test can see the other ranks, left in the
// collective open, not keep the job waiting.
bool test_load_fails(MPI_Comm comm) {
  const char* v = std::getenv("GPT_TEST_CKPT_LOAD_FAIL_RANK");
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return v && std::atoi(v) == rank;
}

std::string step_name(int64_t step) { return fmt::format("step_{:08d}", step); }

// A directory's fsync is best effort (some file systems refuse one).
void fsync_path(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// A file's is not: where it fails, its data may not be on disk (a full
// disk on NFS, an I/O error), so the checkpoint is not published.
void sync_file(const std::string& p) {
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw DataError(fmt::format("{}: fsync failed: {}", p, std::strerror(err)));
  }
  ::close(fd);
}

// One line for a failed checkpoint write: the step, the file, what was
// being written, why, and the room left on the file system (a full disk or
// quota is the usual cause, and HDF5's own message does not say so).
std::string write_failure(int64_t step, const std::string& file, const std::string& at, const std::string& why) {
  std::error_code ec;
  const fs::space_info sp = fs::space(fs::path(file).parent_path(), ec);
  const std::string room = ec ? std::string()
                              : fmt::format("; its file system has {} free of {}", format_bytes(double(sp.available)),
                                            format_bytes(double(sp.capacity)));
  return fmt::format("checkpoint step {}: writing {} failed at {}: {}{}; nothing was published", step, file, at, why,
                     room);
}

// Every .partial-* in ckpt_dir, once a checkpoint is published, is the
// leftover of a write that crashed: a run writes one checkpoint at a time
// (the background writer is joined before the next begins), and one run
// owns its --ckpt-dir. A leftover of the same step is replaced when that
// step is written again; others (an earlier step, or another --ckpt-every)
// would stay forever, each as large as a checkpoint.
void remove_leftover_partials(const std::string& ckpt_dir) {
  std::error_code ec;
  std::vector<fs::path> partials;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec))
    if (e.path().filename().string().rfind(".partial-step_", 0) == 0) partials.push_back(e.path());
  for (const fs::path& p : partials) {
    const uintmax_t bytes = checkpoint_bytes(p.string());
    ec.clear();
    fs::remove_all(p, ec);
    if (!ec)
      log0("removed {}, left by a checkpoint write that did not finish ({:.1f} MiB)", p.string(),
           double(bytes) / 1048576.0);
  }
}

// One warning for the transfers of a checkpoint's write or read that HDF5
// ran as independent I/O (rank 0's count: the global cause makes every rank
// fall back together).
void warn_independent(const h5::CollectiveIo& io, const std::string& what, const char* transfers) {
  if (io.independent == 0) return;
  warn0(
      "{}: {} of {} tensor {} ran as independent MPI-IO, not collective (HDF5: {}; first: {}); on a parallel "
      "file system that is many small requests per rank instead of aggregated ones, so much slower",
      what, io.independent, io.independent + io.collective, transfers, io.why(), io.first);
}

}  // namespace

std::string save_checkpoint(const std::string& ckpt_dir, MPI_Comm comm, const ParamLayout& layout,
                            const std::vector<UnitSlice>& slices, const CheckpointMeta& meta, int keep_last,
                            h5::CollectiveIo* io) {
  for (const UnitSlice& s : slices)  // an evaluation-only strategy's slices hold no moments
    if (s.end > s.begin && (!s.state[1] || !s.state[2]))
      throw std::logic_error("save_checkpoint: a slice without optimizer moments");
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string name = step_name(meta.step);
  const std::string tmp = (fs::path(ckpt_dir) / (".partial-" + name)).string();
  const std::string final_dir = (fs::path(ckpt_dir) / name).string();
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(ckpt_dir, ec);
    fs::remove_all(tmp, ec);
    if (!ec) fs::create_directories(tmp, ec);
    if (ec) throw DataError(fmt::format("{}: cannot create the checkpoint's directory: {}", tmp, ec.message()));
  }
  MPI_Barrier(comm);
  const std::string file = tmp + "/state.h5";
  // A failed write is this rank's alone (a full disk fails rank 0's
  // metadata writes): its handles are abandoned, not closed collectively
  // with ranks that are elsewhere, and the error ends the job. Nothing is
  // published: the directory stays .partial-, which resumes pass over.
  h5::AbandonOnError abandon;
  h5::CollectiveIo modes;
  std::string at = "its creation";  // what the write is at, for its error
  try {
    h5::Id f = h5::create_file(file, comm);
    test_stall(rank);
    for (size_t ui = 0; ui < layout.num_units(); ++ui) {
      const UnitSpec& u = layout.unit(ui);
      const UnitSlice& whole = slices[ui];
      if (whole.written_begin() < whole.begin || whole.written_end() > whole.end ||
          whole.written_end() < whole.written_begin())
        throw std::logic_error("save_checkpoint: a write range outside its slice");
      // The written part: every tensor's piece of it (possibly empty: every rank joins every collective write).
      const UnitSlice s = whole.written_part();
      for_each_piece(u, s.begin, s.end, [&](const TensorSpec& t, int64_t lo, int64_t hi, int64_t off) {
        const int64_t n = hi - lo;
        for (int g = 0; g < 3; ++g) {
          const std::string ds = fmt::format("/{}/{}", kStateGroups[g], t.name);
          at = ds;
          h5::Id d = h5::create_dataset(f.get(), ds, stored_shape(t));
          const float* v = s.state[g] + off;
          h5::write_range(d.get(), v, lo, lo + n, true, &modes);
          uint64_t sum = n > 0 ? tensor_checksum(v, lo, n) : 0;
          MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_UINT64_T, MPI_SUM, comm);
          h5::set_attr(d.get(), "checksum", sum);  // collective: every rank writes the same value
          note_progress(ds);                       // the caller's StallGuard (core/stall_guard.hpp)
        }
        test_write_delay();
      });
    }
    at = "its attributes";
    h5::set_attr(f.get(), "format", std::string(kCheckpointFormat));
    h5::set_attr(f.get(), "format_version", kCheckpointFormatVersion);
    h5::set_attr(f.get(), "step", meta.step);
    h5::set_attr(f.get(), "optimizer_updates", meta.optimizer_updates);
    h5::set_attr(f.get(), "skipped_in_a_row", meta.skipped_in_a_row);
    h5::set_attr(f.get(), "data_epoch", meta.data.epoch);
    h5::set_attr(f.get(), "data_offset", meta.data.offset);
    h5::set_attr(f.get(), "data_sequences", meta.data_sequences);
    h5::set_attr(f.get(), "seed", meta.seed);
    h5::set_attr(f.get(), "strategy", meta.strategy);
    h5::set_attr(f.get(), "mesh", meta.mesh);
    h5::set_attr(f.get(), "world_size", int64_t(meta.world_size));
    h5::set_attr(f.get(), "model", model_json(layout.config()).dump());
    h5::set_attr(f.get(), "config", meta.config.dump());
    if (!meta.build.empty()) h5::set_attr(f.get(), "build", meta.build);
    at = "its close (the flush)";
    f.close();
  } catch (const h5::H5Error& e) {
    throw DataError(write_failure(meta.step, file, at, e.what()));
  }
  MPI_Barrier(comm);  // every rank has closed (flushed) the file
  note_progress("closing state.h5");
  warn_independent(modes, fmt::format("the checkpoint write of step {}", meta.step), "writes");
  if (io) *io = modes;
  if (rank == 0) {
    try {
      sync_file(file);
      std::ofstream c(tmp + "/COMPLETE");
      c << nlohmann::json{{"step", meta.step}, {"world_size", meta.world_size}, {"strategy", meta.strategy},
                          {"mesh", meta.mesh}}
               .dump()
        << "\n";
      c.close();
      if (!c) throw DataError(fmt::format("{}/COMPLETE: cannot write it: {}", tmp, std::strerror(errno)));
      sync_file(tmp + "/COMPLETE");
    } catch (const DataError& e) {
      throw DataError(write_failure(meta.step, file, "publishing it", e.what()));
    }
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
    fsync_path(ckpt_dir);
    if (keep_last > 0) {
      const std::vector<std::string> done = published_checkpoints(ckpt_dir);
      for (size_t i = 0; i + size_t(keep_last) < done.size(); ++i) fs::remove_all(done[i]);
    }
    remove_leftover_partials(ckpt_dir);
  }
  MPI_Barrier(comm);
  return final_dir;
}

uintmax_t checkpoint_bytes(const std::string& dir) {
  uintmax_t bytes = 0;
  std::error_code ec;
  for (const auto& f : fs::recursive_directory_iterator(dir, ec))
    if (f.is_regular_file(ec)) bytes += f.file_size(ec);
  return bytes;
}

int64_t checkpoint_step(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() < 13 || name.size() > 23) return -1;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
  return std::stoll(name.substr(5));
}

std::vector<std::string> published_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::pair<int64_t, std::string>> done;
  if (!fs::is_directory(ckpt_dir)) return {};
  for (const auto& e : fs::directory_iterator(ckpt_dir)) {
    const int64_t step = checkpoint_step(e.path().filename().string());
    if (step >= 0 && fs::exists(e.path() / "COMPLETE")) done.emplace_back(step, e.path().string());
  }
  std::sort(done.begin(), done.end());  // by step: past step 99999999 the names grow a digit
  std::vector<std::string> paths;
  for (auto& [step, path] : done) paths.push_back(std::move(path));
  return paths;
}

std::string latest_checkpoint(const std::string& ckpt_dir) {
  const std::vector<std::string> done = published_checkpoints(ckpt_dir);
  return done.empty() ? std::string() : done.back();
}

std::string not_a_checkpoint(const std::string& path) {
  if (!fs::exists(path)) return "no such checkpoint";
  if (!fs::is_directory(path)) {
    const fs::path p(path);
    if (p.filename() == "state.h5" && fs::exists(p.parent_path() / "COMPLETE"))
      return fmt::format("the state file of a checkpoint, not the checkpoint: give its directory {}",
                         p.parent_path().string());
    return "a file, not a checkpoint (a checkpoint is a directory step_NNNNNNNN holding state.h5 and COMPLETE)";
  }
  if (fs::exists(fs::path(path) / "state.h5")) return "";
  if (const std::string newest = latest_checkpoint(path); !newest.empty())
    return fmt::format("a directory of checkpoints, not a checkpoint; the newest in it is {}", newest);
  return "";
}

CheckpointMeta load_checkpoint(const std::string& path, MPI_Comm comm, const ParamLayout& layout,
                               const std::vector<UnitSlice>& slices, CheckpointPart part, h5::CollectiveIo* io) {
  if (const std::string why = not_a_checkpoint(path); !why.empty()) throw DataError(fmt::format("{}: {}", path, why));
  if (!fs::exists(fs::path(path) / "COMPLETE"))
    throw DataError(fmt::format("{}: not a complete checkpoint (no COMPLETE marker)", path));
  const std::string file = (fs::path(path) / "state.h5").string();
  if (test_load_fails(comm)) throw DamagedCheckpoint(file + ": cannot read it (GPT_TEST_CKPT_LOAD_FAIL_RANK)");
  CheckpointMeta meta;
  h5::CollectiveIo modes;
  try {
    h5::Id f = h5::open_file(file, comm);
    if (!h5::has_attr(f.get(), "format") || h5::attr_string(f.get(), "format") != kCheckpointFormat)
      throw DataError(fmt::format("{}: not a gpt_hpc checkpoint", file));
    const int64_t version = h5::attr_int(f.get(), "format_version");
    if (version != kCheckpointFormatVersion)
      throw DataError(fmt::format("{}: format version {} (this build reads {})", file, version,
                                  kCheckpointFormatVersion));
    const auto saved = nlohmann::json::parse(h5::attr_string(f.get(), "model"));
    const auto want = model_json(layout.config());
    for (auto& [k, v] : want.items()) {
      if (saved.value(k, -1) != v.get<int>())
        throw DataError(fmt::format("{}: model mismatch: {} = {} in the checkpoint, {} in this run", file, k,
                                    saved.value(k, -1), v.get<int>()));
    }
    meta.step = h5::attr_int(f.get(), "step");
    // Written since skipped steps existed; before, every step was an update.
    meta.optimizer_updates =
        h5::has_attr(f.get(), "optimizer_updates") ? h5::attr_int(f.get(), "optimizer_updates") : meta.step;
    if (meta.optimizer_updates < 0 || meta.optimizer_updates > meta.step)
      throw DamagedCheckpoint(
          fmt::format("{}: optimizer_updates = {} outside [0, step = {}]", file, meta.optimizer_updates, meta.step));
    // Written since a resume continues the count of skipped steps in a row.
    meta.skipped_in_a_row = h5::has_attr(f.get(), "skipped_in_a_row") ? h5::attr_int(f.get(), "skipped_in_a_row") : 0;
    if (meta.skipped_in_a_row < 0 || meta.skipped_in_a_row > meta.step - meta.optimizer_updates)
      throw DamagedCheckpoint(fmt::format("{}: skipped_in_a_row = {} outside [0, step - optimizer_updates = {}]", file,
                                          meta.skipped_in_a_row, meta.step - meta.optimizer_updates));
    meta.data = {h5::attr_int(f.get(), "data_epoch"), h5::attr_int(f.get(), "data_offset")};
    meta.data_sequences = h5::has_attr(f.get(), "data_sequences") ? h5::attr_int(f.get(), "data_sequences") : 0;
    meta.seed = h5::attr_uint(f.get(), "seed");
    meta.strategy = h5::attr_string(f.get(), "strategy");
    meta.mesh = h5::attr_string(f.get(), "mesh");
    meta.world_size = int(h5::attr_int(f.get(), "world_size"));
    meta.config = nlohmann::json::parse(h5::attr_string(f.get(), "config"));
    meta.build = h5::has_attr(f.get(), "build") ? h5::attr_string(f.get(), "build") : "";
    for (size_t ui = 0; ui < layout.num_units(); ++ui) {
      const UnitSlice& s = slices[ui];
      for_each_piece(layout.unit(ui), s.begin, s.end, [&](const TensorSpec& t, int64_t lo, int64_t hi, int64_t off) {
        for (int g = 0; g < (part == CheckpointPart::kAll ? 3 : 1); ++g) {
          const std::string ds = fmt::format("/{}/{}", kStateGroups[g], t.name);
          h5::Id d = h5::open_dataset(f.get(), ds);
          if (h5::shape_of(d.get()) != stored_shape(t))
            throw DamagedCheckpoint(fmt::format("{}: dataset {} has the wrong shape", file, ds));
          h5::read_range(d.get(), s.state[g] + off, lo, hi, true, &modes);
          // This rank's written part of the piece: the ranks' parts add up to the tensor's checksum.
          const int64_t c0 = std::max(lo, s.written_begin() - t.offset), c1 = std::min(hi, s.written_end() - t.offset);
          uint64_t sum = c1 > c0 ? tensor_checksum(s.state[g] + off + (c0 - lo), c0, c1 - c0) : 0;
          MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_UINT64_T, MPI_SUM, comm);
          if (sum != h5::attr_uint(d.get(), "checksum"))
            throw DamagedCheckpoint(fmt::format("{}: checksum mismatch in {}: the checkpoint is damaged", file, ds));
          note_progress(ds);
        }
      });
    }
  } catch (const h5::H5Error& e) {
    throw DamagedCheckpoint(h5::in_file(file, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw DamagedCheckpoint(fmt::format("{}: damaged metadata: {}", file, e.what()));
  }
  warn_independent(modes, "reading " + path, "reads");
  if (io) *io = modes;
  return meta;
}

namespace {

// Collective over comm: "" if no rank has an error, else the lowest failing
// rank's, "on rank R: " first unless every rank has one. A rank with an
// error waits at most wait_s for the others to join the vote, then throws
// its error as it is: a rank whose read failed alone may have left the
// others inside a collective read that it will never join, where they
// would wait for the StallGuard's --comm-timeout (600 s by default).
std::string first_error(MPI_Comm comm, const std::string& own, double wait_s) {
  int size = 1, failed = own.empty() ? 0 : 1;
  MPI_Comm_size(comm, &size);
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, comm, &req);
  if (own.empty()) {
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    const double deadline = MPI_Wtime() + wait_s;
    for (int done = 0; MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done;) {
      if (MPI_Wtime() > deadline)
        throw DamagedCheckpoint(fmt::format("{} (only here: the other ranks are still reading it after {:g} s, so "
                                            "--resume auto cannot pass over it)",
                                            own, wait_s));
      ::usleep(1000);
    }
  }
  if (failed == 0) return "";
  const FirstNote e = first_note(own, comm);
  return failed == size ? e.text : fmt::format("on rank {}: {}", e.where.first, e.text);
}

// Rank 0's list, on every rank: a file system whose ranks see the directory
// at different moments must not have them read different checkpoints.
std::vector<std::string> published_on_rank0(const std::string& ckpt_dir, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string joined;
  if (rank == 0)
    for (const std::string& p : published_checkpoints(ckpt_dir)) joined += p + '\n';
  joined = broadcast_string(std::move(joined), 0, comm);
  std::vector<std::string> list;
  for (size_t at = 0, end; (end = joined.find('\n', at)) != std::string::npos; at = end + 1)
    list.push_back(joined.substr(at, end - at));
  return list;
}

// Renames a damaged checkpoint to damaged-step_N beside it (.2, .3, ... if
// taken); "" if that fails.
std::string set_aside(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  std::string to = (p.parent_path() / ("damaged-" + p.filename().string())).string();
  for (int k = 2; fs::exists(to, ec); ++k)
    to = (p.parent_path() / fmt::format("damaged-{}.{}", p.filename().string(), k)).string();
  fs::rename(p, to, ec);
  return ec ? std::string() : to;
}

}  // namespace

NewestCheckpoint load_newest_checkpoint(const std::string& ckpt_dir, MPI_Comm comm, const ParamLayout& layout,
                                        const std::vector<UnitSlice>& slices, double vote_wait_s, CheckpointPart part,
                                        h5::CollectiveIo* io) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // The agreement after each attempt runs on a communicator of its own: a
  // rank that failed early must not have its vote matched with a collective
  // of the read that the others are still in.
  MPI_Comm vote;
  MPI_Comm_dup(comm, &vote);
  struct FreeVote {
    MPI_Comm& c;
    ~FreeVote() { MPI_Comm_free(&c); }
  } free_vote{vote};
  const std::vector<std::string> list = published_on_rank0(ckpt_dir, comm);
  NewestCheckpoint out;
  for (auto it = list.rbegin(); it != list.rend(); ++it) {
    std::string own;
    CheckpointMeta meta;
    try {
      meta = load_checkpoint(*it, comm, layout, slices, part, io);
    } catch (const DamagedCheckpoint& e) {
      own = e.what();
      if (own.empty()) own = "damaged";
    }
    if (std::string error = first_error(vote, own, vote_wait_s); !error.empty()) {
      out.damaged.push_back({*it, std::move(error), ""});
      continue;
    }
    out.path = *it;
    out.meta = std::move(meta);
    if (rank == 0)
      for (NewestCheckpoint::Damaged& d : out.damaged) d.moved_to = set_aside(d.path);
    return out;
  }
  if (!out.damaged.empty()) {
    std::string why;
    for (const NewestCheckpoint::Damaged& d : out.damaged)
      why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", fs::path(d.path).filename().string(), d.error);
    throw DataError(out.damaged.size() == 1
                        ? fmt::format("resume auto: the only checkpoint in {} cannot be read: {}", ckpt_dir, why)
                        : fmt::format("resume auto: none of the {} checkpoints in {} can be read (newest first: {})",
                                      out.damaged.size(), ckpt_dir, why));
  }
  return out;  // none published yet
}

namespace {

// Whether `probe` holds `token`, looking for up to 2 s: a network file
// system may show a new file a moment after it was written elsewhere.
bool sees_probe(const std::string& probe, const std::string& token) {
  for (int tries = 0;; ++tries) {
    std::ifstream in(probe, std::ios::binary);
    std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (got == token) return true;
    if (tries == 20) return false;
    ::usleep(100'000);
  }
}

}  // namespace

void check_ckpt_dir(const std::string& ckpt_dir, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Rank 0 creates the directory and writes a probe of a name and contents
  // no rank has seen before (no stale cache can answer for it).
  std::string problem, probe, token;
  if (rank == 0) {
    std::random_device rd;
    token = fmt::format("{:016x}{:08x}", (uint64_t(rd()) << 32) | rd(), rd());
    probe = (fs::path(ckpt_dir) / (".shared-test-" + token)).string();
    std::error_code ec;
    fs::create_directories(ckpt_dir, ec);
    if (ec) {
      problem = "cannot create it: " + ec.message();
    } else {
      errno = 0;
      if (std::FILE* f = std::fopen(probe.c_str(), "w")) {
        const bool written = std::fputs(token.c_str(), f) >= 0;
        if (std::fclose(f) != 0 || !written)
          problem = fmt::format("cannot write in it: {}", std::strerror(errno ? errno : EIO));
      } else {
        problem = fmt::format("cannot write in it: {}", std::strerror(errno ? errno : EIO));
      }
    }
  }
  for (std::string* v : {&problem, &probe, &token}) *v = broadcast_string(std::move(*v), 0, comm);
  if (!problem.empty()) {
    if (rank == 0) std::remove(probe.c_str());
    throw ConfigError(fmt::format("invalid ckpt-dir = '{}': {}", ckpt_dir, problem));
  }
  // Every rank writes into the checkpoints' one HDF5 file: a directory some
  // ranks do not share (node-local storage in a multi-node job) would give
  // each node a file of its own, none of them whole.
  const RanksWhere blind = ranks_where(rank != 0 && !sees_probe(probe, token), comm);
  if (rank == 0) std::remove(probe.c_str());
  if (blind.count == 0) return;
  const std::string host = broadcast_string(rank == blind.first ? processor_name() : "", blind.first, comm);
  throw ConfigError(fmt::format(
      "invalid ckpt-dir = '{}': {} of {} ({}rank {} on {}) cannot see the files rank 0 writes in it; all ranks write "
      "each checkpoint's one HDF5 file, so it must be on a file system that every node mounts",
      ckpt_dir, count_of(blind.count, "rank"), size, blind.count == 1 ? "" : "the first: ", blind.first, host));
}

}  // namespace gpt
