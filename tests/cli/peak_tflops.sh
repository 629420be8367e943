#!/usr/bin/env bash
# --peak-tflops replaces MFU's denominator, per rank, and the planner's peak:
#   1. cpu, 2 ranks, --peak-tflops 0.002: the metrics header's aggregate peak
#      is 2 x 2 GFLOP/s exactly (not the measured GEMM throughput), and every
#      step's MFU is flops_per_token x tokens_per_s / that peak; the log says
#      where the peak came from. Control: without the flag the header's peak
#      is the measured one, another number.
#   2. --strategy auto names the given peak in its table (the planner's
#      compute time comes from it), as `plan --peak-tflops` does; `plan
#      --config` takes a file's peak-tflops, and plan's own flag wins.
#   3. With EMULATED_TRAINER, only this: --device cuda on a device the GPU
#      table does not know, whose MFU is otherwise 0; the flag gives it one.
#   peak_tflops.sh BUILD_DIR WORK_DIR [EMULATED_TRAINER]
set -uo pipefail
emulated="${3:-}"
source "$(dirname "$0")/common.sh" "$@"

check_mfu() {  # METRICS PEAK_FLOPS
  python3 - "$1" "$2" <<'PY' || fail "$1: MFU not against --peak-tflops"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, steps = lines[0], [r for r in lines if "step" in r and "type" not in r]
peak = float(sys.argv[2])
assert head["gemm_peak_flops"] == peak, (head["gemm_peak_flops"], peak)
assert steps, "no step records"
for r in steps:
    want = head["flops_per_token"] * r["tokens_per_s"] / peak
    assert abs(r["mfu"] - want) <= 1e-9 * want, (r["step"], r["mfu"], want)
print(f"{sys.argv[1]}: peak {peak:g} FLOP/s, {len(steps)} steps' MFU against it")
PY
}

if [ -n "$emulated" ]; then
  trainer="$emulated"
  tiny_run_ok emulated 1 --device cuda --n-head 2 --steps 2 --peak-tflops 0.5 --metrics "$work/emulated.jsonl"
  check_mfu "$work/emulated.jsonl" 5e11
  grep -q "MFU against 0.5 TFLOP/s per rank (--peak-tflops)" "$work/emulated.log" ||
    { cat "$work/emulated.log"; fail "emulated cuda: the log does not name --peak-tflops"; }
  echo "ok: --peak-tflops is MFU's denominator on a GPU the table does not know"
  exit 0
fi

tiny_run_ok given 2 --peak-tflops 0.002 --metrics "$work/given.jsonl"
check_mfu "$work/given.jsonl" 4e9
grep -q "GEMM peak 4.0 GFLOP/s (--peak-tflops)" "$work/given.log" || { cat "$work/given.log"; fail "the log does not name --peak-tflops"; }
tiny_run_ok measured 2 --steps 1 --metrics "$work/measured.jsonl"
python3 -c 'import json, sys; p = json.loads(open(sys.argv[1]).readline())["gemm_peak_flops"]; sys.exit(p == 4e9 or p <= 0)' \
  "$work/measured.jsonl" || fail "control: without --peak-tflops the peak is not a measured one"
grep -q "(--peak-tflops)" "$work/measured.log" && fail "control: the log names --peak-tflops without it"

# --strategy auto's line names the peak per rank it plans with.
tiny_run_ok auto 2 --steps 1 --strategy auto --peak-tflops 0.002
grep -q "; 0.002 TFLOP/s per rank (--peak-tflops) x [0-9]*% MFU$" "$work/auto.log" || { cat "$work/auto.log"; fail "--strategy auto: the plan does not use --peak-tflops"; }
# plan --config takes the file's peak-tflops, as gpt_train does; plan's own flag wins over it.
printf 'peak-tflops = 0.002\n' | cat "$work/tiny.toml" - > "$work/peak.toml"
"$build/apps/plan" --config "$work/peak.toml" --ranks 2 | grep -q ", 0.002 TFLOP/s x " || fail "plan --config: not the file's peak-tflops"
"$build/apps/plan" --config "$work/peak.toml" --ranks 2 --peak-tflops 0.004 | grep -q ", 0.004 TFLOP/s x " ||
  fail "plan --config --peak-tflops: the flag does not win over the file"
# Peaks of 1000 TFLOP/s and more are written whole (a B200's 2250, not 2.25e+03).
"$build/apps/plan" --gpu B200 --ranks 8 | grep -q ", 2250 TFLOP/s x 45% MFU, 720 GB/s inside a node" || fail "plan --gpu B200: the peak's line"
echo "ok: --peak-tflops is MFU's denominator and the planner's peak (plan --config reads it too)"
