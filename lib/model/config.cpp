#include "model/config.hpp"

#include "core/error.hpp"

namespace gpt {

void GPTConfig::validate() const {
  auto require = [](bool ok, const char* key, int value, const char* what) {
    if (!ok) throw ConfigError(fmt::format("invalid {} = {}: {}", key, value, what));
  };
  require(n_layer >= 1, "n_layer", n_layer, "must be >= 1");
  require(n_head >= 1, "n_head", n_head, "must be >= 1");
  require(n_embd >= 1, "n_embd", n_embd, "must be >= 1");
  require(n_embd % n_head == 0, "n_embd", n_embd, "must be a multiple of n_head");
  require(seq_len >= 1, "seq_len", seq_len, "must be >= 1");
  require(vocab_size >= 2 && vocab_size <= 65536, "vocab_size", vocab_size,
          "must be in [2, 65536] (tokens are stored as uint16)");
}

GPTConfig preset(const std::string& name) {
  // {n_layer, n_head, n_embd, seq_len, vocab_size}
  if (name == "tiny") return {4, 4, 128, 128, 256};
  if (name == "gpt2-124m") return {12, 12, 768, 1024, 50257};
  if (name == "gpt2-350m") return {24, 16, 1024, 1024, 50257};
  if (name == "gpt2-774m") return {36, 20, 1280, 1024, 50257};
  if (name == "gpt2-1.5b") return {48, 25, 1600, 1024, 50257};
  throw ConfigError(fmt::format("invalid model = '{}': expected one of tiny, gpt2-124m, gpt2-350m, "
                                "gpt2-774m, gpt2-1.5b", name));
}

std::vector<std::string> preset_names() {
  return {"tiny", "gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b"};
}

std::string model_name(const std::string& name, const GPTConfig& c) {
  return c == preset(name) ? name : name + " (resized)";
}

}  // namespace gpt
