#!/usr/bin/env bash
# plan --config RUN.toml plans the run that gpt_train --config RUN.toml does:
#   1. its table equals plan's with the same model, shape, batch and samples
#      given as flags (a flag given beside --config wins over the file);
#   2. the run itself, 2 ranks: ddp's measured peak per rank equals the
#      plan's ddp total byte for byte (model state, activations and sampling's
#      key/value cache are exact), zero3's stays within its bound; and
#      for the same run with steps = 0 (an evaluation), ddp's too, and it
#      plans on 3 ranks, which global-batch 8 does not divide (per batch);
#      plan --eval of the training config plans the same;
#   3. a global batch the ranks cannot split is an error naming the file.
#   plan_config.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
plan="$build/apps/plan"
cfg="$work/run.toml"
sed 's/^sample-tokens = 0$/sample-tokens = 8\nsample-every = 3/' "$work/tiny.toml" >"$cfg"
grep -q "sample-tokens = 8" "$cfg" || fail "could not write $cfg"

# 1. --config equals the same run given as flags
"$plan" --config "$cfg" --ranks 2 --json "$work/plan.json" >"$work/a.txt" || { cat "$work/a.txt"; fail "plan --config failed"; }
"$plan" --model tiny --n-layer 2 --n-embd 64 --n-head 4 --n-ctx 32 --seq-len 32 --device cpu --micro-batch 2 \
  --accum 2 --threads 1 --sample-tokens 8 --ranks 2 >"$work/b.txt" || fail "plan with flags failed"
diff "$work/a.txt" "$work/b.txt" >"$work/ab.diff" || { cat "$work/ab.diff"; fail "plan --config differs from the same run as flags"; }
"$plan" --config "$cfg" --ranks 2 --micro-batch 4 | grep -q "micro-batch 4 x accum 1" ||
  fail "--micro-batch 4 beside --config: not micro-batch 4 x accum 1"
echo "ok: plan --config equals the run given as flags; a flag beside it wins"

# 2. the run's measured peak
total() { python3 -c 'import json, sys
print(next(r["mem"]["total"] for r in json.load(open(sys.argv[1]))["rows"] if r["name"] == sys.argv[2]))' "$work/plan.json" "$1"; }
peak() { python3 -c 'import json, sys
print([json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][-1]["peak_bytes"])' "$1"; }
for s in ddp zero3; do
  "$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" --config "$cfg" --strategy $s --metrics "$work/$s.jsonl" \
    >"$work/$s.log" 2>&1 || { cat "$work/$s.log"; fail "$s: the run failed"; }
  grep -q "sampled 8 tokens" "$work/$s.log" || fail "$s: the run did not sample"
  measured=$(peak "$work/$s.jsonl"); planned=$(total $s)
  echo "$s: measured peak $measured bytes per rank, planned $planned"
  if [[ $s == ddp ]]; then
    [[ $measured == "$planned" ]] || fail "ddp: measured peak $measured != planned $planned"
  else
    ((measured <= planned)) || fail "zero3: measured peak $measured above the plan's bound $planned"
  fi
done
echo "ok: ddp's measured peak is the plan's total; zero3's is within it"

# 2b. the same for an evaluation (steps = 0): the parameters alone, one block's activations, the sample's cache;
# per batch (a forward pass), on any number of ranks
sed 's/^steps = 6$/steps = 0/' "$cfg" >"$work/eval.toml"
"$plan" --config "$work/eval.toml" --ranks 2 --json "$work/plan.json" >"$work/eval_plan.txt" ||
  { cat "$work/eval_plan.txt"; fail "plan --config eval.toml failed"; }
grep -q "evaluation only (steps = 0): the parameters alone" "$work/eval_plan.txt" ||
  { cat "$work/eval_plan.txt"; fail "plan of steps = 0 does not say it plans an evaluation"; }
"$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" --config "$work/eval.toml" --strategy ddp \
  --metrics "$work/eval.jsonl" >"$work/eval.log" 2>&1 || { cat "$work/eval.log"; fail "the evaluation failed"; }
measured=$(peak "$work/eval.jsonl"); planned=$(total ddp); trained=$(peak "$work/ddp.jsonl")
echo "evaluation, ddp: measured peak $measured bytes per rank, planned $planned (training: $trained)"
[[ $measured == "$planned" ]] || fail "evaluation, ddp: measured peak $measured != planned $planned"
((measured < trained)) || fail "the evaluation's peak $measured is not below training's $trained"
# plan --eval of the training config is the same plan.
"$plan" --config "$cfg" --eval --ranks 2 --json "$work/plan_eval_flag.json" >"$work/eval_flag_plan.txt" ||
  { cat "$work/eval_flag_plan.txt"; fail "plan --config --eval failed"; }
diff "$work/eval_plan.txt" "$work/eval_flag_plan.txt" >"$work/eval_flag.diff" ||
  { cat "$work/eval_flag.diff"; fail "plan --eval differs from the plan of a config of steps = 0"; }
# An evaluation has no global batch: 3 ranks plan it; its times are a batch's.
"$plan" --config "$work/eval.toml" --ranks 3 >"$work/eval_plan3.txt" 2>&1 ||
  { cat "$work/eval_plan3.txt"; fail "plan of steps = 0 on 3 ranks (global-batch 8) failed"; }
grep -q "micro-batch 2 x accum 1, .*evaluation only (steps = 0): the parameters alone; times per batch" \
  "$work/eval_plan3.txt" && grep -q "| comm/batch MiB (intra / inter) | compute s | exposed comm s | batch s |" \
  "$work/eval_plan3.txt" || { cat "$work/eval_plan3.txt"; fail "plan of steps = 0: its header"; }
echo "ok: an evaluation's measured peak is the plan's total, below training's; its plan needs no global batch"

# 3. a batch the ranks cannot split
out=$("$plan" --config "$cfg" --ranks 3 2>&1) && fail "--ranks 3 with global-batch 8 succeeded"
grep -qx "error: invalid global-batch = 8 in $cfg: must be a positive multiple of micro-batch (2) x data-parallel ranks (3): 6 or 12 would do" <<<"$out" ||
  { echo "$out"; fail "unexpected error for --ranks 3"; }
echo "ok: a global batch the ranks cannot split is one error line naming the file"
