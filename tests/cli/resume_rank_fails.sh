#!/usr/bin/env bash
# --resume auto when a checkpoint's read fails on one rank only
# (GPT_TEST_CKPT_LOAD_FAIL_RANK=1: rank 1 finds it damaged before opening
# the file, so rank 0 is left in HDF5's collective open). Rank 1 waits for
# the vote on passing over it for half of --comm-timeout (20 s here), then
# ends the job with its own error: no fall-back to an older checkpoint that
# only some ranks agreed on, no wait for the StallGuard's full timeout, and
# nothing renamed.
#   resume_rank_fails.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
tiny_run_ok save 2 --steps 2 --ckpt-dir "$work/ckpt"
[[ -f "$work/ckpt/step_00000002/COMPLETE" ]] || fail "no checkpoint at step 2"
start=$(date +%s.%N)
GPT_TEST_CKPT_LOAD_FAIL_RANK=1 tiny_run resume 2 --steps 4 --ckpt-dir "$work/ckpt" --resume auto --comm-timeout 20
rc=$?
took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
cat "$work/resume.log"
(( rc != 0 )) || fail "the resume succeeded with rank 1's read failing"
want="error: $work/ckpt/step_00000002/state.h5: cannot read it (GPT_TEST_CKPT_LOAD_FAIL_RANK) (only here: the other ranks are still reading it after 10 s, so --resume auto cannot pass over it)"
grep -qF "$want" "$work/resume.log" || fail "expected the line: $want"
grep -q "no progress" "$work/resume.log" && fail "the job waited for the StallGuard"
python3 -c "import sys; sys.exit(not 9.5 < float(sys.argv[1]) < 40)" "$took" || fail "the job ended after $took s, not after the 10 s vote"
[[ -f "$work/ckpt/step_00000002/COMPLETE" && ! -e "$work/ckpt/damaged-step_00000002" ]] || fail "the checkpoint was set aside"
echo "ok: rank 1's failed read ended the job after $took s with its own error (exit $rc); nothing renamed"
