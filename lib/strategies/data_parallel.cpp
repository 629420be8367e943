// One engine for every strategy. Each unit is sharded over the shard group
// (S ranks) with shard_range(); what differs between strategies is only
// which pieces are persistent and when they are reduced:
//
//            params              grads                      reduction                 optimizer state
//   ddp      full                full                       all-reduce over R, bucketed, on the last micro-batch
//   zero1    full                full (accumulated)         one reduce-scatter per step; all-gather params after
//   zero2    full                shard accumulator          reduce-scatter per unit per micro-batch; all-gather params after
//   zero3    shard (+gathered)   shard accumulator          all-gather per unit in forward and backward; reduce-scatter per unit
//   hybrid   zero3 or zero2 inside the shard group (S), plus an all-reduce of the owned gradient shard across the
//            R replicas, issued per unit as soon as its last reduce-scatter lands (overlapping backward)
//
// ddp is the S = 1 case (the whole world replicates), zero* the R = 1 case,
// so degenerate hybrid meshes (1xN, Nx1) take exactly those code paths.
//
// Gradient accumulation: ddp and zero1 accumulate full gradients locally and
// communicate once per step (like no_sync). zero2/zero3 reduce-scatter every
// micro-batch into the sharded accumulator instead: keeping full gradients
// across micro-batches would cost the 4Ψ bytes those strategies exist to save.
#include <algorithm>
#include <cmath>
#include <deque>

#include "core/error.hpp"
#include "core/shard.hpp"
#include "model/init.hpp"
#include "strategies/strategy.hpp"

namespace gpt {

std::string to_string(StrategyKind s) {
  switch (s) {
    case StrategyKind::kDdp: return "ddp";
    case StrategyKind::kZero1: return "zero1";
    case StrategyKind::kZero2: return "zero2";
    case StrategyKind::kZero3: return "zero3";
    case StrategyKind::kHybrid: return "hybrid";
  }
  return "?";
}

StrategyKind parse_strategy(const std::string& s) {
  for (auto k : {StrategyKind::kDdp, StrategyKind::kZero1, StrategyKind::kZero2, StrategyKind::kZero3,
                 StrategyKind::kHybrid})
    if (to_string(k) == s) return k;
  throw ConfigError(fmt::format("invalid strategy = '{}': expected ddp, zero1, zero2, zero3 or hybrid", s));
}

ShardingRule sharding_rule(StrategyKind kind, StrategyKind hybrid_inner, int shard_size) {
  const StrategyKind inner = kind == StrategyKind::kHybrid ? hybrid_inner : kind;
  ShardingRule r;
  r.params_sharded = shard_size > 1 && inner == StrategyKind::kZero3;
  r.grads_sharded = shard_size > 1 && (inner == StrategyKind::kZero2 || inner == StrategyKind::kZero3);
  r.zero1 = shard_size > 1 && inner == StrategyKind::kZero1;
  return r;
}

namespace {

class DataParallel final : public Strategy {
 public:
  DataParallel(const StrategyOptions& opt, const ParamLayout& layout, DeviceMesh2D& mesh, MemoryTracker* tracker)
      : opt_(opt), layout_(layout), tracker_(tracker) {
    const bool hybrid = opt.kind == StrategyKind::kHybrid;
    if (opt.kind == StrategyKind::kDdp) {
      rep_ = &mesh.world();
    } else if (hybrid) {
      shard_ = &mesh.shard_group();
      rep_ = &mesh.replicate_group();
    } else {
      shard_ = &mesh.world();
    }
    if (shard_ && shard_->size() == 1) shard_ = nullptr;
    if (rep_ && rep_->size() == 1) rep_ = nullptr;
    S_ = shard_ ? shard_->size() : 1;
    srank_ = shard_ ? shard_->rank() : 0;
    const ShardingRule rule = sharding_rule(opt.kind, opt.hybrid_inner, S_);
    params_sharded_ = rule.params_sharded;
    grads_sharded_ = rule.grads_sharded;
    zero1_ = rule.zero1;

    for (const UnitSpec& spec : layout.units()) {
      Unit u;
      u.sh = shard_range(spec.numel, S_, srank_);
      if (params_sharded_) {
        // Each rank materialises only its shard: the full model never exists.
        u.param_shard = Buffer<float>(u.sh.shard_numel, MemCategory::kParams, tracker);
        init_unit_range(spec, opt.seed, u.sh.begin, u.sh.valid_end, u.param_shard.data());
      } else {
        u.full_param = Buffer<float>(u.sh.padded_numel, MemCategory::kParams, tracker);
        init_unit(spec, opt.seed, u.full_param.data());
      }
      if (grads_sharded_) {
        u.grad_shard = Buffer<float>(u.sh.shard_numel, MemCategory::kGrads, tracker);
      } else {
        u.full_grad = Buffer<float>(u.sh.padded_numel, MemCategory::kGrads, tracker);
      }
      u.m = Buffer<float>(u.sh.shard_numel, MemCategory::kOptim, tracker);
      u.v = Buffer<float>(u.sh.shard_numel, MemCategory::kOptim, tracker);
      units_.push_back(std::move(u));
    }
  }

