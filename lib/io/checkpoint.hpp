// Sharded checkpoints in HDF5, loadable under any strategy and world size.
//
// On disk, one directory per checkpoint, <ckpt-dir>/step_NNNNNNNN/:
//   state.h5   one HDF5 file written collectively (MPI-IO) by all ranks;
//              each rank writes only the elements it owns, replicas once.
//     /params/<nanoGPT name>      fp32 with the tensor's shape (wte: [vocab, C], padding rows dropped)
//     /exp_avg/<name>, /exp_avg_sq/<name>   AdamW moments, same shapes
//     each dataset has attribute "checksum": a uint64, the sum over elements
//     of mix(index, float bits) (order-free, so any sharding can verify it)
//     root attributes: format ("gpt_hpc-checkpoint"), format_version, step
//     (optimizer steps done), optimizer_updates (the updates applied: step
//     less the skipped non-finite steps; AdamW's bias-correction count;
//     absent in older checkpoints, read as step), skipped_in_a_row (the
//     non-finite steps skipped since the last applied update, which
//     --skip-nonfinite limits; absent in older checkpoints, read as 0),
//     data_epoch, data_offset, data_sequences (the training data's sequences
//     per epoch, which data_offset counts in; absent in older checkpoints),
//     seed, strategy, mesh, world_size, model (JSON of the shape), config
//     (JSON of the run)
//   COMPLETE   written last; only a directory with it is a checkpoint.
// The directory is written as <ckpt-dir>/.partial-step_NNNNNNNN and renamed
// after every rank has closed the file: a crash never leaves something that
// --resume auto would pick. A published checkpoint found damaged by
// --resume auto is renamed <ckpt-dir>/damaged-step_NNNNNNNN once an older
// one has loaded (load_newest_checkpoint).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "io/data_loader.hpp"
#include "model/layout.hpp"

namespace gpt::h5 {
struct CollectiveIo;  // io/h5.hpp
}  // namespace gpt::h5

