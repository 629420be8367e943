#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/bpe.hpp"

#include <pcre2.h>

#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace gpt {
namespace {

// GPT-2's pre-tokenisation pattern (encoder.py), verbatim.
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr size_t kMaxCache = 1 << 20;  // pieces; cleared when full (bounded memory on 1 GB inputs)

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError(fmt::format("{}: cannot open tokenizer file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

struct Gpt2Tokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_path, const std::string& merges_path) {
  // GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the
  // others are shifted to code points 256.. so every symbol is printable.
  std::unordered_map<std::string, unsigned char> sym_byte;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_sym_[b] = utf8(printable ? b : next++);
    sym_byte[byte_sym_[b]] = static_cast<unsigned char>(b);
  }

  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(read_file(vocab_path));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not a GPT-2 encoder JSON: {}", vocab_path, e.what()));
  }
  if (!enc.is_object() || enc.empty()) throw DataError(fmt::format("{}: expected a JSON object of token -> id", vocab_path));
  decoder_.resize(enc.size());
  for (auto& [tok, idv] : enc.items()) {
    const int id = idv.get<int>();
    if (id < 0 || id >= static_cast<int>(enc.size()))
      throw DataError(fmt::format("{}: id {} of '{}' outside [0, {})", vocab_path, id, tok, enc.size()));
    encoder_[tok] = id;
    // Decode the stand-in characters back to raw bytes.
    std::string raw;
    for (size_t i = 0; i < tok.size();) {
      size_t len = (static_cast<unsigned char>(tok[i]) < 0x80) ? 1 : (static_cast<unsigned char>(tok[i]) < 0xE0) ? 2 : 3;
      auto it = sym_byte.find(tok.substr(i, len));
      if (it == sym_byte.end()) {  // special tokens such as <|endoftext|> are plain ASCII
        raw += tok.substr(i, len);
      } else {
        raw.push_back(static_cast<char>(it->second));
      }
      i += len;
    }
    decoder_[id] = raw;
  }
  if (auto it = encoder_.find("<|endoftext|>"); it != encoder_.end()) eot_ = it->second;

  std::istringstream merges(read_file(merges_path));
  std::string line;
  int rank = 0;
  while (std::getline(merges, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    if (line.find(' ') == std::string::npos)
      throw DataError(fmt::format("{}: malformed merge line {}: '{}'", merges_path, rank + 1, line));
    merge_rank_.emplace(line, rank++);
  }
  if (merge_rank_.empty()) throw DataError(fmt::format("{}: no merges found", merges_path));

  int err = 0;
  PCRE2_SIZE off = 0;
  re_ = std::make_unique<Regex>();
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  GPT_CHECK(re_->code != nullptr, "pcre2_compile failed with code {} at {}", err, off);
  pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE);  // optional speed-up; falls back to the interpreter
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

void Gpt2Tokenizer::bpe_piece(std::string_view piece, std::vector<int>& out) const {
  {
    std::lock_guard lk(cache_mu_);
    if (auto it = cache_.find(std::string(piece)); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::string> sym;
  sym.reserve(piece.size());
  for (unsigned char c : piece) sym.push_back(byte_sym_[c]);
  std::string key;
  while (sym.size() > 1) {
    int best = std::numeric_limits<int>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      key.assign(sym[i]).append(" ").append(sym[i + 1]);
      auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<int>::max()) break;
    // Merge every occurrence of the best pair, left to right (as encoder.py does).
    const std::string a = sym[at], b = sym[at + 1];
    std::vector<std::string> merged;
    merged.reserve(sym.size());
    for (size_t i = 0; i < sym.size();) {
      if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) {
        merged.push_back(a + b);
        i += 2;
      } else {
        merged.push_back(std::move(sym[i]));
        i += 1;
      }
    }
    sym = std::move(merged);
  }
  std::vector<int> ids;
  ids.reserve(sym.size());
  for (const std::string& s : sym) {
    auto it = encoder_.find(s);
    GPT_CHECK(it != encoder_.end(), "BPE symbol missing from the encoder");
    ids.push_back(it->second);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard lk(cache_mu_);
  if (cache_.size() >= kMaxCache) cache_.clear();
  cache_.emplace(std::string(piece), std::move(ids));
}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<int>& out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(re_->code, subject, text.size(), pos, 0, md, nullptr);
    size_t start = text.size(), end = text.size();
    if (rc > 0) {
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      start = ov[0];
      end = ov[1];
    }
    // Bytes no alternative matches (only invalid UTF-8) still become tokens:
    // byte-level BPE can encode any byte, so nothing is ever dropped.
    if (start > pos) bpe_piece(text.substr(pos, start - pos), out);
    if (end > start) bpe_piece(text.substr(start, end - start), out);
    pos = std::max(end, start + (end == start ? 1 : 0));
    if (rc <= 0) break;
  }
  pcre2_match_data_free(md);
}

std::string Gpt2Tokenizer::decode(std::span<const int> ids) const {
  std::string s;
  for (int id : ids) {
    if (id >= 0 && id < static_cast<int>(decoder_.size())) s += decoder_[id];
  }
  return s;
}

}  // namespace gpt
