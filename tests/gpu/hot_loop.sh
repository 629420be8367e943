#!/usr/bin/env bash
# The hot-loop audit (ctest emulated.hot_loop): what one training step on
# --device cuda asks of the host, measured without a GPU. The trainer on the
# emulated backend counts its CUDA runtime, cuBLASLt and NCCL calls by kind
# (GPT_EMULATED_API_LOG, tests/unit/host_cuda/api_log.hpp); each set-up runs
# for 2 and for 4 steps, and half the difference is one steady-state step,
# whatever the set-up and the teardown cost. Budgets per step, M being the
# micro-batches a rank runs per step:
#  * no allocation (cudaMalloc/cudaFree/cudaMallocHost/cudaFreeHost: each
#    synchronises the device), no stream, event or cuBLASLt descriptor
#    created or destroyed, no cuBLASLt algorithm search, no device-wide
#    synchronisation;
#  * no blocking wait on an event (cudaEventSynchronize): the token upload
#    of a micro-batch waits for the previous upload to have left the pinned
#    staging buffer, but polls for it (cudaEventQuery, bounded by
#    --comm-timeout like every host wait); the event queries are reported;
#  * at most one AdamW launch per unit (n_layer + 2: the update takes each
#    element's decay from its launch arguments, not a launch per tensor);
#  * at most 2 host waits for a stream and 2 copies through pageable memory
#    (the loss and the gradient norm, 8 bytes each), and at most M uploads;
#    except with the MPI communicator on device buffers across ranks, which
#    stages every collective through host memory (the test path for ranks
#    sharing a GPU; the product path is NCCL).
# And one batch of a validation (2 and 4 batches of an evaluation): one
# upload, no host wait, no copy back, no allocation; one HellaSwag pass (8
# and 16 examples): one upload and one copy back into pinned memory, waited
# for by polling its event while the next pass computes, no other wait.
# Kernels are counted by name from the launch log (GPT_EMULATED_LAUNCH_LOG,
# tests/unit/host_cuda/launch_log.hpp). Prints one row per set-up and writes
# WORK_DIR/hot_loop.json.
#   hot_loop.sh BUILD_DIR WORK_DIR EMULATED_TRAINER
set -euo pipefail
build="$1"; work="$2"; trainer="$3"
here="$(cd "$(dirname "$0")" && pwd)"
mpirun="$here/../../scripts/mpirun.sh"
rm -rf "$work"
"$here/../make_tiny_run.sh" "$build" "$work"  # global batch 8, micro-batch 2

run() {  # NAME NP MICRO_BATCHES_PER_RANK ARGS...
  local name="$1" np="$2" m="$3"; shift 3
  for steps in 2 4; do
    local dir="$work/$name/steps$steps"
    mkdir -p "$dir"
    GPT_EMULATED_API_LOG="$dir" GPT_EMULATED_LAUNCH_LOG="$dir" "$mpirun" -np "$np" "$trainer" --config "$work/tiny.toml" --n-head 2 \
      --steps "$steps" --device cuda "$@" > "$dir/log" 2>&1 || { echo "FAILED: $name, $steps steps"; cat "$dir/log"; exit 1; }
  done
  echo "$name $np $m $*" >> "$work/setups.txt"
}
run ddp_bf16 1 4
run ddp_fp32 1 4 --precision fp32
run ddp_recompute 1 4 --activation-checkpointing
run ddp_recompute_gelu_ln 1 4 --recompute gelu-ln
export GPT_EMULATED_DEVICES=4  # one emulated GPU per rank, for NCCL
for s in ddp zero1 zero2 zero3; do
  run "nccl_${s}_np2" 2 2 --comm nccl --strategy "$s"
