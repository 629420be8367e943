// GPT-2 byte-level BPE (Radford et al. 2019), reproducing the reference
// encoder's ids exactly:
//  1. pre-tokenise with GPT-2's regex (contractions, letters, numbers, other
//     symbols, whitespace), evaluated by PCRE2 with Unicode properties;
//  2. map each byte of a piece to GPT-2's printable stand-in character;
//  3. merge adjacent symbols by lowest merge rank until none applies;
//  4. look the symbols up in the encoder.
// Accepts encoder.json + vocab.bpe (OpenAI) or vocab.json + merges.txt (the
// same data under Hugging Face's names).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "io/tokenizer.hpp"

namespace gpt {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  using Tokenizer::encode;
  Gpt2Tokenizer(const std::string& vocab_path, const std::string& merges_path);
  ~Gpt2Tokenizer() override;
  Gpt2Tokenizer(const Gpt2Tokenizer&) = delete;
  Gpt2Tokenizer& operator=(const Gpt2Tokenizer&) = delete;

  void encode(std::string_view text, std::vector<int>& out) const override;
  std::string decode(std::span<const int> ids) const override;
  int vocab_size() const override { return static_cast<int>(decoder_.size()); }
  int eot() const override { return eot_; }

 private:
  void bpe_piece(std::string_view piece, std::vector<int>& out) const;

  std::unordered_map<std::string, int> encoder_;
  std::vector<std::string> decoder_;  // id -> raw bytes
  struct Merge {
    int rank;  // lower merges first
    int id;    // the merged token
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  std::array<std::string, 256> byte_sym_;       // byte -> UTF-8 of its stand-in
  std::array<int, 256> byte_id_{};              // byte -> its token
  int eot_ = -1;
  struct Regex;
  std::unique_ptr<Regex> re_;
  uint64_t id_;  // names this tokenizer's entries in the per-thread piece caches (bpe.cpp)
};

}  // namespace gpt
