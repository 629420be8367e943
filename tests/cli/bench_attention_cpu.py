#!/usr/bin/env python3
"""bench/attention_cpu runs end to end with fewer (batch, head) pairs than
threads at micro-batch 1 (3 heads on 2 threads: forward's split of query
blocks) and with enough (B = 4: whole heads per thread): for every shape the
flash-style output and gradients agree with the materialised form's, and
what forward keeps for backward is one log-sum-exp per query row.
  bench_attention_cpu.py ATTENTION_CPU"""
import json
import subprocess
import sys

out = subprocess.run([sys.argv[1], "--reps", "1", "--threads", "2", "--heads", "3"], capture_output=True,
                     text=True, check=True).stdout
rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
shapes = {(r["B"], r["T"]) for r in rows}
if len(rows) != 6 or shapes != {(4, 256), (1, 1024), (4, 1024)}:
    sys.exit(f"FAIL: expected 2 rows for each of 3 shapes, got {[(r['impl'], r['B'], r['T']) for r in rows]}")
for r in rows:
    name = f"{r['impl']} B={r['B']} T={r['T']}"
    if r["n_head"] != 3 or r["threads"] != 2:
        sys.exit(f"FAIL: {name}: n_head {r['n_head']}, threads {r['threads']}")
    # float sums of up to 1024 terms against the same sums in another order
    if not (r["rel_diff_out"] < 1e-6 and r["rel_diff_dqkv"] < 1e-6):
        sys.exit(f"FAIL: {name}: relative difference {r['rel_diff_out']} (out), {r['rel_diff_dqkv']} (dqkv)")
    if r["impl"] == "flash" and r["kept_bytes"] != 4 * r["B"] * 3 * r["T"]:
        sys.exit(f"FAIL: {name}: keeps {r['kept_bytes']} bytes, not one float per query row")
print(f"ok: {len(rows)} rows; flash-style attention equals the materialised form on every shape")
