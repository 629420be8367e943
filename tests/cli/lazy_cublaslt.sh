#!/usr/bin/env bash
# A CPU job never loads cuBLASLt (model/cuda/cublaslt_api.hpp): a 2-rank
# --device cpu training run and the planner, traced by the dynamic loader
# (LD_DEBUG=files lists every library a process loads, dlopen included).
# The same run with the library preloaded must show it, which proves the
# trace would catch it.
#   lazy_cublaslt.sh BUILD_DIR WORK_DIR
set -euo pipefail
build="$1"; work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rm -rf "$work"
"$here/../make_tiny_run.sh" "$build" "$work"

# Runs "$@" with the loader's trace in $work/trace-NAME.<pid>; prints
# "P L": how many processes of the program EXE it traced, and how many of
# them loaded libcublasLt.
loads() {
  local name="$1" exe="$2"; shift 2
  rm -f "$work/trace-$name".*
  LD_DEBUG=files LD_DEBUG_OUTPUT="$work/trace-$name" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; echo "FAIL: $name exited non-zero" >&2; exit 1; }
  local procs=0 with=0 f
  for f in "$work/trace-$name".*; do
    grep -q "needed by [^ ]*/$exe " "$f" || continue
    procs=$((procs + 1))
    if grep -qE "file=[^ ]*libcublasLt" "$f"; then with=$((with + 1)); fi
  done
  echo "$procs $with"
}
train=("$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" --config "$work/tiny.toml" --device cpu
       --steps 2 --log-every 1000)

r=$(loads cpu_train gpt_train "${train[@]}")
echo "gpt_train --device cpu on 2 ranks: processes, those that loaded libcublasLt: $r"
[[ "$r" == "2 0" ]] || { echo "FAIL: expected 2 ranks, none loading cuBLASLt"; exit 1; }
r=$(loads plan plan "$build/apps/plan" --model gpt2-124m --ranks 8)
echo "plan: $r"
[[ "$r" == "1 0" ]] || { echo "FAIL: expected the planner not to load cuBLASLt"; exit 1; }

# No early exit in these pipelines: under pipefail and set -e, a writer
# killed by SIGPIPE after its reader quit would end this script silently.
lib=$(ldconfig -p | awk '/libcublasLt\.so\./ && !found {print $NF; found = 1}')
[[ -n "$lib" ]] || lib=$(find /usr/local/cuda/lib /usr/local/cuda/lib64 -name 'libcublasLt.so.*' -print -quit 2>/dev/null || true)
[[ -n "$lib" ]] || { echo "skip: no libcublasLt to preload for the control"; exit 77; }
r=$(loads control gpt_train env LD_PRELOAD="$lib" "${train[@]}")
echo "control, $lib preloaded: $r"
[[ "$r" == "2 2" ]] || { echo "FAIL: the trace does not show a preloaded cuBLASLt in both ranks"; exit 1; }
echo "PASS"
