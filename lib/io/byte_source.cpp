#include "io/byte_source.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#ifdef GPT_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef GPT_HAVE_ZSTD
#include <zstd.h>
#endif

#include "core/error.hpp"

namespace gpt {
namespace {

class File {
 public:
  explicit File(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw DataError(fmt::format("{}: cannot open input: {}", path, std::strerror(errno)));
  }
  ~File() { std::fclose(f_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  size_t read(char* dst, size_t n) {
    const size_t got = std::fread(dst, 1, n, f_);
    if (got < n && std::ferror(f_)) throw DataError(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
    return got;
  }

 private:
  std::string path_;
  FILE* f_;
};

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(const std::string& path) : file_(path) {}
  size_t read(char* dst, size_t n) override {
    const size_t got = file_.read(dst, n);
    consumed_ += got;
    return got;
  }
  uint64_t consumed() const override { return consumed_; }
  bool plain() const override { return true; }

 private:
  File file_;
  uint64_t consumed_ = 0;
};

#ifdef GPT_HAVE_ZLIB
// gzip, including concatenated members (as `cat a.gz b.gz` makes). zlib's
// inflate rather than gzread, so that consumed() counts exactly the
// compressed bytes the decoder has used (gzread's includes its read-ahead).
class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(const std::string& path) : path_(path), file_(path), buf_(1 << 16) {
    if (inflateInit2(&z_, 15 + 16) != Z_OK) throw DataError(fmt::format("{}: cannot create a gzip decoder", path));
  }
  ~GzipSource() override { inflateEnd(&z_); }
  size_t read(char* dst, size_t n) override {
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT_MAX));
    const uInt want = z_.avail_out;
    while (z_.avail_out == want) {
      if (z_.avail_in == 0) {
        const size_t got = file_.read(buf_.data(), buf_.size());
        if (got == 0) {
          if (member_open_) throw DataError(fmt::format("{}: damaged gzip stream: truncated", path_));
          return 0;
        }
        read_ += got;
        z_.next_in = reinterpret_cast<Bytef*>(buf_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      if (!member_open_ && z_.next_in[0] == 0) {  // not a member's magic (1f 8b): padding
        skip_zero_padding();
        return want - z_.avail_out;
      }
      member_open_ = true;
      const int ret = inflate(&z_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {  // a member ended: another may follow
        member_open_ = false;
        inflateReset(&z_);
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        throw DataError(fmt::format("{}: damaged gzip stream: {}", path_, z_.msg ? z_.msg : zError(ret)));
      }
    }
    return want - z_.avail_out;
  }
  uint64_t consumed() const override { return read_ - z_.avail_in; }
  bool plain() const override { return false; }

 private:
  // Zero bytes after the last member (tape blocks, some archivers' padding)
  // end the stream, as gzip itself accepts them; anything else there is
  // damage. Consumes the input to its end.
  void skip_zero_padding() {
    for (;;) {
      const Bytef* p = z_.next_in;
      if (std::any_of(p, p + z_.avail_in, [](Bytef b) { return b != 0; }))
        throw DataError(fmt::format("{}: damaged gzip stream: non-zero bytes in the zero padding after its last member",
                                    path_));
      z_.avail_in = 0;
      const size_t got = file_.read(buf_.data(), buf_.size());
      if (got == 0) return;
      read_ += got;
      z_.next_in = reinterpret_cast<Bytef*>(buf_.data());
      z_.avail_in = static_cast<uInt>(got);
    }
  }

  std::string path_;
  File file_;
  std::vector<char> buf_;
  z_stream z_{};
  uint64_t read_ = 0;
  bool member_open_ = false;
};
#endif

#ifdef GPT_HAVE_ZSTD
// zstd, including concatenated frames.
class ZstdSource final : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path)
      : path_(path), file_(path), ctx_(ZSTD_createDCtx()), buf_(ZSTD_DStreamInSize()) {
    if (!ctx_) throw DataError(fmt::format("{}: cannot create a zstd decoder", path));
  }
  ~ZstdSource() override { ZSTD_freeDCtx(ctx_); }
  size_t read(char* dst, size_t n) override {
    ZSTD_outBuffer out{dst, n, 0};
    while (out.pos == 0) {
      if (in_.pos == in_.size) {
        const size_t got = file_.read(buf_.data(), buf_.size());
        if (got == 0) {
          if (frame_open_) throw DataError(fmt::format("{}: damaged zstd stream: truncated", path_));
          return 0;
        }
        read_ += got;
        in_ = {buf_.data(), got, 0};
      }
      const size_t ret = ZSTD_decompressStream(ctx_, &out, &in_);
      if (ZSTD_isError(ret))
        throw DataError(fmt::format("{}: damaged zstd stream: {}", path_, ZSTD_getErrorName(ret)));
      frame_open_ = ret != 0;  // 0: a frame ended here
    }
    return out.pos;
  }
  uint64_t consumed() const override { return read_ - (in_.size - in_.pos); }
  bool plain() const override { return false; }

 private:
  std::string path_;
  File file_;
  ZSTD_DCtx* ctx_;
  std::vector<char> buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  uint64_t read_ = 0;
  bool frame_open_ = false;
};
#endif

}  // namespace

std::unique_ptr<ByteSource> open_byte_source(const std::string& path) {
  unsigned char magic[4] = {};
  size_t n = 0;
  {
    File f(path);
    n = f.read(reinterpret_cast<char*>(magic), 4);
  }
  if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
#ifdef GPT_HAVE_ZLIB
    return std::make_unique<GzipSource>(path);
#else
    throw DataError(fmt::format("{}: a gzip file, but this build has no zlib (install zlib1g-dev, rebuild)", path));
#endif
  }
  if (n == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) {
#ifdef GPT_HAVE_ZSTD
    return std::make_unique<ZstdSource>(path);
#else
    throw DataError(fmt::format("{}: a zstd file, but this build has no libzstd (install libzstd-dev, rebuild)", path));
#endif
  }
  for (const char* suffix : {".gz", ".zst"}) {
    const size_t k = std::strlen(suffix);
    if (path.size() >= k && path.compare(path.size() - k, k, suffix) == 0)
      throw DataError(
          fmt::format("{}: named {} but not {} data ({}): a damaged or mislabelled file", path, suffix,
                      suffix[1] == 'g' ? "gzip" : "zstd",
                      n == 0 ? std::string("it is empty")
                             : fmt::format("its first bytes are {:02x}", fmt::join(magic, magic + n, " "))));
  }
  return std::make_unique<PlainSource>(path);
}

}  // namespace gpt