  StrategyKind kind() const override { return opt_.kind; }

  void begin_micro_batch(bool last) override { last_ = last; }

  void prefetch(size_t i) override {
    Unit& u = units_[i];
    if (!params_sharded_ || u.held || u.gather) return;
    u.full_param = take(u.sh.padded_numel, /*zeroed=*/false);  // the gather writes every element
    u.gather = shard_->all_gather_async(u.param_shard.data(), u.full_param.data(), size_t(u.sh.shard_numel),
                                        DType::kF32);
  }

  const float* params(size_t i) override {
    Unit& u = units_[i];
    if (params_sharded_ && !u.held) {
      prefetch(i);
      u.gather->wait();
      u.gather.reset();
      u.held = true;
    }
    return u.full_param.data();
  }

  void release(size_t i) override {
    Unit& u = units_[i];
    if (!params_sharded_ || !u.held) return;
    give(u.full_param);
    u.held = false;
  }

  float* grads(size_t i) override {
    Unit& u = units_[i];
    // A reduce-scatter of this unit's previous micro-batch may still be in
    // flight on its full gradient (the embedding's is issued last and needed
    // first, by the tied LM head): finish it before the buffer is reused.
    if (auto it = std::find(pending_.begin(), pending_.end(), i); it != pending_.end()) {
      drain(i);
      pending_.erase(it);
    }
    if (grads_sharded_ && u.full_grad.size() == 0) u.full_grad = take(u.sh.padded_numel, /*zeroed=*/true);
    return u.full_grad.data();
  }

  void grads_done(size_t i) override {
    Unit& u = units_[i];
    if (grads_sharded_) {
      // In place: this rank's reduced piece lands at its own offset.
      u.reduce = shard_->reduce_scatter_async(u.full_grad.data(), u.full_grad.data() + u.sh.begin,
                                              size_t(u.sh.shard_numel), DType::kF32, ReduceOp::kSum);
      u.reduce_is_last = last_;
      pending_.push_back(i);
      // Bound the transient full gradients: finish those already reduced,
      // and never keep more than two in flight.
      while (!pending_.empty() && (pending_.size() > 2 || units_[pending_.front()].reduce->is_completed())) {
        drain(pending_.front());
        pending_.pop_front();
      }
    } else if (!shard_ && rep_ && last_) {
      // ddp: bucket units in backward order; a full bucket is all-reduced
      // at once, asynchronously, while the rest of backward runs.
      bucket_.push_back(i);
      bucket_bytes_ += double(u.sh.padded_numel) * 4;
      if (bucket_bytes_ >= opt_.bucket_mb * (1 << 20)) flush_bucket();
    }
  }

  void finish_gradient_sync() override {
    flush_bucket();
    for (Unit& u : units_) wait(u.reduce);
    while (!pending_.empty()) {
      drain(pending_.front());
      pending_.pop_front();
    }
    if (zero1_) {
      for (Unit& u : units_)
        u.reduce = shard_->reduce_scatter_async(u.full_grad.data(), u.full_grad.data() + u.sh.begin,
                                                size_t(u.sh.shard_numel), DType::kF32, ReduceOp::kSum);
      for (Unit& u : units_) wait(u.reduce);
    }
    for (Unit& u : units_) wait(u.replicate);  // hybrid: issued by drain() during backward
  }

  double grad_norm() override {
    double local = 0;
    for (Unit& u : units_) local += sum_squares(grad_shard_ptr(u), u.sh.valid());
    if (shard_) {  // each element is owned by exactly one rank of the shard group; replicas are not added
      float x = static_cast<float>(local);
      shard_->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum);
      local = x;
    }
    return std::sqrt(local);
  }

  void step(const AdamWHyper& h, const AdamWStep& s) override {
    for (size_t i = 0; i < units_.size(); ++i) {
      Unit& u = units_[i];
      float* p = params_sharded_ ? u.param_shard.data() : u.full_param.data() + u.sh.begin;
      adamw_update(layout_.unit(i), u.sh.begin, u.sh.valid_end, p, grad_shard_ptr(u), u.m.data(), u.v.data(), h, s);
    }
    gather_replicated_params();
    for (Unit& u : units_) (grads_sharded_ ? u.grad_shard : u.full_grad).fill(0.f);
  }

  UnitSlice owned(size_t i) override {
    Unit& u = units_[i];
    UnitSlice s;
    s.begin = u.sh.begin;
    s.end = u.sh.valid_end;
    s.state[0] = params_sharded_ ? u.param_shard.data() : u.full_param.data() + u.sh.begin;
    s.state[1] = u.m.data();
    s.state[2] = u.v.data();
    s.canonical = !rep_ || rep_->rank() == 0;  // one replica's partition is written
    return s;
  }

