#include "io/hellaswag.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "io/json_line.hpp"

namespace gpt {
namespace {

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// HellaSwag's files hold the label as a number; Hugging Face's copy of the
// dataset (exported with to_json) as a string of digits: both are read.
int read_label(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
      return std::stoi(s);
  }
  throw DataError(fmt::format("{}: \"label\" is {}, not the index of the right ending (the test split has no "
                              "labels: use the validation split)",
                              where, v.dump()));
}

std::vector<int32_t> encode_checked(const Tokenizer& tok, const std::string& text, int vocab_size,
                                    const std::string& where, const char* what) {
  const std::vector<int> ids = tok.encode(text);
  if (ids.empty()) throw DataError(fmt::format("{}: {} is empty", where, what));
  for (int id : ids)
    if (id >= vocab_size)
      throw DataError(fmt::format("{}: {} has token id {}, outside the model's vocabulary (vocab_size {}): give the "
                                  "tokenizer the model was trained with (--tokenizer)",
                                  where, what, id, vocab_size));
  return {ids.begin(), ids.end()};
}

}  // namespace

std::vector<ChoiceExample> read_hellaswag(const std::string& path, const Tokenizer& tok, int vocab_size,
                                          int64_t limit) {
  std::ifstream in(path);
  if (!in) throw DataError(fmt::format("{}: cannot read HellaSwag data: {}", path, std::strerror(errno)));
  std::vector<ChoiceExample> out;
  std::string text;
  for (int64_t line = 1; (limit == 0 || int64_t(out.size()) < limit) && std::getline(in, text); ++line) {
    if (blank(text)) continue;
    const std::string where = fmt::format("{}:{}", path, line);
    const nlohmann::json doc = parse_json_object_line(text, path, line);
    const auto ctx = doc.find("ctx");
    const auto endings = doc.find("endings");
    const auto label = doc.find("label");
    if (ctx == doc.end() || !ctx->is_string()) throw DataError(fmt::format("{}: no string \"ctx\"", where));
    if (endings == doc.end() || !endings->is_array() || endings->size() < 2)
      throw DataError(fmt::format("{}: no array of two or more \"endings\"", where));
    if (label == doc.end()) throw DataError(fmt::format("{}: no \"label\" (the test split has none: use the "
                                                        "validation split)", where));
    ChoiceExample ex;
    ex.context = encode_checked(tok, ctx->get_ref<const std::string&>(), vocab_size, where, "\"ctx\"");
    for (size_t k = 0; k < endings->size(); ++k) {
      const nlohmann::json& e = (*endings)[k];
      const std::string what = fmt::format("ending {}", k);
      if (!e.is_string()) throw DataError(fmt::format("{}: {} is not a string", where, what));
      // The ending continues the context after a space, as llm.c and
      // lm-evaluation-harness join them: " " + ending is tokenised alone.
      // (Appended rather than `" " + string`: GCC 12 warns falsely on that
      // form, -Wrestrict, its bug 105651.)
      std::string ending = " ";
      ending += e.get_ref<const std::string&>();
      ex.endings.push_back(encode_checked(tok, ending, vocab_size, where, what.c_str()));
    }
    ex.label = read_label(*label, where);
    if (ex.label < 0 || ex.label >= int(ex.endings.size()))
      throw DataError(fmt::format("{}: \"label\" {} is not an ending's index (there are {})", where, ex.label,
                                  ex.endings.size()));
    out.push_back(std::move(ex));
  }
  if (in.bad()) throw DataError(fmt::format("{}: read error", path));
  if (out.empty()) throw DataError(fmt::format("{}: no HellaSwag examples in the file", path));
  return out;
}

ChoiceRow choice_row(const ChoiceExample& ex, int ending, int max_len) {
  const int64_t n = int64_t(ex.context.size() + ex.endings.at(size_t(ending)).size());
  const int64_t pairs = n - 1;
  ChoiceRow r;
  r.start = std::max<int64_t>(0, pairs - max_len);
  r.len = int(pairs - r.start);
  r.first_scored = int(std::max<int64_t>(0, int64_t(ex.context.size()) - 1 - r.start));
  r.truncated = r.start > 0;
  return r;
}

void fill_choice_row(const ChoiceExample& ex, int ending, const ChoiceRow& row, int32_t* tokens, int32_t* targets) {
  const std::vector<int32_t>& end = ex.endings.at(size_t(ending));
  const int64_t c = int64_t(ex.context.size());
  auto at = [&](int64_t k) { return k < c ? ex.context[size_t(k)] : end[size_t(k - c)]; };
  for (int i = 0; i < row.len; ++i) {
    tokens[i] = at(row.start + i);
    targets[i] = at(row.start + i + 1);
  }
}

EndingLoss ending_loss(const ChoiceRow& row, std::span<const float> losses) {
  EndingLoss l;
  for (int i = row.first_scored; i < row.len; ++i) l.sum += double(losses[size_t(i)]);
  l.tokens = row.len - row.first_scored;
  return l;
}

ChoiceVerdict judge(const ChoiceExample& ex, std::span<const EndingLoss> losses) {
  size_t best = 0, best_norm = 0;
  auto mean = [](const EndingLoss& l) { return l.sum / std::max(1, l.tokens); };
  for (size_t k = 1; k < losses.size(); ++k) {
    if (losses[k].sum < losses[best].sum) best = k;
    if (mean(losses[k]) < mean(losses[best_norm])) best_norm = k;
  }
  return {int(best) == ex.label, int(best_norm) == ex.label};
}

}  // namespace gpt
