#!/usr/bin/env bash
# Compares the data-parallel strategies on this machine: the same model
# (input/sweep-6x384.toml), data, seed and global batch under each strategy,
# one run after another, through the sweep driver (scripts/sweep), which
# writes OUT/report.md, report.csv and plots.
#   bench/strategies.sh [RANKS] [STEPS] [OUT]     (RANKS x 1 thread each)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
np="${1:-4}"; steps="${2:-10}"; out="${3:-$root/runs/bench/strategies}"
half=$((np / 2)); [[ $half -ge 1 ]] || half=1
"$root/scripts/prepare_default_data.sh" >/dev/null
OMP_NUM_THREADS=1 "$root/scripts/sweep" run --config "$root/input/sweep-6x384.toml" \
  --strategies ddp,zero1,zero2,zero3,hybrid --meshes "${half}x$((np / half))" --hybrid-inner zero3,zero2 \
  --ranks "$np" --steps "$steps" --out "$out" --build "${BUILD_DIR:-$root/build}" --launcher mpirun \
  -- --micro-batch $((16 / np))
cat "$out/report.md"
