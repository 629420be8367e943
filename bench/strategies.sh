#!/usr/bin/env bash
# Compares the data-parallel strategies on this machine: the same model,
# data, seed and global batch under each strategy, one run after another.
# Prints a table and writes JSON lines to OUT (default runs/bench/strategies.jsonl).
#   bench/strategies.sh [RANKS] [STEPS]        (RANKS x 1 thread each)
# Model: 6 layers, 6 heads, width 384, T=256, byte vocabulary (a few seconds
# per step on 4 ranks here). Data: the default fortunes shards.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
np="${1:-4}"; steps="${2:-10}"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/runs/bench/strategies.jsonl}"
work="$(dirname "$out")/strategies"; mkdir -p "$work"; : > "$out"
"$root/scripts/prepare_default_data.sh" >/dev/null
half=$((np / 2)); [[ $half -ge 1 ]] || half=1
runs=("ddp::" "zero1::" "zero2::" "zero3::" "hybrid:${half}x$((np / half)):zero3" "hybrid:${half}x$((np / half)):zero2")
for r in "${runs[@]}"; do
  IFS=: read -r strategy mesh inner <<<"$r"
  name="$strategy${mesh:+-$mesh}${inner:+-$inner}"
  args=(--strategy "$strategy")
  [[ -n "$mesh" ]] && args+=(--mesh "$mesh" --hybrid-inner "$inner")
  if ! OMP_NUM_THREADS=1 "$root/scripts/mpirun.sh" -np "$np" "$build/apps/gpt_train" \
      --n-layer 6 --n-head 6 --n-embd 384 --n-ctx 256 --seq-len 256 --vocab-size 256 \
      --data "$root/input/data/fortunes/fortunes_train_*.bin" --global-batch 16 --micro-batch $((16 / np)) \
      --steps "$steps" --lr 1e-3 --warmup 2 --threads 1 --sample-tokens 0 --log-every "$steps" \
      --metrics "$work/$name.jsonl" "${args[@]}" > "$work/$name.log" 2>&1; then
    echo "{\"name\": \"$name\", \"error\": \"$(grep -m1 '^error' "$work/$name.log" | tr -d '"')\"}" >> "$out"
    continue
  fi
  python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; r['name']=sys.argv[2]; print(json.dumps(r))" \
    "$work/$name.jsonl" "$name" >> "$out"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"# strategies: {rows[0].get('world_size', '?')} ranks x 1 thread, 6x384 model, T=256, global batch 16; "
      "means over steps after 2 warm-up")
hdr = ("strategy", "tok/s", "tok/s/rank", "peak MiB/rank", "state MiB/rank", "comm MiB/step", "comm s", "exposed s", "overlap", "final loss")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for r in rows:
    if "error" in r:
        print(f"| {r['name']} | failed: {r['error']} |"); continue
    M = 1048576
    print(f"| {r['name']} | {r['tokens_per_s']:.0f} | {r['tokens_per_s_per_rank']:.0f} | {r['peak_bytes']/M:.1f} | "
          f"{r['model_state_bytes']/M:.1f} | {r['comm_bytes_per_step']/M:.1f} | {r['comm_time_s']:.3f} | "
          f"{r['exposed_comm_s']:.3f} | {100*r['overlap']:.0f}% | {r['final_loss']:.4f} |")
PY
