#!/usr/bin/env bash
# Crash safety: SIGKILL one rank while a checkpoint is being written (the
# test hook GPT_TEST_CKPT_WRITE_DELAY_MS makes the write slow). Then: the
# earlier checkpoint is intact and loadable, --resume auto ignores the partial
# one and finishes the run, ckpt_tool verify flags the partial one, and
# ckpt_tool list shows both and names the earlier one as where to resume.
#   ckpt_crash.sh BUILD_DIR WORK_DIR
set -uo pipefail
build="$1"; work="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work"; mkdir -p "$work"
python3 "$root/tests/make_text.py" "$work/text.txt" 3000
"$build/apps/prepare_data" --input "$work/text.txt" --out "$work" --name d --val-fraction 0 >/dev/null || exit 1
args=(--data "$work/d_train_*.bin" --n-layer 2 --n-embd 64 --n-head 4 --n-ctx 32 --seq-len 32 --global-batch 8
      --micro-batch 4 --steps 4 --threads 1 --sample-tokens 0 --strategy zero3 --ckpt-dir "$work/ckpt" --ckpt-every 2)
GPT_TEST_CKPT_WRITE_DELAY_MS=150 "$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" "${args[@]}" \
  --metrics "$work/crash.jsonl" >"$work/crash.log" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do  # wait until the second checkpoint is being written
  [[ -d "$work/ckpt/.partial-step_00000004" ]] && break
  sleep 0.1
done
[[ -d "$work/ckpt/.partial-step_00000004" ]] || { echo "FAIL: second checkpoint never started"; cat "$work/crash.log"; exit 1; }
sleep 0.5
victim=$(pgrep -f "gpt_train.*$work/crash.jsonl" | tail -1)
[[ -n "$victim" ]] || { echo "FAIL: no rank to kill"; exit 1; }
kill -9 "$victim"
wait "$launcher" && { echo "FAIL: the job survived a killed rank"; exit 1; }

fail() { echo "FAIL: $*"; ls -la "$work/ckpt"; exit 1; }
[[ -f "$work/ckpt/step_00000002/COMPLETE" ]] || fail "the earlier checkpoint is gone"
[[ ! -e "$work/ckpt/step_00000004" ]] || fail "a partial checkpoint was published"
"$build/apps/ckpt_tool" verify "$work/ckpt/step_00000002" >/dev/null || fail "earlier checkpoint does not verify"
out=$("$build/apps/ckpt_tool" verify "$work/ckpt/.partial-step_00000004") && fail "verify accepted the partial checkpoint"
grep -q "no COMPLETE marker" <<<"$out" || fail "verify did not name the problem: $out"
listed=$("$build/apps/ckpt_tool" list "$work/ckpt" --verify) || fail "ckpt_tool list failed: $listed"
grep -qE '^step_00000002 .* published, verified$' <<<"$listed" || fail "list does not show step 2 verified: $listed"
grep -qE '^\.partial-step_00000004 .* a write that did not finish$' <<<"$listed" || fail "list does not show the partial one: $listed"
grep -qx -- "--resume auto would start from: step_00000002 (verified)" <<<"$listed" || fail "list names another start: $listed"
"$root/scripts/mpirun.sh" -np 2 "$build/apps/gpt_train" "${args[@]}" --resume auto >"$work/resume.log" 2>&1 \
  || { cat "$work/resume.log"; fail "resume auto failed"; }
grep -q "resumed from $work/ckpt/step_00000002" "$work/resume.log" || fail "resume auto did not pick step 2"
[[ -f "$work/ckpt/step_00000004/COMPLETE" ]] || fail "the resumed run did not publish step 4"
echo "ok: killed rank $victim mid-write; step 2 intact, partial ignored and flagged, resumed to step 4"
