#!/usr/bin/env bash
# Side-by-side CPU training throughput: this project vs PyTorch (Debian's
# python3-torch, OpenBLAS), same configurations, same thread count, one after
# the other in one run. Prints a table and writes JSON to OUT (default
# runs/bench/compare_cpu.json). Needs: scripts/setup.sh --with-torch.
# CONFIGS picks configurations (default a,b,c; bench/train_throughput.cpp).
#   bench/compare_cpu.sh [THREADS] [STEPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
threads="${1:-2}"; steps="${2:-5}"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/runs/bench/compare_cpu.json}"
mkdir -p "$(dirname "$out")"
configs="${CONFIGS:-a,b,c}"
ours="$(OMP_NUM_THREADS=$threads "$build/bench/train_throughput" --threads "$threads" --steps "$steps" --configs "$configs" | grep '^{')"
theirs="$(OMP_NUM_THREADS=$threads /usr/bin/python3 "$root/bench/torch_train.py" --threads "$threads" --steps "$steps" --configs "$configs")"
python3 - "$out" <<PY
import json, sys
ours = [json.loads(l) for l in """$ours""".splitlines() if l.strip()]
theirs = {r["config"]: r for r in (json.loads(l) for l in """$theirs""".splitlines() if l.strip())}
rows = []
print(f"# CPU training step (fwd+bwd+clip+AdamW), {ours[0]['threads']} threads, mean of $steps steps after warm-up")
print(f"# {'config':<6} {'ours tok/s':>11} {'torch tok/s':>12} {'speed-up':>9} {'ours MFU':>9} {'GEMM peak GF/s':>15}")
for r in ours:
    t = theirs[r["config"]]
    ratio = r["tokens_per_s"] / t["tokens_per_s"]
    print(f"  {r['config']:<6} {r['tokens_per_s']:>11.1f} {t['tokens_per_s']:>12.1f} {ratio:>8.2f}x {100*r['mfu']:>8.1f}% {r['gemm_peak_gflops']:>15.1f}")
    rows.append({"config": r["config"], "ours": r, "pytorch": t, "speedup": ratio})
json.dump(rows, open(sys.argv[1], "w"), indent=1)
print(json.dumps({"speedup": {x["config"]: round(x["speedup"], 3) for x in rows},
                  "mfu": {x["config"]: round(x["ours"]["mfu"], 3) for x in rows}}))
PY
