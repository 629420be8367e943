#include "io/trace_writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace gpt {
namespace {

std::string event_name(const trace::Event& e) {
  return e.index >= 0 ? std::string(e.name) + "." + std::to_string(e.index) : std::string(e.name);
}

// This rank's events as comma-separated JSON objects (no brackets).
std::string rank_events(int rank) {
  std::string out;
  auto add = [&](const nlohmann::json& j) {
    if (!out.empty()) out += ",\n";
    out += j.dump();
  };
  add({{"ph", "M"}, {"pid", rank}, {"name", "process_name"}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
  add({{"ph", "M"}, {"pid", rank}, {"name", "process_sort_index"}, {"args", {{"sort_index", rank}}}});
  const std::vector<std::string> lanes = trace::lanes();
  for (size_t l = 0; l < lanes.size(); ++l) {
    add({{"ph", "M"}, {"pid", rank}, {"tid", l}, {"name", "thread_name"}, {"args", {{"name", lanes[l]}}}});
    add({{"ph", "M"}, {"pid", rank}, {"tid", l}, {"name", "thread_sort_index"}, {"args", {{"sort_index", l}}}});
  }
  for (const trace::Event& e : trace::events()) {
    nlohmann::json args = nlohmann::json::object();
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    const std::string name = event_name(e);
    if (!e.async) {
      add({{"ph", "X"}, {"pid", rank}, {"tid", e.lane}, {"name", name}, {"cat", e.cat}, {"ts", e.ts_us},
           {"dur", e.dur_us}, {"args", args}});
    } else {
      add({{"ph", "b"}, {"pid", rank}, {"tid", e.lane}, {"name", name}, {"cat", e.cat}, {"id", e.id},
           {"ts", e.ts_us}, {"args", args}});
      add({{"ph", "e"}, {"pid", rank}, {"tid", e.lane}, {"name", name}, {"cat", e.cat}, {"id", e.id},
           {"ts", e.ts_us + e.dur_us}});
    }
  }
  return out;
}

}  // namespace

void check_trace_path(const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int err = 0;
  if (rank == 0) {
    const std::string tmp = path + ".partial";
    errno = 0;
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f) {
      std::fclose(f);
      std::remove(tmp.c_str());
    } else {
      err = errno ? errno : EIO;
    }
  }
  MPI_Bcast(&err, 1, MPI_INT, 0, comm);
  if (err) throw ConfigError(fmt::format("invalid trace = '{}': cannot create it ({})", path, std::strerror(err)));
}

void write_trace(const std::string& path, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::string mine = rank_events(rank);
  int len = static_cast<int>(mine.size());
  GPT_CHECK(mine.size() < size_t(1) << 31, "trace of rank {} too large ({} bytes)", rank, mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm);
  std::vector<char> all;
  if (rank == 0) {
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      displs[size_t(r)] = static_cast<int>(total);
      total += lens[size_t(r)];
    }
    GPT_CHECK(total < int64_t(1) << 31, "merged trace too large ({} bytes)", total);
    all.resize(size_t(total));
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, comm);
  int64_t dropped = static_cast<int64_t>(trace::dropped());
  MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &dropped, &dropped, 1, MPI_INT64_T, MPI_SUM, 0, comm);
  int ok = 1;
  std::string error;
  if (rank == 0) {
    // Written aside and renamed, so a reader never sees half a file.
    const std::string tmp = path + ".partial";
    std::ofstream f(tmp, std::ios::binary);
    f << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"ranks\": " << size << ", \"dropped_events\": " << dropped
      << "},\n\"traceEvents\": [\n";
    for (int r = 0; r < size; ++r) {
      if (r > 0 && lens[size_t(r)] > 0) f << ",\n";
      f.write(all.data() + displs[size_t(r)], lens[size_t(r)]);
    }
    f << "\n]}\n";
    f.close();
    if (!f || std::rename(tmp.c_str(), path.c_str()) != 0) {
      ok = 0;
      error = fmt::format("cannot write trace {}", path);
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  if (!ok) throw Error(rank == 0 ? error : fmt::format("cannot write trace {} (rank 0 failed)", path));
}

}  // namespace gpt
