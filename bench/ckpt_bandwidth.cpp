// Checkpoint write and read bandwidth for a model's full training state
// (params + two AdamW moments, fp32), against the ceiling of one process
// fwrite-ing the same bytes to one file on the same disk (with fsync, as the
// checkpoint does). --holding zero3: each rank owns a 1/N shard of every
// unit; ddp: every rank holds all of it, writes a 1/N share and reads all
// of it back (each replica its whole slice).
//   mpirun -np N ckpt_bandwidth [--model gpt2-124m] [--holding zero3|ddp] [--dir DIR] [--reps 2]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "comm/mpi_env.hpp"
#include "core/shard.hpp"
#include "core/timer.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"

using namespace gpt;

int main(int argc, char** argv) {
  MpiEnv env(&argc, &argv);
  CLI::App app{"ckpt_bandwidth"};
  std::string model = "gpt2-124m", dir = "runs/bench/ckpt_bw";
  std::string holding = "zero3";
  int reps = 2;
  app.add_option("--model", model);
  app.add_option("--holding", holding)->check(CLI::IsMember({"zero3", "ddp"}));
  app.add_option("--dir", dir);
  app.add_option("--reps", reps);
  CLI11_PARSE(app, argc, argv);
  const ParamLayout layout(preset(model));
  const int N = env.size(), r = env.rank();
  std::vector<std::vector<float>> store;
  std::vector<UnitSlice> slices;
  std::mt19937 rng(r);
  for (const UnitSpec& u : layout.units()) {
    const bool ddp = holding == "ddp";
    const ShardRange sh = shard_range(u.numel, ddp ? 1 : N, ddp ? 0 : r);
    UnitSlice s;
    s.begin = sh.begin;
    s.end = sh.valid_end;
    if (ddp) {  // as the trainer's ddp: the r-th of N pieces of the unit
      const ShardRange part = shard_range(u.numel, N, r);
      s.write_begin = std::min(part.begin, u.numel);
      s.write_end = s.write_begin + part.valid();
    }
    for (int g = 0; g < 3; ++g) {
      store.emplace_back(size_t(sh.shard_numel));
      for (auto& x : store.back()) x = float(rng() % 1000) * 1e-3f;
      s.state[g] = store.back().data();
    }
    slices.push_back(s);
  }
  const double bytes = 3.0 * 4 * double(layout.model_numel());
  CheckpointMeta meta;
  meta.world_size = N;
  meta.strategy = holding;
  double w = 1e30, rd = 1e30;
  h5::CollectiveIo io;
  for (int i = 0; i < reps; ++i) {
    meta.step = i + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    Timer t;
    const std::string path = save_checkpoint(dir, MPI_COMM_WORLD, layout, slices, meta, 1);
    w = std::min(w, t.seconds());
    MPI_Barrier(MPI_COMM_WORLD);
    Timer t2;
    load_checkpoint(path, MPI_COMM_WORLD, layout, slices, CheckpointPart::kAll, &io);
    rd = std::min(rd, t2.seconds());
  }
  double ceiling = 0;
  if (r == 0) {  // one process, one file, the same bytes, fsync'ed
    std::vector<float> buf(size_t(bytes / 4));
    const std::string f = dir + "/fwrite_ceiling.bin";
    Timer t;
    FILE* fp = std::fopen(f.c_str(), "wb");
    std::fwrite(buf.data(), 4, buf.size(), fp);
    std::fflush(fp);
    ::fsync(fileno(fp));
    std::fclose(fp);
    ceiling = t.seconds();
    std::filesystem::remove(f);
    std::printf("# ckpt_bandwidth: %s, %d ranks, %s holding, %.0f MB of state (params + 2 moments), best of %d\n",
                model.c_str(), N, holding.c_str(), bytes / 1e6, reps);
    std::printf(
        "  write %.2f s (%.2f GB/s) | read+verify %.2f s (%.2f GB/s; rank 0 read %.0f MB) | fwrite ceiling "
        "%.2f s (%.2f GB/s)\n",
        w, bytes / w / 1e9, rd, bytes / rd / 1e9, double(io.bytes) / 1e6, ceiling, bytes / ceiling / 1e9);
    const nlohmann::json j{{"model", model}, {"ranks", N},   {"holding", holding},           {"bytes", bytes},
                           {"write_s", w},   {"read_s", rd}, {"read_bytes_rank0", io.bytes}, {"fwrite_s", ceiling}};
    std::printf("%s\n", j.dump().c_str());
  }
  if (r == 0) std::filesystem::remove_all(dir);
  return 0;
}
