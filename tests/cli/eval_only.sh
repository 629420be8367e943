#!/usr/bin/env bash
# --steps 0 evaluates a model without training it, and every run's metrics
# hold the evaluation it starts with. 2 ranks, the tiny set-up with
# validation data and HellaSwag-format examples made from its text:
#   1. 6 steps, zero3, a checkpoint at the end: the metrics hold
#      {"type": "eval", "step": 0, "val_loss", "hellaswag", "seconds"}
#      after the run's header and before the first step, and step 6's record
#      the validation and HellaSwag at the end;
#   2. --steps 0 from the config without `data` (none is needed), ddp: the
#      seed's initialisation, evaluated as run 1's step 0 bit for bit; the
#      log says nothing is trained, no checkpoint is written, the model
#      state is the parameters alone (4 bytes each, no gradients or
#      moments), and the summary reports the evaluation (final_val_loss,
#      final_loss -1, steps_done 0);
#   3. --steps 0 --init-from run 1's checkpoint, zero2: run 1's step 6 bit for
#      bit;
#   4. --steps 0 --resume that checkpoint: the eval record is at step 6;
#   5. --steps 0 with nothing to evaluate warns; --steps 3 without data is
#      one line naming the missing --data;
#   6. --steps 0 --resume auto in an empty directory warns that it evaluates
#      the seed's initialisation;
#   7. --steps 0 from the training config (its --data given, not read): run
#      2's evaluation bit for bit; on 3 ranks with --micro-batch 16 (which
#      global-batch 8 cannot be split into) and --lr-decay-steps 100 (longer
#      than any schedule of 0 steps) it runs, its header's accum_steps is 0,
#      and --recompute warns that it changes nothing.
#   eval_only.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
"$build/apps/prepare_data" --input "$work/text.txt" --out "$work/val" --name v --val-fraction 0.2 >/dev/null ||
  fail "prepare_data"
python3 "$root/tests/make_hellaswag.py" "$work/text.txt" "$work/hellaswag.jsonl" 24 || fail "make_hellaswag.py"
grep -v '^data' "$work/tiny.toml" >"$work/nodata.toml"
evals=(--val-data "$work/val/v_val_*.bin" --val-batches 2 --hellaswag "$work/hellaswag.jsonl")
tiny_run_ok train 2 --strategy zero3 "${evals[@]}" --ckpt-dir "$work/ckpt" --metrics "$work/train.jsonl"
nodata_run() {  # tiny_run with nodata.toml
  local name=$1 np=$2; shift 2
  "$root/scripts/mpirun.sh" -np "$np" "$trainer" --config "$work/nodata.toml" "$@" >"$work/$name.log" 2>&1
}
eval_run() {
  local name=$1 rc=0; shift
  nodata_run "$name" 2 --steps 0 "${evals[@]}" --ckpt-dir "$work/ckpt_$name" --metrics "$work/$name.jsonl" "$@" ||
    rc=$?
  (( rc == 0 )) || { cat "$work/$name.log"; fail "$name: the run failed (exit $rc)"; }
}
eval_run fresh --strategy ddp
eval_run imported --strategy zero2 --init-from "$work/ckpt/step_00000006"
eval_run resumed --resume "$work/ckpt/step_00000006"
grep -q 'nothing to train: --steps is 0; validation and sample only' "$work/fresh.log" ||
  { cat "$work/fresh.log"; fail "the evaluation run does not say it trains nothing"; }
grep -q 'data: none (--steps 0: evaluation only)' "$work/fresh.log" ||
  { cat "$work/fresh.log"; fail "the evaluation run's data line"; }
grep -q 'model state .* MiB per rank (the parameters only: --steps 0 keeps no gradients or optimizer state)' \
  "$work/fresh.log" || { cat "$work/fresh.log"; fail "the evaluation run's model-state line"; }
grep -q 'no step trained | peak mem/rank' "$work/fresh.log" ||
  { cat "$work/fresh.log"; fail "the evaluation run's summary"; }
