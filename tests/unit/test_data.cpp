#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "io/data_loader.hpp"
#include "io/token_shard.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpt_data_test_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::vector<uint16_t>& toks) {
    std::string p = (dir_ / name).string();
    ShardWriter w(p);
    w.append(toks);
    w.close();
    return p;
  }
  fs::path dir_;
};

std::vector<uint16_t> iota_tokens(size_t n, uint16_t mod = 1000) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = uint16_t(i % mod);
  return t;
}

TEST_F(DataTest, ShardRoundTripInLlmcFormat) {
  auto toks = iota_tokens(1000);
  auto p = write("a.bin", toks);
  EXPECT_EQ(fs::file_size(p), 1024u + 2 * 1000);
  std::ifstream f(p, std::ios::binary);
  int32_t hdr[3];
  f.read(reinterpret_cast<char*>(hdr), sizeof hdr);
  EXPECT_EQ(hdr[0], 20240520);
  EXPECT_EQ(hdr[1], 1);
  EXPECT_EQ(hdr[2], 1000);
  TokenShard s(p);
  ASSERT_EQ(s.size(), 1000);
  EXPECT_TRUE(std::equal(toks.begin(), toks.end(), s.tokens().begin()));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

void expect_data_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "no error; expected one containing '" << needle << "'";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
  }
}

TEST_F(DataTest, BadShardsAreRefusedNamingTheFile) {
  const std::string missing = (dir_ / "missing.bin").string();
  expect_data_error([&] { TokenShard s(missing); }, missing);

  auto p = write("t.bin", iota_tokens(100));
  fs::resize_file(p, 1024 + 150);  // 75 of 100 tokens
  expect_data_error([&] { TokenShard s(p); }, "truncated shard");
  fs::resize_file(p, 500);
  expect_data_error([&] { TokenShard s(p); }, "shorter than the 1024-byte header");

  auto q = write("m.bin", iota_tokens(10));
  {
    std::fstream f(q, std::ios::in | std::ios::out | std::ios::binary);
    int32_t bad = 12345;
    f.write(reinterpret_cast<char*>(&bad), 4);
  }
  expect_data_error([&] { TokenShard s(q); }, "bad magic 12345");
}

TEST_F(DataTest, TokensOutsideTheVocabularyAreRefused) {
  auto toks = iota_tokens(50, 300);
  toks[42] = 256;
  auto p = write("v.bin", toks);
  TokenShard s(p);
  EXPECT_EQ(s.scan(256).error, p + ": token id 256 at position 42 is outside the model's vocabulary (vocab_size 256)");
  EXPECT_EQ(s.scan(256).max_id, 256);
  EXPECT_EQ(s.scan(300).error, "");
  EXPECT_EQ(s.scan(256, 43).error, "");  // a range: positions [43, 50)
  EXPECT_EQ(s.scan(256, 0, 42).error, "");
  EXPECT_EQ(s.scan(256, 0, 42).max_id, 41);
  EXPECT_NE(s.scan(256, 42, 43).error, "");
  EXPECT_EQ(s.scan(256, 50).max_id, -1);  // empty
}

// The ranks' parts of the vocabulary check cover every token once: a single
// bad token, wherever it is (shard edges, the ends, in between), is reported
// by exactly one part, naming its shard and its position there, for any
// number of parts.
TEST_F(DataTest, VocabularyCheckPartsCoverEveryTokenOnce) {
  const std::vector<int64_t> sizes{20000, 17001};
  std::vector<std::vector<uint16_t>> shards;
  for (int64_t n : sizes) shards.push_back(iota_tokens(size_t(n), 256));
  for (const int64_t at : {int64_t(0), int64_t(16383), int64_t(16384), int64_t(19999), int64_t(20000),
                           int64_t(20000 + 16384), int64_t(37000)}) {
    const size_t f = at < sizes[0] ? 0 : 1;
    const int64_t pos = f == 0 ? at : at - sizes[0];
    std::vector<std::vector<uint16_t>> bad = shards;
    bad[f][size_t(pos)] = 300;
    const std::vector<std::string> files{write("v0.bin", bad[0]), write("v1.bin", bad[1])};
    DataLoader l({files, 16, 4, 4, 0, 1, 1, false});
    const std::string expected = fmt::format(
        "{}: token id 300 at position {} is outside the model's vocabulary (vocab_size 256)", files[f], pos);
    for (int parts : {1, 2, 3, 7, 64}) {
      int reports = 0, max_id = -1;
      for (int p = 0; p < parts; ++p) {
        const TokenShard::Scan part = l.scan_tokens(256, p, parts);
        max_id = std::max(max_id, part.max_id);
        if (part.error.empty()) continue;
        ++reports;
        EXPECT_EQ(part.error, expected) << "part " << p << " of " << parts;
        EXPECT_EQ(part.max_id, 300) << "part " << p << " of " << parts;
      }
      EXPECT_EQ(reports, 1) << "token " << at << ", " << parts << " parts";
      EXPECT_EQ(max_id, 300);
    }
    EXPECT_EQ(l.scan_tokens(301).error, "");
    EXPECT_EQ(l.scan_tokens(301).max_id, 300);
    EXPECT_EQ(l.scan_tokens(65536).error, "");  // every uint16 id fits
  }
}

