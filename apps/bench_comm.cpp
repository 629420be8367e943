// bench_comm: collective benchmark in the style of nccl-tests.
//
// For each collective and each size: fill inputs with a rank-dependent
// integer pattern, run once and count wrong output elements (#wrong, summed
// over ranks), then warm up, barrier, and time `iters` back-to-back
// collectives (each issued async and waited). The time reported is the
// maximum over ranks of the mean per collective.
//
// Sizes are the full buffer of the collective (all_reduce: the buffer;
// reduce_scatter: the input; all_gather: the output; broadcast: the buffer).
// algbw = size / time. busbw = algbw x the collective's bus factor, the data
// each rank must move relative to size under a ring algorithm, so busbw is
// comparable to link bandwidth across collectives and rank counts:
//   all_reduce 2(n-1)/n, reduce_scatter (n-1)/n, all_gather (n-1)/n, broadcast 1.
//
//   mpirun -np 4 bench_comm [--backend mpi|nccl] [--ops all_reduce,...] [--min-bytes 8]
//     [--max-bytes 64M] [--factor 4] [--iters 20] [--warmup 5] [--dtype f32|bf16]
//     [--group world|shard|replicate] [--mesh RxS] [--inplace] [--json FILE]
#include <CLI/CLI.hpp>

#include <cmath>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "command_line.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi_env.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "comm/bench_buffer.hpp"

