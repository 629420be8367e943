// Where a strategy's unit state lives, and the element-wise math the engine
// does on it (data_parallel.cpp): the host (fp32, the CPU path) or a GPU
// (fp32 or bf16 compute copies with fp32 master weights, the CUDA path).
// The engine decides *what* is gathered, reduced, accumulated and updated;
// the arena only knows *how* on its kind of memory.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "comm/communicator.hpp"
#include "core/memory.hpp"
#include "model/adamw.hpp"
#include "model/layout.hpp"

namespace gpt {

class Arena {
 public:
  virtual ~Arena() = default;
  virtual bool on_device() const = 0;
  // Zero-initialised when `zeroed`; counted in the tracker under `cat`.
  virtual void* allocate(size_t bytes, MemCategory cat, bool zeroed) = 0;
  virtual void deallocate(void* p, size_t bytes, MemCategory cat) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  // dst[i] = src[i] with a type conversion (a copy when the types match).
  virtual void convert(void* dst, DType dt, const void* src, DType st, int64_t n) = 0;
  // acc[i] += src[i] (in fp32).
  virtual void accumulate(void* acc, DType at, const void* src, DType st, int64_t n) = 0;
  // Sum of squares of every range added since begin_norm(), in double, in a
  // fixed order (deterministic). end_norm() waits for the device;
  // end_norm_to() does not: it writes the sum rounded to fp32 into `out`
  // (arena memory), for a collective to add the shard group's sums before
  // one wait reads the total.
  virtual void begin_norm() = 0;
  virtual void add_squares(const void* x, DType t, int64_t n) = 0;
  virtual double end_norm() = 0;
  virtual void end_norm_to(float* out) = 0;
  // AdamW over elements [begin, end) of `unit` (pointers at `begin`): fp32
  // master, m, v; gradient g of type gt; `param` (type pt) receives the new
  // value when the compute copy is not the master itself (else nullptr).
  virtual void adamw(const UnitSpec& unit, int64_t begin, int64_t end, float* master, void* param, DType pt,
                     const void* g, DType gt, float* m, float* v, const AdamWHyper& h, const AdamWStep& s) = 0;
  // Host fp32 <-> arena memory of type t (set-up, checkpoints: not the hot loop).
  virtual void upload(void* dst, DType t, const float* host, int64_t n) = 0;
  virtual void download(float* host, const void* src, DType t, int64_t n) = 0;
};

// The host arena: fp32 only, plain memory (64-byte aligned, like Buffer).
std::unique_ptr<Arena> make_host_arena(MemoryTracker* tracker);

// An owning array of n elements of `t` in an arena. Move-only.
class Block {
 public:
  Block() = default;
  Block(Arena* arena, int64_t n, DType t, MemCategory cat, bool zeroed = true)
      : arena_(arena), n_(n), t_(t), cat_(cat) {
    if (n > 0) p_ = arena_->allocate(bytes(), cat, zeroed);
  }
  ~Block() { reset(); }
  Block(Block&& o) noexcept { *this = std::move(o); }
  Block& operator=(Block&& o) noexcept {
    if (this != &o) {
      reset();
      arena_ = o.arena_;
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      t_ = o.t_;
      cat_ = o.cat_;
    }
    return *this;
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  void* data() { return p_; }
  const void* data() const { return p_; }
  // Address of element i.
  void* at(int64_t i) { return static_cast<char*>(p_) + i * int64_t(dtype_size(t_)); }
  float* f32() { return static_cast<float*>(p_); }  // only for kF32 blocks
  int64_t size() const { return n_; }
  DType dtype() const { return t_; }
  size_t bytes() const { return size_t(n_) * dtype_size(t_); }
  void zero() {
    if (p_) arena_->zero(p_, bytes());
  }
  void reset() {
    if (p_) arena_->deallocate(p_, bytes(), cat_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  Arena* arena_ = nullptr;
  void* p_ = nullptr;
  int64_t n_ = 0;
  DType t_ = DType::kF32;
  MemCategory cat_ = MemCategory::kScratch;
};

}  // namespace gpt