// A window read is checked too (a rank whose copy of the data differs from
// the ones the start-up check read): the window holding the bad token, as
// input or as the last target, is an error naming it; the one before is not.
TEST_F(DataTest, WindowsReadAreCheckedAgainstTheVocabulary) {
  for (const int at : {20, 16}) {  // T = 16: inside window 1; window 0's last target
    std::vector<uint16_t> toks = iota_tokens(16 * 4 + 1, 256);
    toks[size_t(at)] = 300;
    const std::vector<std::string> files{write("w.bin", toks)};
    DataLoader l({files, 16, 1, 1, 0, 1, 1, false, 256});
    std::vector<int32_t> t(16), g(16);
    if (at == 20) {
      EXPECT_NO_THROW(l.micro_batch(0, t.data(), g.data()));
      l.advance();
    }
    expect_data_error([&] { l.micro_batch(0, t.data(), g.data()); },
                      fmt::format("w.bin: token id 300 at position {} is outside the model's vocabulary (vocab_size "
                                  "256) in a batch, after the start-up check passed",
                                  at));
    DataLoader unchecked({files, 16, 1, 1, 0, 1, 1, false});
    EXPECT_NO_THROW(unchecked.micro_batch(0, t.data(), g.data()));
  }
}

TEST_F(DataTest, RanksPartitionTheGlobalBatchAndMicroBatchesCoverIt) {
  // Windows are identified by their first token (shard 0: 0.., shard 1: 5000..).
  std::vector<uint16_t> a(16 * 40 + 1), b(16 * 30 + 1);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 5000);
  std::vector<std::string> files{write("a.bin", a), write("b.bin", b)};
  const int T = 16, G = 12, M = 3, W = 2;
  // Single rank reference: one micro-batch of the whole global batch.
  DataLoader ref({files, T, G, G, 0, 1, 9, true});
  for (int step = 0; step < 8; ++step) {  // crosses an epoch boundary (70 windows / 12)
    std::vector<int32_t> rt(G * T), rg(G * T);
    ref.micro_batch(0, rt.data(), rg.data());
    std::vector<int32_t> got;
    for (int r = 0; r < W; ++r) {
      DataLoader l({files, T, G, M, r, W, 9, true});
      ASSERT_EQ(l.accum_steps(), 2);
      l.seek(ref.position());
      for (int m = 0; m < l.accum_steps(); ++m) {
        std::vector<int32_t> t(M * T), g(M * T);
        l.micro_batch(m, t.data(), g.data());
        for (int i = 0; i < M * T; ++i) EXPECT_EQ(g[i], t[i] + 1);  // targets are inputs shifted by one
        got.insert(got.end(), t.begin(), t.end());
      }
    }
    EXPECT_EQ(got, rt) << "step " << step;
    ref.advance();
  }
  EXPECT_EQ(ref.position().epoch, 1);
}

// Validation's loader (no shuffle, one micro-batch a step): the whole
// batches and then the tail, each rank's stripe of the partial batch, read
// every window once and in order.
TEST_F(DataTest, TheTailHoldsTheWindowsAfterTheWholeBatches) {
  std::vector<uint16_t> a(8 * 23 + 1);
  std::iota(a.begin(), a.end(), 0);  // window w starts with token 8 w
  std::vector<std::string> files{write("v.bin", a)};
  const int T = 8, M = 2, W = 3;  // 23 windows: 3 whole batches of 6, and 5 more (2, 2 and 1 a rank)
  std::vector<int32_t> seen;
  for (int r = 0; r < W; ++r) {
    DataLoader l({files, T, M * W, M, r, W, 1, false});
    ASSERT_EQ(l.tail_windows(), 5);
    ASSERT_EQ(l.steps_per_epoch(), 3);  // the start-up's data line says it
    std::vector<int32_t> t(M * T, -1), g(M * T, -1);
    const int rows = l.tail(t.data(), g.data());
    EXPECT_EQ(rows, r < 2 ? 2 : 1) << "rank " << r;
    for (int i = 0; i < rows; ++i) {
      seen.push_back(t[size_t(i) * T] / T);
      EXPECT_EQ(g[size_t(i) * T], t[size_t(i) * T] + 1);
    }
    for (size_t k = size_t(rows) * T; k < t.size(); ++k) EXPECT_EQ(t[k], -1) << "written past the rank's rows";
  }
  EXPECT_EQ(seen, (std::vector<int32_t>{18, 19, 20, 21, 22}));
  // Data that divide have no tail: every rank reads no row.
  DataLoader whole({files, T, 1, 1, 0, 1, 1, false});
  EXPECT_EQ(whole.tail_windows(), 0);
  EXPECT_EQ(whole.steps_per_epoch(), 23);
  // Its steps are an epoch: the next step begins the second.
  for (int s = 0; s < 23; ++s) whole.advance();
  EXPECT_EQ(whole.position(), (LoaderPosition{1, 0}));
  std::vector<int32_t> t(T), g(T);
  EXPECT_EQ(whole.tail(t.data(), g.data()), 0);
}

