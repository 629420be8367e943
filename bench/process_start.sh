#!/usr/bin/env bash
# What loading cuBLASLt at start-up cost a process that never multiplies on a
# GPU, side by side in one run: gpt_train as built (cuBLASLt opened on first
# use, model/cuda/cublaslt_api.hpp) against the same binary with the library
# preloaded (LD_PRELOAD), which is what linking it did. Two cases, repeated
# REPS times interleaved, medians reported:
#   help   gpt_train --help (start, parse, exit; one process)
#   train  a 2-rank --device cpu run of the tiny test model, 2 steps (per rank)
# Prints a table and writes JSON to OUT (default runs/bench/process_start.json).
#   bench/process_start.sh [REPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
reps="${1:-5}"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/runs/bench/process_start.json}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
lib=$(ldconfig -p | awk '/libcublasLt\.so\./ {print $NF; exit}')
[[ -n "$lib" ]] || lib=$(find /usr/local/cuda/lib /usr/local/cuda/lib64 -name 'libcublasLt.so.*' 2>/dev/null | head -1)
[[ -n "$lib" ]] || { echo "no libcublasLt found to compare with" >&2; exit 1; }
"$root/tests/make_tiny_run.sh" "$build" "$work/run" > /dev/null

# One measurement: "wall_s cpu_s maxrss_kb" per process, one line each.
measure() {  # measure CASE PRELOAD
  local t="$work/time.$1.$2"; rm -f "$t".*
  local pre=(); [[ "$2" == linked ]] && pre=(env LD_PRELOAD="$lib")
  local fmt="%e %U %S %M"
  if [[ "$1" == help ]]; then
    "${pre[@]}" /usr/bin/time -o "$t.0" -f "$fmt" "$build/apps/gpt_train" --help > /dev/null
  else
    "${pre[@]}" "$root/scripts/mpirun.sh" -np 2 bash -c \
      '/usr/bin/time -o "$0.$OMPI_COMM_WORLD_RANK" -f "$1" "${@:2}"' "$t" "$fmt" \
      "$build/apps/gpt_train" --config "$work/run/tiny.toml" --device cpu --steps 2 --log-every 1000 \
      > "$work/train.log" 2>&1 || { cat "$work/train.log" >&2; exit 1; }
  fi
  awk '{printf "%s %.3f %s\n", $1, $2 + $3, $4}' "$t".*
}

for ((i = 0; i < reps; i++)); do
  for c in help train; do
    for p in lazy linked; do measure "$c" "$p" | sed "s/^/$c $p /"; done
  done
done > "$work/samples"

python3 - "$work/samples" "$out" "$lib" "$reps" <<'PY'
import json, statistics, sys
samples, out, lib, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
by = {}
for line in open(samples):
    case, how, wall, cpu, rss = line.split()
    by.setdefault((case, how), []).append((float(wall), float(cpu), int(rss)))
med = lambda xs: statistics.median(xs)
rows = {}
print(f"# process start with and without cuBLASLt ({lib}) loaded; medians of {reps} runs")
print(f"# {'case':<6} {'how':<15} {'wall s':>7} {'CPU s/proc':>11} {'max RSS MB/proc':>16}")
for case in ("help", "train"):
    for how, label in (("linked", "loaded at start"), ("lazy", "on first use")):
        v = by[(case, how)]
        r = {"wall_s": med([x[0] for x in v]), "cpu_s_per_process": med([x[1] for x in v]),
             "max_rss_mb_per_process": med([x[2] for x in v]) / 1024}
        rows.setdefault(case, {})[how] = r
        print(f"  {case:<6} {label:<15} {r['wall_s']:>7.2f} {r['cpu_s_per_process']:>11.2f} {r['max_rss_mb_per_process']:>16.1f}")
for case, r in rows.items():
    r["cpu_saved_s_per_process"] = r["linked"]["cpu_s_per_process"] - r["lazy"]["cpu_s_per_process"]
    r["rss_saved_mb_per_process"] = r["linked"]["max_rss_mb_per_process"] - r["lazy"]["max_rss_mb_per_process"]
    r["wall_ratio"] = r["linked"]["wall_s"] / r["lazy"]["wall_s"]
json.dump({"library": lib, "reps": reps, "cases": rows}, open(out, "w"), indent=1)
print(json.dumps({c: {k: round(r[k], 3) for k in ("wall_ratio", "cpu_saved_s_per_process", "rss_saved_mb_per_process")}
                  for c, r in rows.items()}))
PY
