#!/usr/bin/env bash
# scripts/sweep on this machine: 2 ranks, ddp / zero3 / hybrid 1x2 and one
# invalid strategy. The report must list all four runs in grid order, the
# failed one with its error, equal final losses for the three good runs
# (same global batch), and three PNG plots.
#   sweep_report.sh BUILD_DIR WORK_DIR
set -euo pipefail
build="$(realpath "$1")"; work="$(realpath -m "$2")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work"; mkdir -p "$work"
"$root/tests/make_tiny_run.sh" "$build" "$work"  # data/ and tiny.toml
"$root/scripts/sweep" run --strategies ddp,zero3,hybrid,zero9 --meshes 1x2 --ranks 2 --steps 3 \
  --config "$work/tiny.toml" --build "$build" --out "$work/sweep" --launcher mpirun
python3 - "$work/sweep" <<'PY'
import csv, os, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(d, "report.csv"))))
assert [r["name"] for r in rows] == ["ddp", "zero3", "hybrid-1x2-zero3", "zero9"], rows
good = rows[:3]
assert all(r["status"] == "ok" for r in good), good
losses = {r["final_loss"] for r in good}
assert len(losses) == 1, f"strategies disagree on the final loss: {losses}"
assert float(good[1]["model_state_mib"]) < float(good[0]["model_state_mib"]), "zero3 should hold less than ddp"
assert rows[3]["status"] == "failed" and "invalid strategy = 'zero9'" in rows[3]["error"], rows[3]
md = open(os.path.join(d, "report.md")).read()
assert "| zero9 |" in md
for p in ("throughput.png", "memory.png", "breakdown.png"):
    with open(os.path.join(d, p), "rb") as f:
        assert f.read(4) == b"\x89PNG", p
print("sweep report OK:", os.path.join(d, "report.md"))
PY
