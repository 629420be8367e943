#!/usr/bin/env bash
# Where a GPU training step's time goes, kernel by kernel: Nsight Compute
# times every kernel of one step of bench_gpu_train (each kernel alone, its
# duration only, clocks left as they are), and this prints the kernels grouped
# by name with their total time, count and share, largest first, plus a JSON
# line. Kernels run serialised with cold caches under ncu, so the total is
# above the step's time in a stream; the shares are what to read.
#   bench/gpu_kernel_profile.sh [BUILD_DIR] [MODEL] [BATCH] [SEQ] [extra bench_gpu_train flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; model="${2:-gpt2-124m}"; batch="${3:-16}"; seq="${4:-1024}"
shift $(( $# < 4 ? $# : 4 ))
raw="$(mktemp)"; trap 'rm -f "$raw"' EXIT
ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$build/bench/bench_gpu_train" --model "$model" --batch "$batch" --seq "$seq" --steps 1 --warmup 0 "$@" > "$raw"
python3 - "$raw" <<'PY'
import collections, csv, json, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
total = collections.Counter(); count = collections.Counter()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = r["Kernel Name"].split("(")[0]
    name = name[5:] if name.startswith("void ") else name
    total[name] += float(r["Metric Value"].replace(",", "")) / 1e6  # ns -> ms
    count[name] += 1
all_ms = sum(total.values())
print(f"# {sum(count.values())} kernels, {all_ms:.2f} ms serialised")
print(f"  {'kernel':<72} {'calls':>6} {'ms':>9} {'share':>7}")
for name, ms in total.most_common():
    print(f"  {name[:72]:<72} {count[name]:>6} {ms:>9.3f} {100 * ms / all_ms:>6.1f}%")
print(json.dumps({"bench": "kernel_profile", "total_ms": all_ms,
                  "kernels": [{"name": n, "calls": count[n], "ms": ms} for n, ms in total.most_common()]}))
PY
