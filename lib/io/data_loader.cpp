#include "io/data_loader.hpp"

#include <glob.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/nearest_multiples.hpp"
#include "core/stall_guard.hpp"

namespace gpt {
namespace {

// The splitmix64 generator: the finaliser of a golden-ratio counter.
uint64_t splitmix(uint64_t& s) {
  const uint64_t r = mix64(s);
  s += 0x9E3779B97F4A7C15ull;
  return r;
}

}  // namespace

std::vector<std::string> expand_globs(const std::string& patterns) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= patterns.size()) {
    size_t end = patterns.find(',', start);
    if (end == std::string::npos) end = patterns.size();
    std::string pat = patterns.substr(start, end - start);
    start = end + 1;
    if (pat.empty()) continue;
    glob_t g{};
    int rc = ::glob(pat.c_str(), GLOB_NOSORT, nullptr, &g);
    if (rc != 0 || g.gl_pathc == 0) {
      globfree(&g);
      throw DataError(fmt::format("{}: no such file (data pattern matched nothing)", pat));
    }
    std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  if (out.empty()) throw DataError("empty data pattern");
  return out;
}

int accum_steps(int global_batch, int micro_batch, int world, const std::string& source) {
  if (global_batch <= 0 || micro_batch <= 0 || world <= 0 || global_batch % world != 0 ||
      (global_batch / world) % micro_batch != 0) {
    const bool positive = global_batch > 0 && micro_batch > 0 && world > 0;
    throw ConfigError(fmt::format(
        "invalid global-batch = {}{}: must be a positive multiple of micro-batch ({}) x data-parallel ranks ({}){}",
        global_batch, source.empty() ? "" : " in " + source, micro_batch, world,
        positive ? fmt::format(": {} would do", nearest_multiples(global_batch, int64_t(micro_batch) * world)) : ""));
  }
  return global_batch / world / micro_batch;
}

DataLoader::DataLoader(LoaderOptions opt) : opt_(std::move(opt)) {
  accum_ = gpt::accum_steps(opt_.global_batch, opt_.micro_batch, opt_.world);
  GPT_CHECK(opt_.seq_len >= 1, "seq_len {}", opt_.seq_len);
  first_window_.push_back(0);
  for (const std::string& f : opt_.files) {
    TokenShard s(f);
    const int64_t w = s.size() > opt_.seq_len ? (s.size() - 1) / opt_.seq_len : 0;
    total_tokens_ += s.size();
    first_window_.push_back(first_window_.back() + w);
    shards_.push_back(std::move(s));
  }
  total_windows_ = first_window_.back();
  if (total_windows_ > int64_t(UINT32_MAX))
    throw DataError(
        fmt::format("{}{}: {} sequences of {}+1 tokens, more than the loader's 2^32; a longer seq-len "
                    "makes fewer",
                    opt_.files.front(), opt_.files.size() > 1 ? " (and others)" : "", total_windows_, opt_.seq_len));
  if (total_windows_ < opt_.global_batch) {
    throw DataError(fmt::format("{}{}: {} tokens give {} sequences of {}+1 tokens, fewer than one global batch "
                                "({})",
                                opt_.files.front(), opt_.files.size() > 1 ? " (and others)" : "", total_tokens_,
                                total_windows_, opt_.seq_len, opt_.global_batch));
  }
  build_order();
}

TokenShard::Scan DataLoader::scan_tokens(int vocab_size, int part, int parts) const {
  GPT_CHECK(parts >= 1 && part >= 0 && part < parts, "part {} of {}", part, parts);
  // Part p: tokens [p * N / parts, (p + 1) * N / parts) of the concatenation.
  const auto cut = [&](int p) { return int64_t((__int128(total_tokens_) * p) / parts); };
  const int64_t begin = cut(part), end = cut(part + 1);
  TokenShard::Scan r;
  int64_t shard_start = 0;  // the shard's first token in the concatenation
  for (const TokenShard& s : shards_) {
    const int64_t lo = std::max(begin, shard_start) - shard_start;
    const int64_t hi = std::min(end, shard_start + s.size()) - shard_start;
    shard_start += s.size();
    if (lo >= hi) continue;
    TokenShard::Scan here = s.scan(vocab_size, lo, hi);
    r.max_id = std::max(r.max_id, here.max_id);
    if (!here.error.empty()) {
      r.error = std::move(here.error);
      break;
    }
    note_progress("the token check of " + s.path());
  }
  return r;
}