[[ -z "$(ls -A "$work/ckpt_fresh")" ]] || fail "--steps 0 wrote a checkpoint: $(ls "$work/ckpt_fresh")"
python3 - "$work" <<'PY' || fail "the evaluation records"
import json, sys
def recs(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
def evals(rs):
    return [r for r in rs if r.get("type") == "eval"]
train = recs("train")
steps = [r for r in train if "type" not in r]
start = evals(train)
assert len(start) == 1 and train.index(start[0]) == 1 and start[0]["step"] == 0, start
assert 5.0 < start[0]["val_loss"] < 6.0 and start[0]["hellaswag"]["examples"] == 24 and start[0]["seconds"] >= 0, start
end = steps[-1]
assert end["step"] == 6 and "val_loss" in end and "hellaswag" in end, end
assert end["val_loss"] < start[0]["val_loss"] - 0.3, (start, end)  # trained: the two are not the same numbers
def same(ev, want, what):
    assert ev["val_loss"] == want["val_loss"], (what, ev, want)
    for k in ("acc", "acc_norm", "examples"):
        assert ev["hellaswag"][k] == want["hellaswag"][k], (what, k, ev, want)
for name, step, want in (("fresh", 0, start[0]), ("imported", 0, end), ("resumed", 6, end)):
    rs = recs(name)
    ev = evals(rs)
    assert len(ev) == 1 and ev[0]["step"] == step, (name, ev)
    same(ev[0], want, name)
    assert not [r for r in rs if "type" not in r], (name, "a step record")
    s = rs[-1]
    assert s["type"] == "summary" and s["steps_done"] == step and s["final_loss"] == -1, (name, s)
    assert s["final_val_loss"] == ev[0]["val_loss"] and s["final_hellaswag_acc_norm"] == ev[0]["hellaswag"]["acc_norm"], s
# The parameters alone (fp32: 4 bytes each, replicated under ddp): no gradients, no moments.
fresh = recs("fresh")
assert fresh[0]["model_state_bytes"] == 4 * fresh[0]["params_stored"], fresh[0]
assert fresh[-1]["model_state_bytes"] == fresh[0]["model_state_bytes"], fresh[-1]
PY
# Nothing to evaluate: a warning says so.
nodata_run idle 1 --steps 0 && grep -q 'warning.*--steps 0 without --val-data, --hellaswag or --sample-tokens: there is nothing to evaluate' \
  "$work/idle.log" || { cat "$work/idle.log"; fail "--steps 0 with nothing to evaluate: no warning"; }
! grep -q 'nothing to evaluate' "$work/fresh.log" || fail "an evaluation run warns that there is nothing to evaluate"
rc=0; nodata_run nodata 2 --steps 3 || rc=$?
(( rc != 0 )) && grep -q 'error: missing data: give --data GLOB (llm.c token shards), or --steps 0 to evaluate only' \
  "$work/nodata.log" || { cat "$work/nodata.log"; fail "--steps 3 without data (exit $rc)"; }
# --resume auto that finds no checkpoint would evaluate the seed's initialisation: a warning says so.
mkdir -p "$work/ckpt_empty"
nodata_run empty 1 --steps 0 "${evals[@]}" --resume auto --ckpt-dir "$work/ckpt_empty" &&
  grep -q "warning.*resume auto: no checkpoint in $work/ckpt_empty: --steps 0 evaluates the seed's initialisation" \
    "$work/empty.log" || { cat "$work/empty.log"; fail "--steps 0 --resume auto without a checkpoint: no warning"; }
# An evaluation reads no training data and has no global batch or schedule.
tiny_run_ok with_data 2 --steps 0 "${evals[@]}" --strategy ddp --metrics "$work/with_data.jsonl"
grep -q "data: none (--steps 0: evaluation only; --data $work/data/d_train_\*.bin is not read); batches of micro 2 x ranks 2" \
  "$work/with_data.log" || { cat "$work/with_data.log"; fail "the evaluation's data line with --data given"; }
tiny_run_ok odd 3 --steps 0 "${evals[@]}" --micro-batch 16 --lr-decay-steps 100 --recompute gelu-ln \
  --metrics "$work/odd.jsonl"
grep -q 'warning.*--recompute gelu-ln with --steps 0: an evaluation keeps one block.s activations already' \
  "$work/odd.log" || { cat "$work/odd.log"; fail "--recompute with --steps 0: no warning"; }
python3 - "$work" <<'PY' || fail "the evaluation from the training config"
import json, sys
def recs(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
ev = lambda name: [r for r in recs(name) if r.get("type") == "eval"][0]
assert ev("with_data")["val_loss"] == ev("fresh")["val_loss"], (ev("with_data"), ev("fresh"))
odd = recs("odd")
assert odd[0]["accum_steps"] == 0 and odd[0]["train_tokens"] == 0 and odd[0]["world_size"] == 3, odd[0]
assert ev("odd")["hellaswag"]["examples"] == 24, ev("odd")
PY
echo "ok: --steps 0 evaluates as the training run did at step 0 and step 6; the start's evaluation is in the metrics"
echo "ok: an evaluation from a training config reads no training data and needs no global batch that divides"