TEST_F(DataTest, ShuffleIsSeededAndResumable) {
  std::vector<std::string> files{write("a.bin", iota_tokens(8 * 200 + 1, 60000))};
  auto first_tokens = [&](DataLoader& l, int steps) {
    std::vector<int32_t> out;
    std::vector<int32_t> t(4 * 8), g(4 * 8);
    for (int s = 0; s < steps; ++s) {
      l.micro_batch(0, t.data(), g.data());
      for (int i = 0; i < 4; ++i) out.push_back(t[i * 8]);
      l.advance();
    }
    return out;
  };
  DataLoader a({files, 8, 4, 4, 0, 1, 1, true}), b({files, 8, 4, 4, 0, 1, 1, true}), c({files, 8, 4, 4, 0, 1, 2, true});
  auto sa = first_tokens(a, 60);
  EXPECT_EQ(sa, first_tokens(b, 60));
  EXPECT_NE(sa, first_tokens(c, 60));
  std::set<int32_t> uniq(sa.begin(), sa.begin() + 200);  // one epoch: every window once
  EXPECT_EQ(uniq.size(), 200u);
  // Resume from a saved position reproduces the rest of the stream.
  DataLoader d({files, 8, 4, 4, 0, 1, 1, true});
  first_tokens(d, 55);
  const LoaderPosition pos = d.position();
  DataLoader e({files, 8, 4, 4, 0, 1, 1, true});
  e.seek(pos);
  auto tail = first_tokens(e, 5);
  EXPECT_EQ(tail, std::vector<int32_t>(sa.end() - 20, sa.end()));  // 5 steps x 4 sequences
}

TEST_F(DataTest, TooLittleDataOrNonDividingBatchIsAnError) {
  std::vector<std::string> files{write("s.bin", iota_tokens(100))};
  expect_data_error([&] { DataLoader l({files, 16, 8, 8, 0, 1, 1, true}); }, "fewer than one global batch");
  EXPECT_THROW(DataLoader({files, 4, 6, 4, 0, 1, 1, true}), ConfigError);
}

// The one batch rule of the loader, plan and --strategy auto.
TEST(AccumSteps, GlobalBatchOverRanksAndMicroBatchOrOneErrorNamingTheSource) {
  EXPECT_EQ(accum_steps(24, 4, 3), 2);
  EXPECT_EQ(accum_steps(8, 8, 1), 1);
  // The error names the multiples of micro-batch x ranks either side (none when a count is not positive).
  for (auto [g, m, w, would] : {std::tuple{8, 2, 3, ": 6 or 12 would do"},
                                {12, 8, 1, ": 8 or 16 would do"},
                                {0, 1, 1, ""},
                                {8, 0, 1, ""},
                                {6, 4, 1, ": 4 or 8 would do"},
                                {3, 2, 2, ": 4 would do"}}) {
    try {
      accum_steps(g, m, w, "run.toml");
      ADD_FAILURE() << g << " " << m << " " << w << ": accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("invalid global-batch = {} in run.toml: must be a positive "
                                                   "multiple of micro-batch ({}) x data-parallel ranks ({}){}",
                                                   g, m, w, would));
    }
  }
  EXPECT_THROW(accum_steps(8, 2, 3), ConfigError);
}

TEST_F(DataTest, GlobsExpandSortedAndMissingPatternsFail) {
  write("x_train_000001.bin", iota_tokens(10));
  write("x_train_000000.bin", iota_tokens(10));
  auto files = expand_globs((dir_ / "x_train_*.bin").string());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_LT(files[0], files[1]);
  expect_data_error([&] { expand_globs((dir_ / "nothing_*.bin").string()); }, "matched nothing");
}

}  // namespace
}  // namespace gpt
