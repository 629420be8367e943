#!/usr/bin/env bash
# Side-by-side data-parallel CPU training on RANKS ranks of 1 thread each:
# gpt_train --strategy ddp (and zero3, for what sharding costs here) against
# PyTorch's DistributedDataParallel over gloo (bench/torch_ddp.py), the same
# model, sequence length, global and micro batch, one run after another in
# one invocation. Debian 12's PyTorch 1.13 cannot import FSDP (a dataclass
# error in torch.distributed._shard under Python 3.11), so DDP is the
# comparison. Prints a table and writes JSON to OUT (default
# runs/bench/compare_ddp_cpu.json). Needs: scripts/setup.sh --with-torch.
#   bench/compare_ddp_cpu.sh [RANKS] [STEPS]      CONFIGS=small,gpt2 (default both)
#     small: 6 layers, width 384, T=256, vocabulary 256, global batch 16, micro-batch 4
#     gpt2:  gpt2-124m (vocabulary 50257), T=256, global batch 8, micro-batch 4
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
np="${1:-2}"; steps="${2:-6}"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/runs/bench/compare_ddp_cpu.json}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
"$root/scripts/prepare_default_data.sh" >/dev/null
export OMP_NUM_THREADS=1
declare -A ours_flags torch_flags
ours_flags[small]="--config $root/input/sweep-6x384.toml"
torch_flags[small]="--n-layer 6 --n-head 6 --n-embd 384 --seq-len 256 --vocab-size 256 --global-batch 16 --micro-batch 4"
ours_flags[gpt2]="--config $root/input/sweep-6x384.toml --n-layer 12 --n-head 12 --n-embd 768 --vocab-size 50257 --global-batch 8 --micro-batch 4"
torch_flags[gpt2]="--n-layer 12 --n-head 12 --n-embd 768 --seq-len 256 --vocab-size 50257 --global-batch 8 --micro-batch 4"
for c in $(echo "${CONFIGS:-small,gpt2}" | tr , ' '); do
  [[ -n "${ours_flags[$c]:-}" ]] || { echo "error: CONFIGS: unknown config '$c' (small, gpt2)" >&2; exit 2; }
  for s in ddp zero3; do
    # shellcheck disable=SC2086  # the flags are words
    "$root/scripts/mpirun.sh" -np "$np" "$build/apps/gpt_train" ${ours_flags[$c]} --strategy "$s" --threads 1 \
      --steps $((steps + 2)) --metrics "$work/$c.$s.jsonl" >"$work/$c.$s.log" 2>&1 ||
      { tail -5 "$work/$c.$s.log"; echo "error: gpt_train ($c, $s) failed" >&2; exit 1; }
  done
  # shellcheck disable=SC2086
  /usr/bin/python3 "$root/bench/torch_ddp.py" --ranks "$np" --threads 1 --steps "$steps" --warmup 2 ${torch_flags[$c]} \
    > "$work/$c.torch.json"
done
python3 - "$out" "$work" "$np" "$steps" "${CONFIGS:-small,gpt2}" "$root" <<'PY'
import json, os, subprocess, sys, time
out, work, np, steps, configs, root = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5].split(","), sys.argv[6]
def summary(path):
    return [json.loads(l) for l in open(path) if '"summary"' in l][-1]
rows = []
print(f"# data-parallel CPU training step, {np} ranks x 1 thread, mean of the steps after the warm-up ({steps} "
      "here, 2 warm-up steps ours excludes too); tokens/s over all ranks")
print(f"# {'config':<6} {'ours ddp':>10} {'ours zero3':>11} {'torch DDP':>10} {'ddp speed-up':>13} {'zero3 / torch':>14}")
for c in configs:
    ddp, z3 = summary(f"{work}/{c}.ddp.jsonl"), summary(f"{work}/{c}.zero3.jsonl")
    t = json.loads(open(f"{work}/{c}.torch.json").read().strip().splitlines()[-1])
    r = {"config": c, "ranks": np, "ours_ddp_tokens_per_s": ddp["tokens_per_s"],
         "ours_zero3_tokens_per_s": z3["tokens_per_s"], "torch_ddp_tokens_per_s": t["tokens_per_s"],
         "ours_ddp_overlap": ddp.get("overlap"), "torch_version": t["torch_version"],
         "ddp_speedup": ddp["tokens_per_s"] / t["tokens_per_s"], "zero3_speedup": z3["tokens_per_s"] / t["tokens_per_s"]}
    rows.append(r)
    print(f"  {c:<6} {r['ours_ddp_tokens_per_s']:>10.1f} {r['ours_zero3_tokens_per_s']:>11.1f} "
          f"{r['torch_ddp_tokens_per_s']:>10.1f} {r['ddp_speedup']:>12.2f}x {r['zero3_speedup']:>13.2f}x")
git = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"],
                     capture_output=True, text=True).stdout.strip()
json.dump({"date": time.strftime("%Y-%m-%d"), "git": git or "unknown", "host": os.uname().nodename,
           "threads_per_rank": 1, "steps": int(steps), "rows": rows}, open(out, "w"), indent=1)
print(json.dumps({"ddp_speedup": {r["config"]: round(r["ddp_speedup"], 3) for r in rows},
                  "zero3_speedup": {r["config"]: round(r["zero3_speedup"], 3) for r in rows}}))
PY
