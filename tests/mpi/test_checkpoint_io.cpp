// Checkpoints' MPI-IO is really collective. Parallel HDF5 runs a transfer
// asked to be collective as independent I/O, without an error, wherever it
// cannot do it collectively (io/h5.hpp: CollectiveIo), and independent I/O
// from many ranks is what makes checkpoints slow on a parallel file
// system. So every tensor a checkpoint writes or reads must run as
// collective MPI-IO on every rank, whatever the rank owns: a zero3 shard
// (some ranks' shards miss whole tensors), a replica's share of a slice
// that all ranks hold (ddp), or a replica that writes nothing but joins
// every write. Each is read back as any of them reads it, the written
// parts' checksums adding up. And the check must see a fallback:
// a write through a type conversion is one, named by HDF5's cause.
// Launched on 2 and 3 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <utility>

#include "core/shard.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "mpi_test_env.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string d = (fs::temp_directory_path() / ("gpt_ckpt_io_test_" + name)).string();
  if (test::env().rank() == 0) fs::remove_all(d);
  MPI_Barrier(MPI_COMM_WORLD);
  return d;
}

int64_t num_tensors(const ParamLayout& layout) {
  return std::accumulate(layout.units().begin(), layout.units().end(), int64_t(0),
                         [](int64_t n, const UnitSpec& u) { return n + int64_t(u.tensors.size()); });
}

// How the ranks hold the state: zero3's shards; ddp's replicas, each
// writing its share of every unit (the trainer's); or replicas of which the
// first writes everything and the others nothing, though they join every
// collective write.
enum class Holding { kSharded, kReplicasSplit, kOneReplicaWrites };

// This rank's training state: params and two moments of its slice of every
// unit (the same values on every rank for a given element), and its slices.
struct State {
  std::vector<std::vector<float>> store;
  std::vector<UnitSlice> slices;
};
State make_state(const ParamLayout& layout, Holding h) {
  const int N = test::env().size(), r = test::env().rank();
  State st;
  st.store.reserve(3 * layout.num_units());
  for (const UnitSpec& u : layout.units()) {
    const ShardRange sh = h == Holding::kSharded ? shard_range(u.numel, N, r) : shard_range(u.numel, 1, 0);
    UnitSlice s;
    s.begin = sh.begin;
    s.end = sh.valid_end;
    if (h == Holding::kReplicasSplit) {
      const ShardRange part = shard_range(s.end, N, r);
      s.write_begin = std::min(part.begin, s.end);
      s.write_end = s.write_begin + part.valid();
    } else if (h == Holding::kOneReplicaWrites && r > 0) {
      s.write_begin = s.write_end = s.begin;
    }
    for (int g = 0; g < 3; ++g) {
      st.store.emplace_back(size_t(std::max<int64_t>(sh.valid_end - sh.begin, 1)));
      for (size_t i = 0; i < st.store.back().size(); ++i)
        st.store.back()[i] = float(g + 1) * 1e-3f * float((sh.begin + int64_t(i)) % 997);
      s.state[g] = st.store.back().data();
    }
    st.slices.push_back(s);
  }
  return st;
}

