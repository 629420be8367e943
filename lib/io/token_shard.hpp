// Token shards in llm.c's format: a header of 256 int32 (magic 20240520,
// version 1, token count, rest zero) followed by the tokens as uint16.
// Shards written by llm.c's or nanoGPT-style scripts load unchanged.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace gpt {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderInts = 256;
inline constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

// A read-only, memory-mapped shard whose header was validated against the
// file length. Move-only; unmaps on destruction.
class TokenShard {
 public:
  // Throws DataError naming the file if it is missing, unreadable, shorter
  // than its header, has a wrong magic or version, or a size that does not
  // match the header's token count.
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&&) = delete;
  TokenShard(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return ntok_; }
  std::span<const uint16_t> tokens() const { return {tokens_, static_cast<size_t>(ntok_)}; }
  // Positions [begin, end) (clamped to the shard) scanned once: their
  // largest id (-1 when the range is empty), and the first token >=
  // vocab_size as a one-line DataError message naming the file, the
  // position and the id ("" when there is none). It reads only [begin, end)
  // of the mapping, whose page faults (or disk reads) are its cost.
  struct Scan {
    int max_id = -1;
    std::string error;
  };
  Scan scan(int vocab_size, int64_t begin = 0, int64_t end = INT64_MAX) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t ntok_ = 0;
};

// Streams tokens into a shard file; the header's count is written on close().
// Writes to PATH.tmp and renames on close, so a crash never leaves a shard
// whose header lies about its length.
class ShardWriter {
 public:
  explicit ShardWriter(std::string path);
  ~ShardWriter();
  void append(std::span<const uint16_t> toks);
  int64_t count() const { return count_; }
  void close();

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace gpt
