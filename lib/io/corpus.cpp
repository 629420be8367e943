#include "io/corpus.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "io/json_line.hpp"

namespace gpt {
namespace {

constexpr size_t kChunk = 1 << 20;  // bytes per piece (a text piece grows until a safe cut, at most 64×)

bool visible_ascii(char c) { return c > ' ' && c < 0x7f; }

// Largest cut < buf.size() at which GPT-2's pre-tokeniser splits anyway (just
// after a newline that follows a visible character, before an ASCII letter
// or digit); 0 if none.
size_t safe_cut(std::string_view buf) {
  for (size_t p = buf.size() - 1; p >= 2; --p) {
    if (buf[p - 1] == '\n' && visible_ascii(buf[p - 2]) && std::isalnum(static_cast<unsigned char>(buf[p]))) return p;
  }
  return 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

CorpusFormat corpus_format(const std::string& path, const std::string& flag) {
  if (flag == "text") return CorpusFormat::kText;
  if (flag == "jsonl") return CorpusFormat::kJsonl;
  if (flag != "auto") throw ConfigError(fmt::format("invalid format = {}: expected auto, text or jsonl", flag));
  std::string_view name = path;
  for (std::string_view z : {".gz", ".zst"})
    if (ends_with(name, z)) name.remove_suffix(z.size());
  for (std::string_view j : {".jsonl", ".ndjson", ".json"})
    if (ends_with(name, j)) return CorpusFormat::kJsonl;
  return CorpusFormat::kText;
}

CorpusReader::CorpusReader(std::vector<std::string> inputs, const std::string& format, bool gpt2_cuts,
                           double val_fraction)
    : inputs_(std::move(inputs)), gpt2_cuts_(gpt2_cuts) {
  for (const auto& in : inputs_) {
    std::error_code ec;
    const auto sz = std::filesystem::file_size(in, ec);
    if (ec) throw DataError(fmt::format("{}: cannot read input: {}", in, ec.message()));
    sizes_.push_back(sz);
    total_ += sz;
    formats_.push_back(corpus_format(in, format));
  }
  boundary_ = total_ - static_cast<uint64_t>(val_fraction * double(total_));
}

uint64_t CorpusReader::position() {
  if (!src_) return base_;
  if (src_->plain()) return base_ + handed_;
  // Compressed: where the compressed data of the read that produced the
  // next byte began (a lower bound of its place, so under the file's size).
  while (marks_.size() > 1 && marks_.front().first <= handed_) marks_.pop_front();
  return base_ + (marks_.empty() ? src_->consumed() : marks_.front().second);
}

void CorpusReader::fill(size_t want) {
  constexpr size_t kStep = 1 << 16;  // decompressed bytes per read: the split's resolution in a compressed file
  if (head_ > 0) {
    buf_.erase(0, head_);
    head_ = 0;
  }
  while (!eof_ && buf_.size() < want) {
    const size_t old = buf_.size();
    buf_.resize(want);
    const uint64_t before = src_->consumed();
    const size_t got = src_->read(buf_.data() + old, std::min(want - old, kStep));
    buf_.resize(old + got);
    read_ += got;
    if (got == 0) eof_ = true;
    if (got > 0 && !src_->plain()) marks_.emplace_back(read_, before);
  }
}

bool CorpusReader::next(CorpusPiece& p) {
  while (true) {
    if (separator_) {
      separator_ = false;
      p.kind = CorpusPiece::Kind::kSeparator;
      p.bytes.clear();
      p.val = is_val(position());
      return true;
    }
    if (!src_) {
      if (fi_ >= inputs_.size()) return false;
      src_ = open_byte_source(inputs_[fi_]);
      marks_.clear();
      read_ = 0;
      eof_ = false;
      buf_.clear();
      head_ = 0;
      handed_ = 0;
      line_ = 0;
    }
    if (formats_[fi_] == CorpusFormat::kText ? next_text(p) : next_jsonl(p)) return true;
    src_.reset();
    base_ += sizes_[fi_];
    separator_ = fi_ + 1 < inputs_.size() && formats_[fi_ + 1] == CorpusFormat::kText;
    ++fi_;
  }
}

bool CorpusReader::next_text(CorpusPiece& p) {
  size_t target = kChunk;
  while (true) {
    if (buf_.size() - head_ < target) fill(target);
    const std::string_view b = std::string_view(buf_).substr(head_);
    if (b.empty()) return false;
    const uint64_t at = position();
    size_t cut = b.size();
    if (src_->plain() && at < boundary_ && at + cut > boundary_) {
      cut = boundary_ - at;  // the split point itself: train and val are separate texts
    } else if (!eof_ && gpt2_cuts_) {
      cut = safe_cut(b);
      if (cut == 0) {  // no safe point yet: read more (bounded: give up exactness at 64 chunks)
        if (b.size() < 64 * kChunk) {
          target = b.size() + kChunk;
          continue;
        }
        cut = b.size();
      }
    }
    p.kind = CorpusPiece::Kind::kText;
    p.bytes.assign(b.substr(0, cut));
    p.val = is_val(at);
    head_ += cut;
    handed_ += cut;
    return true;
  }
}

bool CorpusReader::next_jsonl(CorpusPiece& p) {
  p.kind = CorpusPiece::Kind::kJsonl;
  p.bytes.clear();
  p.file = inputs_[fi_];
  bool any = false;
  while (p.bytes.size() < kChunk) {
    size_t nl = std::string::npos;
    for (size_t scanned = 0;;) {  // the next line: [head_, nl), reading until it is whole
      nl = buf_.find('\n', head_ + scanned);
      if (nl != std::string::npos || eof_) break;
      scanned = buf_.size() - head_;
      fill(scanned + kChunk);  // moves the buffer's start to head_ = 0
    }
    if (head_ == buf_.size()) break;  // the end of the input
    const size_t len = (nl == std::string::npos ? buf_.size() : nl) - head_;
    const bool val = is_val(position());  // where the line starts
    if (any && val != p.val) break;            // a piece holds one split: the line starts the next piece
    if (!any) {
      p.val = val;
      p.first_line = line_ + 1;
      any = true;
    }
    p.bytes.append(buf_, head_, len);
    p.bytes += '\n';
    const size_t step = len + (nl == std::string::npos ? 0 : 1);
    head_ += step;
    handed_ += step;
    ++line_;
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
    const nlohmann::json doc = parse_json_object_line(text, p.file, line);
    const auto it = doc.find(text_key);
    if (it == doc.end() || !it->is_string())
      throw DataError(fmt::format("{}:{}: no string \"{}\" in the object (--text-key)", p.file, line, text_key));
    if (tok.eot() >= 0) out.push_back(tok.eot());
    tok.encode(it->get_ref<const std::string&>(), out);
  }
}

}  // namespace gpt
