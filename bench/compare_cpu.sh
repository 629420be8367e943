#!/usr/bin/env bash
# Side-by-side CPU training throughput and memory: this project vs PyTorch
# (Debian's python3-torch, OpenBLAS), same configurations, same thread count,
# one after the other in one run. Each configuration runs in its own process
# on each side, so its max RSS (/usr/bin/time) is that configuration's peak;
# PyTorch's RSS after `import torch` alone is reported beside it (the
# library's own share). Prints a table and writes JSON to OUT (default
# runs/bench/compare_cpu.json). Needs: scripts/setup.sh --with-torch.
# CONFIGS picks configurations (default a,b,c; bench/train_throughput.cpp).
#   bench/compare_cpu.sh [THREADS] [STEPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
threads="${1:-2}"; steps="${2:-5}"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/runs/bench/compare_cpu.json}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
configs="${CONFIGS:-a,b,c}"
export OMP_NUM_THREADS=$threads
for c in ${configs//,/ }; do
  /usr/bin/time -o "$work/rss.ours.$c" -f %M "$build/bench/train_throughput" --threads "$threads" \
    --steps "$steps" --configs "$c" | grep '^{' >> "$work/ours"
  /usr/bin/time -o "$work/rss.torch.$c" -f %M /usr/bin/python3 "$root/bench/torch_train.py" --threads "$threads" \
    --steps "$steps" --configs "$c" >> "$work/torch"
done
/usr/bin/time -o "$work/rss.import" -f %M /usr/bin/python3 -c "import torch"
python3 - "$out" "$work" "$steps" <<'PY'
import json, sys
out, work, steps = sys.argv[1], sys.argv[2], sys.argv[3]
ours = [json.loads(l) for l in open(f"{work}/ours") if l.strip()]
theirs = {r["config"]: r for r in (json.loads(l) for l in open(f"{work}/torch") if l.strip())}
rss = lambda name: int(open(f"{work}/rss.{name}").read().split()[-1]) / 1024  # KiB -> MiB
base = rss("import")
rows = []
print(f"# CPU training step (fwd+bwd+clip+AdamW), {ours[0]['threads']} threads, mean of {steps} steps after warm-up;"
      f" max RSS per process (PyTorch's after 'import torch' alone: {base:.0f} MiB)")
print(f"# {'config':<6} {'ours tok/s':>11} {'torch tok/s':>12} {'speed-up':>9} {'ours MFU':>9} {'GEMM peak GF/s':>15}"
      f" {'ours RSS MiB':>13} {'torch RSS MiB':>14}")
for r in ours:
    c = r["config"]
    t = theirs[c]
    ratio = r["tokens_per_s"] / t["tokens_per_s"]
    mo, mt = rss(f"ours.{c}"), rss(f"torch.{c}")
    print(f"  {c:<6} {r['tokens_per_s']:>11.1f} {t['tokens_per_s']:>12.1f} {ratio:>8.2f}x {100*r['mfu']:>8.1f}%"
          f" {r['gemm_peak_gflops']:>15.1f} {mo:>13.0f} {mt:>14.0f}")
    rows.append({"config": c, "ours": dict(r, max_rss_mib=mo), "pytorch": dict(t, max_rss_mib=mt),
                 "pytorch_import_rss_mib": base, "speedup": ratio})
json.dump(rows, open(out, "w"), indent=1)
print(json.dumps({"speedup": {x["config"]: round(x["speedup"], 3) for x in rows},
                  "mfu": {x["config"]: round(x["ours"]["mfu"], 3) for x in rows},
                  "max_rss_mib": {x["config"]: [round(x["ours"]["max_rss_mib"]), round(x["pytorch"]["max_rss_mib"])]
                                  for x in rows}}))
PY