done
run nccl_zero3_np2_reduce_bf16 2 2 --comm nccl --strategy zero3 --reduce-dtype bf16
run nccl_hybrid_np4 4 1 --comm nccl --strategy hybrid --mesh 2x2
run mpi_zero3_np2 2 2 --comm mpi --strategy zero3
# A validation (here an evaluation, --steps 0) of 2 and of 4 batches: half the
# difference is one batch, which uploads its tokens and waits for nothing
# (the losses add up on the device and are read once, after the last).
"$build/apps/prepare_data" --input "$work/text.txt" --out "$work/val" --name v --val-fraction 0.2 >/dev/null
for batches in 2 4; do
  dir="$work/validation/steps$batches"  # counts() reads NAME/stepsN
  mkdir -p "$dir"
  GPT_EMULATED_API_LOG="$dir" "$mpirun" -np 1 "$trainer" --config "$work/tiny.toml" --n-head 2 --steps 0 \
    --device cuda --val-data "$work/val/v_val_*.bin" --val-batches "$batches" > "$dir/log" 2>&1 ||
    { echo "FAILED: validation of $batches batches"; cat "$dir/log"; exit 1; }
done
# HellaSwag (an evaluation of 8 and of 16 examples, 4 rows each, cut to the
# 32 positions: passes of one shape): one pass uploads its tokens, copies its
# row losses back into pinned memory and waits only for the pass before's.
python3 "$here/../make_hellaswag.py" "$work/text.txt" "$work/hellaswag.jsonl" 16
for examples in 8 16; do
  dir="$work/hellaswag/steps$examples"  # counts() reads NAME/stepsN
  mkdir -p "$dir"
  GPT_EMULATED_API_LOG="$dir" "$mpirun" -np 1 "$trainer" --config "$work/tiny.toml" --n-head 2 --steps 0 \
    --device cuda --hellaswag "$work/hellaswag.jsonl" --hellaswag-examples "$examples" > "$dir/log" 2>&1 ||
    { echo "FAILED: HellaSwag of $examples examples"; cat "$dir/log"; exit 1; }
done

python3 - "$work" <<'PY'
import glob, json, os, re, sys
work = sys.argv[1]

def counts(name, steps):
    """Calls by kind, the largest of any rank (every rank makes the same kinds of call)."""
    ranks = []
    for path in glob.glob(os.path.join(work, name, f"steps{steps}", "api.*.txt")):
        with open(path) as f:
            ranks.append({k: int(v) for k, v in (line.split() for line in f)})
    return {k: max(r.get(k, 0) for r in ranks) for k in set().union(*ranks)} if ranks else None

def kernel_launches(name, steps, pattern):
    """Launches of kernels whose symbol contains `pattern`, the largest of any rank."""
    per_rank = []
    for path in glob.glob(os.path.join(work, name, f"steps{steps}", "launches.*.txt")):
        with open(path) as f:
            per_rank.append(sum(int(line.split()[-1]) for line in f if pattern in line.split()[0]))
    return max(per_rank, default=0)

units = 2 + 2  # tiny.toml's 2 layers, the embedding and the final LayerNorm

def group(step, prefix):
    return sum(v for k, v in step.items() if k.startswith(prefix))

failures, report = [], []
print(f"{'per step':<28} {'launch':>6} {'matmul':>6} {'nccl':>5} {'waits':>5} {'evq':>5} "
      f"{'h2d':>4} {'d2h':>4} {'pageable':>8} {'alloc':>5} {'create':>6}")