TEST(CheckpointIo, EveryTensorIsWrittenAndReadCollectively) {
  const ParamLayout layout(preset("tiny"));
  const int64_t tensors = num_tensors(layout);
  const std::pair<Holding, const char*> holdings[] = {{Holding::kSharded, "sharded"},
                                                      {Holding::kReplicasSplit, "replicas_split"},
                                                      {Holding::kOneReplicaWrites, "one_replica_writes"}};
  for (const auto& [holding, name] : holdings) {
    SCOPED_TRACE(name);
    const std::string dir = fresh_dir(name);
    State st = make_state(layout, holding);
    CheckpointMeta meta;
    meta.step = 3;
    meta.world_size = test::env().size();
    meta.strategy = holding == Holding::kSharded ? "zero3" : "ddp";
    h5::CollectiveIo wrote;
    const std::string path = save_checkpoint(dir, MPI_COMM_WORLD, layout, st.slices, meta, 0, &wrote);
    EXPECT_EQ(wrote.independent, 0) << wrote.why() << " (first: " << wrote.first << ")";
    EXPECT_EQ(wrote.collective, 3 * tensors);  // params and both moments of every tensor

    // Read back as each holding reads it (the checksums of the written parts add up to the tensors').
    for (const auto& [reader, reader_name] : holdings) {
      SCOPED_TRACE(std::string("read as ") + reader_name);
      State back = make_state(layout, reader), want = make_state(layout, reader);
      for (auto& v : back.store) std::fill(v.begin(), v.end(), 0.f);
      h5::CollectiveIo read;
      load_checkpoint(path, MPI_COMM_WORLD, layout, back.slices, CheckpointPart::kAll, &read);
      EXPECT_EQ(read.independent, 0) << read.why() << " (first: " << read.first << ")";
      EXPECT_EQ(read.collective, 3 * tensors);
      EXPECT_EQ(back.store, want.store);
      // Each rank reads the whole of its slices, replicas included, and the count says so.
      int64_t held = 0;
      for (const UnitSlice& s : back.slices) held += s.end - s.begin;
      EXPECT_EQ(read.bytes, 3 * 4 * held);
    }

    h5::CollectiveIo params;
    load_checkpoint(path, MPI_COMM_WORLD, layout, st.slices, CheckpointPart::kParams, &params);
    EXPECT_EQ(params.independent, 0);
    EXPECT_EQ(params.collective, tensors);
    int64_t held = 0;
    for (const UnitSlice& s : st.slices) held += s.end - s.begin;
    EXPECT_EQ(params.bytes, 4 * held);  // the parameters alone
  }
}

// Replicas split the write: on N ranks each writes about 1/N of the state,
// and together every element once (the file's checksums verify on load).
TEST(CheckpointIo, ReplicasWriteAShareEach) {
  const ParamLayout layout(preset("tiny"));
  const int N = test::env().size();
  State st = make_state(layout, Holding::kReplicasSplit);
  int64_t mine = 0;
  for (const UnitSlice& s : st.slices) mine += s.written_end() - s.written_begin();
  int64_t all = mine;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(all, layout.model_numel());
  EXPECT_LE(mine, layout.model_numel() / N + int64_t(layout.num_units()));
  EXPECT_GE(mine, layout.model_numel() / N - int64_t(layout.num_units()));
}

// The check itself: a write HDF5 cannot do collectively (memory doubles into
// a file of floats: a type conversion) counts as independent, with its
// cause and dataset, beside one that runs collectively.
TEST(CheckpointIo, AFallbackToIndependentIoIsSeenWithItsCause) {
  const std::string dir = fresh_dir("fallback");
  if (test::env().rank() == 0) fs::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  const int N = test::env().size(), r = test::env().rank();
  h5::Id f = h5::create_file(dir + "/t.h5", MPI_COMM_WORLD);
  h5::Id d = h5::create_dataset(f.get(), "/group/d", {int64_t(8) * N});
  h5::CollectiveIo io;
  std::vector<float> mine(8, float(r));
  h5::write_range(d.get(), mine.data(), 8 * r, 8 * (r + 1), true, &io);
  EXPECT_EQ(io.collective, 1);
  EXPECT_EQ(io.independent, 0);

  std::vector<double> doubles(8, double(r));
  h5::Id space(H5Dget_space(d.get()));
  hsize_t start = hsize_t(8 * r), count = 8;
  ASSERT_GE(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr), 0);
  h5::Id mem(H5Screate_simple(1, &count, nullptr));
  h5::Id dxpl(H5Pcreate(H5P_DATASET_XFER));
  ASSERT_GE(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), 0);
  ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_DOUBLE, mem.get(), space.get(), dxpl.get(), doubles.data()), 0);
  io.record(dxpl.get(), d.get());
  EXPECT_EQ(io.collective, 1);
  EXPECT_EQ(io.independent, 1);
  EXPECT_EQ(io.why(), "datatype conversion");
  EXPECT_EQ(io.first, "/group/d");

  h5::CollectiveIo none;
  none.causes = 0x2 | 0x1000;
  EXPECT_EQ(none.why(), "datatype conversion, HDF5 cause bits 0x1000");
}

}  // namespace
}  // namespace gpt