namespace {

using namespace gpt;

enum class Op { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

struct OpInfo {
  Op op;
  const char* name;
  double bus_factor(int n) const {
    switch (op) {
      case Op::kAllReduce: return 2.0 * (n - 1) / n;
      case Op::kReduceScatter:
      case Op::kAllGather: return double(n - 1) / n;
      case Op::kBroadcast: return 1.0;
    }
    return 1.0;
  }
};

const OpInfo kOps[] = {{Op::kAllReduce, "all_reduce"},
                       {Op::kReduceScatter, "reduce_scatter"},
                       {Op::kAllGather, "all_gather"},
                       {Op::kBroadcast, "broadcast"}};

// Rank r's input element i: small integers, so sums are exact in f32 and bf16.
float pattern(int r, size_t i) { return float((r * 3 + i * 7) % 11); }

struct Row {
  std::string op;
  size_t bytes, count;
  double time_us, algbw, busbw;
  long long wrong;
};

Row bench_one(const OpInfo& info, Communicator& comm, BenchBuffers& buf, size_t bytes, DType dt, int iters,
              int warmup, bool inplace, MPI_Comm world) {
  const int n = comm.size(), r = comm.rank();
  const size_t es = dtype_size(dt);
  // Element counts: the full buffer rounded down to a multiple of n (for the
  // scatter/gather collectives) and to at least one element per rank.
  size_t full = std::max<size_t>(bytes / es, size_t(n));
  if (info.op == Op::kReduceScatter || info.op == Op::kAllGather) full = full / n * n;
  const size_t piece = full / n;

  // Inputs and where the outputs land.
  std::vector<float> host(full);
  const void* send = buf.send();
  void* recv = buf.recv();
  size_t send_count = full;
  switch (info.op) {
    case Op::kAllReduce:
      for (size_t i = 0; i < full; ++i) host[i] = pattern(r, i);
      buf.upload(inplace ? buf.recv() : buf.send(), host, dt);
      if (inplace) send = recv;
      break;
    case Op::kBroadcast:  // always in place: the buffer itself is broadcast
      for (size_t i = 0; i < full; ++i) host[i] = pattern(r, i);
      buf.upload(buf.recv(), host, dt);
      break;
    case Op::kReduceScatter:
      for (size_t i = 0; i < full; ++i) host[i] = pattern(r, i);
      buf.upload(inplace ? buf.recv() : buf.send(), host, dt);
      if (inplace) {
        send = recv;
        recv = static_cast<char*>(buf.recv()) + r * piece * es;
      }
      break;
    case Op::kAllGather:
      send_count = piece;
      host.assign(piece, 0.f);
      for (size_t i = 0; i < piece; ++i) host[i] = pattern(r, i);
      if (inplace) {
        send = static_cast<char*>(buf.recv()) + r * piece * es;
        buf.upload(const_cast<void*>(send), host, dt);
      } else {
        buf.upload(buf.send(), host, dt);
      }
      break;
  }
  auto issue = [&]() -> WorkPtr {
    switch (info.op) {
      case Op::kAllReduce: return comm.all_reduce_async(send, recv, full, dt, ReduceOp::kSum);
      case Op::kReduceScatter: return comm.reduce_scatter_async(send, recv, piece, dt, ReduceOp::kSum);
      case Op::kAllGather: return comm.all_gather_async(send, recv, send_count, dt);
      case Op::kBroadcast: return comm.broadcast_async(recv, full, dt, 0);
    }
    return nullptr;
  };

  // Correctness on the first run.
  issue()->wait();
  long long wrong = 0;
  const size_t out_count = info.op == Op::kReduceScatter ? piece : full;
  std::vector<float> out = buf.download(recv, out_count, dt);
  for (size_t i = 0; i < out_count; ++i) {
    float want = 0;
    switch (info.op) {
      case Op::kAllReduce:
        for (int q = 0; q < n; ++q) want += pattern(q, i);
        break;
      case Op::kReduceScatter:
        for (int q = 0; q < n; ++q) want += pattern(q, r * piece + i);
        break;
      case Op::kAllGather: want = pattern(int(i / piece), i % piece); break;
      case Op::kBroadcast: want = pattern(0, i); break;
    }
    if (out[i] != want) ++wrong;
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, world);

  for (int i = 0; i < warmup; ++i) issue()->wait();
  comm.barrier();
  Timer t;
  for (int i = 0; i < iters; ++i) issue()->wait();
  buf.synchronize();
  double mean = t.seconds() / iters;
  MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, world);
  const double size_bytes = double(full) * es;
  const double algbw = size_bytes / mean / 1e9;
  return {info.name, size_t(size_bytes), full, mean * 1e6, algbw, algbw * info.bus_factor(n), wrong};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_comm: collective bandwidth (nccl-tests style)"};
  gpt::add_version_flag(app, "bench_comm");
  std::string backend = "mpi", ops = "all_reduce,reduce_scatter,all_gather,broadcast", min_b = "8", max_b = "64M",
              dtype = "f32", group = "world", mesh_spec, json_path;
  int factor = 4, iters = 20, warmup = 5;
  bool inplace = false;
  app.add_option("--backend", backend, "mpi | nccl")->capture_default_str()->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("--ops", ops, "comma-separated collectives")->capture_default_str();
  app.add_option("--min-bytes", min_b, "smallest size (K, M, G suffixes)")->capture_default_str()->type_name("SIZE");
  app.add_option("--max-bytes", max_b, "largest size")->capture_default_str()->type_name("SIZE");
  app.add_option("--factor", factor, "size multiplier between rows")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--iters", iters, "timed iterations per size")->capture_default_str()->check(gpt::kPositiveInt);
  app.add_option("--warmup", warmup, "untimed iterations per size")->capture_default_str()->check(gpt::kNonNegativeInt);
  app.add_option("--dtype", dtype, "f32 | bf16")->capture_default_str()->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--group", group, "world | shard | replicate (mesh groups)")
      ->capture_default_str()
      ->check(CLI::IsMember({"world", "shard", "replicate"}));
  app.add_option("--mesh", mesh_spec, "RxS (default: nodes x ranks per node)")->type_name("RxS");
  app.add_flag("--inplace", inplace, "in-place collectives");
  app.add_option("--json", json_path, "write JSON lines here (rank 0)")->type_name("FILE");
  // --help and --version answer before MPI starts, as gpt_train's do; a bad
  // flag is reported once, by rank 0, with every rank ending.
  if (gpt::asks_for_help_or_version(argc, argv)) return gpt::parse_command_line(app, argc, argv);
  std::optional<MpiEnv> env;
  try {
    env.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  if (const std::string error = gpt::parse_or_error(app, argc, argv); !error.empty()) env->abort(error);

  try {
    const CommBackend be = parse_comm_backend(backend);
    const DType dt = dtype == "bf16" ? DType::kBF16 : dtype == "f32" ? DType::kF32 : throw ConfigError(fmt::format(
                                                                                           "invalid dtype = '{}': expected f32 or bf16", dtype));
    const MeshShape shape = mesh_spec.empty() ? default_mesh(*env) : parse_mesh(mesh_spec, env->size());
    DeviceMesh2D mesh(*env, shape, be, env->local_rank());
    Communicator& comm = group == "world"     ? mesh.world()
                         : group == "shard"   ? mesh.shard_group()
                         : group == "replicate" ? mesh.replicate_group()
                                                : throw ConfigError(fmt::format(
                                                      "invalid group = '{}': expected world, shard or replicate", group));
    const size_t lo = parse_bytes(min_b, "min-bytes"), hi = parse_bytes(max_b, "max-bytes");
    if (lo == 0 || lo > hi) throw ConfigError(fmt::format("invalid sizes: min-bytes {} > max-bytes {}", lo, hi));
    BenchBuffers buf(be == CommBackend::kNccl, hi + 64 * size_t(comm.size()));

    std::vector<Row> rows;
    if (env->rank() == 0) {
      std::printf("# bench_comm: backend %s, %d ranks, mesh %s, group %s (%d ranks), dtype %s, %s, iters %d, warmup %d\n",
                  backend.c_str(), env->size(), to_string(shape).c_str(), group.c_str(), comm.size(), dtype.c_str(),
                  inplace ? "in place" : "out of place", iters, warmup);
      std::printf("# time: max over ranks of the mean per collective; busbw = algbw x 2(n-1)/n (all_reduce), "
                  "(n-1)/n (reduce_scatter, all_gather), 1 (broadcast)\n");
      std::printf("# %-15s %12s %12s %12s %12s %12s %8s\n", "collective", "size(B)", "count", "time(us)",
                  "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    }
    long long total_wrong = 0;
    for (const OpInfo& info : kOps) {
      if (("," + ops + ",").find("," + std::string(info.name) + ",") == std::string::npos) continue;
      for (size_t b = lo; b <= hi; b *= size_t(factor)) {
        Row row = bench_one(info, comm, buf, b, dt, iters, warmup, inplace, MPI_COMM_WORLD);
        total_wrong += row.wrong;
        if (env->rank() == 0) {
          std::printf("  %-15s %12zu %12zu %12.2f %12.3f %12.3f %8lld\n", row.op.c_str(), row.bytes, row.count,
                      row.time_us, row.algbw, row.busbw, row.wrong);
          std::fflush(stdout);
        }
        rows.push_back(row);
      }
    }
    if (env->rank() == 0) {
      std::ofstream jf;
      if (!json_path.empty()) jf.open(json_path);
      for (const Row& r : rows) {
        nlohmann::json j = {{"backend", backend}, {"ranks", env->size()}, {"group", group}, {"group_size", comm.size()},
                            {"mesh", to_string(shape)}, {"dtype", dtype}, {"inplace", inplace}, {"collective", r.op},
                            {"size_bytes", r.bytes}, {"count", r.count}, {"time_us", r.time_us},
                            {"algbw_gbps", r.algbw}, {"busbw_gbps", r.busbw}, {"wrong", r.wrong}};
        if (jf) jf << j.dump() << "\n";
      }
      std::printf("# %s: %lld wrong elements in total\n", total_wrong ? "FAILED" : "ok", total_wrong);
    }
    return total_wrong ? 1 : 0;
  } catch (const std::exception& e) {
    env->abort(e.what());
  }
}
