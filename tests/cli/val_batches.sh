#!/usr/bin/env bash
# Validation reads --val-batches micro-batches on every rank from the start
# of the validation data at every evaluation. 2 ranks, micro-batch 2, a
# validation set of 93 sequences:
#   1. --val-batches 100 (400 sequences): a warning naming 400, 93 and the
#      largest count that reads each sequence at most once (23);
#   2. --val-batches 23 (92 sequences): no warning; --val-batches 0 reads
#      all 93, the last one on rank 0 alone, and says so: its losses are not
#      23's; evaluated (--steps 0) under zero3, its loss is the mean over
#      the 93 sequences that 1 rank reading one at a time gives (1e-6);
#   3. --eval-every without --val-data or --hellaswag and --sample-every with
#      --sample-tokens 0 (tiny.toml's) warn that they do nothing;
#   4. so do hybrid's --mesh and --hybrid-inner and ddp's --bucket-mb given
#      to zero3, and hybrid's own flags do not;
#   5. a strategy predicted not to fit in --device-mem warns before it allocates.
#   val_batches.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
head -c 3000 "$work/text.txt" > "$work/val.txt"
"$build/apps/prepare_data" --input "$work/val.txt" --out "$work/val" --name v --val-fraction 0 >/dev/null ||
  fail "prepare_data val.txt"
val=(--steps 2 --val-data "$work/val/v_train_*.bin" --eval-every 1)
tiny_run_ok many 2 "${val[@]}" --val-batches 100
grep -q 'validation: 100 batches of 2 x 2 ranks = 400 sequences; the validation data hold 93' "$work/many.log" ||
  { cat "$work/many.log"; fail "--val-batches 100: the log does not say what validation reads"; }
grep -q 'warning.*validation: --val-batches 100 reads 400 sequences, but the validation data hold 93: some count more than once in the validation loss; --val-batches 23 reads each at most once' \
  "$work/many.log" || { cat "$work/many.log"; fail "--val-batches 100: no warning"; }
tiny_run_ok fit 2 "${val[@]}" --val-batches 23 --metrics "$work/fit.jsonl"
! grep -q 'warning.*validation' "$work/fit.log" || { cat "$work/fit.log"; fail "--val-batches 23 warns"; }
tiny_run_ok all 2 "${val[@]}" --val-batches 0 --metrics "$work/all.jsonl"
grep -q 'validation: all 93 sequences (--val-batches 0): 23 batches of 2 x 2 ranks and the last 1 (up to 2 a rank)' \
  "$work/all.log" || { cat "$work/all.log"; fail "--val-batches 0: the log does not say what validation reads"; }
! grep -q 'warning.*validation' "$work/all.log" || { cat "$work/all.log"; fail "--val-batches 0 warns"; }
val_losses() { python3 -c 'import json, sys; print([r["val_loss"] for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r])' "$1"; }
[[ "$(val_losses "$work/all.jsonl")" != "$(val_losses "$work/fit.jsonl")" && $(val_losses "$work/all.jsonl") == *,*,* ]] ||
  fail "--val-batches 0 leaves out the 93rd sequence: $(val_losses "$work/all.jsonl") against 23's $(val_losses "$work/fit.jsonl")"
# The whole set's mean: zero3 on 2 ranks (rank 1 has no row of the last batch, but gathers with rank 0) against 1 rank
# reading the 93 sequences one a batch.
eval=(--steps 0 --val-data "$work/val/v_train_*.bin")
tiny_run_ok all_zero3 2 "${eval[@]}" --val-batches 0 --strategy zero3 --metrics "$work/all_zero3.jsonl"
tiny_run_ok one_by_one 1 "${eval[@]}" --val-batches 93 --micro-batch 1 --metrics "$work/one_by_one.jsonl"
python3 - "$work/all_zero3.jsonl" "$work/one_by_one.jsonl" <<'PY' || fail "--val-batches 0 is not the mean over all 93 sequences"
import json, sys
a, b = ([r["val_loss"] for r in map(json.loads, open(p)) if r.get("type") == "eval"][0] for p in sys.argv[1:])
print(f"--val-batches 0 on 2 ranks (zero3): {a!r}; one sequence at a time on 1 rank: {b!r}")
assert abs(a - b) <= 1e-6 * abs(b), (a, b)
PY
# 3. --eval-every without --val-data or --hellaswag, and --sample-every with --sample-tokens 0, say that they do nothing.
tiny_run_ok off 2 --steps 2 --eval-every 1 --sample-every 1
grep -q 'warning.*--eval-every 1 without --val-data or --hellaswag: there is no validation' "$work/off.log" ||
  { cat "$work/off.log"; fail "--eval-every without --val-data: no warning"; }
grep -q 'warning.*--sample-every 1 with --sample-tokens 0: there are no samples' "$work/off.log" ||
  { cat "$work/off.log"; fail "--sample-every with --sample-tokens 0: no warning"; }
! grep -qE 'warning.*(--eval-every|--sample-every)' "$work/fit.log" || fail "--val-batches 23: a flag warning"
# 4. Another strategy's flags: --mesh and --hybrid-inner are hybrid's, --bucket-mb is ddp's.
tiny_run_ok strat 2 --steps 2 --strategy zero3 --mesh 2x1 --hybrid-inner zero2 --bucket-mb 5
for want in '--mesh 2x1 applies to --strategy hybrid: zero3 uses all 2 ranks as one group' \
            '--hybrid-inner zero2 applies to --strategy hybrid: it changes nothing for zero3' \
            "--bucket-mb 5 applies to --strategy ddp's gradient all-reduce: it changes nothing for zero3"; do
  grep -qF -- "$want" "$work/strat.log" || { cat "$work/strat.log"; fail "no warning: $want"; }
done
tiny_run_ok hyb 2 --steps 2 --strategy hybrid --mesh 2x1 --hybrid-inner zero2
! grep -q 'applies to --strategy' "$work/hyb.log" || { cat "$work/hyb.log"; fail "hybrid's own flags warn"; }
# 5. A strategy the planner predicts will not fit in the memory per rank warns before it allocates.
tiny_run_ok small 2 --steps 1 --strategy zero1 --device-mem 1MiB
grep -q 'warning.*zero1 is predicted to need .* per rank (model state .*), more than the 921.6 KiB usable of 1.0 MiB per rank (--device-mem): the run may run out of memory' \
  "$work/small.log" || { cat "$work/small.log"; fail "zero1 in 1 MiB: no warning"; }
! grep -q 'predicted to need' "$work/fit.log" "$work/strat.log" || fail "a run that fits warns that it may not"
echo "ok: validation that reads more sequences than the data hold warns, with the count that fits; flags that do nothing say so, another strategy's too"
