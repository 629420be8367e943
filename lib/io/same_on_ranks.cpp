#include "io/same_on_ranks.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <vector>

#include "comm/agree.hpp"
#include "core/error.hpp"
#include "core/plural.hpp"

namespace gpt {
namespace {

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

int size_of(MPI_Comm comm) {
  int s = 1;
  MPI_Comm_size(comm, &s);
  return s;
}

// to_json()'s key as the flag that sets it.
std::string flag_name(const std::string& json_key) {
  if (json_key == "time_limit_s") return "time-limit";
  std::string f = json_key;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

std::string shown(const nlohmann::json& v) {
  if (v.is_null()) return "(none)";
  return v.is_string() ? fmt::format("'{}'", v.get<std::string>()) : v.dump();
}

// "rank 1 (on node2)": a rank as the messages name it.
std::string rank_on(int rank, const std::string& host) { return fmt::format("rank {} (on {})", rank, host); }

// " (and 2 other ranks)", or nothing when the named rank is the only one.
std::string others(const RanksWhere& w) {
  return w.count > 1 ? fmt::format(" (and {} other {})", w.count - 1, w.count == 2 ? "rank" : "ranks") : "";
}

struct Shard {
  std::string path;
  int64_t tokens = 0;
  std::string name() const { return std::filesystem::path(path).filename().string(); }
};

// The host, then each shard's path and token count, '\0'-separated.
std::string encode(const std::string& host, const std::vector<Shard>& shards) {
  std::string s = host + '\0';
  for (const Shard& sh : shards) s += sh.path + '\0' + std::to_string(sh.tokens) + '\0';
  return s;
}

std::vector<Shard> decode(const std::string& wire, std::string* host) {
  std::vector<std::string> fields;
  for (size_t at = 0; at < wire.size();) {
    const size_t nul = wire.find('\0', at);
    fields.push_back(wire.substr(at, nul - at));
    at = nul + 1;
  }
  *host = fields.empty() ? "" : fields.front();
  std::vector<Shard> shards;
  for (size_t i = 1; i + 1 < fields.size(); i += 2) shards.push_back({fields[i], std::stoll(fields[i + 1])});
  return shards;
}

// How `mine` (rank `rank` on `host`) differs from rank 0's shards, "" when
// it does not.
std::string shard_difference(const std::vector<Shard>& zero, const std::string& zero_host,
                             const std::vector<Shard>& mine, int rank, const std::string& host) {
  const std::string here = rank_on(rank, host), there = rank_on(0, zero_host);
  const size_t n = std::min(zero.size(), mine.size());
  for (size_t i = 0; i < n; ++i) {
    const Shard &a = zero[i], &b = mine[i];
    if (a.name() != b.name())
      return fmt::format("shard {} is {} ({} tokens) on {} but {} ({} tokens) on {}", i + 1, a.path, a.tokens, there,
                         b.path, b.tokens, here);
    if (a.tokens != b.tokens)
      return fmt::format("shard {}, {}, holds {} tokens on {} but {} on {} ({})", i + 1, a.name(), a.tokens, there,
                         b.tokens, here, b.path);
  }
  if (zero.size() == mine.size()) return "";
  const bool fewer = mine.size() < zero.size();
  const Shard& first = fewer ? zero[n] : mine[n];
  return fmt::format("{} has {}, {} {}: the first {} is shard {}, {} ({} tokens)", here,
                     count_of(int64_t(mine.size()), "shard"), there, zero.size(), fewer ? "missing" : "extra", n + 1,
                     first.path, first.tokens);
}

// Keys compared only by whether they are given (their paths may differ),
// and keys not compared at all (check_same_config's contract).
bool is_file_key(const std::string& k) {
  static const std::array<const char*, 8> keys = {"data",      "val_data",  "vocab",   "merges",
                                                  "hellaswag", "init_from", "metrics", "trace"};
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}
bool is_free_key(const std::string& k) { return k == "threads" || k == "cpu_gemm" || k == "log_level"; }

}  // namespace

void check_same_config(const RunConfig& cfg, MPI_Comm comm) {
  if (size_of(comm) == 1) return;
  nlohmann::json mine = cfg.to_json();
  for (auto it = mine.begin(); it != mine.end();) {
    if (is_file_key(it.key())) it.value() = !it.value().get<std::string>().empty();
    it = is_free_key(it.key()) ? mine.erase(it) : std::next(it);
  }
  const std::string own = mine.dump();
  mine = nlohmann::json::parse(own);  // compared as rank 0's is: after the same round trip
  const int rank = rank_of(comm);
  const std::string zero_host = broadcast_string(rank == 0 ? processor_name() : "", 0, comm);
  const nlohmann::json zero = nlohmann::json::parse(broadcast_string(own, 0, comm));
  std::string note;
  if (zero != mine) {
    // The first key (in rank 0's order) whose value differs, and how many do.
    const std::string this_rank = rank_on(rank, processor_name()), rank0 = rank_on(0, zero_host);
    std::string first;
    int differ = 0;
    for (auto it = zero.begin(); it != zero.end(); ++it) {
      const auto m = mine.find(it.key());
      const nlohmann::json here = m == mine.end() ? nlohmann::json() : *m;
      if (here == it.value()) continue;
      if (differ++ > 0) continue;
      const std::string flag = flag_name(it.key());
      if (is_file_key(it.key())) {
        const bool given_here = here == true;
        first = fmt::format("--{} is given on {}, not on {}", flag, given_here ? this_rank : rank0,
                            given_here ? rank0 : this_rank);
      } else {
        first = fmt::format("{} = {} on {}, {} on {}", flag, shown(here), this_rank, shown(it.value()), rank0);
      }
    }
    note = differ > 1 ? fmt::format("{}, and {} other {}", first, differ - 1, differ == 2 ? "key" : "keys") : first;
  }
  const FirstNote found = first_note(std::move(note), comm);
  if (found.where.count == 0) return;
  throw ConfigError(fmt::format(
      "the ranks were not given the same configuration: {}{}; every rank must be given the same flags and config "
      "file (all but the files a node may hold its own copy of, and --threads, --cpu-gemm and --log-level)",
      found.text, others(found.where)));
}

void check_same_shards(const DataLoader& loader, const std::string& flag, MPI_Comm comm) {
  if (size_of(comm) == 1) return;
  std::vector<Shard> mine;
  for (const TokenShard& s : loader.shards()) mine.push_back({s.path(), s.size()});
  const int rank = rank_of(comm);
  const std::string host = processor_name();
  std::string zero_host;
  const std::vector<Shard> zero = decode(broadcast_string(rank == 0 ? encode(host, mine) : "", 0, comm), &zero_host);
  const FirstNote found =
      first_note(rank == 0 ? std::string() : shard_difference(zero, zero_host, mine, rank, host), comm);
  if (found.where.count == 0) return;
  throw DataError(fmt::format(
      "the ranks do not read the same {}: {}{}; every rank must read the same shards (file names, order and token "
      "counts): a node's copy of them may be incomplete or of another version",
      flag, found.text, others(found.where)));
}

}  // namespace gpt
