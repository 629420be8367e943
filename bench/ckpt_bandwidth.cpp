// Checkpoint write and read bandwidth for a model's full training state
// (params + two AdamW moments, fp32), each rank owning a 1/N shard of every
// unit as under zero3, against the ceiling of one process fwrite-ing the same
// bytes to one file on the same disk (with fsync, as the checkpoint does).
//   mpirun -np N ckpt_bandwidth [--model gpt2-124m] [--dir DIR] [--reps 2]
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

using namespace gpt;

int main(int argc, char** argv) {
  MpiEnv env(&argc, &argv);
  CLI::App app{"ckpt_bandwidth"};
  std::string model = "gpt2-124m", dir = "runs/bench/ckpt_bw";
  int reps = 2;
  app.add_option("--model", model);
  app.add_option("--dir", dir);
  app.add_option("--reps", reps);
  CLI11_PARSE(app, argc, argv);
  const ParamLayout layout(preset(model));
  const int N = env.size(), r = env.rank();
  std::vector<std::vector<float>> store;
  std::vector<UnitSlice> slices;
  std::mt19937 rng(r);
  for (const UnitSpec& u : layout.units()) {
    const ShardRange sh = shard_range(u.numel, N, r);
    UnitSlice s;
    s.begin = sh.begin;
    s.end = sh.valid_end;
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
  meta.strategy = "zero3";
  double w = 1e30, rd = 1e30;
  for (int i = 0; i < reps; ++i) {
    meta.step = i + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    Timer t;
    const std::string path = save_checkpoint(dir, MPI_COMM_WORLD, layout, slices, meta, 1);
    w = std::min(w, t.seconds());
    MPI_Barrier(MPI_COMM_WORLD);
    Timer t2;
    load_checkpoint(path, MPI_COMM_WORLD, layout, slices);
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
    std::printf("# ckpt_bandwidth: %s, %d ranks, %.0f MB of state (params + 2 moments), best of %d\n", model.c_str(),
                N, bytes / 1e6, reps);
    std::printf("  write %.2f s (%.2f GB/s) | read+verify %.2f s (%.2f GB/s) | fwrite ceiling %.2f s (%.2f GB/s)\n", w,
                bytes / w / 1e9, rd, bytes / rd / 1e9, ceiling, bytes / ceiling / 1e9);
    std::printf("%s\n", nlohmann::json{{"model", model}, {"ranks", N}, {"bytes", bytes}, {"write_s", w},
                                       {"read_s", rd}, {"fwrite_s", ceiling}}
                            .dump()
                            .c_str());
  }
  if (r == 0) std::filesystem::remove_all(dir);
  return 0;
}
