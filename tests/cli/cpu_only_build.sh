#!/usr/bin/env bash
# The build a CPU cluster gets (no CUDA toolkit; -DGPT_CUDA=OFF stands in
# for a machine without nvcc, where CMake finds none): it configures, builds
# the programs, trains with the same losses, bit for bit, as this build's
# gpt_train on the CPU (zero3 on 2 ranks), and refuses --device cuda with
# one line. Registered where this build has CUDA, so that a change whose CPU
# code needs CUDA's headers or libraries is caught here, not by a user.
#   cpu_only_build.sh SOURCE_DIR WORK_DIR GPT_TRAIN GENERATOR
set -euo pipefail
src="$1"; work="$2"; train="$3"; generator="$4"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
cmake -S "$src" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=OFF \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure without CUDA"; }
grep -q "gpt: CUDA=OFF" "$work/configure.log" || { cat "$work/configure.log"; fail "CUDA was not left out"; }
# One job: this runs beside the other tests.
cmake --build "$work/build" -j 1 --target gpt_train prepare_data ckpt_tool plan bench_comm \
  > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; fail "build without CUDA"; }
"$src/tests/make_tiny_run.sh" "$work/build" "$work/run"
for b in cuda_build cpu_only; do
  bin="$train"; [ "$b" = cpu_only ] && bin="$work/build/apps/gpt_train"
  "$src/scripts/mpirun.sh" -np 2 "$bin" --config "$work/run/tiny.toml" --strategy zero3 \
    --metrics "$work/$b.jsonl" > "$work/$b.log" 2>&1 || { cat "$work/$b.log"; fail "$b: the run failed"; }
done
python3 - "$work/cuda_build.jsonl" "$work/cpu_only.jsonl" <<'PY'
import json, sys
steps = [[(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if "type" not in r]
         for p in sys.argv[1:]]
assert len(steps[0]) == 6 and steps[0] == steps[1], steps
print(f"6 steps of zero3 on 2 ranks, the same losses and gradient norms in both builds (last loss {steps[1][-1][1]:.6f})")
PY
out="$("$work/build/apps/gpt_train" --config "$work/run/tiny.toml" --device cuda 2>&1)" && fail "--device cuda ran"
grep -qx "error: invalid device = 'cuda': this build has no CUDA (configure with a CUDA toolkit present)" <<<"$out" ||
  { echo "$out"; fail "--device cuda: no one-line error"; }
echo "ok: the build without CUDA trains as this one does and refuses --device cuda"
