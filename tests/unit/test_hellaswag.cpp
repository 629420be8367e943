// HellaSwag's pieces without a model: reading the JSON lines, laying an
// ending out as a row (truncation included), scoring rows from per-position
// losses. The trainer's evaluation against one sequence at a time through
// the model: tests/mpi/test_strategies.cpp; a trained model beating chance:
// tests/cli/train_converges.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/hellaswag.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = (fs::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

std::vector<int32_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(HellaSwag, ReadsContextsEndingsAndLabels) {
  ByteTokenizer tok;
  const std::string path = write_file(
      "gpt_hs_ok.jsonl",
      R"({"ind": 4, "ctx": "A man", "ctx_a": "A man", "endings": ["sat.", "ran", "x"], "label": 2, "split": "val"})"
      "\n\n"  // blank lines are skipped
      R"({"ctx": "Hi", "endings": ["a", "bb"], "label": "1"})"
      "\n");
  const auto ex = read_hellaswag(path, tok, 256);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].context, bytes("A man"));
  ASSERT_EQ(ex[0].endings.size(), 3u);
  EXPECT_EQ(ex[0].endings[0], bytes(" sat."));  // joined to the context by a space
  EXPECT_EQ(ex[0].endings[2], bytes(" x"));
  EXPECT_EQ(ex[0].label, 2);
  EXPECT_EQ(ex[1].label, 1);  // Hugging Face's copy holds labels as strings
  EXPECT_EQ(read_hellaswag(path, tok, 256, 1).size(), 1u);  // --hellaswag-examples
  fs::remove(path);
}

TEST(HellaSwag, RefusesBadExamplesByFileAndLine) {
  ByteTokenizer tok;
  const std::string good = R"({"ctx": "Hi", "endings": ["a", "bb"], "label": 0})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"ctx\": \"Hi\", ", ":2: not JSON: column"},
      {"[1, 2]", ":2: not a JSON object"},
      {R"({"endings": ["a", "b"], "label": 0})", ":2: no string \"ctx\""},
      {R"({"ctx": 5, "endings": ["a", "b"], "label": 0})", ":2: no string \"ctx\""},
      {R"({"ctx": "Hi", "endings": "a", "label": 0})", ":2: no array of two or more \"endings\""},
      {R"({"ctx": "Hi", "endings": ["a"], "label": 0})", ":2: no array of two or more \"endings\""},
      {R"({"ctx": "Hi", "endings": ["a", 3], "label": 0})", ":2: ending 1 is not a string"},
      {R"({"ctx": "Hi", "endings": ["a", "b"]})", ":2: no \"label\" (the test split has none"},
      {R"({"ctx": "Hi", "endings": ["a", "b"], "label": ""})", ":2: \"label\" is \"\", not the index"},
      {R"({"ctx": "Hi", "endings": ["a", "b"], "label": 2})", ":2: \"label\" 2 is not an ending's index (there are 2)"},
      {R"({"ctx": "Hi", "endings": ["a", "b"], "label": -1})", ":2: \"label\" -1 is not an ending's index"},
      {R"({"ctx": "", "endings": ["a", "b"], "label": 0})", ":2: \"ctx\" is empty"},
      {R"({"ctx": "Hi", "endings": ["a", "\u00e9"], "label": 0})", ":2: ending 1 has token id 195, outside the model's "
                                                                   "vocabulary (vocab_size 128)"},
  };
  for (const auto& [line, want] : cases) {
    const std::string path = write_file("gpt_hs_bad.jsonl", good + "\n" + line + "\n");
    try {
      read_hellaswag(path, tok, 128);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path + want), std::string::npos) << e.what() << "\nwanted: " << want;
    }
    fs::remove(path);
  }
  EXPECT_THROW(read_hellaswag("/no/such/hellaswag.jsonl", tok, 256), DataError);
  const std::string empty = write_file("gpt_hs_empty.jsonl", "\n");
  EXPECT_THROW(read_hellaswag(empty, tok, 256), DataError);
  fs::remove(empty);
}