for line in open(os.path.join(work, "setups.txt")):
    name, np_, m, *args = line.split()
    m = int(m)
    a, b = counts(name, 2), counts(name, 4)
    if a is None or b is None:
        failures.append(f"{name}: no API log (was the trainer built with the emulated backend?)")
        continue
    step = {k: (b.get(k, 0) - a.get(k, 0)) / 2 for k in set(a) | set(b)}
    step = {k: v for k, v in step.items() if v}
    waits = step.get("sync.stream", 0) + step.get("sync.memcpy", 0)
    adamw = (kernel_launches(name, 4, "adamw_kernel") - kernel_launches(name, 2, "adamw_kernel")) / 2
    row = {"setup": name, "ranks": int(np_), "micro_batches": m, "args": args,
           "launches": step.get("launch", 0), "matmuls": step.get("cublaslt.matmul", 0),
           "collectives": group(step, "nccl."), "stream_waits": waits, "event_waits": step.get("sync.event", 0),
           "event_queries": step.get("query.event", 0),
           "uploads": step.get("copy.h2d", 0), "downloads": step.get("copy.d2h", 0),
           "pageable_copies": step.get("copy.pageable", 0), "allocations": group(step, "alloc."),
           "created": group(step, "create.") + group(step, "destroy."), "adamw_launches": adamw, "calls": step}
    report.append(row)
    print(f"{name:<28} {row['launches']:>6g} {row['matmuls']:>6g} {row['collectives']:>5g} {waits:>5g} "
          f"{row['event_queries']:>5g} {row['uploads']:>4g} {row['downloads']:>4g} {row['pageable_copies']:>8g} "
          f"{row['allocations']:>5g} {row['created']:>6g}")

    def budget(what, value, limit):
        if value > limit:
            failures.append(f"{name}: {what} {value:g} per step, budget {limit:g}")
    for k, v in step.items():
        if k.startswith(("alloc.", "create.", "destroy.")) or k in ("cublaslt.heuristic", "sync.device"):
            budget(k, v, 0)
    budget("blocking event waits (cudaEventSynchronize)", row["event_waits"], 0)
    budget("AdamW launches", adamw, units)
    if adamw <= 0:
        failures.append(f"{name}: no AdamW launch counted per step (is the kernel still adamw_kernel?)")
    if not (name.startswith("mpi_") and int(np_) > 1):
        budget("host waits for a stream", waits, 2)
        budget("copies through pageable memory", row["pageable_copies"], 2)
        budget("uploads", row["uploads"], m)
    if row["launches"] <= 0 or row["matmuls"] <= 0:
        failures.append(f"{name}: no kernels counted per step: the audit measured nothing")

a, b = counts("validation", 2), counts("validation", 4)  # 2 and 4 batches
batch = {k: (b.get(k, 0) - a.get(k, 0)) / 2 for k in set(a) | set(b)} if a and b else {}
batch = {k: v for k, v in batch.items() if v}
print(f"per validation batch: {batch}")
if not batch.get("launch"):
    failures.append("validation: no kernels counted per batch: the audit measured nothing")
for k, v in batch.items():
    if k.startswith(("alloc.", "create.", "destroy.", "sync.")) or k in ("copy.pageable", "copy.d2h"):
        failures.append(f"validation: {k} {v:g} per batch, budget 0")
if batch.get("copy.h2d", 0) > 1:
    failures.append(f"validation: {batch['copy.h2d']:g} uploads per batch, budget 1")
report.append({"setup": "validation batch", "calls": batch})

def passes(examples):
    log = open(os.path.join(work, "hellaswag", f"steps{examples}", "log")).read()
    return int(re.search(r"hellaswag: \d+ examples from .*?; (\d+) passes", log).group(1))
a, b = counts("hellaswag", 8), counts("hellaswag", 16)
n = passes(16) - passes(8)
hs = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)} if a and b and n > 0 else {}
hs = {k: v for k, v in hs.items() if v}
print(f"per HellaSwag pass ({n} passes more): {hs}")
if not hs.get("launch"):
    failures.append("HellaSwag: no kernels counted per pass: the audit measured nothing")
for k, v in hs.items():
    if k.startswith(("alloc.", "create.", "destroy.", "sync.")) or k == "copy.pageable":
        failures.append(f"HellaSwag: {k} {v:g} per pass, budget 0")
for k in ("copy.h2d", "copy.d2h"):
    if hs.get(k, 0) > 1:
        failures.append(f"HellaSwag: {k} {hs[k]:g} per pass, budget 1")
report.append({"setup": "hellaswag pass", "calls": hs})

with open(os.path.join(work, "hot_loop.json"), "w") as f:
    json.dump(report, f, indent=1)
for msg in failures:
    print("OVER BUDGET:", msg)
sys.exit(1 if failures else 0)
PY
