#include "emulated_bf16.hpp"

#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"

namespace gpt::test {
namespace {

float get(const void* p, DType t, int64_t i) {
  return t == DType::kF32 ? static_cast<const float*>(p)[i] : bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}
void put(void* p, DType t, int64_t i, float x) {
  if (t == DType::kF32) static_cast<float*>(p)[i] = x;
  else static_cast<uint16_t*>(p)[i] = f32_to_bf16(x);
}

class EmuArena final : public Arena {
 public:
  explicit EmuArena(MemoryTracker* tracker) : host_(make_host_arena(tracker)) {}
  bool on_device() const override { return true; }  // exercise the checkpoint staging path too
  // Plain host memory: the host arena's.
  void* allocate(size_t bytes, MemCategory cat, bool zeroed) override { return host_->allocate(bytes, cat, zeroed); }
  void deallocate(void* p, size_t bytes, MemCategory cat) override { host_->deallocate(p, bytes, cat); }
  void zero(void* p, size_t bytes) override { host_->zero(p, bytes); }
  void convert(void* dst, DType dt, const void* src, DType st, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) put(dst, dt, i, get(src, st, i));
  }
  void accumulate(void* acc, DType at, const void* src, DType st, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) put(acc, at, i, get(acc, at, i) + get(src, st, i));
  }
  void begin_norm() override { norm_ = 0; }
  void add_squares(const void* x, DType t, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) norm_ += double(get(x, t, i)) * get(x, t, i);
  }
  double end_norm() override { return norm_; }
  void end_norm_to(float* out) override { *out = static_cast<float>(norm_); }
  void adamw(const UnitSpec& unit, int64_t begin, int64_t end, float* master, void* param, DType pt, const void* g,
             DType gt, float* m, float* v, const AdamWHyper& h, const AdamWStep& s) override {
    std::vector<float> g32(size_t(end - begin));
    for (int64_t i = 0; i < end - begin; ++i) g32[size_t(i)] = get(g, gt, i);
    adamw_update(unit, begin, end, master, g32.data(), m, v, h, s);
    if (param)
      for (int64_t i = 0; i < end - begin; ++i) put(param, pt, i, master[i]);
  }
  void upload(void* dst, DType t, const float* host, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) put(dst, t, i, host[i]);
  }
  void download(float* host, const void* src, DType t, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) host[i] = get(src, t, i);
  }

 private:
  std::unique_ptr<Arena> host_;
  double norm_ = 0;
};

// The host model (make_host_model) on fp32 copies of the bf16 parameters;
// each gradient is widened before the model accumulates into it and
// rounded back after.
class EmuModel final : public UnitModel {
 public:
  EmuModel(const ParamLayout& layout, const GPTOptions& opt, MemoryTracker* tracker)
      : L_(layout), host_(make_host_model(layout, opt, tracker)) {}
  void set_shape(int B, int Tn) override { host_->set_shape(B, Tn); }
  void set_batch(const int32_t* tokens, const int32_t* targets) override { host_->set_batch(tokens, targets); }
  void forward_embedding(const void* emb) override { host_->forward_embedding(wide(E(), emb, 0)); }
  void forward_block(int layer, const void* block) override {
    host_->forward_block(layer, wide(L_.block_unit(layer), block, 0));
  }
  void forward_head(const void* fin, const void* emb, void* emb_grad, float loss_scale) override {
    const float* f = wide(L_.final_unit(), fin, 0);
    const float* e = wide(E(), emb, 1);
    host_->forward_head(f, e, emb_grad ? wide_grad(E(), emb_grad) : nullptr, loss_scale);
    if (emb_grad) narrow_grad(E(), emb_grad);
  }
  double take_loss() override { return host_->take_loss(); }
  void copy_row_losses(int slot) override { host_->copy_row_losses(slot); }
  const float* row_losses_ready(int slot) override { return host_->row_losses_ready(slot); }
  void backward_final(const void* fin, void* fin_grad) override {
    host_->backward_final(wide(L_.final_unit(), fin, 0), wide_grad(L_.final_unit(), fin_grad));
    narrow_grad(L_.final_unit(), fin_grad);
  }
  void backward_block(int layer, const void* block, void* g) override {
    const size_t u = L_.block_unit(layer);
    host_->backward_block(layer, wide(u, block, 0), wide_grad(u, g));
    narrow_grad(u, g);
  }
  void backward_embedding(void* emb_grad) override {
    host_->backward_embedding(wide_grad(E(), emb_grad));
    narrow_grad(E(), emb_grad);
  }
  void logits_row(const void* fin, const void* emb, int64_t row, float* out) override {
    host_->logits_row(wide(L_.final_unit(), fin, 0), wide(E(), emb, 1), row, out);
  }

 private:
  size_t E() const { return L_.embedding_unit(); }
  // fp32 copies of bf16 parameters (slot: two may be live at once).
  const float* wide(size_t u, const void* p, int slot) {
    auto& w = params_[slot];
    w.resize(size_t(L_.unit(u).numel));
    for (size_t i = 0; i < w.size(); ++i) w[i] = bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    return w.data();
  }
  float* wide_grad(size_t u, const void* g) {
    grad_.resize(size_t(L_.unit(u).numel));
    for (size_t i = 0; i < grad_.size(); ++i) grad_[i] = bf16_to_f32(static_cast<const uint16_t*>(g)[i]);
    return grad_.data();
  }
  void narrow_grad(size_t u, void* g) {
    for (int64_t i = 0; i < L_.unit(u).numel; ++i) static_cast<uint16_t*>(g)[i] = f32_to_bf16(grad_[size_t(i)]);
  }
  const ParamLayout& L_;
  std::unique_ptr<UnitModel> host_;
  std::vector<float> params_[2], grad_;
};

class EmuBackend final : public DeviceBackend {
 public:
  explicit EmuBackend(MemoryTracker* tracker) : tracker_(tracker), arena_(tracker) {}
  Arena* arena() override { return &arena_; }
  std::unique_ptr<UnitModel> make_model(const ParamLayout& layout, const GPTOptions& opt) override {
    return std::make_unique<EmuModel>(layout, opt, tracker_);
  }
  void* stream() override { return nullptr; }
  std::string device_name() const override { return "emulated bf16 (host)"; }
  int device_index() const override { return 0; }
  int64_t reserved_bytes() const override { return 0; }

 private:
  MemoryTracker* tracker_;
  EmuArena arena_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_emulated_bf16_backend(MemoryTracker* tracker) {
  return std::make_unique<EmuBackend>(tracker);
}

}  // namespace gpt::test