void DataLoader::build_order() {
  order_.clear();
  if (!opt_.shuffle) return;
  order_.resize(static_cast<size_t>(total_windows_));
  for (int64_t i = 0; i < total_windows_; ++i) order_[i] = uint32_t(i);
  // Fisher-Yates with our own generator: std::shuffle's use of the engine is
  // implementation-defined, this is the same everywhere.
  uint64_t s = opt_.seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(pos_.epoch) + 1;
  for (int64_t i = total_windows_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(splitmix(s) % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

int64_t DataLoader::window_at(int64_t order_index) const {
  return order_.empty() ? order_index : order_[order_index];
}

void DataLoader::micro_batch(int m, int32_t* tokens, int32_t* targets) const {
  GPT_CHECK(m >= 0 && m < accum_, "micro-batch {} of {}", m, accum_);
  const int64_t first = pos_.offset + int64_t(opt_.rank) * (opt_.global_batch / opt_.world) +
                        int64_t(m) * opt_.micro_batch;
  read_windows(first, opt_.micro_batch, tokens, targets);
}

int DataLoader::tail(int32_t* tokens, int32_t* targets) const {
  GPT_CHECK(accum_ == 1, "the tail of a loader of {} micro-batches a step", accum_);
  const int64_t start = total_windows_ - tail_windows();  // the partial batch's first window in the epoch's order
  const int64_t mine = start + int64_t(opt_.rank) * opt_.micro_batch;
  const int rows = int(std::clamp<int64_t>(total_windows_ - mine, 0, opt_.micro_batch));
  read_windows(mine, rows, tokens, targets);
  return rows;
}

void DataLoader::read_windows(int64_t first, int count, int32_t* tokens, int32_t* targets) const {
  const int T = opt_.seq_len;
  for (int i = 0; i < count; ++i) {
    const int64_t w = window_at(first + i);
    const auto it = std::upper_bound(first_window_.begin(), first_window_.end(), w) - 1;
    const size_t shard = static_cast<size_t>(it - first_window_.begin());
    const int64_t at = (w - *it) * T;
    const uint16_t* src = shards_[shard].tokens().data() + at;
    uint16_t mx = 0;
    for (int t = 0; t < T; ++t) {
      tokens[i * T + t] = src[t];
      targets[i * T + t] = src[t + 1];
      mx = std::max(mx, src[t + 1]);
    }
    if (opt_.vocab_size > 0 && std::max(mx, src[0]) >= opt_.vocab_size)
      throw DataError(shards_[shard].scan(opt_.vocab_size, at, at + T + 1).error +
                      " in a batch, after the start-up check passed: the data changed since, or this rank's copy "
                      "differs from those that other ranks checked");
  }
}

void DataLoader::advance() {
  pos_.offset += opt_.global_batch;
  if (pos_.offset + opt_.global_batch > total_windows_) {
    pos_.offset = 0;
    ++pos_.epoch;
    build_order();
  }
}

void DataLoader::seek(const LoaderPosition& p) {
  if (p.epoch < 0 || p.offset < 0 || p.offset + opt_.global_batch > total_windows_) {
    throw DataError(fmt::format("data position (epoch {}, offset {}) is outside this data set ({} sequences)", p.epoch,
                                p.offset, total_windows_));
  }
  const bool new_epoch = p.epoch != pos_.epoch;
  pos_ = p;
  if (new_epoch) build_order();
}

}  // namespace gpt
