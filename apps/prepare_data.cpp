// prepare_data: text and JSON-lines files -> llm.c token shards
// (*_train_NNNNNN.bin, *_val_NNNNNN.bin).
//
// Streams the input in pieces of about 1 MiB (io/corpus.hpp), tokenised in
// parallel batches of two pieces per thread and written in input order, so
// an input of any size is tokenised in bounded memory and the ids do not
// depend on the thread count. For gpt2, text is cut only where GPT-2's
// pre-tokeniser would cut anyway, so the ids equal those of tokenising the
// whole input at once.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>

#include "command_line.hpp"
#include "core/error.hpp"
#include "io/corpus.hpp"
#include "io/token_shard.hpp"
#include "io/tokenizer.hpp"

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prepare_data: tokenize text and JSON-lines files into llm.c token shards"};
  gpt::add_version_flag(app, "prepare_data");
  std::string kind = "byte", out_dir, name = "data", vocab, merges, format = "auto", text_key = "text";
  std::vector<std::string> inputs;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
  int threads = 0;
  app.add_option("--tokenizer", kind, "byte | gpt2")->capture_default_str()->check(CLI::IsMember({"byte", "gpt2"}));
  app.add_option("--input", inputs, "text or JSON-lines files, plain or gzip/zstd compressed")
      ->required()
      ->expected(1, -1)
      ->type_name("FILE");
  app.add_option("--format", format,
                 "auto (jsonl for *.jsonl, *.ndjson and *.json, also beneath .gz/.zst; text otherwise) | text | jsonl "
                 "(one JSON object per line, a document each)")->capture_default_str()
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  app.add_option("--text-key", text_key, "jsonl: the key of each object's text")->capture_default_str();
  app.add_option("--out", out_dir, "output directory")->required()->type_name("DIR");
  app.add_option("--name", name, "shard file prefix")->capture_default_str();
  app.add_option("--val-fraction", val_fraction, "last fraction of the input used for validation")->capture_default_str()
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--vocab", vocab, "gpt2: encoder.json or vocab.json")->type_name("FILE");
  app.add_option("--merges", merges, "gpt2: vocab.bpe or merges.txt")->type_name("FILE");
  app.add_option("--shard-tokens", shard_tokens, "tokens per shard")->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(INT32_MAX)));
  app.add_option("--threads", threads, "tokenizing threads (0: OMP_NUM_THREADS or all cores)")->capture_default_str()
      ->check(CLI::Range(0, 4096));
  if (const int rc = gpt::parse_command_line(app, argc, argv); rc >= 0) return rc;

  try {
    auto tok = gpt::make_tokenizer(kind, vocab, merges);
    gpt::CorpusReader reader(inputs, format, kind == "gpt2", val_fraction);
    if (std::error_code ec; std::filesystem::create_directories(out_dir, ec), ec)
      throw gpt::DataError(fmt::format("{}: cannot create the output directory: {}", out_dir, ec.message()));
    const std::string prefix = (std::filesystem::path(out_dir) / name).string();
    RotatingWriter train(prefix, "train", shard_tokens), val(prefix, "val", shard_tokens);

    // Batches of two pieces per thread: read in order, tokenised in
    // parallel, written in order. A reader thread reads (and decompresses)
    // the next batch while this one is tokenised, so reading is not a serial
    // phase. The first error in input order is the one reported.
    const int nt = threads > 0 ? threads : omp_get_max_threads();
    std::vector<gpt::CorpusPiece> batch(2 * size_t(nt)), next(batch.size());
    std::vector<std::vector<int>> ids(batch.size());
    std::vector<std::exception_ptr> errors(batch.size());
    auto read_batch = [&reader](std::vector<gpt::CorpusPiece>& b) {
      size_t n = 0;
      while (n < b.size() && reader.next(b[n])) ++n;
      return n;
    };
    for (size_t n = read_batch(batch); n > 0;) {
      size_t n_next = 0;
      std::exception_ptr read_error;
      std::thread read_ahead([&] {
        try {
          if (n == batch.size()) n_next = read_batch(next);
        } catch (...) {
          read_error = std::current_exception();
        }
      });
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
      for (size_t i = 0; i < n; ++i) {
        // Appends go to a vector on this thread's stack: the headers of
        // ids[i] and ids[i + 1] share a cache line, and appending to them
        // from two threads made 2 threads barely faster than 1.
        std::vector<int> local;
        local.swap(ids[i]);
        local.clear();
        errors[i] = nullptr;
        try {
          gpt::tokenize_piece(batch[i], *tok, text_key, local);
        } catch (...) {
          errors[i] = std::current_exception();
        }
        ids[i].swap(local);
      }
      read_ahead.join();
      for (size_t i = 0; i < n; ++i)
        if (errors[i]) std::rethrow_exception(errors[i]);
      for (size_t i = 0; i < n; ++i) (batch[i].val ? val : train).append(ids[i]);
      if (read_error) std::rethrow_exception(read_error);
      batch.swap(next);
      n = n_next;
    }
    train.finish();
    val.finish();
    if (train.total() == 0)  // nothing to train on: an error here, not when gpt_train finds no shard
      throw gpt::DataError(fmt::format("{}: no text to tokenise ({} bytes); no shard written",
                                       inputs.size() == 1 ? inputs[0] : fmt::format("{} inputs", inputs.size()),
                                       reader.total_bytes()));
    // Asked for a validation split and got none: the split falls between
    // JSON documents, and in a compressed file it is only as fine as the
    // decoder's blocks, so a small input may leave nothing after it.
    if (val_fraction > 0 && val.total() == 0)
      std::fprintf(stderr,
                   "warning: no validation tokens: no document starts in the last %g%% of the input (%llu of %llu "
                   "bytes), or it is inside a compressed file's first block (64 KiB of text or more); give more "
                   "input, a larger --val-fraction, or a separate validation input\n",
                   100 * val_fraction, static_cast<unsigned long long>(val_fraction * double(reader.total_bytes())),
                   static_cast<unsigned long long>(reader.total_bytes()));
    std::printf("prepare_data: %zu file(s), %llu bytes -> %lld train tokens in %d shard(s), %lld val tokens in %d "
                "shard(s) under %s\n",
                inputs.size(), static_cast<unsigned long long>(reader.total_bytes()),
                static_cast<long long>(train.total()), train.shards(), static_cast<long long>(val.total()),
                val.shards(), out_dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
