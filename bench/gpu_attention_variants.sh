#!/usr/bin/env bash
# The attention dK/dV kernel compiled for 2 and for 3 blocks per SM
# (GPT_DKV_MIN_BLOCKS: its register budget, 255 or 168 at sm_90), each timed
# by bench_gpu_attention in the same build directory, one after the other on
# the same GPU; prints each run's table, then one line per variant and a JSON
# line. The build is left at the default (3) afterwards, even on failure.
#   bench/gpu_attention_variants.sh [BUILD_DIR] [bench_gpu_attention flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; shift $(( $# > 0 ? 1 : 0 ))
[ -f "$build/CMakeCache.txt" ] || { echo "gpu_attention_variants: $build: not a configured build directory" >&2; exit 2; }
restore() {  # the default again, whatever happened
  cmake -S "$root" -B "$build" -DGPT_DKV_MIN_BLOCKS=3 > /dev/null && cmake --build "$build" --target bench_gpu_attention > /dev/null
}
trap restore EXIT
declare -A json
for blocks in 2 3; do
  cmake -S "$root" -B "$build" -DGPT_DKV_MIN_BLOCKS="$blocks" > /dev/null
  cmake --build "$build" --target bench_gpu_attention > /dev/null
  echo "## GPT_DKV_MIN_BLOCKS=$blocks"
  out="$("$build/bench/bench_gpu_attention" "$@")"
  grep -v '^{' <<< "$out"
  json[$blocks]="$(grep '^{' <<< "$out" | tail -n 1)"
done
python3 - "${json[2]}" "${json[3]}" <<'PY'
import json, sys
runs = {blocks: json.loads(text) for blocks, text in zip((2, 3), sys.argv[1:])}
tc = {b: next(r for r in run["results"] if r["kernel"] == "tensor_core_bf16") for b, run in runs.items()}
print("# dK/dV blocks per SM   tensor-core bwd ms   fwd ms")
for b, r in tc.items():
    print(f"  {b:<21} {r['bwd_ms']:>18.3f} {r['fwd_ms']:>8.3f}")
print(json.dumps({"bench": "attention_dkv_variants", "device": runs[3].get("device"),
                  "variants": [{"dkv_min_blocks": b, "fwd_ms": r["fwd_ms"], "bwd_ms": r["bwd_ms"]}
                               for b, r in tc.items()]}))
PY
