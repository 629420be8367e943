#!/usr/bin/env bash
# Every program says what it was built from (core/build_info.hpp):
# --version prints "<program> <commit> (<build type>; ...)", the commit git's
# HEAD of the source tree (as of the build: "-dirty" allowed); gpt_train's
# answers without MPI (as all but bench_comm's) and names the MPI library; a run's first log line and
# its metrics header (build.revision) name the same commit, as do its
# checkpoint (ckpt_tool info) and a resume from it. And the script
# that generates it (cmake/build_info.cmake): GPT_GIT_REVISION wins, a tree
# without git says "unknown", and an unchanged text is not rewritten (its
# time stamp kept, so nothing relinks).
#   version.sh ROOT BUILD_DIR DATA_GLOB
set -uo pipefail
root="$1"; build="$2"; data="$3"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
head=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
for prog in gpt_train plan prepare_data bench_comm ckpt_tool; do
  # every program answers before MPI starts (MPI told to use a transport that does not exist)
  out=$(OMPI_MCA_pml=nonexistent "$build/apps/$prog" --version 2>&1) || { echo "FAIL: $prog --version: $out"; fail=1; continue; }
  line=$(head -1 <<<"$out")
  [[ $line =~ ^$prog\ ([0-9a-z-]+)\ \((Release|Debug|RelWithDebInfo|MinSizeRel|no\ build\ type)\;\ (CUDA\ architectures\ [0-9\ ]+|CPU\ only:\ no\ CUDA\ code)\)$ ]] ||
    { echo "FAIL: $prog --version said: $line"; fail=1; continue; }
  rev=${BASH_REMATCH[1]}
  [[ $head == unknown || ${rev%-dirty} == "$head" ]] || { echo "FAIL: $prog was built from $rev, the tree is at $head (a build since the commit regenerates it)"; fail=1; }
done
grep -q "^MPI: " <<<"$(OMPI_MCA_pml=nonexistent "$build/apps/gpt_train" --version)" ||
  { echo "FAIL: gpt_train --version names no MPI library"; fail=1; }
want=$("$build/apps/gpt_train" --version | head -1)
"$build/apps/gpt_train" --data "$data" --steps 1 --metrics "$work/m.jsonl" --ckpt-dir "$work/ck" > "$work/log" 2>&1 ||
  { cat "$work/log"; echo "FAIL: the one-step run"; exit 1; }
rev=$(cut -d' ' -f2 <<<"$want")
# Its checkpoint records the commit (root attribute build); ckpt_tool info and a resume name it.
info=$("$build/apps/ckpt_tool" info "$work/ck/step_00000001")
grep -qF "build $rev)" <<<"${info%%$'\n'*}" || { echo "$info"; echo "FAIL: ckpt_tool info does not name build $rev"; fail=1; }
"$build/apps/gpt_train" --data "$data" --steps 2 --ckpt-dir "$work/ck" --resume auto > "$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; echo "FAIL: the resume"; exit 1; }
grep -qF "by a build of $rev)" "$work/resume.log" || { grep resumed "$work/resume.log"; echo "FAIL: the resume line does not name $rev"; fail=1; }
grep -qF "[info] $want" <(head -1 "$work/log") || { head -3 "$work/log"; echo "FAIL: the first log line is not '$want'"; fail=1; }
python3 - "$work/m.jsonl" "$want" <<'PY' || fail=1
import json, sys
b = json.loads(open(sys.argv[1]).readline())["build"]
if sys.argv[2].split()[1] != b["revision"] or not b["build_type"] or not b["cuda_architectures"]:
    sys.exit(f"FAIL: the metrics header's build {b} against --version's '{sys.argv[2]}'")
PY
# The generator alone.
gen() { cmake -DSRC="$1" -DOUT="$work/b.cpp" -DBUILD_TYPE=Release -DCUDA_ARCHS="$2" -P "$root/cmake/build_info.cmake"; }
mkdir "$work/nogit"
(unset GPT_GIT_REVISION; gen "$work/nogit" "")
grep -qF '{"unknown", "Release", "none"}' "$work/b.cpp" || { cat "$work/b.cpp"; echo "FAIL: a tree without git"; fail=1; }
GPT_GIT_REVISION=abc123 gen "$work/nogit" "90"
grep -qF '{"abc123", "Release", "90"}' "$work/b.cpp" || { cat "$work/b.cpp"; echo "FAIL: GPT_GIT_REVISION"; fail=1; }
touch -d '2000-01-01' "$work/b.cpp"
GPT_GIT_REVISION=abc123 gen "$work/nogit" "90"
[[ $(stat -c %Y "$work/b.cpp") == $(date -d '2000-01-01' +%s) ]] || { echo "FAIL: an unchanged text was rewritten"; fail=1; }
GPT_GIT_REVISION=def456 gen "$work/nogit" "90"
grep -qF '"def456"' "$work/b.cpp" || { echo "FAIL: a changed revision was not written"; fail=1; }
GPT_GIT_REVISION='v1 "x"\' gen "$work/nogit" "90"
grep -qF '{"v1__x__", "Release", "90"}' "$work/b.cpp" || { cat "$work/b.cpp"; echo "FAIL: quotes in GPT_GIT_REVISION"; fail=1; }
(( fail == 0 )) || exit 1
echo "ok: 5 programs built from $head say so; the run's log and metrics agree; the generator's cases"
