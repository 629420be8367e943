#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/bpe.hpp"

#include <pcre2.h>

#include <atomic>
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

constexpr size_t kMaxCache = 1 << 18;  // pieces per thread (about 30 MB); cleared when full: bounded memory on any input

// Pre-tokenised pieces repeat (" the", ",\n"), so their ids are cached. The
// cache is per thread, so lookups take no lock: one cache behind a mutex
// made prepare_data 3.5x slower on 2 threads than on 1. A thread's cache
// serves one tokenizer at a time, named by a process-unique id.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct PieceCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int>, StringHash, std::equal_to<>> ids;
};
thread_local PieceCache t_cache;
std::atomic<uint64_t> next_tokenizer_id{1};

uint64_t pair_key(int a, int b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

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

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_path, const std::string& merges_path)
    : id_(next_tokenizer_id.fetch_add(1)) {
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
    // Merges are applied on token ids: both halves and the merged symbol
    // must be tokens (true of GPT-2's files, whose vocabulary is the 256
    // byte symbols, then each merge's result in rank order).
    const size_t sp = line.find(' ');
    const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
    const auto ia = encoder_.find(a), ib = encoder_.find(b), iab = encoder_.find(a + b);
    if (ia == encoder_.end() || ib == encoder_.end() || iab == encoder_.end())
      throw DataError(fmt::format("{}: merge line {} '{}': '{}' is not a token of {}", merges_path, rank + 1, line,
                                  ia == encoder_.end() ? a : ib == encoder_.end() ? b : a + b, vocab_path));
    merges_.emplace(pair_key(ia->second, ib->second), Merge{rank, iab->second});
    ++rank;
  }
  if (merges_.empty()) throw DataError(fmt::format("{}: no merges found", merges_path));
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = encoder_.find(byte_sym_[byte]);
    if (it == encoder_.end())
      throw DataError(fmt::format("{}: byte {} ('{}') is not a token", vocab_path, byte, byte_sym_[byte]));
    byte_id_[byte] = it->second;
  }

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
  PieceCache& cache = t_cache;
  if (cache.owner != id_) {
    cache.ids.clear();
    cache.owner = id_;
  }
  if (auto it = cache.ids.find(piece); it != cache.ids.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  // GPT-2's bpe(): repeatedly merge every occurrence, left to right, of
  // the adjacent pair with the lowest merge rank, until no pair merges.
  std::vector<int> ids(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) ids[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  while (ids.size() > 1) {
    const Merge* best = nullptr;
    uint64_t best_key = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const uint64_t key = pair_key(ids[i], ids[i + 1]);
      const auto it = merges_.find(key);
      if (it != merges_.end() && (best == nullptr || it->second.rank < best->rank)) {
        best = &it->second;
        best_key = key;
      }
    }
    if (best == nullptr) break;
    size_t w = 0;
    for (size_t i = 0; i < ids.size();) {
      if (i + 1 < ids.size() && pair_key(ids[i], ids[i + 1]) == best_key) {
        ids[w++] = best->id;
        i += 2;
      } else {
        ids[w++] = ids[i++];
      }
    }
    ids.resize(w);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cache.ids.size() >= kMaxCache) cache.ids.clear();
  cache.ids.emplace(std::string(piece), std::move(ids));
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
