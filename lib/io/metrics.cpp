#include "io/metrics.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <utility>

#include "core/error.hpp"
#include "core/logging.hpp"

namespace gpt {

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
  if (path.empty()) return;
  const auto parent = std::filesystem::path(path).parent_path();
  if (std::error_code ec; !parent.empty() && (std::filesystem::create_directories(parent, ec), ec))
    throw DataError(fmt::format("{}: cannot create the metrics file's directory: {}", path, ec.message()));
  path_ = path;
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) throw DataError(fmt::format("{}: cannot create metrics file: {}", path, std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!f_) return;
  // Invalid UTF-8 (a byte-level sample's text) becomes U+FFFD instead of an exception.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_line(line.data(), line.size());
}

namespace {

// `key` (the text before the number: any comma or closing brace, the quoted
// key and its colon), then a JSON number as
// nlohmann::json writes a double: the shortest form that reads back the
// same, ".0" on whole numbers, null for NaN and infinities (JSON has
// neither).
void append_number(fmt::memory_buffer& out, const char* key, double v) {
  fmt::format_to(std::back_inserter(out), "{}", key);
  if (!std::isfinite(v)) {
    fmt::format_to(std::back_inserter(out), "null");
    return;
  }
  const size_t start = out.size();
  fmt::format_to(std::back_inserter(out), "{}", v);
  if (std::find_if(out.begin() + start, out.end(), [](char c) { return c == '.' || c == 'e'; }) == out.end())
    fmt::format_to(std::back_inserter(out), ".0");
}

}  // namespace

void MetricsWriter::write(const StepRecord& r) {
  if (!f_) return;
  line_.clear();
  auto out = std::back_inserter(line_);
  fmt::format_to(out, "{{\"comm\":{{\"bytes\":{},\"calls\":{}", r.comm_bytes, r.comm_calls);
  append_number(line_, ",\"exposed_s\":", r.comm_exposed_s);
  append_number(line_, ",\"time_s\":", r.comm_time_s);
  append_number(line_, "},\"elapsed_s\":", r.elapsed_s);
  append_number(line_, ",\"grad_norm\":", r.grad_norm);
  if (r.hellaswag_acc) {
    append_number(line_, ",\"hellaswag\":{\"acc\":", *r.hellaswag_acc);
    append_number(line_, ",\"acc_norm\":", r.hellaswag_acc_norm.value_or(0));
    fmt::format_to(out, ",\"examples\":{}}}", r.hellaswag_examples);
  }
  append_number(line_, ",\"loss\":", r.loss);
  append_number(line_, ",\"lr\":", r.lr);
  fmt::format_to(out, ",\"mem\":{{\"activations\":{},\"buffers\":{},\"grads\":{},\"optim\":{},\"params\":{},\"peak\":{}}}",
                 r.mem_activations, r.mem_buffers, r.mem_grads, r.mem_optim, r.mem_params, r.mem_peak);
  append_number(line_, ",\"mfu\":", r.mfu);
  if (r.skipped) fmt::format_to(out, ",\"skipped\":true");
  fmt::format_to(out, ",\"step\":{}", r.step);
  append_number(line_, ",\"step_time_s\":", r.step_time_s);
  append_number(line_, ",\"tokens_per_s\":", r.tokens_per_s);
  if (r.val_loss) append_number(line_, ",\"val_loss\":", *r.val_loss);
  fmt::format_to(out, "}}\n");
  write_line(line_.data(), line_.size());
}

void MetricsWriter::write_line(const char* data, size_t size) {
  errno = 0;
  const bool ok = std::fwrite(data, 1, size, f_) == size && std::fflush(f_) == 0;
  if (ok) return;
  const int err = errno;
  std::clearerr(f_);
  if (!std::exchange(warned_, true))
    spdlog::warn("metrics: writing {} failed: {}; the run goes on, without the records that cannot be written", path_,
                 err ? std::strerror(err) : "a short write");
}

}  // namespace gpt
