// The per-step metrics record (MetricsWriter::write(StepRecord)) is written
// by hand, without nlohmann::json, so that a step allocates nothing: it must
// read back as the same JSON, and be byte for byte what nlohmann::json would
// write for the same record (keys sorted, whole numbers as "3.0", NaN and
// infinities as null).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "io/metrics.hpp"

namespace gpt {
namespace {

nlohmann::json as_json(const StepRecord& r) {
  nlohmann::json j = {{"step", r.step},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"grad_norm", r.grad_norm},
                      {"tokens_per_s", r.tokens_per_s},
                      {"mfu", r.mfu},
                      {"step_time_s", r.step_time_s},
                      {"elapsed_s", r.elapsed_s},
                      {"mem",
                       {{"params", r.mem_params},
                        {"grads", r.mem_grads},
                        {"optim", r.mem_optim},
                        {"activations", r.mem_activations},
                        {"buffers", r.mem_buffers},
                        {"peak", r.mem_peak}}},
                      {"comm",
                       {{"bytes", r.comm_bytes},
                        {"calls", r.comm_calls},
                        {"time_s", r.comm_time_s},
                        {"exposed_s", r.comm_exposed_s}}}};
  if (r.val_loss) j["val_loss"] = *r.val_loss;
  if (r.hellaswag_acc)
    j["hellaswag"] = {{"acc", *r.hellaswag_acc}, {"acc_norm", *r.hellaswag_acc_norm}, {"examples", r.hellaswag_examples}};
  if (r.skipped) j["skipped"] = true;
  return j;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(Metrics, StepRecordIsWhatNlohmannJsonWrites) {
  const auto path = (std::filesystem::temp_directory_path() / "gpt_test_metrics.jsonl").string();
  std::vector<StepRecord> records(4);
  records[0] = {1, 5.561038291081786, double(3e-3f), 3.1852458591625368, 26360.05, 0.167, 0.0097};
  records[0].mem_params = 474112;
  records[0].mem_peak = int64_t(1) << 40;
  records[0].comm_bytes = 123456789012;
  records[0].comm_calls = 45;
  records[0].comm_time_s = 1e-7;
  records[0].elapsed_s = 3601.25;
  records[1] = {2, 3.0, 0.0, 1e300, -2.5e-5, 0, 12};  // whole numbers, exponents, a negative
  records[1].val_loss = 4.25;
  records[1].hellaswag_acc = 2869 / 10042.0;  // --hellaswag
  records[1].hellaswag_acc_norm = 0.25;
  records[1].hellaswag_examples = 10042;
  records[2] = {3, std::numeric_limits<double>::quiet_NaN(), 1.0, std::numeric_limits<double>::infinity()};
  records[2].val_loss = -std::numeric_limits<double>::infinity();
  records[2].skipped = true;  // a step not applied (--skip-nonfinite)
  records[3] = {1000000, 0.1, 0.2, 0.30000000000000004};
  {
    MetricsWriter w(path);
    for (const auto& r : records) w.write(r);
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(lines[i], as_json(records[i]).dump()) << "record " << i;
    EXPECT_EQ(nlohmann::json::parse(lines[i]), nlohmann::json::parse(as_json(records[i]).dump())) << "record " << i;
  }
  std::filesystem::remove(path);
}

TEST(Metrics, NoPathWritesNothing) {
  MetricsWriter w;
  w.write(StepRecord{});  // a no-op, not a crash
}

}  // namespace
}  // namespace gpt