TEST(HellaSwag, RowsPredictTheEndingFromTheContext) {
  ChoiceExample ex{{1, 2, 3}, {{4, 5}, {6}}, 0};
  int32_t tok[8], tgt[8];
  // Room for all: s = 1 2 3 4 5, positions read 1 2 3 4 and predict 2 3 4 5;
  // positions 2 and 3 predict the ending's 4 and 5.
  ChoiceRow r = choice_row(ex, 0, 16);
  EXPECT_EQ(r.start, 0);
  EXPECT_EQ(r.len, 4);
  EXPECT_EQ(r.first_scored, 2);
  EXPECT_FALSE(r.truncated);
  fill_choice_row(ex, 0, r, tok, tgt);
  EXPECT_EQ(std::vector<int32_t>(tok, tok + 4), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(std::vector<int32_t>(tgt, tgt + 4), (std::vector<int32_t>{2, 3, 4, 5}));
  // Three positions: the context loses its first token.
  r = choice_row(ex, 0, 3);
  EXPECT_EQ(r.start, 1);
  EXPECT_EQ(r.len, 3);
  EXPECT_EQ(r.first_scored, 1);
  EXPECT_TRUE(r.truncated);
  fill_choice_row(ex, 0, r, tok, tgt);
  EXPECT_EQ(std::vector<int32_t>(tok, tok + 3), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(std::vector<int32_t>(tgt, tgt + 3), (std::vector<int32_t>{3, 4, 5}));
  // One position: only the ending's last token is scored.
  r = choice_row(ex, 0, 1);
  EXPECT_EQ(r.len, 1);
  EXPECT_EQ(r.first_scored, 0);
  fill_choice_row(ex, 0, r, tok, tgt);
  EXPECT_EQ(tok[0], 4);
  EXPECT_EQ(tgt[0], 5);
  // A one-token ending: one scored position, the last.
  r = choice_row(ex, 1, 16);
  EXPECT_EQ(r.len, 3);
  EXPECT_EQ(r.first_scored, 2);
}

TEST(HellaSwag, SummedAndMeanLossCanDisagree) {
  ChoiceExample ex{{1, 9}, {{2, 3}, {4, 5, 6, 7}}, 1};
  const ChoiceRow a = choice_row(ex, 0, 16), b = choice_row(ex, 1, 16);
  // Position 0 reads the context only: its loss is not the ending's.
  const std::vector<float> la = {100, 2, 2}, lb = {100, 1.5f, 1.5f, 1.5f, 1.5f};
  const EndingLoss ea = ending_loss(a, std::span<const float>(la).first(size_t(a.len)));
  const EndingLoss eb = ending_loss(b, std::span<const float>(lb).first(size_t(b.len)));
  EXPECT_DOUBLE_EQ(ea.sum, 4);  // the row reads 1 9 2: position 0 predicts 9, 1 and 2 predict the ending
  EXPECT_EQ(ea.tokens, 2);
  EXPECT_DOUBLE_EQ(eb.sum, 6);
  EXPECT_EQ(eb.tokens, 4);
  const std::vector<EndingLoss> both = {{4, 2}, {6, 4}};  // sums 4 < 6; means 2 > 1.5
  const ChoiceVerdict v = judge(ex, both);
  EXPECT_FALSE(v.correct);
  EXPECT_TRUE(v.correct_norm);
  ex.label = 0;
  const ChoiceVerdict w = judge(ex, both);
  EXPECT_TRUE(w.correct);
  EXPECT_FALSE(w.correct_norm);
  // A tie goes to the lower index.
  const std::vector<EndingLoss> tie = {{3, 1}, {3, 1}};
  EXPECT_TRUE(judge(ex, tie).correct);
  ex.label = 1;
  EXPECT_FALSE(judge(ex, tie).correct_norm);
}

}  // namespace
}  // namespace gpt
