#!/usr/bin/env bash
# Samples continue --sample-prompt, and a checkpoint can be sampled without
# training. 2 ranks, zero3 (the sample gathers the sharded parameters):
#   1. 10 steps, greedy (--sample-temperature 0), a checkpoint at the end:
#      the final sample starts with the prompt;
#   2. resumed from that checkpoint with --steps 10: nothing is trained
#      (logged), and the sample equals run 1's, byte for byte;
#      both runs' metrics hold the sample as a {"type": "sample"} record;
#   3. the same on 1 rank (ddp) with 40 tokens, past the context of 32: the
#      first 24 are run 1's (the key/value cache up to the context, whole
#      passes over a sliding window after it).
#   sample_prompt.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
run() {
  local name=$1; shift
  tiny_run_ok "$name" 2 --strategy zero3 --steps 10 --sample-prompt 'ROMEO:' --sample-temperature 0 --sample-tokens 24 "$@"
}
sample() { sed -n '/sample at step 10:/,$p' "$1" | sed -n 2,3p; }
run train --ckpt-dir "$work/ckpt" --metrics "$work/train.jsonl"
run eval --resume "$work/ckpt/step_00000010" --metrics "$work/eval.jsonl"
[[ $(sample "$work/train.log") == ROMEO:* ]] || { cat "$work/train.log"; fail "the sample does not start with the prompt"; }
grep -q 'nothing to train: the checkpoint is at step 10 and --steps is 10' "$work/eval.log" ||
  { cat "$work/eval.log"; fail "the evaluation run does not say it trains nothing"; }
[[ "$(sample "$work/train.log")" == "$(sample "$work/eval.log")" ]] ||
  fail "the checkpoint's greedy sample differs from the training run's: '$(sample "$work/eval.log")'"
# The metrics record each sample: {"type": "sample", "step", "text", "prompt", "tokens", ...}, the
# same text in both runs, and the text the log shows.
python3 - "$work/train.jsonl" "$work/eval.jsonl" "$(sample "$work/train.log")" <<'PY' || fail "the metrics' sample records"
import json, sys
def samples(path):
    return [r for r in map(json.loads, open(path)) if r.get("type") == "sample"]
train, ev = samples(sys.argv[1]), samples(sys.argv[2])
assert [r["step"] for r in train] == [10] and [r["step"] for r in ev] == [10], (train, ev)
t = train[0]
assert t["prompt"] == "ROMEO:" and t["tokens"] == 24 and t["temperature"] == 0 and t["top_k"] == 0, t
assert t["text"].startswith("ROMEO:") and t["text"] == ev[0]["text"], (t["text"], ev[0]["text"])
assert t["text"].startswith(sys.argv[3]), (t["text"], sys.argv[3])
assert t["seconds"] >= 0 and t["comm_bytes"] > 0, t  # zero3 on 2 ranks gathers
# The run that trains nothing has no final loss (-1, as for validation), not a loss of 0.
summary = lambda path: [r for r in map(json.loads, open(path)) if r.get("type") == "summary"][-1]
assert summary(sys.argv[2])["final_loss"] == -1 and summary(sys.argv[1])["final_loss"] > 0, summary(sys.argv[2])
PY
tiny_run_ok long 1 --steps 10 --sample-prompt 'ROMEO:' --sample-temperature 0 --sample-tokens 40 \
  --resume "$work/ckpt/step_00000010"
long=$(sample "$work/long.log")
short=$(sample "$work/train.log")
(( ${#long} == ${#short} + 16 )) || fail "the 40-token sample has ${#long} bytes, the 24-token one ${#short}"
[[ "${long:0:${#short}}" == "$short" ]] ||
  fail "the 40-token sample does not start with the 24-token one: '$long' vs '$short'"
echo "ok: the sample continues the prompt; the checkpoint alone gives the same greedy sample, also past the context"
