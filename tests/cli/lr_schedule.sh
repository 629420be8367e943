#!/usr/bin/env bash
# The learning-rate schedule flags reach the optimizer, and warmup-stable-
# decay does what it is for: extending a run from a checkpoint in its stable
# phase. 2 ranks, zero2, the tiny set-up.
#   1. --warmup 4 --lr-decay linear --lr-decay-ratio 0.25 over 20 steps: the
#      metrics' lr of every step is the formula's (warm-up to step 4, lr to
#      step 16, linear to min-lr by step 20); the run header records the
#      schedule and the log describes it;
#   2. resumed from step 10's checkpoint with --steps 40: steps 11-18 have the
#      first run's losses bit for bit (the updates before them had the same
#      LR), step 19's differs; the LR stays at lr to step 32 and decays over
#      the last 8 steps;
#   3. the same extension with --lr-decay-steps 4 instead of the ratio: the
#      cool-down keeps its 4 steps (37-40), steps 11-18 again have the first
#      run's losses;
#   4. the control: with the default cosine schedule step 7's loss differs,
#      so the loss comparison can fail.
#   lr_schedule.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
run() {
  local name=$1; shift
  tiny_run_ok "$name" 2 --strategy zero2 --log-every 1 --lr 3e-3 --min-lr 3e-4 --warmup 4 \
    --metrics "$work/$name.jsonl" "$@"
}
wsd=(--lr-decay linear --lr-decay-ratio 0.25)
run first --steps 20 "${wsd[@]}" --ckpt-dir "$work/ckpt" --ckpt-every 10
grep -q 'learning rate: warm-up over steps 1-4, 0.003 through step 17, then linear decay over steps 18-20 towards 0.0003' \
  "$work/first.log" || { cat "$work/first.log"; fail "the log does not describe the schedule"; }
run longer --steps 40 "${wsd[@]}" --resume "$work/ckpt/step_00000010" --ckpt-dir "$work/ckpt_longer"
grep -q 'resumed from .*step_00000010 (step 10,' "$work/longer.log" || { cat "$work/longer.log"; fail "no resume from step 10"; }
run fixed --steps 40 --lr-decay linear --lr-decay-steps 4 --resume "$work/ckpt/step_00000010" --ckpt-dir "$work/ckpt_fixed"
grep -q 'then linear decay over steps 38-40 towards 0.0003' "$work/fixed.log" || { cat "$work/fixed.log"; fail "fixed: the log does not describe the schedule"; }
run cosine --steps 40
python3 - "$work" <<'PY' || fail "metrics"
import json, math, sys
work = sys.argv[1]
def read(name):
    recs = [json.loads(l) for l in open(f"{work}/{name}.jsonl")]
    return recs[0], {r["step"]: r for r in recs if "grad_norm" in r}
lr, lo, warm = 3e-3, 3e-4, 4
def expect(step, total, start):  # step: 1-based, as logged; start: the decay's first 0-based step
    s = step - 1
    if s < warm: return lr * (s + 1) / warm
    if s < start: return lr
    return lo + (1 - min(1.0, (s - start) / (total - start))) * (lr - lo)
def check(steps, total, start, name):
    for k, r in steps.items():
        e = expect(k, total, start)
        assert math.isclose(r["lr"], e, rel_tol=1e-6), f"{name}: step {k}: lr {r['lr']}, expected {e}"
head, first = read("first")
assert head["config"]["lr_decay"] == "linear" and head["config"]["lr_decay_ratio"] == 0.25, head["config"]
assert sorted(first) == list(range(1, 21)), sorted(first)
check(first, 20, 16, "first")
assert math.isclose(first[17]["lr"], lr, rel_tol=1e-6) and first[18]["lr"] < lr and math.isclose(first[20]["lr"], lo + (lr - lo) / 4, rel_tol=1e-6), [first[k]["lr"] for k in (17, 18, 20)]
_, longer = read("longer")
assert sorted(longer) == list(range(11, 41)), sorted(longer)
check(longer, 40, 31, "longer")  # the decay: round(0.25 x 36) = 9 steps, from 0-based step 31
assert math.isclose(longer[32]["lr"], lr, rel_tol=1e-6) and longer[33]["lr"] < lr
# A step's loss is taken before its update: step k's loss follows the updates of steps up to k - 1.
for k in range(11, 19):
    assert repr(longer[k]["loss"]) == repr(first[k]["loss"]), f"step {k}: {longer[k]['loss']} != {first[k]['loss']}"
assert longer[19]["loss"] != first[19]["loss"], "step 19: the first run's step 18 had a lower LR, the loss must differ"
head, fixed = read("fixed")
assert head["config"]["lr_decay_steps"] == 4, head["config"]
assert sorted(fixed) == list(range(11, 41)), sorted(fixed)
check(fixed, 40, 36, "fixed")  # --lr-decay-steps 4: the last 4 steps, as in the 20-step run
assert math.isclose(fixed[37]["lr"], lr, rel_tol=1e-6) and fixed[38]["lr"] < lr
for k in range(11, 19):
    assert repr(fixed[k]["loss"]) == repr(first[k]["loss"]), f"fixed: step {k}: {fixed[k]['loss']} != {first[k]['loss']}"
_, cos = read("cosine")
assert cos[6]["lr"] < lr and cos[7]["loss"] != first[7]["loss"], "control: cosine's step 7 loss equals the WSD run's"
print("ok: lr of every step as the formula; steps 11-18 of both extended runs have the first run's losses")
PY
