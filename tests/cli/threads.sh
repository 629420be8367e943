#!/usr/bin/env bash
# --threads 0 (the default) shares the node's cores among the ranks that may
# run on them, instead of starting every core's worth of threads in every
# rank. With C = the cores this shell may use (scripts/mpirun.sh does not
# bind ranks):
#   1. 1 rank: C threads;
#   2. 2 ranks: max(1, C/2) threads each ("C cores shared by 2 ranks");
#   3. 2 ranks, each pinned to a core of its own (taskset): 1 thread each,
#      "1 core shared by 1 rank";
#   4. OMP_NUM_THREADS=1 is obeyed and named; --threads 1 logs no share.
#   threads.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
unset OMP_NUM_THREADS
cores=$(nproc)
plural() { (( $1 == 1 )) && echo "$1 $2" || echo "$1 ${2}s"; }
expect() {  # NAME TEXT: the run's log says "threads: TEXT"
  grep -qF "threads: $2" "$work/$1.log" || { grep 'threads' "$work/$1.log"; fail "$1: the log does not say 'threads: $2'"; }
}
sed -i '/^threads = /d' "$work/tiny.toml"  # the default, 0
tiny_run_ok one 1 --steps 2
expect one "$(plural "$cores" thread) per rank ($(plural "$cores" core) shared by 1 rank)"
tiny_run_ok two 2 --steps 2
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
expect two "$(plural $half thread) per rank ($(plural "$cores" core) shared by 2 ranks)"
if (( cores >= 2 )); then
  # Each rank on the core of its rank's number: disjoint masks.
  printf '#!/bin/sh\nexec taskset -c "$OMPI_COMM_WORLD_RANK" "%s" "$@"\n' "$build/apps/gpt_train" > "$work/pin.sh"
  chmod +x "$work/pin.sh"
  trainer="$work/pin.sh" tiny_run_ok pinned 2 --steps 2
  expect pinned "1 thread per rank (1 core shared by 1 rank)"
fi
OMP_NUM_THREADS=1 tiny_run_ok omp 2 --steps 2
expect omp "1 thread per rank (OMP_NUM_THREADS)"
tiny_run_ok explicit 2 --steps 2 --threads 1
! grep -q 'threads: ' "$work/explicit.log" || fail "--threads 1: a share was logged"
echo "ok: --threads 0 shares the cores among the ranks that may use them"
