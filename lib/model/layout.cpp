#include "model/layout.hpp"

#include <cmath>

#include <fmt/format.h>

namespace gpt {
namespace {

struct UnitBuilder {
  UnitSpec unit;
  int64_t add(std::string name, std::vector<int64_t> shape, InitKind init, float std, bool decay) {
    TensorSpec t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.numel = 1;
    for (int64_t d : t.shape) t.numel *= d;
    t.init_numel = t.numel;
    t.offset = unit.numel;
    t.init = init;
    t.init_std = std;
    t.decay = decay;
    unit.numel += t.numel;
    unit.tensors.push_back(std::move(t));
    return unit.tensors.back().offset;
  }
};

}  // namespace

ParamLayout::ParamLayout(const GPTConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
  const int64_t C = cfg.n_embd, V = cfg.vocab_size, Vp = cfg.padded_vocab(), T = cfg.seq_len;
  const float std = 0.02f;
  // GPT-2 scales the init of projections that write into the residual stream
  // by 1/sqrt(2 * n_layer): each block adds two such terms.
  const float proj_std = static_cast<float>(0.02 / std::sqrt(2.0 * cfg.n_layer));

  UnitBuilder emb{{"embedding", UnitKind::kEmbedding, -1, {}, 0}};
  emb.add("transformer.wte.weight", {Vp, C}, InitKind::kNormal, std, true);
  emb.unit.tensors.back().init_numel = V * C;
  wpe_off_ = emb.add("transformer.wpe.weight", {T, C}, InitKind::kNormal, std, true);
  units_.push_back(std::move(emb.unit));

  for (int l = 0; l < cfg.n_layer; ++l) {
    UnitBuilder b{{fmt::format("h.{}", l), UnitKind::kBlock, l, {}, 0}};
    auto n = [l](const char* s) { return fmt::format("transformer.h.{}.{}", l, s); };
    BlockOffsets o;
    o.ln1_w = b.add(n("ln_1.weight"), {C}, InitKind::kOnes, 0, false);
    o.ln1_b = b.add(n("ln_1.bias"), {C}, InitKind::kZeros, 0, false);
    o.qkv_w = b.add(n("attn.c_attn.weight"), {3 * C, C}, InitKind::kNormal, std, true);
    o.qkv_b = b.add(n("attn.c_attn.bias"), {3 * C}, InitKind::kZeros, 0, false);
    o.attproj_w = b.add(n("attn.c_proj.weight"), {C, C}, InitKind::kNormal, proj_std, true);
    o.attproj_b = b.add(n("attn.c_proj.bias"), {C}, InitKind::kZeros, 0, false);
    o.ln2_w = b.add(n("ln_2.weight"), {C}, InitKind::kOnes, 0, false);
    o.ln2_b = b.add(n("ln_2.bias"), {C}, InitKind::kZeros, 0, false);
    o.fc_w = b.add(n("mlp.c_fc.weight"), {4 * C, C}, InitKind::kNormal, std, true);
    o.fc_b = b.add(n("mlp.c_fc.bias"), {4 * C}, InitKind::kZeros, 0, false);
    o.fcproj_w = b.add(n("mlp.c_proj.weight"), {C, 4 * C}, InitKind::kNormal, proj_std, true);
    o.fcproj_b = b.add(n("mlp.c_proj.bias"), {C}, InitKind::kZeros, 0, false);
    block_ = o;
    units_.push_back(std::move(b.unit));
  }

  UnitBuilder fin{{"final", UnitKind::kFinal, -1, {}, 0}};
  fin.add("transformer.ln_f.weight", {C}, InitKind::kOnes, 0, false);
  fin.add("transformer.ln_f.bias", {C}, InitKind::kZeros, 0, false);
  units_.push_back(std::move(fin.unit));

  for (const auto& u : units_) total_ += u.numel;
}

int64_t ParamLayout::model_numel() const {
  return total_ - static_cast<int64_t>(cfg_.padded_vocab() - cfg_.vocab_size) * cfg_.n_embd;
}

}  // namespace gpt
