#!/usr/bin/env bash
# Ranks given different configurations or data (io/same_on_ranks.hpp), as
# MPMD launches ('mpirun -np 1 A : -np 1 B') make them, end the job at
# start-up with one line naming the key or the shard and the first rank
# that differs, within 60 s (before, a rank with another batch size or
# --threads waited in a collective until --comm-timeout, and a node with an
# extra shard trained on another data order without a word):
#   1. another --seed on rank 1: the key, both values, both ranks;
#   2. two keys differ: the first, and how many more;
#   3. ranks 1 and 2 of 3 differ: the first named, the other counted;
#   4. --val-data on rank 1 only: it says which rank has it;
#   5. rank 1's data directory holds an extra shard, or rank 0's does (one
#      missing on rank 1), or rank 1's copy has another name: the shard
#      named, with the counts;
#   6. rank 1's copy of shard 1 holds fewer tokens: named, with both counts;
#   7. what may differ does not stop the run and changes no loss: rank 1
#      reads its own copy of the data in another directory, with its own
#      --threads (0: the collective core share, which rank 0 with
#      --threads 1 takes part in too), --log-level and --metrics.
#   same_on_ranks.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh" "$@"
host=$(hostname)
t="$build/apps/gpt_train"
base=(--config "$work/tiny.toml" --steps 2)
launch() {  # NAME EXPECTED-EXIT MPIRUN-ARGS...: runs; checks the exit within 60 s and no crash
  local name=$1 want=$2 rc=0; shift 2
  timeout 60 "$root/scripts/mpirun.sh" "$@" >"$work/$name.log" 2>&1 || rc=$?
  [[ $rc == "$want" ]] || { cat "$work/$name.log"; fail "$name: exit $rc, expected $want"; }
  ! grep -qE 'terminate called|Segmentation fault|core dumped' "$work/$name.log" || { cat "$work/$name.log"; fail "$name: crashed"; }
  grep '^error:' "$work/$name.log" > "$work/$name.errors"
}
expect_line() {  # NAME REGEX: the one error line
  local name=$1 re=$2 n
  n=$(wc -l < "$work/$name.errors")
  (( n == 1 )) || { cat "$work/$name.log"; fail "$name: $n error lines, expected 1"; }
  grep -qE -- "^error: $re\$" "$work/$name.errors" || { cat "$work/$name.log"; fail "$name: the error line is not: error: $re"; }
  echo "ok: $name: $(cat "$work/$name.errors")"
}
config_tail="; every rank must be given the same flags and config file \(all but the files a node may hold its own copy of, and --threads, --cpu-gemm and --log-level\)"
data_tail="; every rank must read the same shards \(file names, order and token counts\): a node's copy of them may be incomplete or of another version"

launch seed 1 -np 1 "$t" "${base[@]}" : -np 1 "$t" "${base[@]}" --seed 5
expect_line seed "the ranks were not given the same configuration: seed = 5 on rank 1 \(on $host\), 1337 on rank 0 \(on $host\)$config_tail"

launch two_keys 1 -np 1 "$t" "${base[@]}" : -np 1 "$t" "${base[@]}" --global-batch 4 --lr 1e-3
expect_line two_keys "the ranks were not given the same configuration: global-batch = 4 on rank 1 \(on $host\), 8 on rank 0 \(on $host\), and 1 other key$config_tail"

launch ranks 1 -np 1 "$t" "${base[@]}" --global-batch 6 : -np 2 "$t" "${base[@]}" --global-batch 6 --clip 0.5
expect_line ranks "the ranks were not given the same configuration: clip = 0.5 on rank 1 \(on $host\), 1.0 on rank 0 \(on $host\) \(and 1 other rank\)$config_tail"

launch val 1 -np 1 "$t" "${base[@]}" : -np 1 "$t" "${base[@]}" --val-data "$work/data/d_train_*.bin"
expect_line val "the ranks were not given the same configuration: --val-data is given on rank 1 \(on $host\), not on rank 0 \(on $host\)$config_tail"

# Rank 1's copies of the data in a directory of its own.
mkdir -p "$work/extra" "$work/short" "$work/copy" "$work/renamed"
cp "$work"/data/d_train_*.bin "$work/extra/"
cp "$work"/data/d_train_*.bin "$work/short/"
cp "$work"/data/d_train_*.bin "$work/copy/"
cp "$work/data/d_train_000000.bin" "$work/extra/d_train_000099.bin"
cp "$work/data/d_train_000000.bin" "$work/renamed/d_train_000001.bin"
n0=$(python3 - "$work/data/d_train_000000.bin" "$work/short/d_train_000000.bin" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<i", b, 8)[0]
keep = n - 100  # the last 100 tokens gone, the header saying so
h = bytearray(b[:1024]); struct.pack_into("<i", h, 8, keep)
open(sys.argv[2], "wb").write(bytes(h) + b[1024:1024 + 2 * keep])
print(n)
PY
) || fail "writing the short shard"
nshards=$(ls "$work"/data/d_train_*.bin | wc -l)

launch extra 1 -np 1 "$t" "${base[@]}" : -np 1 "$t" "${base[@]}" --data "$work/extra/d_train_*.bin"
expect_line extra "the ranks do not read the same --data: rank 1 \(on $host\) has $((nshards + 1)) shards, rank 0 \(on $host\) $nshards: the first extra is shard $((nshards + 1)), $work/extra/d_train_000099.bin \($n0 tokens\)$data_tail"

launch missing 1 -np 1 "$t" "${base[@]}" --data "$work/extra/d_train_*.bin" : -np 1 "$t" "${base[@]}"
expect_line missing "the ranks do not read the same --data: rank 1 \(on $host\) has $nshards shards?, rank 0 \(on $host\) $((nshards + 1)): the first missing is shard $((nshards + 1)), $work/extra/d_train_000099.bin \($n0 tokens\)$data_tail"

launch renamed 1 -np 1 "$t" "${base[@]}" : -np 1 "$t" "${base[@]}" --data "$work/renamed/d_train_*.bin"
expect_line renamed "the ranks do not read the same --data: shard 1 is $work/data/d_train_000000.bin \($n0 tokens\) on rank 0 \(on $host\) but $work/renamed/d_train_000001.bin \($n0 tokens\) on rank 1 \(on $host\)$data_tail"

launch short 1 -np 1 "$t" "${base[@]}" : -np 1 "$t" "${base[@]}" --data "$work/short/d_train_*.bin"
expect_line short "the ranks do not read the same --data: shard 1, d_train_000000.bin, holds $n0 tokens on rank 0 \(on $host\) but $((n0 - 100)) on rank 1 \(on $host\) \($work/short/d_train_000000.bin\)$data_tail"

launch same_2 0 -np 2 "$t" "${base[@]}" --log-every 1
launch own_copy 0 -np 1 "$t" "${base[@]}" --log-every 1 : \
  -np 1 "$t" "${base[@]}" --log-every 1 --data "$work/copy/d_train_*.bin" --threads 0 --log-level warn --metrics "$work/rank1.jsonl"
losses() { grep -oE 'loss [0-9.]+' "$work/$1.log"; }
[[ -n "$(losses same_2)" && "$(losses same_2)" == "$(losses own_copy)" ]] ||
  { cat "$work/same_2.log" "$work/own_copy.log"; fail "own_copy: its losses differ from the same run's on the same data"; }
echo "ok: own_copy: the run's losses ($(losses own_copy | paste -sd' ')) are those of 2 ranks given the same"
