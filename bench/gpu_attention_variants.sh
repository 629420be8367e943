#!/usr/bin/env bash
# The tensor-core attention backward's occupancy variants, each timed by
# bench_gpu_attention in the same build directory, one after the other on
# the same GPU: the dK/dV kernel at 2 or 3 blocks per SM (GPT_DKV_MIN_BLOCKS:
# its register budget at sm_90, up to 255 or 168) crossed with the dQ kernel
# at ptxas's choice (3 blocks) or held to 4 (GPT_DQ_MIN_BLOCKS=4: 128
# registers, a 20-byte spill). Prints each run's table, then one line per
# variant and a JSON line. The build is left at the defaults (3 and 0)
# afterwards, even on failure.
#   bench/gpu_attention_variants.sh [BUILD_DIR] [bench_gpu_attention flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; shift $(( $# > 0 ? 1 : 0 ))
[ -f "$build/CMakeCache.txt" ] || { echo "gpu_attention_variants: $build: not a configured build directory" >&2; exit 2; }
configure() {  # DKV_BLOCKS DQ_BLOCKS
  cmake -S "$root" -B "$build" -DGPT_DKV_MIN_BLOCKS="$1" -DGPT_DQ_MIN_BLOCKS="$2" > /dev/null &&
    cmake --build "$build" --target bench_gpu_attention > /dev/null
}
restore() { configure 3 0; }  # the defaults again, whatever happened
trap restore EXIT
runs=()
for dkv in 2 3; do
  for dq in 0 4; do
    configure "$dkv" "$dq"
    echo "## GPT_DKV_MIN_BLOCKS=$dkv GPT_DQ_MIN_BLOCKS=$dq"
    out="$("$build/bench/bench_gpu_attention" "$@")"
    grep -v '^{' <<< "$out"
    runs+=("$dkv $dq $(grep '^{' <<< "$out" | tail -n 1)")
  done
done
RUNS="$(printf '%s\n' "${runs[@]}")" python3 - <<'PY'
import json, os
runs = []
for line in os.environ["RUNS"].splitlines():
    dkv, dq, text = line.split(" ", 2)
    run = json.loads(text)
    tc = next(r for r in run["results"] if r["kernel"] == "tensor_core_bf16")
    rc = next(r for r in run["results"] if r["kernel"] == "tensor_core_bf16_recompute")
    l2 = next(r for r in run["results"] if r["kernel"] == "tensor_core_bf16_ds_in_l2")
    runs.append({"dkv_min_blocks": int(dkv), "dq_min_blocks": int(dq), "fwd_ms": tc["fwd_ms"], "bwd_ms": tc["bwd_ms"],
                 "bwd_ds_in_l2_ms": l2["bwd_ms"], "bwd_recompute_ms": rc["bwd_ms"], "device": run.get("device")})
print("# dK/dV blocks per SM   dQ min blocks (0: ptxas)   bwd ms (stored dS)   bwd ms (dS in L2)"
      "   bwd ms (dQ recomputed)   fwd ms")
for r in runs:
    print(f"  {r['dkv_min_blocks']:<21} {r['dq_min_blocks']:<26} {r['bwd_ms']:>18.3f} {r['bwd_ds_in_l2_ms']:>17.3f} "
          f"{r['bwd_recompute_ms']:>24.3f} {r['fwd_ms']:>8.3f}")
print(json.dumps({"bench": "attention_backward_variants", "device": runs[-1]["device"],
                  "variants": [{k: v for k, v in r.items() if k != "device"} for r in runs]}))
PY
