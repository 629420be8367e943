// One engine for every strategy. Each unit is sharded over the shard group
// (S ranks) with shard_range(); what differs between strategies is only
// which pieces are persistent and when they are reduced:
//
//            params              grads                      reduction                 optimizer state
//   ddp      full                full                       all-reduce over R, bucketed, on the last micro-batch
//   zero1    full                full (accumulated)         reduce-scatter per unit, last micro-batch; all-gather after
//   zero2    full                shard accumulator          reduce-scatter per unit per micro-batch; all-gather params after
//            (zero1, zero2 on a GPU: the post-step all-gathers are waited for by the unit's next use, so they
//            overlap the next forward; on the host, at the end of the step)
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
//
// Precision and memory (strategies/arena.hpp): the same engine runs on the
// host (fp32: the parameters are their own master weights) and on a GPU,
// where with bf16 parameters each rank also keeps the fp32 master weights of
// the piece it updates (next to m and v, sharded like them), gathers and
// computes in bf16, widens gradients to the reduce dtype before each
// collective, and accumulates sharded gradients in fp32.
#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/shard.hpp"
#include "core/stall_guard.hpp"
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
      : opt_(opt), layout_(layout) {
    if (!opt_.arena) {
      own_arena_ = make_host_arena(tracker);
      opt_.arena = own_arena_.get();
    }
    A_ = opt_.arena;
    pt_ = opt.param_dtype;
    rt_ = opt.reduce_dtype;
    mixed_ = pt_ != DType::kF32;
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

    // Zero-filled until initialise() or a checkpoint's load (owned, after_load) gives them values.
    for (const UnitSpec& spec : layout.units()) {
      Unit u;
      u.sh = shard_range(spec.numel, S_, srank_);
      if (params_sharded_)
        u.param_shard = Block(A_, u.sh.shard_numel, pt_, MemCategory::kParams);
      else
        u.full_param = Block(A_, u.sh.padded_numel, pt_, MemCategory::kParams);
      if (opt.trains) {
        if (mixed_)  // fp32 master of the owned piece: optimizer state, as in ZeRO's accounting
          u.master = Block(A_, u.sh.shard_numel, DType::kF32, MemCategory::kOptim);
        if (grads_sharded_) {
          u.grad_shard = Block(A_, u.sh.shard_numel, DType::kF32, MemCategory::kGrads);
        } else {
          u.full_grad = Block(A_, u.sh.padded_numel, pt_, MemCategory::kGrads);
        }
        u.m = Block(A_, u.sh.shard_numel, DType::kF32, MemCategory::kOptim);
        u.v = Block(A_, u.sh.shard_numel, DType::kF32, MemCategory::kOptim);
      }
      units_.push_back(std::move(u));
    }
    // Room for three transient buffers per unit, the kinds take() hands out
    // (gathered parameters, full gradient, widened gradient), so that give()
    // does not grow the cache inside the hot loop (tests/alloc_audit.sh).
    cache_.reserve(3 * units_.size());
  }

  // In-flight all-gathers write into the units' buffers: they end before the
  // buffers are freed. Not while an error unwinds: a collective it broke may
  // never end, and the run is ending on that error.
  ~DataParallel() override {
    if (std::uncaught_exceptions() > 0) return;
    try {
      settle();
    } catch (const std::exception&) {  // reported by the run's own settle() where it mattered
    }
  }

  StrategyKind kind() const override { return opt_.kind; }

  void settle() override {
    if (params_sharded_) return;  // zero3's gathers are prefetches, ended by params()
    for (Unit& u : units_) wait(u.gather);
  }

  void begin_micro_batch(bool last) override { last_ = last; }

  void prefetch(size_t i) override {
    Unit& u = units_[i];
    if (!params_sharded_ || u.held || u.gather) return;
    u.full_param = take(u.sh.padded_numel, pt_, /*zeroed=*/false);  // the gather writes every element
    u.gather = shard_->all_gather_async(u.param_shard.data(), u.full_param.data(), size_t(u.sh.shard_numel), pt_);
  }

  const void* params(size_t i) override {
    Unit& u = units_[i];
    if (!params_sharded_) wait(u.gather);  // zero1/zero2: the post-step all-gather of this unit
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

  void* grads(size_t i) override {
    training_only("grads");
    Unit& u = units_[i];
    // A reduce-scatter of this unit's previous micro-batch may still be in
    // flight on its full gradient (the embedding's is issued last and needed
    // first, by the tied LM head): finish it before the buffer is reused.
    if (auto it = std::find(pending_.begin(), pending_.end(), i); it != pending_.end()) {
      drain(i);
      pending_.erase(it);
    }
    if (grads_sharded_ && u.full_grad.size() == 0) u.full_grad = take(u.sh.padded_numel, pt_, /*zeroed=*/true);
    return u.full_grad.data();
  }

  void grads_done(size_t i) override {
    training_only("grads_done");
    Unit& u = units_[i];
    if (grads_sharded_) {
      // In place: this rank's reduced piece lands at its own offset.
      Block& buf = reduce_buffer(u);
      u.reduce = shard_->reduce_scatter_async(buf.data(), buf.at(u.sh.begin), size_t(u.sh.shard_numel), rt_,
                                              ReduceOp::kSum);
      u.reduce_is_last = last_;
      pending_.push_back(i);
      // Bound the transient full gradients: finish those already reduced,
      // and never keep more than two in flight.
      while (!pending_.empty() && (pending_.size() > 2 || units_[pending_.front()].reduce->is_completed())) {
        drain(pending_.front());
        pending_.pop_front();
      }
    } else if (zero1_ && last_) {
      // zero1: the accumulated gradient is final once the last micro-batch's
      // backward is done with the unit: its reduce-scatter overlaps the rest
      // of backward, as ddp's all-reduce does (DeepSpeed's overlap_comm).
      Block& buf = reduce_buffer(u);
      u.reduce = shard_->reduce_scatter_async(buf.data(), buf.at(u.sh.begin), size_t(u.sh.shard_numel), rt_,
                                              ReduceOp::kSum);
    } else if (!shard_ && rep_ && last_) {
      // ddp: bucket units in backward order; a full bucket is all-reduced
      // at once, asynchronously, while the rest of backward runs.
      bucket_.push_back(i);
      bucket_bytes_ += double(u.sh.padded_numel) * double(dtype_size(rt_));
      if (bucket_bytes_ >= opt_.bucket_mb * (1 << 20)) flush_bucket();
    }
  }

  void finish_gradient_sync() override {
    training_only("finish_gradient_sync");
    flush_bucket();
    for (Unit& u : units_) wait(u.reduce);
    while (!pending_.empty()) {
      drain(pending_.front());
      pending_.pop_front();
    }
    for (Unit& u : units_) wait(u.replicate);  // hybrid: issued by drain() during backward
  }

  double grad_norm() override {
    training_only("grad_norm");
    A_->begin_norm();
    for (Unit& u : units_) {
      auto [g, t] = reduced_grad(u);
      A_->add_squares(g, t, u.sh.valid());
    }
    if (!shard_) return std::sqrt(A_->end_norm());
    // Each element is owned by exactly one rank of the shard group; replicas
    // are not added. The local sums are added where they are (a GPU
    // communicator reduces device memory), then read once: one host wait.
    if (!norm_buf_.size()) norm_buf_ = Block(A_, 1, DType::kF32, MemCategory::kScratch);
    A_->end_norm_to(norm_buf_.f32());
    shard_->all_reduce(norm_buf_.data(), norm_buf_.data(), 1, DType::kF32, ReduceOp::kSum);
    float x = 0;
    A_->download(&x, norm_buf_.data(), DType::kF32, 1);
    return std::sqrt(double(x));
  }

  void step(const AdamWHyper& h, const AdamWStep& s) override {
    training_only("step");
    settle();  // every unit's was waited for by its use in forward; this is for a step without one
    for (size_t i = 0; i < units_.size(); ++i) {
      Unit& u = units_[i];
      void* piece = owned_piece(u);
      float* master = mixed_ ? u.master.f32() : static_cast<float*>(piece);
      auto [g, gt] = reduced_grad(u);
      A_->adamw(layout_.unit(i), u.sh.begin, u.sh.valid_end, master, mixed_ ? piece : nullptr, pt_, g, gt,
                u.m.f32(), u.v.f32(), h, s);
    }
    gather_replicated_params();
    discard_gradients();
  }

  void discard_gradients() override {
    training_only("discard_gradients");
    for (Unit& u : units_) {
      (grads_sharded_ ? u.grad_shard : u.full_grad).zero();
      give(u.red);
    }
  }

  // Each rank computes the initial values of its part of the owned piece
  // (replica_part: 1/R of it), puts zeros in the rest, and the replicas sum
  // the piece: every element is one rank's value plus zeros, so exact, and
  // the same bits as every rank computing all of it, R times faster (under
  // ddp R is the world: the whole model on each rank before). Then the
  // replicated parameters are gathered as after a load (zero1, zero2).
  void initialise() override {
    for (size_t i = 0; i < units_.size(); ++i) {
      Unit& u = units_[i];
      const auto [lo, hi] = replica_part(u);
      std::vector<float> init(size_t(u.sh.shard_numel), 0.f);
      init_unit_range(layout_.unit(i), opt_.seed, lo, hi, init.data() + (lo - u.sh.begin));
      // The master weights where there are any (bf16 training), narrowed into the compute copy as a load's are.
      void* dst = u.master.size() ? u.master.data() : owned_piece(u);
      const DType t = u.master.size() ? DType::kF32 : pt_;
      A_->upload(dst, t, init.data(), u.sh.shard_numel);
      if (rep_) rep_->all_reduce(dst, dst, size_t(u.sh.shard_numel), t, ReduceOp::kSum);
      if (u.master.size()) A_->convert(owned_piece(u), pt_, u.master.data(), DType::kF32, u.sh.shard_numel);
      // The caller's StallGuard bounds progress, not the whole: a large model's initial values take long, each
      // unit's do not.
      note_progress("the initial values of unit " + layout_.unit(i).name);
    }
    gather_replicated_params();
  }

  UnitSlice owned(size_t i, OwnedFor use) override {
    Unit& u = units_[i];
    UnitSlice s;
    s.begin = u.sh.begin;
    s.end = u.sh.valid_end;
    if (rep_) std::tie(s.write_begin, s.write_end) = replica_part(u);
    void* state[3];
    DType type[3];
    const int parts = owned_state(u, state, type);
    if (A_->on_device()) {
      // Checkpoints read and write host memory: host copies of the owned
      // state, for a save of the write range alone (then the slice, in copies of it).
      const bool save = use == OwnedFor::kSave;
      if (save) {
        s = s.written_part();
        s.detached = true;
      }
      const int64_t n = save ? s.end - s.begin : u.sh.shard_numel;
      std::vector<Buffer<float>>& host = save ? u.save_host : u.host;
      if (host.empty())
        for (int g = 0; g < parts; ++g)
          host.emplace_back(size_t(std::max<int64_t>(n, 1)), MemCategory::kScratch, nullptr);
      for (int g = 0; g < parts; ++g) {
        const char* src = static_cast<const char*>(state[g]) + size_t(s.begin - u.sh.begin) * dtype_size(type[g]);
        if (n > 0 && use != OwnedFor::kLoad)  // a load's read fills them; the padding goes up as zeros
          A_->download(host[g].data(), src, type[g], n);
        state[g] = host[g].data();
      }
    }
    // Host memory (the host arena's, or the copies above) is fp32.
    for (int g = 0; g < parts; ++g) s.state[g] = static_cast<float*>(state[g]);
    return s;
  }

  void after_load() override {
    for (Unit& u : units_) {
      if (A_->on_device() && !u.host.empty()) {
        void* state[3];
        DType type[3];
        const int parts = owned_state(u, state, type);
        for (int g = 0; g < parts; ++g) A_->upload(state[g], type[g], u.host[g].data(), u.sh.shard_numel);
        u.host.clear();  // the read's copies: a save makes its own, of its write range
      }
      if (u.master.size())  // the compute copy of the owned piece from the loaded master
        A_->convert(owned_piece(u), pt_, u.master.data(), DType::kF32, u.sh.shard_numel);
    }
    gather_replicated_params();
  }

  void discard_load() override {
    for (Unit& u : units_) u.host.clear();
  }

  void gather_full(size_t i, float* out) override {
    Unit& u = units_[i];
    const int64_t n = layout_.unit(i).numel;
    if (params_sharded_) {
      Block full(A_, u.sh.padded_numel, pt_, MemCategory::kScratch, false);
      shard_->all_gather(u.param_shard.data(), full.data(), size_t(u.sh.shard_numel), pt_);
      A_->download(out, full.data(), pt_, n);
    } else {
      wait(u.gather);
      A_->download(out, u.full_param.data(), pt_, n);
    }
  }

 private:
  struct Unit {
    ShardRange sh;
    // param_shard / full_param / full_grad: pt_; master, grad_shard, m, v: fp32; red: rt_.
    Block full_param, param_shard, master, full_grad, grad_shard, red, m, v;
    // Device arenas: host copies of master, m, v for a checkpoint's read
    // (the owned piece, until after_load) and for its saves (the write range).
    std::vector<Buffer<float>> host, save_host;
    WorkPtr gather, reduce, replicate;
    bool held = false;            // full_param gathered (params_sharded_ only)
    bool reduce_is_last = false;  // the in-flight reduce-scatter is the step's last micro-batch
  };

  // The R replicas of the owned piece (ddp's ranks, hybrid's groups) hold
  // the same values: this rank's r-th of R parts of its valid elements
  // [begin, end), the part it writes of them (so a checkpoint's write is
  // spread over every rank, not the whole model from rank 0 under ddp) and
  // computes their initial values for; the whole piece without replicas.
  std::pair<int64_t, int64_t> replica_part(const Unit& u) const {
    if (!rep_) return {u.sh.begin, u.sh.valid_end};
    const int64_t n = u.sh.valid();
    const ShardRange part = shard_range(n, rep_->size(), rep_->rank());
    const int64_t begin = u.sh.begin + std::min(part.begin, n);  // a part wholly in the padding is empty
    return {begin, begin + part.valid()};
  }

  // The compute copy (pt_) of the piece this rank owns and updates.
  void* owned_piece(Unit& u) { return params_sharded_ ? u.param_shard.data() : u.full_param.at(u.sh.begin); }
  // What a checkpoint holds of the owned piece, in arena memory, and its types; returns how many (3, or 1 for an
  // evaluation-only strategy: the parameters alone). The parameters are the fp32 master weights where there are
  // any (bf16 training), else the compute copy itself (fp32; or an evaluation's bf16, widened and narrowed on the
  // way to and from the host).
  int owned_state(Unit& u, void* state[3], DType type[3]) {
    state[0] = u.master.size() ? u.master.data() : owned_piece(u);
    type[0] = u.master.size() ? DType::kF32 : pt_;
    state[1] = u.m.data();
    state[2] = u.v.data();
    type[1] = type[2] = DType::kF32;
    return opt_.trains ? 3 : 1;
  }

  // A training call on an evaluation-only strategy (StrategyOptions::trains):
  // a bug in the caller, which would otherwise write through null gradients.
  void training_only(const char* call) const {
    if (!opt_.trains) throw std::logic_error(std::string("Strategy::") + call + " on an evaluation-only strategy");
  }

  // The full gradient in the reduce dtype: the gradient buffer itself when
  // the types match, else a widened (or narrowed) transient copy, u.red.
  Block& reduce_buffer(Unit& u) {
    if (rt_ == pt_) return u.full_grad;
    u.red = take(u.sh.padded_numel, rt_, /*zeroed=*/false);
    A_->convert(u.red.data(), rt_, u.full_grad.data(), pt_, u.sh.padded_numel);
    return u.red;
  }

  // The reduced gradient this rank owns (valid after finish_gradient_sync).
  std::pair<const void*, DType> reduced_grad(Unit& u) {
    if (grads_sharded_) return {u.grad_shard.data(), DType::kF32};
    if (u.red.size()) return {u.red.at(u.sh.begin), rt_};
    return {u.full_grad.at(u.sh.begin), pt_};
  }

  // zero1/zero2: each rank updated (or loaded) only its shard of the
  // replicated parameters; every rank needs the whole model. In place, so
  // the owned piece they send is not written meanwhile (the next write is
  // the next step's, after settle()). On a GPU they are waited for where
  // the unit is next read (params, gather_full): the compute stream waits
  // for each unit's, so they overlap the next forward. On the host they end
  // the step: there the progress threads share the cores with the compute,
  // and waiting in forward exposed more of zero1's step (README, Planner).
  void gather_replicated_params() {
    if (params_sharded_ || !shard_) return;
    for (Unit& u : units_)
      u.gather = shard_->all_gather_async(u.full_param.at(u.sh.begin), u.full_param.data(), size_t(u.sh.shard_numel),
                                          pt_);
    if (!A_->on_device()) settle();
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
    Block& src = u.red.size() ? u.red : u.full_grad;
    A_->accumulate(u.grad_shard.data(), DType::kF32, src.at(u.sh.begin), src.dtype(), u.sh.shard_numel);
    give(u.full_grad);
    give(u.red);
    // hybrid: once the last micro-batch's piece is in, the owned shard is
    // summed over the replicas, overlapping the rest of backward.
    if (rep_ && u.reduce_is_last)
      u.replicate = rep_->all_reduce_async(u.grad_shard.data(), u.grad_shard.data(), size_t(u.sh.shard_numel),
                                           DType::kF32, ReduceOp::kSum);
  }

  // Transient full-unit buffers (gathered params, unit gradients, widened
  // gradients) are reused rather than reallocated: every block unit has the
  // same size, so after the first step the hot loop allocates nothing.
  // Cached buffers stay counted in mem.buffers, since this rank keeps them.
  Block take(int64_t n, DType t, bool zeroed) {
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->size() != n || it->dtype() != t) continue;
      Block b = std::move(*it);
      cache_.erase(it);
      if (zeroed) b.zero();
      return b;
    }
    return Block(A_, n, t, MemCategory::kBuffers, zeroed);
  }
  void give(Block& b) {
    if (b.size()) cache_.push_back(std::move(b));
    b = Block();
  }

  void flush_bucket() {
    for (size_t i : bucket_) {
      Unit& u = units_[i];
      Block& buf = reduce_buffer(u);
      u.reduce = rep_->all_reduce_async(buf.data(), buf.data(), size_t(u.sh.padded_numel), rt_, ReduceOp::kSum);
    }
    bucket_.clear();
    bucket_bytes_ = 0;
  }

  StrategyOptions opt_;
  const ParamLayout& layout_;
  std::unique_ptr<Arena> own_arena_;  // the host arena when none was given
  Arena* A_ = nullptr;
  DType pt_ = DType::kF32, rt_ = DType::kF32;
  bool mixed_ = false;
  Communicator* shard_ = nullptr;  // null when S == 1
  Communicator* rep_ = nullptr;    // null when R == 1
  int S_ = 1, srank_ = 0;
  bool params_sharded_ = false, grads_sharded_ = false, zero1_ = false, last_ = true;
  std::vector<Unit> units_;
  std::deque<size_t> pending_;  // units with a reduce-scatter in flight, oldest first
  std::vector<size_t> bucket_;
  double bucket_bytes_ = 0;
  std::vector<Block> cache_;  // released transient buffers, see take()
  Block norm_buf_;            // one float: the global norm's all-reduce
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
