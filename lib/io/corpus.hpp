// prepare_data's input: text files and JSON-lines files (one document per
// line: a JSON object with its text under a key, as Hugging Face datasets'
// to_json and most web corpora ship). The reader cuts the input into pieces
// of about 1 MiB that tokenise independently: tokenising the pieces in any
// order, on any number of threads, and concatenating their ids in input
// order gives the ids of tokenising the input whole.
//
// Document separators (when the tokenizer has one, e.g. GPT-2's
// <|endoftext|>): every JSON-lines document is preceded by one, as llm.c's
// dataset scripts do; a text file is followed by one when the next input is
// a text file (a JSON-lines file brings its own).
//
// Inputs may be gzip or zstd (io/byte_source.hpp); `auto` looks through
// .gz and .zst to the name beneath.
//
// Validation split: the last val_fraction of the input files' bytes
// (compressed bytes for a compressed file). A plain text file is cut at that
// exact byte, a compressed one between pieces; a JSON-lines document
// belongs to the split in which its line starts.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "io/byte_source.hpp"
#include "io/tokenizer.hpp"

namespace gpt {

enum class CorpusFormat { kText, kJsonl };

// flag: "text", "jsonl", or "auto": jsonl for names ending in .jsonl,
// .ndjson or .json (C4's and Dolma's JSON lines are *.json.gz), after any
// .gz or .zst; text otherwise. Throws ConfigError for another flag.
CorpusFormat corpus_format(const std::string& path, const std::string& flag);

struct CorpusPiece {
  enum class Kind { kText, kJsonl, kSeparator };
  Kind kind = Kind::kText;
  std::string bytes;       // kText: text; kJsonl: whole lines, each ending in '\n'
  bool val = false;        // belongs to the validation split
  std::string file;        // kJsonl: the input, for error messages
  int64_t first_line = 0;  // kJsonl: 1-based line number of the first line
};

class CorpusReader {
 public:
  // gpt2_cuts: cut text only where GPT-2's pre-tokeniser splits anyway (so
  // pieces tokenise as the whole does); otherwise anywhere (byte tokenizer).
  // Throws DataError naming an input that cannot be read.
  CorpusReader(std::vector<std::string> inputs, const std::string& format, bool gpt2_cuts, double val_fraction);
  // The next piece in input order into `piece` (its buffers are reused);
  // false after the last one.
  bool next(CorpusPiece& piece);
  uint64_t total_bytes() const { return total_; }

 private:
  bool next_text(CorpusPiece& p);
  bool next_jsonl(CorpusPiece& p);
  void fill(size_t want);  // until want bytes are buffered or the file ends
  uint64_t position();     // of the next byte to hand out, in input files' bytes
  bool is_val(uint64_t position) const { return boundary_ < total_ && position >= boundary_; }

  std::vector<std::string> inputs_;
  std::vector<CorpusFormat> formats_;
  std::vector<uint64_t> sizes_;
  bool gpt2_cuts_;
  uint64_t total_ = 0, boundary_ = 0;
  uint64_t base_ = 0;     // bytes of the inputs before the open one
  uint64_t handed_ = 0;   // (decompressed) bytes of the open input handed out
  size_t fi_ = 0;
  std::unique_ptr<ByteSource> src_;  // the open input, or null
  bool eof_ = false, separator_ = false;
  std::string buf_;   // read but not yet handed out: [head_, size)
  size_t head_ = 0;
  int64_t line_ = 0;  // jsonl: lines of the open input handed out
  uint64_t read_ = 0;  // (decompressed) bytes of the open input read
  // Compressed input: (read_ after a read, consumed() before it), oldest first.
  std::deque<std::pair<uint64_t, uint64_t>> marks_;
};

// Appends the ids of one piece to `out`. Throws DataError naming the file
// and line of a JSON-lines document that is not an object with a string
// under text_key.
void tokenize_piece(const CorpusPiece& p, const Tokenizer& tok, const std::string& text_key, std::vector<int>& out);

}  // namespace gpt
