#!/usr/bin/env bash
# A resume warns when it cannot continue the data stream of the run that
# wrote the checkpoint (and stays silent when it can). 2 ranks write a zero2
# checkpoint at step 2; then, on 1 rank under ddp (another world size and
# strategy, which change nothing in the data stream):
#   1. the same settings: no warning;
#   2. --seed 5: a warning naming both seeds;
#   3. --seq-len 16: a warning naming both sequence counts and lengths;
#   4. other data (fewer tokens): a warning naming both sequence counts;
#   5. ckpt_tool info shows the recorded count of sequences;
#   6. --resume given the directory of checkpoints (not one of them) is one
#      error line naming the newest checkpoint in it and --resume auto, and
#      ckpt_tool info says the same.
#   resume_data.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
tiny_run_ok first 2 --strategy zero2 --steps 2 --ckpt-dir "$work/ckpt"
ckpt="$work/ckpt/step_00000002"
head -c 40000 "$work/text.txt" > "$work/small.txt"
"$build/apps/prepare_data" --input "$work/small.txt" --out "$work/small" --name s --val-fraction 0 >/dev/null ||
  fail "prepare_data small.txt"
resume() { local name=$1; shift; tiny_run_ok "$name" 1 --strategy ddp --steps 3 --resume "$ckpt" "$@"; }
warnings() { grep 'warning.*resume:' "$work/$1.log"; }
resume same
[[ -z "$(warnings same)" ]] || fail "the same settings warn: $(warnings same)"
resume seed --seed 5
warnings seed | grep -q "resume: --seed is 5 here, 1337 in the checkpoint's run: the data order (and the samples) after step 2 differ" ||
  { cat "$work/seed.log"; fail "--seed 5: no warning naming both seeds"; }
resume seq --seq-len 16
warnings seq | grep -q "resume: the training data are 7312 sequences of 16 tokens here, 3656 of 32 in the checkpoint's run: its data position (epoch 0, sequence 16) counts those" ||
  { cat "$work/seq.log"; fail "--seq-len 16: no warning naming both sequence counts"; }
resume data --data "$work/small/s_train_*.bin"
warnings data | grep -qE "resume: the training data are [0-9]+ sequences of 32 tokens here, 3656 of 32 in the checkpoint's run" ||
  { cat "$work/data.log"; fail "other data: no warning naming both sequence counts"; }
[[ "$(warnings data)" != *"are 3656 sequences"* ]] || fail "other data: the small data set has as many sequences"
"$build/apps/ckpt_tool" info "$ckpt" > "$work/info.txt" || fail "ckpt_tool info"
grep -q 'data position epoch 0 offset 16 of 3656 sequences' "$work/info.txt" ||
  { cat "$work/info.txt"; fail "ckpt_tool info does not show the data's sequence count"; }
tiny_run dir 2 --steps 3 --resume "$work/ckpt"; rc=$?
[[ $rc == 1 && $(grep -c '^error:' "$work/dir.log") == 1 ]] || { cat "$work/dir.log"; fail "--resume DIR: exit $rc, expected 1 and one error line"; }
grep -qF "error: invalid resume = '$work/ckpt': a directory of checkpoints, not a checkpoint; the newest in it is $ckpt (or --ckpt-dir $work/ckpt --resume auto)" \
  "$work/dir.log" || { cat "$work/dir.log"; fail "--resume DIR: the error does not name the newest checkpoint"; }
"$build/apps/ckpt_tool" info "$work/ckpt" 2>"$work/info_dir.txt" && fail "ckpt_tool info DIR succeeded"
grep -qF "error: $work/ckpt: a directory of checkpoints, not a checkpoint; the newest in it is $ckpt" "$work/info_dir.txt" ||
  { cat "$work/info_dir.txt"; fail "ckpt_tool info DIR: the error does not name the newest checkpoint"; }
echo "ok: a resume warns about another seed, sequence length or data set, and only then; a directory of checkpoints is named as such"
