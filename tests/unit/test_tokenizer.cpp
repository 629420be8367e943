#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/bpe.hpp"
#include "io/token_shard.hpp"

#include <fmt/format.h>
#include <unistd.h>
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

namespace gpt {
namespace {

// prepare_data tokenises in 1 MiB chunks cut only where GPT-2's
// pre-tokeniser splits anyway; tinyshakespeare (1.1 MB) spans two chunks,
// and the shard must equal tokenising the whole text at once.
TEST_F(Gpt2Test, StreamingPrepareDataEqualsWholeFileTokenisation) {
  const fs::path txt = fs::path(env_or("GPT_SHARED_DATA", GPT_DEFAULT_SHARED_DATA)) / "tinyshakespeare.txt";
  if (!fs::exists(txt)) GTEST_SKIP() << txt << " not present";
  const fs::path out = fs::temp_directory_path() / fmt::format("gpt_stream_test_{}", ::getpid());
  const fs::path vocab = env_or("GPT_VOCAB_DIR", GPT_DEFAULT_VOCAB_DIR);
  const std::string cmd = fmt::format("{} --tokenizer gpt2 --vocab {} --merges {} --input {} --out {} --name s "
                                      "--val-fraction 0 > /dev/null",
                                      GPT_PREPARE_DATA, (vocab / "encoder.json").string(),
                                      (vocab / "vocab.bpe").string(), txt.string(), out.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(txt, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), size_t(1) << 20) << "must span more than one chunk";
  const std::vector<int> whole = tok_->encode(text);
  TokenShard shard((out / "s_train_000000.bin").string());
  ASSERT_EQ(size_t(shard.size()), whole.size());
  EXPECT_TRUE(std::equal(whole.begin(), whole.end(), shard.tokens().begin()));
  fs::remove_all(out);
}

}  // namespace
}  // namespace gpt
