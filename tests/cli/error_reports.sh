#!/usr/bin/env bash
# The error lines of a multi-rank job (comm/error_report.hpp): rank 0
# prints each distinct error once, naming its ranks and host unless every
# rank had it. Rank-specific errors come from MPMD launches, where ranks get
# different --data ('mpirun -np 1 A : -np 1 B'), as when one node lacks a file:
#   1. 3 ranks, the same truncated shard: one line naming no ranks;
#   2. rank 1 alone has a bad shard while rank 0 trains: one line naming
#      rank 1 and its host (rank 1 prints it itself: rank 0 has no error);
#   3. ranks 0-1 one error, rank 2 another: two lines, in rank order, each
#      naming its ranks;
#   4. rank 1's copy of the data has ids past the vocabulary in the part of
#      it that rank 0 checks at start-up, in rank 0's good copy: rank 1
#      meets one in its first batch, and its error says why the check
#      passed.
# Every case exits 1 within 60 s and shows no crash.
#   error_reports.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
host=$(hostname)
good=(--config "$work/tiny.toml" --steps 2 --micro-batch 2)
head -c 100 /dev/zero > "$work/short.bin"
printf 'not a shard, but long enough to hold a whole header of 1024 bytes %01000d' 0 > "$work/magic.bin"
short="$work/short.bin: truncated shard: 100 bytes, shorter than the 1024-byte header"
magic="$work/magic.bin: bad magic [-0-9]+ \(expected 20240520\): not an llm.c token shard"
launch() {  # NAME MPIRUN-ARGS...: runs, checks exit 1 within 60 s and no crash
  local name=$1 rc=0; shift
  timeout 60 "$root/scripts/mpirun.sh" "$@" >"$work/$name.log" 2>&1 || rc=$?
  [[ $rc == 1 ]] || { cat "$work/$name.log"; fail "$name: exit $rc, expected 1"; }
  ! grep -qE 'terminate called|Segmentation fault|core dumped' "$work/$name.log" || { cat "$work/$name.log"; fail "$name: crashed"; }
  grep '^error:' "$work/$name.log" > "$work/$name.errors"
}
expect_lines() {  # NAME REGEX...: the error lines, one regex each, in order
  local name=$1; shift
  local n; n=$(wc -l < "$work/$name.errors")
  (( n == $# )) || { cat "$work/$name.log"; fail "$name: $n error lines, expected $#"; }
  local i=1 re
  for re in "$@"; do
    sed -n "${i}p" "$work/$name.errors" | grep -qE -- "^error: $re\$" ||
      { cat "$work/$name.log"; fail "$name: error line $i is not: error: $re"; }
    i=$((i + 1))
  done
  echo "ok: $name: $(paste -sd'|' "$work/$name.errors")"
}
t="$build/apps/gpt_train"
launch all -np 3 "$t" "${good[@]}" --global-batch 6 --data "$work/short.bin"
expect_lines all "$short"
launch one -np 1 "$t" "${good[@]}" --global-batch 4 : \
  -np 1 "$t" "${good[@]}" --global-batch 4 --data "$work/magic.bin"
expect_lines one "$magic \(rank 1 on $host\)"
launch two -np 2 "$t" "${good[@]}" --global-batch 6 --data "$work/short.bin" : \
  -np 1 "$t" "${good[@]}" --global-batch 6 --data "$work/magic.bin"
expect_lines two "$short \(ranks 0-1 on $host\)" "$magic \(rank 2 on $host\)"
# 4. Every 10th token of the first half of rank 1's copy of the first shard is 300 (rank 0 checks that
# half, in its own copy). The copy's name and size are the original's, as a node's copy of it has them.
mkdir -p "$work/damaged"
cp "$work"/data/d_train_*.bin "$work/damaged/"
python3 - "$work/data/d_train_000000.bin" "$work/damaged/d_train_000000.bin" <<'PY' || fail "writing the damaged copy"
import sys
b = bytearray(open(sys.argv[1], "rb").read())
n = (len(b) - 1024) // 2
for i in range(0, n // 2, 10):
    b[1024 + 2 * i: 1026 + 2 * i] = (300).to_bytes(2, "little")
open(sys.argv[2], "wb").write(b)
PY
six=(--config "$work/tiny.toml" --steps 6 --micro-batch 2 --global-batch 4)
launch copy -np 1 "$t" "${six[@]}" : -np 1 "$t" "${six[@]}" --data "$work/damaged/d_train_*.bin"
expect_lines copy "$work/damaged/d_train_000000.bin: token id 300 at position [0-9]+ is outside the model's vocabulary \(vocab_size 256\) in a batch, after the start-up check passed: the data changed since, or this rank's copy differs from those that other ranks checked \(rank 1 on $host\)"
