#!/usr/bin/env bash
# gpt_train --help answers without MPI (on a login node, without a
# launcher): with Open MPI told to use a transport that does not exist, MPI
# cannot start, yet --help prints every flag and exits 0. Control: the same
# setting makes a run fail, so MPI really could not start. The other MPI
# program, bench_comm, answers --help so too.
#   help_without_mpi.sh GPT_TRAIN BENCH_COMM
set -uo pipefail
train="$1"; bench_comm="$2"
export OMPI_MCA_pml=nonexistent
out=$("$train" --help 2>&1) || { echo "$out"; echo "FAIL: --help exited non-zero"; exit 1; }
grep -q -- "--comm-timeout" <<<"$out" || { echo "$out"; echo "FAIL: the help lacks --comm-timeout"; exit 1; }
grep -q -- "--ckpt-dir" <<<"$out" || { echo "$out"; echo "FAIL: the help lacks --ckpt-dir"; exit 1; }
grep -q -- "75 stopped early on" <<<"$out" || { echo "$out"; echo "FAIL: the help lacks the exit codes"; exit 1; }
if "$train" --steps 1 > /dev/null 2>&1; then echo "FAIL: control: a run started MPI anyway"; exit 1; fi
out=$("$bench_comm" --help 2>&1) || { echo "$out"; echo "FAIL: bench_comm --help exited non-zero"; exit 1; }
grep -q -- "--min-bytes SIZE" <<<"$out" || { echo "$out"; echo "FAIL: bench_comm's help lacks --min-bytes"; exit 1; }
if "$bench_comm" --max-bytes 1K > /dev/null 2>&1; then echo "FAIL: control: bench_comm started MPI anyway"; exit 1; fi
echo "ok: gpt_train's and bench_comm's --help without MPI; the control runs fail to start MPI"
