// The data-parallel strategy: owns the storage of parameters, gradients and
// optimizer state, and decides what is gathered, reduced and freed, and when.
// The trainer drives it unit by unit; the model never sees it, and it never
// computes layer math.
//
// Call sequence for one micro-batch (the trainer's loop, strategies/trainer.cpp):
//   forward:   params(u) for each unit, release(u) when the unit is done
//              (prefetch(next) first, so the next all-gather overlaps compute)
//   backward:  grads(u) before the unit's backward (a zeroed or accumulating
//              full buffer), grads_done(u) after it
//   per step:  finish_gradient_sync(), grad_norm(), step()
// The embedding unit's params and grads are taken before the LM head (tied
// to wte) and released after the embedding's backward: it stays gathered
// for the whole micro-batch, as FSDP keeps its root unit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/mesh.hpp"
#include "core/memory.hpp"
#include "io/checkpoint.hpp"
#include "model/adamw.hpp"
#include "model/layout.hpp"
#include "strategies/arena.hpp"

namespace gpt {

enum class StrategyKind { kDdp, kZero1, kZero2, kZero3, kHybrid };
std::string to_string(StrategyKind s);
StrategyKind parse_strategy(const std::string& s);  // ConfigError for unknown names

// What a strategy keeps sharded over a shard group of `shard_size` ranks:
// the one definition the engine (data_parallel.cpp) and the cost model
// (cost_model.cpp) share. With one rank in the group nothing is sharded.
struct ShardingRule {
  bool params_sharded = false;  // zero3 (and hybrid with zero3 inside)
  bool grads_sharded = false;   // zero2, zero3
  bool zero1 = false;           // optimizer state only
};
ShardingRule sharding_rule(StrategyKind kind, StrategyKind hybrid_inner, int shard_size);

struct StrategyOptions {
  StrategyKind kind = StrategyKind::kDdp;
  StrategyKind hybrid_inner = StrategyKind::kZero3;  // kZero2 or kZero3
  double bucket_mb = 25;                             // ddp: gradient bucket size
  uint64_t seed = 0;                                 // parameter initialisation
  // Precision. param_dtype: the compute copy forward/backward read, and the
  // gradients they write (bf16 on the GPU by default; the host is fp32).
  // With bf16 params the fp32 master weights are a separate, sharded-like-
  // the-optimizer-state copy. reduce_dtype: the type gradients are reduced
  // in (fp32 by default: bf16 gradients are widened before the collective).
  // Sharded gradient accumulators are fp32.
  DType param_dtype = DType::kF32;
  DType reduce_dtype = DType::kF32;
  Arena* arena = nullptr;  // where the state lives; nullptr: the host
  // false: evaluation only (gpt_train --steps 0). The parameters alone are
  // kept: no gradients, no master weights, no AdamW moments, so a model is
  // evaluated in its parameters' memory (ddp: 4 bytes a parameter in fp32,
  // 2 in bf16, of training's 16). Only the forward calls (prefetch, params,
  // release), gather_full, owned (parameters only: state[1] and state[2] are
  // null) and after_load may be called; the others throw std::logic_error.
  bool trains = true;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Start of a micro-batch; `last` = the last one before the optimizer step.
  virtual void begin_micro_batch(bool last) = 0;
  // Issues the gather of unit u if its params are sharded (no-op otherwise).
  virtual void prefetch(size_t u) = 0;
  // Full parameters of unit u (waits for its gather), of param_dtype, in
  // the arena's memory. Valid until release(u).
  virtual const void* params(size_t u) = 0;
  virtual void release(size_t u) = 0;
  // Full gradient buffer of unit u (param_dtype) for its backward to accumulate into.
  virtual void* grads(size_t u) = 0;
  // Unit u's backward is complete for this micro-batch.
  virtual void grads_done(size_t u) = 0;

  // After the last micro-batch: every gradient reduction complete.
  virtual void finish_gradient_sync() = 0;
  // Global L2 norm of the reduced gradient (each element counted once).
  virtual double grad_norm() = 0;
  // AdamW on the owned part, then the reduced gradient is cleared for the
  // next step's first micro-batch.
  virtual void step(const AdamWHyper& h, const AdamWStep& s) = 0;
  // A skipped step (its gradient is not finite): the reduced gradient is
  // cleared and nothing else changes (parameters, master weights, moments).
  virtual void discard_gradients() = 0;
  // Completes the collectives still in flight after step() (zero1/zero2's
  // parameter all-gathers, which otherwise end at the unit's next use): the
  // end of a run calls it, so that their errors are reported as the run's.
  virtual void settle() = 0;

  // Full parameters of unit u into host out[numel] (collective over all
  // ranks): the compute copy, widened to fp32.
  virtual void gather_full(size_t u, float* out) = 0;

  // Checkpoints: the part of unit u this rank owns (fp32 master params and
  // AdamW moments, as host pointers), and, after those were loaded,
  // rebuilding what is replicated. Without `trains`, the parameters only
  // (the compute copy, widened).
  //  * kLoad, kImport: the whole owned part to be read into; on a GPU, host
  //    copies uploaded by after_load, which then frees them. kLoad's are
  //    not filled from the device (the read fills them), kImport's are (it
  //    reads the parameters alone, and the moments go back as they were).
  //  * kSave: what this rank writes of it, its write range. On a GPU, host
  //    copies of that range alone (the slice is the range, `detached` set:
  //    training does not change them until the next owned call), so ddp's
  //    ranks each download 1/N of the model state instead of all of it.
  virtual UnitSlice owned(size_t u, OwnedFor use) = 0;
  virtual void after_load() = 0;
  // After owned(u, kLoad) when nothing was read (--resume auto found no
  // checkpoint): the state stays as it is, and a GPU's host copies are
  // freed (12 bytes a parameter it owns, for the whole run otherwise).
  virtual void discard_load() = 0;
  // The seed's initial values (model/init.hpp) of every parameter, where no
  // checkpoint gives them (a new strategy's state is zero until one of the
  // two): collective. Each replica computes 1/R of what it owns and the
  // replicas exchange them, so the values are the same on every mesh.
  virtual void initialise() = 0;
  virtual StrategyKind kind() const = 0;
};

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& opt, const ParamLayout& layout, DeviceMesh2D& mesh,
                                        MemoryTracker* tracker);

}  // namespace gpt
