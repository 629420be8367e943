// What every rank of a job must be given alike, checked at start-up.
//
// Each rank parses its own command line and config file and globs its own
// data. A rank given something else (an MPMD launch, a node's own copy of
// the config file, a node whose copy of the shards is incomplete) would
// otherwise wait in a collective whose sizes differ until --comm-timeout,
// or train silently on another data order: the shuffle and each rank's
// part of every batch are computed from the number of windows. So the
// ranks compare what they were given with rank 0's, and a difference ends
// the job with one line naming the key or the shard, and the first rank
// that differs.
#pragma once

#include <mpi.h>

#include <string>

#include "io/data_loader.hpp"
#include "io/run_config.hpp"

namespace gpt {

// Collective over comm: throws ConfigError when a rank's configuration
// differs from rank 0's, naming the first key that differs (as its flag)
// with both values and the lowest rank that differs: "the ranks were not
// given the same configuration: global-batch = 12 on rank 1 (on node2), 8
// on rank 0 (on node1); ...". Two kinds of key may differ: the files a node
// may hold its own copy of (the data, the tokenizer's, HellaSwag's,
// --init-from) and those only rank 0 writes (--metrics, --trace), whose
// paths are not compared, only whether each is given (the data are
// compared by what they hold: check_same_shards); and how a rank computes
// (--threads, --cpu-gemm, --log-level), which no collective sees.
void check_same_config(const RunConfig& cfg, MPI_Comm comm);

// Collective over comm: throws DataError when a rank's shards differ from
// rank 0's in number, order, file name (the directory may differ: a
// node-local copy) or token count, naming the first shard that differs and
// the lowest rank. `flag` names the data ("--data", "--val-data").
void check_same_shards(const DataLoader& loader, const std::string& flag, MPI_Comm comm);

}  // namespace gpt
