#include "io/token_shard.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.hpp"

namespace gpt {

TokenShard::TokenShard(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open shard: {}", path, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw DataError(fmt::format("{}: cannot stat shard: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw DataError(fmt::format("{}: a directory, not a token shard (give a glob of its shards, e.g. '{}/*.bin')", path,
                                path));
  }
  const auto bytes = static_cast<int64_t>(st.st_size);
  if (bytes < kShardHeaderBytes) {
    ::close(fd);
    throw DataError(fmt::format("{}: truncated shard: {} bytes, shorter than the {}-byte header", path, bytes,
                                kShardHeaderBytes));
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) throw DataError(fmt::format("{}: mmap failed: {}", path, std::strerror(errno)));
  map_ = m;
  map_bytes_ = static_cast<size_t>(bytes);
  const auto* hdr = static_cast<const int32_t*>(m);
  auto fail = [&](const std::string& msg) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw DataError(fmt::format("{}: {}", path, msg));
  };
  if (hdr[0] != kShardMagic)
    fail(fmt::format("bad magic {} (expected {}): not an llm.c token shard", hdr[0], kShardMagic));
  if (hdr[1] != kShardVersion) fail(fmt::format("unsupported shard version {} (expected {})", hdr[1], kShardVersion));
  if (hdr[2] < 0) fail(fmt::format("negative token count {}", hdr[2]));
  ntok_ = hdr[2];
  const int64_t expect = kShardHeaderBytes + 2 * ntok_;
  if (bytes < expect)
    fail(fmt::format("truncated shard: header says {} tokens ({} bytes), file has {} bytes", ntok_, expect, bytes));
  if (bytes > expect)
    fail(fmt::format("shard size mismatch: header says {} tokens ({} bytes), file has {} bytes", ntok_, expect,
                     bytes));
  ::madvise(map_, map_bytes_, MADV_RANDOM);
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(m) + kShardHeaderBytes);
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenShard::TokenShard(TokenShard&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      tokens_(std::exchange(o.tokens_, nullptr)),
      ntok_(std::exchange(o.ntok_, 0)) {}

TokenShard::Scan TokenShard::scan(int vocab_size, int64_t begin, int64_t end) const {
  Scan r;
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, ntok_);
  for (int64_t i = begin; i < end; ++i) r.max_id = std::max(r.max_id, int(tokens_[i]));
  if (r.max_id < vocab_size) return r;
  for (int64_t i = begin; i < end; ++i)  // where the first one is: errors only
    if (tokens_[i] >= vocab_size) {
      r.error = fmt::format("{}: token id {} at position {} is outside the model's vocabulary (vocab_size {})", path_,
                            tokens_[i], i, vocab_size);
      break;
    }
  return r;
}

ShardWriter::ShardWriter(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) throw DataError(fmt::format("{}: cannot create: {}", tmp_, std::strerror(errno)));
  std::array<int32_t, kShardHeaderInts> hdr{};
  if (std::fwrite(hdr.data(), 4, hdr.size(), f_) != hdr.size())
    throw DataError(fmt::format("{}: write failed", tmp_));
}

ShardWriter::~ShardWriter() {
  if (f_) {  // not closed: abandoned (error path); leave no partial shard behind
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void ShardWriter::append(std::span<const uint16_t> toks) {
  if (toks.empty()) return;
  if (std::fwrite(toks.data(), 2, toks.size(), f_) != toks.size())
    throw DataError(fmt::format("{}: write failed: {}", tmp_, std::strerror(errno)));
  count_ += static_cast<int64_t>(toks.size());
  if (count_ > INT32_MAX) throw DataError(fmt::format("{}: more than 2^31-1 tokens in one shard", path_));
}

void ShardWriter::close() {
  std::array<int32_t, kShardHeaderInts> hdr{};
  hdr[0] = kShardMagic;
  hdr[1] = kShardVersion;
  hdr[2] = static_cast<int32_t>(count_);
  bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(hdr.data(), 4, hdr.size(), f_) == hdr.size();
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  if (!ok) throw DataError(fmt::format("{}: write failed", tmp_));
  std::filesystem::rename(tmp_, path_);
}

}  // namespace gpt