namespace gpt {

inline constexpr int64_t kCheckpointFormatVersion = 1;
inline constexpr const char* kCheckpointFormat = "gpt_hpc-checkpoint";  // state.h5's root attribute "format"

// The state groups of state.h5, in UnitSlice::state order.
inline constexpr const char* kStateGroups[3] = {"params", "exp_avg", "exp_avg_sq"};

// A tensor's shape on disk (and in exports): wte without its padded rows.
std::vector<int64_t> stored_shape(const TensorSpec& t);

// The "model" attribute: {n_layer, n_head, n_embd, n_ctx, vocab_size}.
nlohmann::json model_json(const GPTConfig& c);
GPTConfig model_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception if incomplete

// What this rank owns of one unit: elements [begin, end) of the unit's flat
// buffer, with pointers to element `begin` of params and the two moments.
// Of it, this rank writes and checksums [write_begin, write_end) (write_end
// < 0: all of it), and the ranks' written parts are a partition of the
// unit: ranks holding the same slice (ddp's, hybrid's replica groups) each
// write their share of it, in parallel, instead of one writing it all. A
// load reads the whole slice and checksums the written part.
struct UnitSlice {
  int64_t begin = 0, end = 0;
  float* state[3] = {nullptr, nullptr, nullptr};  // params, exp_avg, exp_avg_sq
  int64_t write_begin = 0, write_end = -1;
  // [write_begin, write_end), the whole slice where write_end < 0.
  int64_t written_begin() const { return write_end < 0 ? begin : write_begin; }
  int64_t written_end() const { return write_end < 0 ? end : write_end; }
  // The written part as a slice of its own, written whole: its range, the
  // state pointers moved to its first element (null ones stay null).
  UnitSlice written_part() const {
    UnitSlice w = *this;
    w.begin = written_begin();
    w.end = written_end();
    for (float*& p : w.state)
      if (p) p += w.begin - begin;
    w.write_begin = 0;
    w.write_end = -1;
    return w;
  }
  // The state is a copy made for this checkpoint (a GPU's host copies), not
  // the live state: a background write may use it as its snapshot.
  bool detached = false;
};

// What a strategy's slice is asked for (Strategy::owned): a checkpoint's
// load (which reads every element of what it keeps), an import of the
// parameters alone (the moments keep their values), or a save.
enum class OwnedFor { kLoad, kImport, kSave };

struct CheckpointMeta {
  int64_t step = 0;
  int64_t optimizer_updates = 0;  // <= step: updates applied (a skipped step is not one)
  int64_t skipped_in_a_row = 0;   // <= step - optimizer_updates: skipped steps since the last update
  LoaderPosition data;
  int64_t data_sequences = 0;  // sequences per epoch of the data that `data` counts in; 0: not recorded
  uint64_t seed = 0;
  std::string strategy, mesh;
  int world_size = 1;
  nlohmann::json config;
  std::string build;  // the writing binary's commit (core/build_info.hpp); "" where an older checkpoint lacks it
};

// Collective over comm. Writes aside, then publishes <ckpt_dir>/step_NNNNNNNN.
// keep_last > 0: older published checkpoints beyond the newest keep_last are
// removed after the new one is published. Returns the published path.
// Every tensor goes through one collective MPI-IO transfer per rank; one
// that HDF5 ran independently instead is a warning naming HDF5's reason
// (slow on a parallel file system, io/h5.hpp), and `io`, if given, gets
// this rank's counts.
std::string save_checkpoint(const std::string& ckpt_dir, MPI_Comm comm, const ParamLayout& layout,
                            const std::vector<UnitSlice>& slices, const CheckpointMeta& meta, int keep_last,
                            h5::CollectiveIo* io = nullptr);

// A checkpoint whose files cannot be read or whose contents fail their
// checks (checksums, metadata, shapes): a storage fault, not a checkpoint of
// another model or format (those are plain DataErrors). --resume auto goes
// past one to an older checkpoint.
class DamagedCheckpoint : public DataError {
 public:
  using DataError::DataError;
};

// What load_checkpoint reads: the whole state (a resume), or the parameters
// only (--init-from a checkpoint, or an evaluation-only run's resume: the
// moments in the slices are not touched, and may be null).
enum class CheckpointPart { kAll, kParams };

// Collective over comm. Reads each rank's slices from the checkpoint at
// `path`, verifies checksums, and returns its metadata. Throws
// DamagedCheckpoint naming the file for one that cannot be read or fails a
// check (a checksum, its metadata, a dataset's shape), DataError for a path
// that is not a complete checkpoint or one of another model or format.
// Its reads are collective as save_checkpoint's writes are, with the same
// warning and `io`.
CheckpointMeta load_checkpoint(const std::string& path, MPI_Comm comm, const ParamLayout& layout,
                               const std::vector<UnitSlice>& slices, CheckpointPart part = CheckpointPart::kAll,
                               h5::CollectiveIo* io = nullptr);

// Order-free checksum of elements [lo, lo + n) of a tensor (v points at
// element lo): partial sums of disjoint ranges add up to the whole tensor's.
uint64_t tensor_checksum(const float* v, int64_t lo, int64_t n);

// The step of a checkpoint directory's name, "step_" and at least 8 digits
// (as save_checkpoint names them); -1 for any other name (a user's
// "step_00000300.bak" is not a checkpoint).
int64_t checkpoint_step(const std::string& name);

// The bytes of the files under a checkpoint directory (0 where it cannot be
// read): what removing it frees, what ckpt_tool list shows.
uintmax_t checkpoint_bytes(const std::string& dir);

// The published checkpoints under ckpt_dir (directories step_N holding
// COMPLETE), oldest first; none if ckpt_dir does not exist.
std::vector<std::string> published_checkpoints(const std::string& ckpt_dir);

// The newest published checkpoint under ckpt_dir, or "" if there is none.
std::string latest_checkpoint(const std::string& ckpt_dir);

// What --resume auto loaded.
struct NewestCheckpoint {
  std::string path;  // "" when ckpt_dir holds no published checkpoint (nothing was loaded)
  CheckpointMeta meta;
  struct Damaged {
    std::string path, error;  // error: the lowest failing rank's, "on rank R: " first unless every rank failed
    std::string moved_to;     // where it was set aside; "" if the rename failed
  };
  std::vector<Damaged> damaged;  // newer than `path` and not loadable, newest first
};

// --resume auto. Collective over comm. Loads the newest published checkpoint
// under ckpt_dir (rank 0's listing, so every rank reads the same files) that
// loads on every rank. A newer one that throws DamagedCheckpoint on any rank
// is passed over on all of them; once an older one has loaded, rank 0
// renames each passed-over one to damaged-step_NNNNNNNN (then .2, .3, ...
// if taken): kept for inspection, never picked or pruned again, so a later
// resume cannot fall back further than this one did. Throws DataError,
// renaming nothing, when every checkpoint there is damaged (a fresh start
// would silently throw the run away). Other errors (another model or format)
// propagate at once, as from load_checkpoint. A rank whose load failed
// waits at most vote_wait_s for the others to vote: a failure on some ranks
// only can leave the others in a collective read it will never join, so it
// then throws its own DamagedCheckpoint, which ends the job. `io`, if
// given, gets the counts of the read that loaded.
NewestCheckpoint load_newest_checkpoint(const std::string& ckpt_dir, MPI_Comm comm, const ParamLayout& layout,
                                        const std::vector<UnitSlice>& slices, double vote_wait_s,
                                        CheckpointPart part = CheckpointPart::kAll, h5::CollectiveIo* io = nullptr);

// Why `path` is not a checkpoint when it is what is easily given instead
// (nothing at all, or the directory of checkpoints rather than one of them,
// then naming the newest in it), without the path itself; "" otherwise.
std::string not_a_checkpoint(const std::string& path);

// Collective over comm: rank 0 creates ckpt_dir (and its parents) and writes
// a file in it that every other rank must then read (waiting up to 2 s for
// it), and removes it. So a directory that cannot hold checkpoints, or one
// that not every rank shares (node-local storage in a multi-node job), is a
// ConfigError on every rank at the start, not an error (or a checkpoint
// written in pieces) after training.
void check_ckpt_dir(const std::string& ckpt_dir, MPI_Comm comm);

}  // namespace gpt
