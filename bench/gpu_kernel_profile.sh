#!/usr/bin/env bash
# Where a GPU training step's time goes, kernel by kernel: Nsight Compute
# times every kernel of one step of bench_gpu_train (each kernel alone, its
# duration only, clocks left as they are), and this prints the kernels grouped
# by name with their total time, count and share, largest first, plus a JSON
# line. Kernels run serialised with cold caches under ncu, so the total is
# above the step's time in a stream; the shares are what to read.
# With BASELINE=FILE (an earlier profile's JSON, e.g. one committed under
# bench/results/), it then prints the time per kernel family (attention,
# GEMMs, softmax/cross-entropy, LayerNorm, AdamW, bias gradients, the norm,
# ...) then and now, so a kernel rework reads as one table.
#   bench/gpu_kernel_profile.sh [BUILD_DIR] [MODEL] [BATCH] [SEQ] [extra bench_gpu_train flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; model="${2:-gpt2-124m}"; batch="${3:-16}"; seq="${4:-1024}"
shift $(( $# < 4 ? $# : 4 ))
raw="$(mktemp)"; trap 'rm -f "$raw"' EXIT
ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$build/bench/bench_gpu_train" --model "$model" --batch "$batch" --seq "$seq" --steps 1 --warmup 0 "$@" > "$raw"
python3 - "$raw" "${BASELINE:-}" <<'PY'
import collections, csv, json, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
total = collections.Counter(); count = collections.Counter()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = r["Kernel Name"].split("(")[0]
    name = name[5:] if name.startswith("void ") else name
    total[name] += float(r["Metric Value"].replace(",", "")) / 1e6  # ns -> ms
    count[name] += 1
all_ms = sum(total.values())
print(f"# {sum(count.values())} kernels, {all_ms:.2f} ms serialised")
print(f"  {'kernel':<72} {'calls':>6} {'ms':>9} {'share':>7}")
for name, ms in total.most_common():
    print(f"  {name[:72]:<72} {count[name]:>6} {ms:>9.3f} {100 * ms / all_ms:>6.1f}%")

def family(name):
    """A kernel's family, for comparing profiles across kernel reworks (names and templates change)."""
    rules = [("attention (tensor cores)", ("tc::",)), ("attention (delta term, SIMT)", ("simt::", "attention")),
             ("GEMM (cuBLASLt)", ("nvjet", "xmma", "cutlass", "splitKreduce", "gemm")),
             ("softmax / cross-entropy", ("classifier_impl",)), ("LayerNorm", ("layernorm_impl",)),
             ("AdamW", ("adamw_impl",)), ("bias gradients", ("bias_grad_impl",)),
             ("gradient norm / loss sums", ("sum_kernel", "sum_partials")), ("embedding", ("embedding_impl",)),
             ("GELU", ("gelu_impl",)), ("casts / accumulation", ("convert_kernel", "accumulate_kernel"))]
    for fam, keys in rules:
        if any(k in name for k in keys):
            return fam
    return "other"

if len(sys.argv) > 2 and sys.argv[2]:
    base = json.load(open(sys.argv[2]))
    then, now = collections.Counter(), collections.Counter()
    for k in base["kernels"]:
        then[family(k["name"])] += k["ms"]
    for n, ms in total.items():
        now[family(n)] += ms
    print(f"# per kernel family: {sys.argv[2]} ({base.get('device', '?')}, {base.get('git_revision', '?')}) and now")
    print(f"  {'family':<28} {'then ms':>9} {'now ms':>9} {'change':>9}")
    for fam in sorted(set(then) | set(now), key=lambda f: -max(then[f], now[f])):
        print(f"  {fam:<28} {then[fam]:>9.3f} {now[fam]:>9.3f} {now[fam] - then[fam]:>+9.3f}")
    print(f"  {'all':<28} {sum(then.values()):>9.3f} {all_ms:>9.3f} {all_ms - sum(then.values()):>+9.3f}")
print(json.dumps({"bench": "kernel_profile", "total_ms": all_ms,
                  "kernels": [{"name": n, "calls": count[n], "ms": ms} for n, ms in total.most_common()]}))
PY
