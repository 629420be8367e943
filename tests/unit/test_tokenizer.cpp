#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
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
  // Ids outside its 256 (a larger model's samples) are skipped, not folded onto bytes (300 & 0xff is ',').
  EXPECT_EQ(t.decode(std::vector<int>{'H', 300, 'i', -1, 256}), "Hi");
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
  EXPECT_EQ(tok_->decode(std::vector<int>{15496, 50257, 995, -1}), "Hello world");  // a padded vocabulary's ids skipped
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

// Merges are applied on token ids, so each merge's halves and result must be
// tokens; a merges file that does not fit the vocabulary is refused at load.
TEST_F(Gpt2Test, RefusesMergesOfSymbolsOutsideTheVocabulary) {
  const fs::path dir = env_or("GPT_VOCAB_DIR", GPT_DEFAULT_VOCAB_DIR);
  const fs::path merges = fs::temp_directory_path() / fmt::format("gpt_bad_merges_{}.txt", ::getpid());
  std::ofstream(merges) << "#version: 0.2\nh e\nQ9Q9 X8X8\n";
  try {
    Gpt2Tokenizer t((dir / "encoder.json").string(), merges.string());
    ADD_FAILURE() << "must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("merge line 2 'Q9Q9 X8X8': 'Q9Q9' is not a token of"), std::string::npos)
        << e.what();
  }
  fs::remove(merges);
}

TEST_F(Gpt2Test, RoundTripsInvalidUtf8WithoutLosingBytes) {
  const std::string s = "ok \xff\xfe then \xc3 end";
  EXPECT_EQ(tok_->decode(tok_->encode(s)), s);
}

}  // namespace
}  // namespace gpt

namespace gpt {
namespace {

// Runs prepare_data with the GPT-2 vocabulary; returns its exit status.
int prepare(const std::string& args) {
  const fs::path vocab = env_or("GPT_VOCAB_DIR", GPT_DEFAULT_VOCAB_DIR);
  const std::string cmd = fmt::format("{} --tokenizer gpt2 --vocab {} --merges {} {} > /dev/null", GPT_PREPARE_DATA,
                                      (vocab / "encoder.json").string(), (vocab / "vocab.bpe").string(), args);
  return std::system(cmd.c_str());
}

std::vector<int> shard_ids(const fs::path& file) {
  TokenShard shard(file.string());
  return {shard.tokens().begin(), shard.tokens().end()};
}

std::string read_text(const fs::path& file) {
  std::ifstream f(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

fs::path tinyshakespeare() {
  return fs::path(env_or("GPT_SHARED_DATA", GPT_DEFAULT_SHARED_DATA)) / "tinyshakespeare.txt";
}

// prepare_data tokenises in pieces of about 1 MiB, cut only where GPT-2's
// pre-tokeniser splits anyway, on several threads; tinyshakespeare five
// times over (5.6 MB) is six pieces (three batches on 1 thread, two on 2),
// and the shard must equal tokenising the whole text at once.
TEST_F(Gpt2Test, StreamingPrepareDataEqualsWholeFileTokenisation) {
  if (!fs::exists(tinyshakespeare())) GTEST_SKIP() << tinyshakespeare() << " not present";
  const fs::path out = fs::temp_directory_path() / fmt::format("gpt_stream_test_{}", ::getpid());
  fs::create_directories(out);
  const std::string one = read_text(tinyshakespeare());
  std::string text;
  for (int i = 0; i < 5; ++i) text += one;
  std::ofstream(out / "in.txt", std::ios::binary) << text;
  const std::vector<int> whole = tok_->encode(text);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(fmt::format("{} threads", threads));
    const fs::path dir = out / std::to_string(threads);
    ASSERT_EQ(prepare(fmt::format("--input {} --out {} --name s --val-fraction 0 --threads {}",
                                  (out / "in.txt").string(), dir.string(), threads)),
              0);
    EXPECT_EQ(shard_ids(dir / "s_train_000000.bin"), whole);
  }
  fs::remove_all(out);
}

// JSON-lines input: each document (a line's "text") is preceded by
// <|endoftext|>, as llm.c's dataset scripts do; a text file that follows
// another input is preceded by one; blank lines, CRLF endings, other keys
// and escapes are handled; a document belongs to the split its line starts
// in. Documents: tinyshakespeare's paragraphs, over a megabyte of JSON.
TEST_F(Gpt2Test, PrepareDataReadsJsonLinesDocuments) {
  if (!fs::exists(tinyshakespeare())) GTEST_SKIP() << tinyshakespeare() << " not present";
  const fs::path out = fs::temp_directory_path() / fmt::format("gpt_jsonl_test_{}", ::getpid());
  fs::create_directories(out);
  const std::string text = read_text(tinyshakespeare());
  std::vector<std::string> docs;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find("\n\n", at);
    end = end == std::string::npos ? text.size() : end + 2;
    docs.push_back(text.substr(at, end - at));
    at = end;
  }
  docs.push_back("caf\u00e9 \"quoted\"\ttab");  // escapes in the JSON
  ASSERT_GT(docs.size(), 1000u);
  std::string jsonl;
  std::vector<size_t> line_start;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i == 7) jsonl += "\n  \n";  // blank lines are skipped
    line_start.push_back(jsonl.size());
    nlohmann::json o = {{"id", i}, {"text", docs[i]}, {"meta", {{"source", "tiny"}}}};
    jsonl += o.dump(-1, ' ', /*ensure_ascii=*/i % 2 == 0);
    jsonl += i == 11 ? "\r\n" : "\n";
  }
  ASSERT_GT(jsonl.size(), size_t(1) << 20) << "must span more than one piece";
  std::ofstream(out / "docs.jsonl", std::ios::binary) << jsonl;
  std::ofstream(out / "a.txt", std::ios::binary) << "First file.\n";
  std::ofstream(out / "c.txt", std::ios::binary) << "Last file.\n";
  const int eot = tok_->eot();
  auto doc_ids = [&](size_t from, size_t to) {
    std::vector<int> ids;
    for (size_t i = from; i < to; ++i) {
      ids.push_back(eot);
      tok_->encode(docs[i], ids);
    }
    return ids;
  };

