// prepare_data: text files -> llm.c token shards (*_train_NNNNNN.bin, *_val_NNNNNN.bin).
//
// Streams the input in chunks, so a file of any size is tokenised in bounded
// memory. For gpt2, chunks are cut only where GPT-2's pre-tokeniser would
// cut anyway (just after a newline that follows a visible character and
// before an ASCII letter or digit), so the ids equal those of tokenising the
// whole file at once. The last --val-fraction of the input bytes becomes the
// validation split. For gpt2, <|endoftext|> separates input files.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "command_line.hpp"
#include "core/error.hpp"
#include "io/token_shard.hpp"
#include "io/tokenizer.hpp"

namespace {

constexpr size_t kChunk = 1 << 20;

// Writes shards of at most `max_tokens` tokens: PREFIX_SPLIT_000000.bin, ...
class RotatingWriter {
 public:
  RotatingWriter(std::string prefix, std::string split, int64_t max_tokens)
      : prefix_(std::move(prefix)), split_(std::move(split)), max_(max_tokens) {}
  void append(const std::vector<int>& ids) {
    std::vector<uint16_t> buf(ids.begin(), ids.end());
    size_t at = 0;
    while (at < buf.size()) {
      if (!w_) w_ = std::make_unique<gpt::ShardWriter>(fmt::format("{}_{}_{:06d}.bin", prefix_, split_, index_++));
      const size_t n = std::min<size_t>(buf.size() - at, size_t(max_ - w_->count()));
      w_->append({buf.data() + at, n});
      at += n;
      total_ += static_cast<int64_t>(n);
      if (w_->count() == max_) finish();
    }
  }
  void finish() {
    if (w_) w_->close();
    w_.reset();
  }
  int64_t total() const { return total_; }
  int shards() const { return index_; }

 private:
  std::string prefix_, split_;
  int64_t max_;
  std::unique_ptr<gpt::ShardWriter> w_;
  int index_ = 0;
  int64_t total_ = 0;
};

bool visible_ascii(char c) { return c > ' ' && c < 0x7f; }

// Largest cut <= buf.size() at which GPT-2's pre-tokeniser splits anyway; 0 if none.
size_t safe_cut(const std::string& buf) {
  for (size_t p = buf.size() - 1; p >= 2; --p) {
    if (buf[p - 1] == '\n' && visible_ascii(buf[p - 2]) && std::isalnum(static_cast<unsigned char>(buf[p])))
      return p;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prepare_data: tokenize text into llm.c token shards"};
  std::string kind = "byte", out_dir, name = "data", vocab, merges;
  std::vector<std::string> inputs;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
  app.add_option("--tokenizer", kind, "byte | gpt2")->check(CLI::IsMember({"byte", "gpt2"}));
  app.add_option("--input", inputs, "text files")->required()->expected(1, -1);
  app.add_option("--out", out_dir, "output directory")->required();
  app.add_option("--name", name, "shard file prefix");
  app.add_option("--val-fraction", val_fraction, "last fraction of the input used for validation")
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--vocab", vocab, "gpt2: encoder.json or vocab.json");
  app.add_option("--merges", merges, "gpt2: vocab.bpe or merges.txt");
  app.add_option("--shard-tokens", shard_tokens, "tokens per shard")->check(CLI::Range(int64_t(1), int64_t(INT32_MAX)));
  if (const int rc = gpt::parse_command_line(app, argc, argv); rc >= 0) return rc;

  try {
    auto tok = gpt::make_tokenizer(kind, vocab, merges);
    uint64_t total = 0;
    for (const auto& in : inputs) {
      std::error_code ec;
      const auto sz = std::filesystem::file_size(in, ec);
      if (ec) throw gpt::DataError(fmt::format("{}: cannot read input: {}", in, ec.message()));
      total += sz;
    }
    const uint64_t boundary = total - static_cast<uint64_t>(val_fraction * double(total));
    if (std::error_code ec; std::filesystem::create_directories(out_dir, ec), ec)
      throw gpt::DataError(fmt::format("{}: cannot create the output directory: {}", out_dir, ec.message()));
    const std::string prefix = (std::filesystem::path(out_dir) / name).string();
    RotatingWriter train(prefix, "train", shard_tokens), val(prefix, "val", shard_tokens);

    uint64_t consumed = 0;
    std::vector<int> ids;
    for (size_t fi = 0; fi < inputs.size(); ++fi) {
      std::ifstream f(inputs[fi], std::ios::binary);
      if (!f) throw gpt::DataError(fmt::format("{}: cannot open input", inputs[fi]));
      std::string buf;
      bool eof = false;
      size_t target = kChunk;
      while (true) {
        if (!eof && buf.size() < target) {
          const size_t old = buf.size();
          buf.resize(target);
          f.read(buf.data() + old, static_cast<std::streamsize>(target - old));
          buf.resize(old + static_cast<size_t>(f.gcount()));
          if (!f) eof = true;
        }
        if (buf.empty()) break;
        size_t cut = buf.size();
        if (consumed < boundary && consumed + cut > boundary) {
          cut = boundary - consumed;  // the split point itself: train and val are separate texts
        } else if (!eof && kind == "gpt2") {
          cut = safe_cut(buf);
          if (cut == 0) {  // no safe point yet: read more (bounded: give up exactness at 64 chunks)
            if (buf.size() < 64 * kChunk) {
              target = buf.size() + kChunk;
              continue;
            }
            cut = buf.size();
          }
        }
        ids.clear();
        tok->encode(std::string_view(buf).substr(0, cut), ids);
        (consumed < boundary ? train : val).append(ids);
        consumed += cut;
        buf.erase(0, cut);
        target = kChunk;
      }
      if (tok->eot() >= 0 && fi + 1 < inputs.size()) (consumed < boundary ? train : val).append({tok->eot()});
    }
    train.finish();
    val.finish();
    std::printf("prepare_data: %zu file(s), %llu bytes -> %lld train tokens in %d shard(s), %lld val tokens in %d "
                "shard(s) under %s\n",
                inputs.size(), static_cast<unsigned long long>(total), static_cast<long long>(train.total()),
                train.shards(), static_cast<long long>(val.total()), val.shards(), out_dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
