#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.hpp"
#include "strategies/arena.hpp"

namespace gpt {
namespace {

class HostArena final : public Arena {
 public:
  explicit HostArena(MemoryTracker* tracker) : tracker_(tracker) {}
  bool on_device() const override { return false; }
  void* allocate(size_t bytes, MemCategory cat, bool zeroed) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    if (zeroed) std::memset(p, 0, rounded);
    if (tracker_) tracker_->add(cat, int64_t(bytes));
    return p;
  }
  void deallocate(void* p, size_t bytes, MemCategory cat) override {
    std::free(p);
    if (tracker_) tracker_->add(cat, -int64_t(bytes));
  }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void convert(void* dst, DType dt, const void* src, DType st, int64_t n) override {
    check(dt, st);
    if (dst != src) std::memcpy(dst, src, size_t(n) * 4);
  }
  void accumulate(void* acc, DType at, const void* src, DType st, int64_t n) override {
    check(at, st);
    float* a = static_cast<float*>(acc);
    const float* s = static_cast<const float*>(src);
    for (int64_t k = 0; k < n; ++k) a[k] += s[k];
  }
  void begin_norm() override { norm_ = 0; }
  void add_squares(const void* x, DType t, int64_t n) override {
    check(t, DType::kF32);
    norm_ += sum_squares(static_cast<const float*>(x), n);
  }
  double end_norm() override { return norm_; }
  void end_norm_to(float* out) override { *out = static_cast<float>(norm_); }
  void adamw(const UnitSpec& unit, int64_t begin, int64_t end, float* master, void* param, DType pt, const void* g,
             DType gt, float* m, float* v, const AdamWHyper& h, const AdamWStep& s) override {
    check(pt, gt);
    GPT_CHECK(param == nullptr, "the host arena keeps no separate compute copy");
    adamw_update(unit, begin, end, master, static_cast<const float*>(g), m, v, h, s);
  }
  void upload(void* dst, DType t, const float* host, int64_t n) override {
    check(t, DType::kF32);
    if (dst != host) std::memcpy(dst, host, size_t(n) * 4);
  }
  void download(float* host, const void* src, DType t, int64_t n) override {
    check(t, DType::kF32);
    if (host != src) std::memcpy(host, src, size_t(n) * 4);
  }

 private:
  static void check(DType a, DType b) {
    GPT_CHECK(a == DType::kF32 && b == DType::kF32, "the host arena is fp32 only ({} / {})", to_string(a),
              to_string(b));
  }
  MemoryTracker* tracker_;
  double norm_ = 0;
};

}  // namespace

std::unique_ptr<Arena> make_host_arena(MemoryTracker* tracker) { return std::make_unique<HostArena>(tracker); }

}  // namespace gpt