  // text, JSON lines, text: one separator before each document and before c.txt.
  ASSERT_EQ(prepare(fmt::format("--input {} {} {} --out {} --name m --val-fraction 0 --threads 2",
                                (out / "a.txt").string(), (out / "docs.jsonl").string(), (out / "c.txt").string(),
                                (out / "m").string())),
            0);
  std::vector<int> want = tok_->encode("First file.\n");
  const std::vector<int> all = doc_ids(0, docs.size());
  want.insert(want.end(), all.begin(), all.end());
  want.push_back(eot);
  tok_->encode("Last file.\n", want);
  EXPECT_EQ(shard_ids(out / "m" / "m_train_000000.bin"), want);

  // The validation split: the documents whose lines start in the last quarter of the bytes.
  ASSERT_EQ(prepare(fmt::format("--input {} --out {} --name v --val-fraction 0.25 --threads 2",
                                (out / "docs.jsonl").string(), (out / "v").string())),
            0);
  const size_t boundary = jsonl.size() - size_t(0.25 * double(jsonl.size()));
  const size_t first_val =
      size_t(std::lower_bound(line_start.begin(), line_start.end(), boundary) - line_start.begin());
  ASSERT_GT(first_val, 0u);
  ASSERT_LT(first_val, docs.size());
  EXPECT_EQ(shard_ids(out / "v" / "v_train_000000.bin"), doc_ids(0, first_val));
  EXPECT_EQ(shard_ids(out / "v" / "v_val_000000.bin"), doc_ids(first_val, docs.size()));

  // Compressed: gzip and zstd, as one stream and as two concatenated ones
  // (cat a.gz b.gz), gzip also with zero padding after its last member (more
  // than one 64 KiB read of it, as gzip accepts), found by their bytes; `auto` sees JSON lines through
  // .json.gz (C4's names) and .jsonl.zst (the Pile's). The validation split
  // is measured in compressed bytes and falls between documents.
  if (!GPT_PREPARE_DATA_COMPRESSED) {
    fs::remove_all(out);
    GTEST_SKIP() << "prepare_data was built without zlib or libzstd: compressed inputs not tested";
  }
  const std::string half1 = jsonl.substr(0, line_start[docs.size() / 2]), half2 = jsonl.substr(half1.size());
  std::ofstream(out / "h1.jsonl", std::ios::binary) << half1;
  std::ofstream(out / "h2.jsonl", std::ios::binary) << half2;
  const std::string d = out.string();
  const std::string make = fmt::format(
      "cd {0} && gzip -c docs.jsonl > c4.json.gz && (gzip -c h1.jsonl; gzip -c h2.jsonl) > two.json.gz && "
      "(cat two.json.gz; head -c 70000 /dev/zero) > padded.json.gz && "
      "zstd -q -c docs.jsonl > pile.jsonl.zst && (zstd -q -c h1.jsonl; zstd -q -c h2.jsonl) > two.jsonl.zst",
      d);
  ASSERT_EQ(std::system(make.c_str()), 0) << make << " (gzip and zstd: scripts/setup.sh installs them)";
  for (const char* name : {"c4.json.gz", "two.json.gz", "padded.json.gz", "pile.jsonl.zst", "two.jsonl.zst"}) {
    SCOPED_TRACE(name);
    const fs::path dir = out / (std::string(name) + ".out");
    ASSERT_EQ(prepare(fmt::format("--input {} --out {} --name z --val-fraction 0 --threads 2", (out / name).string(),
                                  dir.string())),
              0);
    EXPECT_EQ(shard_ids(dir / "z_train_000000.bin"), all);
    ASSERT_EQ(prepare(fmt::format("--input {} --out {} --name s --val-fraction 0.25 --threads 2",
                                  (out / name).string(), dir.string())),
              0);
    std::vector<int> train = shard_ids(dir / "s_train_000000.bin"), val = shard_ids(dir / "s_val_000000.bin");
    ASSERT_FALSE(train.empty());
    ASSERT_FALSE(val.empty());
    EXPECT_EQ(val.front(), eot) << "the split falls between documents";
    train.insert(train.end(), val.begin(), val.end());
    EXPECT_EQ(train, all);
  }
  if (!HasFailure()) fs::remove_all(out);
}

}  // namespace
}  // namespace gpt
