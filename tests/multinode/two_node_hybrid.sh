#!/usr/bin/env bash
# A real two-node run on one machine: two network namespaces joined by a
# veth pair are two "nodes" to Open MPI (TCP between them, shared memory
# within). 4 ranks, 2 per node, train with --strategy hybrid and no --mesh:
# the default mesh must be nodes x ranks-per-node = 2x2, and the losses must
# equal a single-rank run on the same global batch; --strategy auto plans
# for 2 nodes of 2 ranks.
# Exit 77 (ctest: skipped) where network namespaces cannot be created.
#   two_node_hybrid.sh BUILD_DIR WORK_DIR
set -uo pipefail
build="$1"; work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
ns1=gptn1-$$; ns2=gptn2-$$
cleanup() { ip netns del "$ns1" 2>/dev/null; ip netns del "$ns2" 2>/dev/null; }
trap cleanup EXIT
if ! ip netns add "$ns1" 2>/dev/null || ! ip netns add "$ns2" 2>/dev/null; then
  echo "skip: cannot create network namespaces here"; exit 77
fi
set -e
ip link add "v1_$$" type veth peer name "v2_$$"
ip link set "v1_$$" netns "$ns1"; ip link set "v2_$$" netns "$ns2"
ip -n "$ns1" addr add 10.77.0.1/24 dev "v1_$$"; ip -n "$ns2" addr add 10.77.0.2/24 dev "v2_$$"
for n in "$ns1" "$ns2"; do ip -n "$n" link set lo up; done
ip -n "$ns1" link set "v1_$$" up; ip -n "$ns2" link set "v2_$$" up

rm -rf "$work"; mkdir -p "$work"
"$here/../make_tiny_run.sh" "$build" "$work"  # data/ and tiny.toml: 2 layers, width 64, T=32, batch 8, 6 steps
args=(--config "$work/tiny.toml" --log-every 6)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$build/apps/gpt_train" "${args[@]}" --micro-batch 8 --metrics "$work/single.jsonl" 2>"$work/single.log"
# gpt_train ARGS... on 4 ranks, 2 in each namespace.
on_two_nodes() {
  timeout 300 ip netns exec "$ns1" unshare --uts sh -c "hostname $ns1; exec mpirun --oversubscribe --bind-to none \
    --host $ns1:2,$ns2:2 -np 4 --mca plm_rsh_agent $here/nsrsh --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self,vader --mca btl_vader_single_copy_mechanism none \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    $build/apps/gpt_train ${args[*]} $*"
}
on_two_nodes --micro-batch 2 --strategy hybrid --metrics "$work/hybrid.jsonl" 2>"$work/hybrid.log"
# --strategy auto across the two nodes plans for 2 ranks per node and the links between them.
on_two_nodes --micro-batch 2 --steps 1 --strategy auto 2>"$work/auto.log"
grep -q 'strategy auto: plan for 4 ranks, 2 per node, .*, 3 GB/s inside a node, 1 x 1.2 GB/s across' "$work/auto.log" ||
  { cat "$work/auto.log"; echo "FAIL: strategy auto does not plan for 2 nodes of 2"; exit 1; }
python3 - "$work/single.jsonl" "$work/hybrid.jsonl" <<'PY'
import json, sys
single = [json.loads(l) for l in open(sys.argv[1])]
hybrid = [json.loads(l) for l in open(sys.argv[2])]
assert hybrid[0]["mesh"] == "2x2", f"default mesh should be nodes x ranks-per-node = 2x2, got {hybrid[0]['mesh']}"
a = [r["loss"] for r in single if "type" not in r]
b = [r["loss"] for r in hybrid if "type" not in r]
assert len(a) == len(b) == 6
for s, (x, y) in enumerate(zip(a, b)):
    assert abs(x - y) <= 1e-5 * x, f"step {s + 1}: single {x} vs two-node hybrid {y}"
comm = [r["comm"]["bytes"] for r in hybrid if "type" not in r]
assert all(c > 0 for c in comm)
print(f"two nodes x 2 ranks, mesh {hybrid[0]['mesh']}: losses equal single-rank ({a[-1]:.5f}); comm {comm[-1]} B/step")
PY
