#include "strategies/unit_model.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/flops.hpp"

namespace gpt {
namespace {

class HostModel final : public UnitModel {
 public:
  HostModel(const ParamLayout& layout, const GPTOptions& opt, MemoryTracker* tracker) : m_(layout, opt, tracker) {}
  void set_shape(int B, int Tn) override { m_.set_shape(B, Tn); }
  void set_batch(const int32_t* tokens, const int32_t* targets) override {
    tokens_ = tokens;
    targets_ = targets;
  }
  void forward_embedding(const void* emb) override { m_.forward_embedding(f(emb), tokens_); }
  void forward_block(int layer, const void* block) override { m_.forward_block(layer, f(block)); }
  void forward_head(const void* fin, const void* emb, void* emb_grad, float loss_scale) override {
    loss_sum_ += m_.forward_head(f(fin), f(emb), targets_, static_cast<float*>(emb_grad), loss_scale);
    ++loss_calls_;
  }
  double take_loss() override {
    const double mean = loss_calls_ ? loss_sum_ / loss_calls_ : 0.0;
    loss_sum_ = 0;
    loss_calls_ = 0;
    return mean;
  }
  void copy_row_losses(int slot) override {
    const float* l = m_.row_losses();
    row_slots_[slot].assign(l, l + int64_t(m_.batch()) * m_.seq());
  }
  const float* row_losses_ready(int slot) override { return row_slots_[slot].data(); }
  void backward_final(const void* fin, void* fin_grad) override {
    m_.backward_final(f(fin), static_cast<float*>(fin_grad));
  }
  void backward_block(int layer, const void* block, void* g) override {
    m_.backward_block(layer, f(block), static_cast<float*>(g));
  }
  void backward_embedding(void* emb_grad) override { m_.backward_embedding(tokens_, static_cast<float*>(emb_grad)); }
  void logits_row(const void* fin, const void* emb, int64_t row, float* out) override {
    m_.logits_row(f(fin), f(emb), row, out);
  }
  bool set_decode(int pos) override {
    m_.set_decode(pos);
    return true;
  }

 private:
  static const float* f(const void* p) { return static_cast<const float*>(p); }
  GPT<float> m_;
  const int32_t* tokens_ = nullptr;
  const int32_t* targets_ = nullptr;
  double loss_sum_ = 0;  // sum of per-batch means: every batch has B*T rows
  int loss_calls_ = 0;
  std::vector<float> row_slots_[2];  // copy_row_losses
};

}  // namespace

std::unique_ptr<UnitModel> make_host_model(const ParamLayout& layout, const GPTOptions& opt, MemoryTracker* tracker) {
  return std::make_unique<HostModel>(layout, opt, tracker);
}

double RankGpu::peak_flops(bool bf16) const { return gpu_peak_flops(name, bf16, sms) / ranks; }

#ifndef GPT_HAVE_CUDA
std::unique_ptr<DeviceBackend> make_device_backend(const std::optional<RankGpu>&, bool, DType, MemoryTracker*) {
  throw ConfigError("invalid device = 'cuda': this build has no CUDA (configure with a CUDA toolkit present)");
}
std::optional<RankGpu> rank_gpu(MPI_Comm) { return std::nullopt; }
#endif

}  // namespace gpt
