// GPT-2 model shape: presets and overrides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct GPTConfig {
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;
  int seq_len = 0;     // maximum context length (rows of wpe)
  int vocab_size = 0;  // real vocabulary; logits beyond it never enter the loss

  // Vocabulary rounded up to a multiple of 128 so the LM-head GEMM has a
  // friendly shape (50257 -> 50304). Rows >= vocab_size of wte are zero and
  // stay zero: they receive no gradient and decay keeps zero at zero.
  int padded_vocab() const { return (vocab_size + 127) / 128 * 128; }
  int head_dim() const { return n_embd / n_head; }

  // Throws ConfigError naming the field if the shape is not usable.
  void validate() const;
  bool operator==(const GPTConfig&) const = default;
};

// Presets: "tiny" (tests and the default run), "gpt2-124m", "gpt2-350m",
// "gpt2-774m", "gpt2-1.5b". Throws ConfigError for an unknown name.
GPTConfig preset(const std::string& name);
std::vector<std::string> preset_names();
// How logs name a model made from preset `name`: the name when c is that
// preset's shape, else "tiny (resized)" (their lines give the shape), so
// a config that starts from a preset and overrides it is not shown as it.
std::string model_name(const std::string& name, const GPTConfig& c);

}  // namespace gpt
