#!/usr/bin/env bash
# A step whose loss or gradient norm is NaN or Inf is never applied
# (--skip-nonfinite). The hook GPT_TEST_NAN_GRAD_STEPS=S,... makes the last
# rank's gradient NaN in those steps, as an overflow in one rank's backward
# would; the reductions carry it to every rank. 2 ranks, a checkpoint after
# every step.
#   1. default (0): the run ends at step 4 with exit 1 and one error line;
#      steps 1-3 are checkpointed and logged, step 4 is neither;
#   2. --skip-nonfinite 1, for each strategy: step 4 is skipped (one warning;
#      metrics "skipped": true, grad_norm null; summary skipped_steps 1), the
#      run ends with exit 0 and finite losses; the parameters and both AdamW
#      moments of step 4's checkpoint equal step 3's bit for bit (and step 3's
#      differ from step 2's: the control that the comparison can fail); steps
#      1-4 lose what the unpoisoned run loses (the loss precedes the update);
#      step 8's checkpoint records 7 optimizer updates, and (zero3) step 5's
#      update is AdamW's 4th: its bias correction does not count the skip;
#      resumed from step 6, step 8's state equals the uninterrupted run's;
#   3. --skip-nonfinite 1 with steps 4 and 5 poisoned: ends at step 5 ("2
#      steps in a row"); with 4 and 6: skipped twice, exit 0 (the count of
#      steps in a row restarts after an applied step); resumed from step 4's
#      checkpoint (a skipped step: ckpt_tool shows "1 skipped in a row"), a
#      poisoned step 5 still ends the run: the count is checkpointed.
#   nonfinite.sh BUILD_DIR WORK_DIR [TRAINER STRATEGIES FLAGS...]
# With TRAINER (tests/gpt_train_emulated and --device cuda: the CUDA
# backend's device buffers, bf16 with fp32 master weights) only case 2 (and
# its loss check, with zero3) runs, for the strategies in STRATEGIES.
set -uo pipefail
trainer="${3:-$1/apps/gpt_train}"; strategies="${4:-ddp zero1 zero2 zero3 hybrid}"
extra=("${@:5}")
source "$(dirname "$0")/common.sh" "$@"
# run NAME [flags...]: 2 ranks, 8 steps, a checkpoint per step; output in NAME.log, metrics in NAME.jsonl.
run() {
  local name=$1; shift
  tiny_run "$name" 2 --steps 8 --log-every 1 --metrics "$work/$name.jsonl" --ckpt-dir "$work/$name.ckpt" --ckpt-every 1 \
    "${extra[@]}" "$@"
}
ckpt() { echo "$work/$1.ckpt/step_$(printf %08d "$2")/state.h5"; }
# same_state A B: the parameters and moments of two checkpoint files are equal, element for element.
same_state() {
  local g
  for g in /params /exp_avg /exp_avg_sq; do h5diff -q "$1" "$2" $g $g >/dev/null 2>&1 || return 1; done
}
losses() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "grad_norm" in r: print(r["step"], repr(r["loss"]))' "$1"; }

# 0. the unpoisoned reference
run ref --strategy zero3 || { cat "$work/ref.log"; fail "reference run failed"; }

