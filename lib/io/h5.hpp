// A thin checked wrapper over the parts of HDF5 the checkpoints use. Every
// call is checked; failures throw H5Error with HDF5's own innermost message
// and the file or object involved. Every hid_t is owned by an H5Id (RAII).
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace gpt::h5 {

class H5Error : public Error {
 public:
  using Error::Error;
};

// `message` prefixed with "file: ", unless it already begins with the file
// (the errors of create_file and open_file name it).
std::string in_file(const std::string& file, const std::string& message);

// Owns one HDF5 identifier and closes it with the right H5*close.
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Id& operator=(Id&& o) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const { return id_; }
  void reset();
  // Closes now and reports failure (a file close flushes: its error matters).
  void close();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// While one lives on this thread, an Id destroyed by an exception thrown
// past it is abandoned, not closed. Closing a parallel file (and a dataset
// of it) is collective, and after a failure on this rank alone (a full
// disk: HDF5's metadata is written by rank 0) the other ranks are in
// another collective call: closing would hang this rank too, where
// abandoning lets the error reach the job's abort, which ends every rank.
// For writes, whose failure ends the job; a read that fails may be retried
// elsewhere (resume auto) and closes its file as usual.
class AbandonOnError {
 public:
  AbandonOnError();
  ~AbandonOnError();
  AbandonOnError(const AbandonOnError&) = delete;
  AbandonOnError& operator=(const AbandonOnError&) = delete;

 private:
  int outer_;  // the enclosing guard's exception count, -1 for none
};

// comm == MPI_COMM_NULL: serial access (tools); otherwise MPI-IO, collective.
Id create_file(const std::string& path, MPI_Comm comm);
Id open_file(const std::string& path, MPI_Comm comm);
bool is_hdf5(const std::string& path);  // false also for a file that cannot be read

Id create_dataset(hid_t file, const std::string& name, const std::vector<int64_t>& shape);
Id open_dataset(hid_t file, const std::string& name);
std::vector<int64_t> shape_of(hid_t dset);

// How transfers asked to be collective actually ran. Parallel HDF5 turns
// such a transfer into independent MPI-IO without an error wherever it
// cannot do it collectively (a type conversion between memory and file, a
// data transform, a filter, a dataset neither contiguous nor chunked:
// H5Pget_mpio_no_collective_cause), and on a parallel file system many
// ranks' independent requests are much slower than MPI-IO's aggregated
// collective ones. Read back after each transfer, so a checkpoint can say
// so and its tests can hold every transfer to collective (as HighFive's do).
struct CollectiveIo {
  int64_t collective = 0;   // transfers that ran as collective MPI-IO
  int64_t independent = 0;  // asked to be collective, ran as independent I/O
  uint32_t causes = 0;      // why, H5D_MPIO_* bits over every rank's (the global cause)
  std::string first;        // the first dataset that ran independently
  int64_t bytes = 0;        // this rank's bytes moved to or from the file, collective or not
  // Reads how the transfer just made with `dxpl` (its transfer property
  // list) on dataset `dset` ran, and counts it.
  void record(hid_t dxpl, hid_t dset);
  // HDF5's causes in words: "datatype conversion, data transforms".
  std::string why() const;
};

// Elements [lo, hi) of the dataset in row-major order, from/to a contiguous
// buffer. Collective when the file was opened with a communicator: every
// rank calls it, a rank with lo == hi takes part with an empty selection;
// `io`, if given, counts how it ran.
void write_range(hid_t dset, const float* data, int64_t lo, int64_t hi, bool collective, CollectiveIo* io = nullptr);
void read_range(hid_t dset, float* data, int64_t lo, int64_t hi, bool collective, CollectiveIo* io = nullptr);

void set_attr(hid_t obj, const std::string& name, const std::string& value);
void set_attr(hid_t obj, const std::string& name, int64_t value);
void set_attr(hid_t obj, const std::string& name, uint64_t value);
std::string attr_string(hid_t obj, const std::string& name);
int64_t attr_int(hid_t obj, const std::string& name);
uint64_t attr_uint(hid_t obj, const std::string& name);
bool has_attr(hid_t obj, const std::string& name);

}  // namespace gpt::h5
