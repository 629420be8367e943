// Tokenizers: "byte" (one token per byte, vocab 256) and "gpt2" (GPT-2's
// byte-level BPE, see bpe.hpp). Both are exact inverses on valid input:
// decode(encode(s)) == s. decode skips ids outside [0, vocab_size()): a
// model's vocabulary may be larger (padded), and its samples may hold them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual void encode(std::string_view text, std::vector<int>& out) const = 0;
  virtual std::string decode(std::span<const int> ids) const = 0;
  virtual int vocab_size() const = 0;
  // Document separator, or -1 if the tokenizer has none.
  virtual int eot() const = 0;

  std::vector<int> encode(std::string_view text) const {
    std::vector<int> out;
    encode(text, out);
    return out;
  }
};

class ByteTokenizer final : public Tokenizer {
 public:
  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<int>& out) const override;
  std::string decode(std::span<const int> ids) const override;
  int vocab_size() const override { return 256; }
  int eot() const override { return -1; }
};

// kind: "byte" or "gpt2". For gpt2, vocab is encoder.json (or vocab.json)
// and merges is vocab.bpe (or merges.txt). Throws ConfigError for an unknown
// kind, DataError for unreadable vocabulary files.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab,
                                          const std::string& merges);

}  // namespace gpt
