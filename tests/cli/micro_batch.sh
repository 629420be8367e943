#!/usr/bin/env bash
# A micro-batch that is not given is fitted to the world size: the largest
# count up to 8 that divides a rank's share of the global batch
# (io/run_config.hpp: fit_micro_batch). With tiny.toml's micro-batch removed
# (global batch 8):
#   1. 1 rank trains micro-batches of 8, and logs no fitting;
#   2. 2 ranks train micro-batches of 4, say so in one line, and follow
#      1 rank's losses (the same global batch);
#   3. a global batch of 22 on 2 ranks is 11 micro-batches of 1 a rank;
#   4. 3 ranks, which do not divide 8, end in one error line naming both;
#   5. a micro-batch given is kept: 2 ranks with --micro-batch 2 accumulate 2;
#   6. plan --config fits it to --ranks as gpt_train does, and so does plan
#      --global-batch without --micro-batch (the same table as the fitted
#      micro-batch and accumulation given as flags); --global-batch with
#      --accum is an error;
#   7. the job scripts' default task counts (4, 2 nodes x 4) can run
#      input/default.toml, their default config (with its old micro-batch
#      of 8 they could not).
#   micro_batch.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
sed -i '/^micro-batch = /d' "$work/tiny.toml"
header() {  # NAME: "micro_batch accum_steps world_size" from the run's metrics header
  python3 -c "import json,sys; h = json.loads(open(sys.argv[1]).readline())
print(h['config']['micro_batch'], h['accum_steps'], h['world_size'])" "$work/$1.jsonl"
}
expect_header() {  # NAME "MICRO ACCUM WORLD"
  local got
  got=$(header "$1") || fail "$1: no metrics header"
  [[ "$got" == "$2" ]] || fail "$1: micro-batch, accumulation and world are '$got', expected '$2'"
}

tiny_run_ok one 1 --steps 3 --metrics "$work/one.jsonl"
expect_header one "8 1 1"
! grep -q 'micro-batch [0-9]*: not given' "$work/one.log" || fail "one: the default 8 was logged as fitted"

tiny_run_ok two 2 --steps 3 --metrics "$work/two.jsonl"
expect_header two "4 1 2"
line="micro-batch 4: not given, so the largest count up to 8 that divides a rank's 4 sequences a step (global-batch 8 / 2 ranks); --micro-batch sets it"
grep -qF "$line" "$work/two.log" || { grep 'micro' "$work/two.log"; fail "two: no line '$line'"; }
python3 - "$work/one.jsonl" "$work/two.jsonl" <<'PY' || fail "two: the losses are not 1 rank's"
import json, sys
def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "type" not in r and "loss" in r]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 3, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-5 * abs(x), (a, b)
print("losses, 1 rank and 2:", a, b)
PY

tiny_run_ok odd 2 --steps 1 --global-batch 22 --metrics "$work/odd.jsonl"
expect_header odd "1 11 2"

rc=0
tiny_run three 3 --steps 1 || rc=$?
(( rc != 0 )) || fail "three: 3 ranks with a global batch of 8 ran"
want="error: invalid global-batch = 8: must be a multiple of the 3 data-parallel ranks (each takes global-batch / ranks sequences a step): 6 or 9 would do"
n=$(grep -cxF "$want" "$work/three.log")
(( n >= 1 )) || { cat "$work/three.log"; fail "three: no line '$want'"; }

tiny_run_ok given 2 --steps 1 --micro-batch 2 --metrics "$work/given.jsonl"
expect_header given "2 2 2"
! grep -q 'not given' "$work/given.log" || fail "given: a given micro-batch was fitted"

out=$("$build/apps/plan" --config "$work/tiny.toml" --ranks 4 2>&1) || { echo "$out"; fail "plan --config --ranks 4 failed"; }
grep -q 'micro-batch 2 x accum 1' <<<"$out" || { echo "$out"; fail "plan: not micro-batch 2 x accum 1 on 4 ranks"; }
"$build/apps/plan" --model gpt2-1.5b --ranks 16 --ranks-per-node 8 --global-batch 512 >"$work/global.txt" ||
  fail "plan --global-batch 512 failed"
"$build/apps/plan" --model gpt2-1.5b --ranks 16 --ranks-per-node 8 --micro-batch 8 --accum 4 >"$work/flags.txt" ||
  fail "plan --micro-batch 8 --accum 4 failed"
diff "$work/global.txt" "$work/flags.txt" || fail "plan --global-batch 512 on 16 ranks is not micro-batch 8 x accum 4"
grep -q 'micro-batch 2 x accum 4' <("$build/apps/plan" --ranks 16 --global-batch 128 --micro-batch 2) ||
  fail "plan --global-batch 128 --micro-batch 2 on 16 ranks is not micro-batch 2 x accum 4"
out=$("$build/apps/plan" --global-batch 64 --accum 2 2>&1)
[[ $? == 1 && "$out" == "error: command line: --accum excludes --global-batch" ]] ||
  { echo "$out"; fail "plan --global-batch with --accum: not one error line, exit 1"; }
# The job scripts' own task counts (#SBATCH --ntasks, or --nodes x --ntasks-per-node) take the default config
# as it is: plan refuses a batch its ranks cannot split, as gpt_train would.
for js in "$root"/jobscripts/*.sbatch; do
  grep -qE 'gpt_train_args|gpt_sweep_grid' "$js" || continue  # those that run GPT_CONFIG's default
  n=$(sed -n 's/^#SBATCH --ntasks=\([0-9]*\)$/\1/p' "$js")
  if [[ -z "$n" ]]; then
    nodes=$(sed -n 's/^#SBATCH --nodes=\([0-9]*\)$/\1/p' "$js")
    per=$(sed -n 's/^#SBATCH --ntasks-per-node=\([0-9]*\)$/\1/p' "$js")
    n=$(( ${nodes:-1} * ${per:-1} ))
  fi
  out=$("$build/apps/plan" --config "$root/input/default.toml" --ranks "$n" 2>&1) ||
    { echo "$out"; fail "$(basename "$js")'s $n tasks cannot run input/default.toml"; }
  echo "$(basename "$js"): $n tasks, $(grep -o 'micro-batch [0-9]* x accum [0-9]*' <<<"$out")"
done
echo "ok: a micro-batch not given is fitted to the ranks (8, 4, 1 x 11; 3 ranks an error), a given one kept, plan alike"
