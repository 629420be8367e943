#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/bpe.hpp"
#include "io/tokenizer.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

TEST(ByteTokenizer, RoundTripsAnyBytes) {
  ByteTokenizer t;
  std::string s = "Hello\n\xff\x00 caf\xc3\xa9";
  s.push_back('\0');
  auto ids = t.encode(s);
  ASSERT_EQ(ids.size(), s.size());
  EXPECT_EQ(ids[0], 'H');
  EXPECT_EQ(ids[6], 255);
  EXPECT_EQ(t.decode(ids), s);
}

// GPT_VOCAB_DIR holds encoder.json + vocab.bpe (scripts/fetch_gpt2_vocab.sh);
// GPT_SHARED_DATA the project's shared reference data.
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

class Gpt2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = env_or("GPT_VOCAB_DIR", GPT_DEFAULT_VOCAB_DIR);
    if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"))
      tok_ = new Gpt2Tokenizer((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
  }
  static void TearDownTestSuite() { delete tok_; }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "GPT-2 vocabulary not found: run scripts/fetch_gpt2_vocab.sh";
  }
  static Gpt2Tokenizer* tok_;
};
Gpt2Tokenizer* Gpt2Test::tok_ = nullptr;

TEST_F(Gpt2Test, KnownIds) {
  EXPECT_EQ(tok_->vocab_size(), 50257);
  EXPECT_EQ(tok_->eot(), 50256);
  EXPECT_EQ(tok_->encode("Hello world"), (std::vector<int>{15496, 995}));
  // Contractions, digits and trailing whitespace follow the regex's alternatives.
  EXPECT_EQ(tok_->encode("I'm 42  \n"), (std::vector<int>{40, 1101, 5433, 220, 220, 198}));
}

TEST_F(Gpt2Test, ReferenceVectorsFromGpt2sOwnEncoder) {
  const fs::path vec = fs::path(env_or("GPT_SHARED_DATA", GPT_DEFAULT_SHARED_DATA)) / "gpt2_bpe_vectors.json";
  if (!fs::exists(vec)) GTEST_SKIP() << vec << " not present";
  std::ifstream f(vec);
  auto cases = nlohmann::json::parse(f);
  ASSERT_GT(cases.size(), 0u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int>>();
    EXPECT_EQ(tok_->encode(text), want) << "text: " << text;
    EXPECT_EQ(tok_->decode(want), text);
  }
}

TEST_F(Gpt2Test, RoundTripsInvalidUtf8WithoutLosingBytes) {
  const std::string s = "ok \xff\xfe then \xc3 end";
  EXPECT_EQ(tok_->decode(tok_->encode(s)), s);
}

}  // namespace
}  // namespace gpt
