#!/usr/bin/env bash
# --time-limit stops a run as a stop signal does, by the clock: after the
# last step that ends within the limit, on every rank, with a checkpoint
# and exit 75, and --resume auto continues it.
#   1. 2 ranks, zero3, 100000 steps (minutes' work) with --time-limit 0:03:
#      exit 75 well before the steps are done, on one or both ranks past
#      the limit (their clocks start a little apart); the stop line's time
#      since the start plus a step near 3 s (rank 0's clock may lag), the
#      time alone within a second of it; the step it stopped after
#      checkpointed; the summary saying "time-limit" and the steps done;
#      the metrics holding those steps; the progress lines saying when the
#      limit stops the run (the ETA is later);
#   2. --resume auto with --steps N+6: exit 0, steps 1 to N+6 once each;
#      the step records' elapsed_s (the same clock) near 3 s at the stop,
#      rising, and counted again from the resume's start;
#   3. a value that is not one of SLURM's --time forms is one error line.
#   time_limit.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
steps=100000
args=(--micro-batch 4 --strategy zero3 --log-every 50 --ckpt-dir "$work/ckpt" --metrics "$work/run.jsonl")
rc=0; tiny_run stop 2 "${args[@]}" --steps $steps --time-limit 0:03 || rc=$?
[[ $rc == 75 ]] || { cat "$work/stop.log"; fail "the run with --time-limit 0:03: exit $rc, expected 75"; }
line=$(grep 'stopping after step' "$work/stop.log") || { cat "$work/stop.log"; fail "no 'stopping after step' line"; }
read -r n now step < <(sed -n 's/.*stopping after step \([0-9]*\) of .*; \([0-9.]*\) s now, a step \([0-9.]*\) s) on [12] of 2 ranks.*/\1 \2 \3/p' <<<"$line")
[[ -n ${step:-} ]] || fail "the stop line does not say when and why: $line"
grep -qF "the next step would end past --time-limit (3.0 s after the start;" <<<"$line" || fail "the stop line: $line"
# (Rank 0's time: where only rank 1 was past the limit, rank 0's clock,
# started a little earlier, is a little behind: 0.5 s allows for that.)
# (A machine so loaded that the start-up took the 3 s stops after step 1.)
python3 -c "import sys; n, now, step = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); assert n == 1 or (now + step > 2.5 and now < 4), (n, now, step)" \
  "$n" "$now" "$step" || fail "stopped after step $n at $now s with steps of $step s, for a limit of 3 s"
((n >= 1 && n < steps)) || fail "stopped after step $n"
[[ -f "$work/ckpt/step_$(printf %08d "$n")/COMPLETE" ]] || { ls "$work/ckpt"; fail "no checkpoint of step $n"; }
# The progress lines say when the limit will stop the run, as its ETA is later (step 50's, where there is one).
((n < 50)) || grep -qE "step +50/$steps \| .* \| eta [0-9hms]+ \(--time-limit in 0m0[0-3]s\)$" "$work/stop.log" ||
  { cat "$work/stop.log"; fail "the progress line does not say when --time-limit stops the run"; }
grep -q "stopped early at --time-limit after step $n of $steps; exit 75" "$work/stop.log" ||
  { cat "$work/stop.log"; fail "no closing line"; }
grep '"type":"summary"' "$work/run.jsonl" | grep -q "\"steps_done\":$n,\"stop_signal\":\"time-limit\"" ||
  fail "the summary: $(grep '"type":"summary"' "$work/run.jsonl")"
# 2. the resume continues it
tiny_run_ok resume 2 "${args[@]}" --steps $((n + 6)) --resume auto
python3 - "$work/run.jsonl" "$n" <<'PY' || fail "the two pieces' steps"
import json, sys
n = int(sys.argv[2])
recs = [r for r in map(json.loads, open(sys.argv[1])) if "type" not in r]
assert [r["step"] for r in recs] == list(range(1, n + 7)), [r["step"] for r in recs][-10:]
# elapsed_s is the clock --time-limit reads: near 3 s at the stop, rising, and from 0 again in the resume
first, second = [r["elapsed_s"] for r in recs[:n]], [r["elapsed_s"] for r in recs[n:]]
assert (n == 1 or 2.5 < first[-1] < 4.5) and first == sorted(first) and second == sorted(second), (first[-3:], second)
assert second[0] < first[-1], (first[-1], second[0])
PY
# 3. SLURM's forms only
rc=0; tiny_run bad 1 --time-limit 1h || rc=$?
((rc != 0)) && grep -qF "error: invalid time-limit = '1h': expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (the forms of SLURM's --time)" "$work/bad.log" ||
  { cat "$work/bad.log"; fail "--time-limit 1h (exit $rc)"; }
echo "ok: --time-limit 0:03 stopped after step $n at $now s (a step $step s), checkpointed, exit 75; the resume continued it"
