#!/usr/bin/env bash
# Tokenising throughput of prepare_data (gpt2) by thread count, side by side
# in one run: each thread count REPS times, interleaved, medians reported.
# The shards of every run must be identical (ids do not depend on threads).
#   bench/prepare_data.sh [FILE] [REPS] [THREADS...]
# FILE defaults to Debian's package changelogs (/usr/share/doc, unpacked:
# English prose with versions, names and hashes, about 60 MB), else
# tinyshakespeare ten times over. Prints a table and writes JSON to OUT
# (default runs/bench/prepare_data.json).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/runs/bench/prepare_data.json}"
vocab="${GPT_VOCAB_DIR:-$root/data/vocab/gpt2}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
input="${1:-}"; reps="${2:-3}"; shift $(( $# > 2 ? 2 : $# ))
threads=("$@"); [[ ${#threads[@]} -gt 0 ]] || threads=(1 $(nproc))
if [[ -z "$input" ]]; then
  input="$work/input.txt"
  if compgen -G "/usr/share/doc/*/changelog*.gz" > /dev/null; then
    for f in /usr/share/doc/*/changelog*.gz; do zcat "$f" 2>/dev/null || true; done | head -c 60000000 > "$input"
  else
    for _ in $(seq 10); do cat "$root/../shared/data/tinyshakespeare.txt"; done > "$input"
  fi
fi
bytes=$(stat -c %s "$input")

for ((i = 0; i < reps; i++)); do
  for t in "${threads[@]}"; do
    rm -rf "$work/out.$t"
    /usr/bin/time -o "$work/time" -f "%e %U %S %M" "$build/apps/prepare_data" --tokenizer gpt2 \
      --vocab "$vocab/encoder.json" --merges "$vocab/vocab.bpe" --input "$input" --out "$work/out.$t" \
      --val-fraction 0 --threads "$t" > /dev/null
    echo "$t $(cat "$work/time")"
  done
done > "$work/samples"
for t in "${threads[@]}"; do
  cmp -s "$work/out.$t/data_train_000000.bin" "$work/out.${threads[0]}/data_train_000000.bin" ||
    { echo "prepare_data: $t threads wrote other ids than ${threads[0]}" >&2; exit 1; }
done
tokens=$(python3 -c "import sys,os; print((os.path.getsize(sys.argv[1]) - 1024) // 2)" \
  "$work/out.${threads[0]}/data_train_000000.bin")

python3 - "$work/samples" "$out" "$bytes" "$tokens" "$reps" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
samples, out, nbytes, tokens, reps, rev = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
by = {}
for line in open(samples):
    t, wall, user, sys_, rss = line.split()
    by.setdefault(int(t), []).append((float(wall), float(user) + float(sys_), int(rss)))
rows, base = [], None
print(f"# prepare_data --tokenizer gpt2: {nbytes / 1e6:.1f} MB -> {tokens} tokens; medians of {reps} runs")
print(f"# {'threads':>7} {'wall s':>7} {'MB/s':>7} {'speed-up':>9} {'CPU s':>7} {'max RSS MB':>11}")
for t in sorted(by):
    wall = statistics.median(x[0] for x in by[t])
    cpu = statistics.median(x[1] for x in by[t])
    rss = statistics.median(x[2] for x in by[t]) / 1024
    base = base or wall
    r = {"threads": t, "wall_s": wall, "mb_per_s": nbytes / 1e6 / wall, "speedup": base / wall, "cpu_s": cpu,
         "max_rss_mb": rss}
    rows.append(r)
    print(f"  {t:>7} {wall:>7.2f} {r['mb_per_s']:>7.1f} {r['speedup']:>8.2f}x {cpu:>7.2f} {rss:>11.0f}")
json.dump({"bench": "prepare_data", "git": rev, "bytes": nbytes, "tokens": tokens, "reps": reps, "rows": rows},
          open(out, "w"), indent=1)
print(f"# JSON: {out}")
PY