if [[ $# -le 2 ]]; then
# 1. the default: the first non-finite step ends the run, unapplied
GPT_TEST_NAN_GRAD_STEPS=4 run end --strategy zero3; rc=$?
[[ $rc == 1 ]] || { cat "$work/end.log"; fail "default policy: exit $rc, expected 1"; }
n=$(grep -c '^error:' "$work/end.log")
[[ $n == 1 ]] || { cat "$work/end.log"; fail "default policy: $n error lines, expected 1"; }
grep -q '^error: training diverged: gradient norm nan (loss [0-9.]*) at step 4; the step was not applied' \
  "$work/end.log" || { cat "$work/end.log"; fail "default policy: the error line does not name step 4's gradient norm"; }
[[ -f $(ckpt end 3) ]] || fail "default policy: step 3's checkpoint is missing"
ls -d "$work/end.ckpt"/*step_00000004* >/dev/null 2>&1 && fail "default policy: step 4 was checkpointed"
(( $(grep -c '"grad_norm"' "$work/end.jsonl") == 3 )) || fail "default policy: the metrics do not hold exactly steps 1-3"
echo "ok: default: exit 1 at step 4, one error line, checkpoints of steps 1-3 only"
fi

# 2. skipped, on every strategy
for strategy in $strategies; do
  mesh=(); [[ $strategy == hybrid ]] && mesh=(--mesh 2x1)
  GPT_TEST_NAN_GRAD_STEPS=4 run "skip_$strategy" --strategy $strategy "${mesh[@]}" --skip-nonfinite 1 ||
    { cat "$work/skip_$strategy.log"; fail "$strategy: the run with a skipped step failed"; }
  log="$work/skip_$strategy.log"; m="$work/skip_$strategy.jsonl"
  n=$(grep -c 'update skipped' "$log")
  [[ $n == 1 ]] || { cat "$log"; fail "$strategy: $n 'update skipped' warnings, expected 1"; }
  grep -q 'step 4: gradient norm nan (loss [0-9.]*): update skipped (1 of at most 1 in a row' "$log" ||
    { cat "$log"; fail "$strategy: the warning does not name step 4"; }
  python3 - "$m" <<'PY' || fail "$strategy: metrics"
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if "grad_norm" in r]
assert [r["step"] for r in steps] == list(range(1, 9)), [r["step"] for r in steps]
assert [r["step"] for r in steps if r.get("skipped")] == [4], "skipped: " + str([r["step"] for r in steps if r.get("skipped")])
assert steps[3]["grad_norm"] is None, steps[3]
assert all(math.isfinite(r["loss"]) for r in steps), [r["loss"] for r in steps]
assert all(math.isfinite(r["grad_norm"]) for r in steps if r["step"] != 4)
s = [r for r in recs if r.get("type") == "summary"][-1]
assert s["skipped_steps"] == 1 and s["steps_done"] == 8, s
PY
  same_state "$(ckpt "skip_$strategy" 3)" "$(ckpt "skip_$strategy" 4)" ||
    fail "$strategy: step 4 was skipped but its checkpoint's state differs from step 3's"
  same_state "$(ckpt "skip_$strategy" 2)" "$(ckpt "skip_$strategy" 3)" &&
    fail "$strategy: steps 2 and 3 have equal state: the comparison cannot tell an update"
  info=$("$build/apps/ckpt_tool" info "$(dirname "$(ckpt "skip_$strategy" 8)")")  # not piped: grep -q would SIGPIPE it
  [[ $info == *"step 8 (7 optimizer updates), "* ]] ||
    fail "$strategy: step 8's checkpoint does not record 7 optimizer updates"
  echo "ok: $strategy: step 4 skipped, its state equal to step 3's, 8 steps finite, 7 updates recorded"
done
# AdamW's bias correction counts updates, not steps (as PyTorch's GradScaler
# and DeepSpeed skip optimizer.step()): step 5 is the 4th update. From the
# checkpoints of steps 4 and 5, a tensor without weight decay must have moved
# by lr / (1 - b1^t) * m' / (sqrt(v' / (1 - b2^t)) + eps) with t = 4; with
# t = 5 the move would be about 7% smaller.
if [[ " $strategies " == *" zero3 "* ]]; then
python3 - "$(ckpt skip_zero3 4)" "$(ckpt skip_zero3 5)" "$work/skip_zero3.jsonl" <<'PY' || fail "zero3: AdamW's step after the skipped one"
import json, math, subprocess, sys, tempfile
def tensor(path, name):  # h5dump -o writes the values alone, comma-separated
    with tempfile.NamedTemporaryFile("r") as f:
        subprocess.run(["h5dump", "-d", name, "-m", "%.9g", "-y", "-w", "0", "-o", f.name, path], check=True,
                       stdout=subprocess.DEVNULL)
        return [float(x) for x in f.read().split(",")]
lr = [json.loads(l) for l in open(sys.argv[3]) if '"step":5,' in l and "grad_norm" in l][0]["lr"]
name = "transformer.ln_f.bias"
p, = [tensor(sys.argv[1], f"/params/{name}")]
p2, m2, v2 = (tensor(sys.argv[2], f"/{g}/{name}") for g in ("params", "exp_avg", "exp_avg_sq"))
def predicted(t):
    bc1, bc2 = 1 - 0.9 ** t, 1 - 0.95 ** t
    return [a - lr / bc1 * m / (math.sqrt(v) / math.sqrt(bc2) + 1e-8) for a, m, v in zip(p, m2, v2)]
def err(t):  # the largest error relative to the largest move
    move = max(abs(b - a) for a, b in zip(p, p2))
    return max(abs(b - q) for b, q in zip(p2, predicted(t))) / move
assert len(p) == 64 and err(4) < 1e-3 and err(5) > 0.03, f"error with t = 4: {err(4):.2e}, with t = 5: {err(5):.2e}"
print(f"ok: zero3: step 5's update is AdamW's 4th (error {err(4):.1e}; as the 5th it would be {err(5):.1e})")
PY
fi
# Steps 1-4 lose exactly what the unpoisoned run loses; step 5 on does not (step 4 was not applied).
if [[ " $strategies " == *" zero3 "* ]]; then
diff <(losses "$work/ref.jsonl" | sed -n 1,4p) <(losses "$work/skip_zero3.jsonl" | sed -n 1,4p) ||
  fail "zero3: the losses of steps 1-4 differ from the unpoisoned run's"
diff -q <(losses "$work/ref.jsonl" | sed -n 5p) <(losses "$work/skip_zero3.jsonl" | sed -n 5p) >/dev/null &&
  fail "zero3: step 5's loss equals the unpoisoned run's: step 4 was applied after all"
echo "ok: zero3: losses of steps 1-4 equal the unpoisoned run's, step 5's differs"
fi
[[ $# -gt 2 ]] && exit 0

# A resume after a skip continues the update count: resumed from step 6 (5
# updates), step 8's state equals the uninterrupted run's bit for bit (with
# the step count as AdamW's t it would not).
run resumed --strategy zero3 --skip-nonfinite 1 --resume "$(dirname "$(ckpt skip_zero3 6)")" ||
  { cat "$work/resumed.log"; fail "the resume after a skipped step failed"; }
same_state "$(ckpt resumed 8)" "$(ckpt skip_zero3 8)" ||
  fail "resumed from step 6 after a skipped step, step 8's state differs from the uninterrupted run's"
echo "ok: resumed after a skipped step: step 8's state equals the uninterrupted run's"

# 3. steps in a row
GPT_TEST_NAN_GRAD_STEPS=4,5 run row --strategy zero2 --skip-nonfinite 1; rc=$?
[[ $rc == 1 ]] || { cat "$work/row.log"; fail "two in a row: exit $rc, expected 1"; }
grep -q '^error: training diverged: gradient norm nan (loss [0-9.]*) at step 5, 2 steps in a row (--skip-nonfinite 1)' \
  "$work/row.log" || { cat "$work/row.log"; fail "two in a row: the error line does not name step 5"; }
ls -d "$work/row.ckpt"/*step_00000005* >/dev/null 2>&1 && fail "two in a row: step 5 was checkpointed"
# The count in a row is checkpointed: resumed from the skipped step 4's
# checkpoint, a poisoned step 5 is the 2nd in a row (a resume that restarted
# the count would skip it and run on).
info=$("$build/apps/ckpt_tool" info "$(dirname "$(ckpt row 4)")")
[[ $info == *"step 4 (3 optimizer updates, 1 skipped in a row), "* ]] ||
  fail "two in a row: step 4's checkpoint does not record 1 skipped step in a row: $info"
GPT_TEST_NAN_GRAD_STEPS=5 run row_resumed --strategy zero2 --skip-nonfinite 1 --resume "$(dirname "$(ckpt row 4)")"; rc=$?
[[ $rc == 1 ]] || { cat "$work/row_resumed.log"; fail "two in a row across a resume: exit $rc, expected 1"; }
grep -q '^error: training diverged: gradient norm nan (loss [0-9.]*) at step 5, 2 steps in a row (--skip-nonfinite 1)' \
  "$work/row_resumed.log" || { cat "$work/row_resumed.log"; fail "two in a row across a resume: the error line does not name step 5"; }
GPT_TEST_NAN_GRAD_STEPS=4,6 run apart --strategy zero2 --skip-nonfinite 1 ||
  { cat "$work/apart.log"; fail "two apart: the run failed"; }
grep '"type":"summary"' "$work/apart.jsonl" | grep -q '"skipped_steps":2' || fail "two apart: skipped_steps is not 2"
echo "ok: 2 in a row end the run at step 5, also across a resume from step 4; 2 apart are both skipped"
