#include "io/tokenizer.hpp"

#include "core/error.hpp"
#include "io/bpe.hpp"

namespace gpt {

void ByteTokenizer::encode(std::string_view text, std::vector<int>& out) const {
  out.reserve(out.size() + text.size());
  for (unsigned char c : text) out.push_back(c);
}

std::string ByteTokenizer::decode(std::span<const int> ids) const {
  std::string s;
  s.reserve(ids.size());
  for (int id : ids)
    if (id >= 0 && id < 256) s.push_back(static_cast<char>(id));
  return s;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab,
                                          const std::string& merges) {
  if (kind == "byte") return std::make_unique<ByteTokenizer>();
  if (kind == "gpt2") {
    if (vocab.empty() || merges.empty())
      throw ConfigError("tokenizer gpt2 needs --vocab (encoder.json) and --merges (vocab.bpe)");
    return std::make_unique<Gpt2Tokenizer>(vocab, merges);
  }
  throw ConfigError(fmt::format("invalid tokenizer = '{}': expected byte or gpt2", kind));
}

}  // namespace gpt
