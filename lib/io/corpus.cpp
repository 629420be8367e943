#include "io/corpus.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace gpt {
namespace {

constexpr size_t kChunk = 1 << 20;  // bytes per piece (a text piece grows until a safe cut, at most 64×)

bool visible_ascii(char c) { return c > ' ' && c < 0x7f; }

// Largest cut < buf.size() at which GPT-2's pre-tokeniser splits anyway (just
// after a newline that follows a visible character, before an ASCII letter
// or digit); 0 if none.
size_t safe_cut(const std::string& buf) {
  for (size_t p = buf.size() - 1; p >= 2; --p) {
    if (buf[p - 1] == '\n' && visible_ascii(buf[p - 2]) && std::isalnum(static_cast<unsigned char>(buf[p]))) return p;
  }
  return 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

CorpusFormat corpus_format(const std::string& path, const std::string& flag) {
  if (flag == "text") return CorpusFormat::kText;
  if (flag == "jsonl") return CorpusFormat::kJsonl;
  if (flag != "auto") throw ConfigError(fmt::format("invalid format = {}: expected auto, text or jsonl", flag));
  return ends_with(path, ".jsonl") || ends_with(path, ".ndjson") ? CorpusFormat::kJsonl : CorpusFormat::kText;
}

CorpusReader::CorpusReader(std::vector<std::string> inputs, const std::string& format, bool gpt2_cuts,
                           double val_fraction)
    : inputs_(std::move(inputs)), gpt2_cuts_(gpt2_cuts) {
  for (const auto& in : inputs_) {
    std::error_code ec;
    const auto sz = std::filesystem::file_size(in, ec);
    if (ec) throw DataError(fmt::format("{}: cannot read input: {}", in, ec.message()));
    total_ += sz;
    formats_.push_back(corpus_format(in, format));
  }
  boundary_ = total_ - static_cast<uint64_t>(val_fraction * double(total_));
}

bool CorpusReader::next(CorpusPiece& p) {
  while (true) {
    if (separator_) {
      separator_ = false;
      p.kind = CorpusPiece::Kind::kSeparator;
      p.bytes.clear();
      p.val = consumed_ >= boundary_;
      return true;
    }
    if (!open_) {
      if (fi_ >= inputs_.size()) return false;
      f_ = std::ifstream(inputs_[fi_], std::ios::binary);
      if (!f_) throw DataError(fmt::format("{}: cannot open input", inputs_[fi_]));
      open_ = true;
      eof_ = false;
      buf_.clear();
      has_held_ = false;
      line_ = 0;
    }
    if (formats_[fi_] == CorpusFormat::kText ? next_text(p) : next_jsonl(p)) return true;
    if (f_.bad()) throw DataError(fmt::format("{}: read error", inputs_[fi_]));
    f_.close();
    open_ = false;
    separator_ = fi_ + 1 < inputs_.size() && formats_[fi_ + 1] == CorpusFormat::kText;
    ++fi_;
  }
}

bool CorpusReader::next_text(CorpusPiece& p) {
  size_t target = kChunk;
  while (true) {
    if (!eof_ && buf_.size() < target) {
      const size_t old = buf_.size();
      buf_.resize(target);
      f_.read(buf_.data() + old, static_cast<std::streamsize>(target - old));
      buf_.resize(old + static_cast<size_t>(f_.gcount()));
      if (!f_) eof_ = true;
    }
    if (buf_.empty()) return false;
    size_t cut = buf_.size();
    if (consumed_ < boundary_ && consumed_ + cut > boundary_) {
      cut = boundary_ - consumed_;  // the split point itself: train and val are separate texts
    } else if (!eof_ && gpt2_cuts_) {
      cut = safe_cut(buf_);
      if (cut == 0) {  // no safe point yet: read more (bounded: give up exactness at 64 chunks)
        if (buf_.size() < 64 * kChunk) {
          target = buf_.size() + kChunk;
          continue;
        }
        cut = buf_.size();
      }
    }
    p.kind = CorpusPiece::Kind::kText;
    p.bytes.assign(buf_, 0, cut);
    p.val = consumed_ >= boundary_;
    consumed_ += cut;
    buf_.erase(0, cut);
    return true;
  }
}

bool CorpusReader::next_jsonl(CorpusPiece& p) {
  p.kind = CorpusPiece::Kind::kJsonl;
  p.bytes.clear();
  p.file = inputs_[fi_];
  bool any = false;
  std::string line;
  while (p.bytes.size() < kChunk) {
    bool val;
    if (has_held_) {
      line.swap(held_);
      val = held_val_;
      has_held_ = false;
    } else {
      if (!std::getline(f_, line)) break;
      val = consumed_ >= boundary_;  // where the line starts
      consumed_ += line.size() + (f_.eof() ? 0 : 1);
      ++line_;
    }
    if (!any) {
      p.val = val;
      p.first_line = line_;
      any = true;
    } else if (val != p.val) {  // a piece holds one split: this line starts the next piece
      held_.swap(line);
      held_val_ = val;
      has_held_ = true;
      break;
    }
    p.bytes += line;
    p.bytes += '\n';
  }
  return any;
}

void tokenize_piece(const CorpusPiece& p, const Tokenizer& tok, const std::string& text_key, std::vector<int>& out) {
  switch (p.kind) {
    case CorpusPiece::Kind::kText:
      tok.encode(p.bytes, out);
      return;
    case CorpusPiece::Kind::kSeparator:
      if (tok.eot() >= 0) out.push_back(tok.eot());
      return;
    case CorpusPiece::Kind::kJsonl:
      break;
  }
  const std::string_view all(p.bytes);
  int64_t line = p.first_line;
  for (size_t pos = 0; pos < all.size(); ++line) {
    const size_t nl = all.find('\n', pos);
    const std::string_view text = all.substr(pos, nl - pos);
    pos = nl + 1;
    if (blank(text)) continue;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      // "[json.exception.parse_error.101] parse error at line 1, column 14: ..." -> "column 14: ..."
      std::string why = e.what();
      if (const size_t at = why.find("] "); at != std::string::npos) why.erase(0, at + 2);
      if (const std::string lead = "parse error at line 1, "; why.rfind(lead, 0) == 0) why.erase(0, lead.size());
      throw DataError(fmt::format("{}:{}: not JSON: {}", p.file, line, why));
    }
    if (!doc.is_object()) throw DataError(fmt::format("{}:{}: not a JSON object", p.file, line));
    const auto it = doc.find(text_key);
    if (it == doc.end() || !it->is_string())
      throw DataError(fmt::format("{}:{}: no string \"{}\" in the object (--text-key)", p.file, line, text_key));
    if (tok.eot() >= 0) out.push_back(tok.eot());
    tok.encode(it->get_ref<const std::string&>(), out);
  }
}

}  // namespace gpt
