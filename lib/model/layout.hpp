// Parameter layout: every parameter lives in one of a few contiguous flat
// buffers ("units", FSDP's FlatParameter): the embedding unit (wte, wpe), one
// unit per transformer block, and the final unit (ln_f). A unit is the
// granularity of gather/free, gradient reduction and checkpoint fragments.
// Tensor names are nanoGPT's so checkpoints map one-to-one onto PyTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace gpt {

enum class UnitKind { kEmbedding, kBlock, kFinal };
enum class InitKind { kNormal, kZeros, kOnes };

struct TensorSpec {
  std::string name;            // nanoGPT name, e.g. "transformer.h.3.attn.c_attn.weight"
  std::vector<int64_t> shape;  // storage shape (wte: [padded_vocab, C])
  int64_t offset = 0;          // first element inside its unit's flat buffer
  int64_t numel = 0;
  InitKind init = InitKind::kZeros;
  float init_std = 0.f;        // for kNormal
  int64_t init_numel = 0;      // elements [init_numel, numel) are zero (wte's padded rows)
  bool decay = false;          // AdamW weight decay applies (2-D weights only)
};

struct UnitSpec {
  std::string name;  // "embedding", "h.{i}", "final"
  UnitKind kind;
  int layer = -1;    // block index for kBlock
  std::vector<TensorSpec> tensors;
  int64_t numel = 0;
};

// Element offsets of a block's tensors inside the block unit (same for all blocks).
struct BlockOffsets {
  int64_t ln1_w, ln1_b, qkv_w, qkv_b, attproj_w, attproj_b;
  int64_t ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
};

class ParamLayout {
 public:
  explicit ParamLayout(const GPTConfig& cfg);

  const GPTConfig& config() const { return cfg_; }
  const std::vector<UnitSpec>& units() const { return units_; }
  const UnitSpec& unit(size_t i) const { return units_[i]; }
  size_t num_units() const { return units_.size(); }
  size_t embedding_unit() const { return 0; }
  size_t block_unit(int layer) const { return 1 + static_cast<size_t>(layer); }
  size_t final_unit() const { return units_.size() - 1; }

  const BlockOffsets& block_offsets() const { return block_; }
  int64_t wte_offset() const { return 0; }
  int64_t wpe_offset() const { return wpe_off_; }

  // Parameters as stored (wte padded to padded_vocab rows).
  int64_t total_numel() const { return total_; }
  // Parameters of the model proper (wte's padded rows excluded): the Ψ of the
  // memory and communication formulas, and GPT-2's reported sizes.
  int64_t model_numel() const;

 private:
  GPTConfig cfg_;
  std::vector<UnitSpec> units_;
  BlockOffsets block_{};
  int64_t wpe_off_ = 0;
  int64_t total_ = 0;
};

}  // namespace gpt