  void after_load() override { gather_replicated_params(); }

  void gather_full(size_t i, float* out) override {
    Unit& u = units_[i];
    const int64_t n = layout_.unit(i).numel;
    if (params_sharded_) {
      Buffer<float> full(u.sh.padded_numel, MemCategory::kScratch, nullptr);
      shard_->all_gather(u.param_shard.data(), full.data(), size_t(u.sh.shard_numel), DType::kF32);
      std::copy(full.data(), full.data() + n, out);
    } else {
      std::copy(u.full_param.data(), u.full_param.data() + n, out);
    }
  }

 private:
  struct Unit {
    ShardRange sh;
    Buffer<float> full_param, param_shard, full_grad, grad_shard, m, v;
    WorkPtr gather, reduce, replicate;
    bool held = false;            // full_param gathered (params_sharded_ only)
    bool reduce_is_last = false;  // the in-flight reduce-scatter is the step's last micro-batch
  };

  // The reduced gradient this rank owns (valid after finish_gradient_sync).
  float* grad_shard_ptr(Unit& u) { return grads_sharded_ ? u.grad_shard.data() : u.full_grad.data() + u.sh.begin; }

  // zero1/zero2: each rank updated (or loaded) only its shard of the
  // replicated parameters; every rank needs the whole model.
  void gather_replicated_params() {
    if (params_sharded_ || !shard_) return;
    for (Unit& u : units_)
      u.reduce = shard_->all_gather_async(u.full_param.data() + u.sh.begin, u.full_param.data(),
                                          size_t(u.sh.shard_numel), DType::kF32);
    for (Unit& u : units_) wait(u.reduce);
  }

  static void wait(WorkPtr& w) {
    if (w) w->wait();
    w.reset();
  }

  // Completes unit i's reduce-scatter: add its piece to the accumulator and
  // free the full gradient.
  void drain(size_t i) {
    Unit& u = units_[i];
    wait(u.reduce);
    const float* src = u.full_grad.data() + u.sh.begin;
    float* acc = u.grad_shard.data();
    for (int64_t k = 0; k < u.sh.shard_numel; ++k) acc[k] += src[k];
    give(u.full_grad);
    // hybrid: once the last micro-batch's piece is in, the owned shard is
    // summed over the replicas, overlapping the rest of backward.
    if (rep_ && u.reduce_is_last)
      u.replicate = rep_->all_reduce_async(acc, acc, size_t(u.sh.shard_numel), DType::kF32, ReduceOp::kSum);
  }

  // Transient full-unit buffers (gathered params, unit gradients) are reused
  // rather than reallocated: every block unit has the same size, so after
  // the first step the hot loop allocates nothing. Cached buffers stay
  // counted in mem.buffers, since this rank keeps holding them.
  Buffer<float> take(int64_t n, bool zeroed) {
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (int64_t(it->size()) != n) continue;
      Buffer<float> b = std::move(*it);
      cache_.erase(it);
      if (zeroed) b.fill(0.f);
      return b;
    }
    return Buffer<float>(size_t(n), MemCategory::kBuffers, tracker_);  // zero-initialised
  }
  void give(Buffer<float>& b) {
    if (b.size()) cache_.push_back(std::move(b));
    b = Buffer<float>();
  }

  void flush_bucket() {
    for (size_t i : bucket_) {
      Unit& u = units_[i];
      u.reduce = rep_->all_reduce_async(u.full_grad.data(), u.full_grad.data(), size_t(u.sh.padded_numel),
                                        DType::kF32, ReduceOp::kSum);
    }
    bucket_.clear();
    bucket_bytes_ = 0;
  }

  StrategyOptions opt_;
  const ParamLayout& layout_;
  MemoryTracker* tracker_;
  Communicator* shard_ = nullptr;  // null when S == 1
  Communicator* rep_ = nullptr;    // null when R == 1
  int S_ = 1, srank_ = 0;
  bool params_sharded_ = false, grads_sharded_ = false, zero1_ = false, last_ = true;
  std::vector<Unit> units_;
  std::deque<size_t> pending_;  // units with a reduce-scatter in flight, oldest first
  std::vector<size_t> bucket_;
  double bucket_bytes_ = 0;
  std::vector<Buffer<float>> cache_;  // released transient buffers, see take()
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& opt, const ParamLayout& layout, DeviceMesh2D& mesh,
                                        MemoryTracker* tracker) {
  if (opt.kind == StrategyKind::kHybrid && opt.hybrid_inner != StrategyKind::kZero2 &&
      opt.hybrid_inner != StrategyKind::kZero3) {
    throw ConfigError(fmt::format("invalid hybrid-inner = '{}': expected zero2 or zero3", to_string(opt.hybrid_inner)));
  }
  return std::make_unique<DataParallel>(opt, layout, mesh, tracker);
}

}  // namespace gpt
