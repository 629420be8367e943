#!/usr/bin/env python3
"""Attributes the heap allocations of a steady-state training step (the
allocation audit, tests/alloc_audit.sh).

Input: for rank 0 (diff.0.folded), heaptrack's allocation stacks for the extra steps of the
longer run (heaptrack_print --diff of the two runs, as a folded flame graph:
"outermost;...;innermost COUNT" per line). Each stack belongs to one owner,
decided walking from the outermost frame inwards:
  * mpi: the first frame not ours is in Open MPI (or a thread of its own):
    its internal buffers, which we do not choose;
  * emulator: the first frame not ours is the emulated CUDA runtime, NCCL,
    cuBLASLt or a kernel launch (tests/unit/host_cuda): on a GPU these are
    the driver's;
  * product: everything else, our code and the libraries it calls itself
    (libstdc++, fmt, spdlog, nlohmann-json). Budget: none per step, summed
    per allocation site (see audit()).

  alloc_audit.py WORK_DIR SETUPS_FILE STEPS_APART  -> prints a table, writes WORK_DIR/alloc_audit.json
  Exits 1 when a set-up's product allocations exceed the budget, printing their stacks.
"""
import glob
import json
import os
import re
import sys

MPI = re.compile(r"^(MPI_|PMPI_|ompi_|NBC_|mca_|opal_|pmix|PMIx|event_|orte_|hwloc|ucp_|uct_|ucs_|0x[0-9a-f]+$)")
EMULATOR = re.compile(r"^(emulated_cuda::|host_cuda::|cuda[A-Z]\w*$|nccl[A-Z]\w*$|cublasLt\w*$|make_fcontext|jump_fcontext"
                      r"|void boost::context::|void emulated_cuda::|.*\bemulated_cuda::launch_kernel)")
OURS = re.compile(r"^(main$|gpt::|.*\bgpt::)")
BUDGET = 0  # product allocations per steady-state step


def owner(frames):
    for f in frames:
        if EMULATOR.match(f):
            return "emulator"
        if MPI.match(f):
            return "mpi"
    # Threads neither we nor the emulator started (Open MPI's progress
    # threads) run none of our frames.
    return "product" if any(OURS.match(f) for f in frames) else "mpi"


def short(frame):
    return re.sub(r"\(.*", "", frame)[:90]


def audit(folded):
    """Per owner, what the extra steps allocated. Our allocations are summed
    per allocation site (the innermost frame) with their signs: the same site
    reached by another path in the shorter run (a pool that grew one call
    earlier or later, as threads happened to run) cancels out."""
    totals = {"product": 0, "mpi": 0, "emulator": 0}
    sites = {}  # innermost frame -> [net count, stacks that added]
    with open(folded) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            n = int(count)
            frames = [x for x in stack.split(";") if x]
            who = owner(frames)
            if who != "product":
                totals[who] += max(n, 0)  # reported, not budgeted: fewer in the longer run is start-up noise
                continue
            site = sites.setdefault(frames[-1] if frames else "?", [0, []])
            site[0] += n
            if n > 0:
                site[1].append((n, frames))
    product = [(net, stacks) for net, stacks in sites.values() if net > 0]
    totals["product"] = sum(net for net, _ in product)
    return totals, [s for _, stacks in sorted(product, key=lambda p: -p[0]) for s in stacks]


def main():
    work, setups_file, apart = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows, failed = [], False
    print(f"{'set-up':<28} {'ranks':>5} {'ours/step':>9} {'MPI/step':>9} {'emulator/step':>13}")
    for line in open(setups_file):
        name, ranks, *args = line.split()
        per_rank = []
        for folded in sorted(glob.glob(os.path.join(work, name, "diff.*.folded"))):
            per_rank.append(audit(folded))
        if not per_rank:
            print(f"{name}: no profile")
            sys.exit(1)
        worst = max(per_rank, key=lambda r: r[0]["product"])
        row = {"setup": name, "ranks": int(ranks), "args": args}
        for who in ("product", "mpi", "emulator"):
            row[who + "_per_step"] = max(r[0][who] for r in per_rank) / apart
        rows.append(row)
        print(f"{name:<28} {ranks:>5} {row['product_per_step']:>9g} {row['mpi_per_step']:>9g} "
              f"{row['emulator_per_step']:>13g}")
        row["over_budget"] = row["product_per_step"] > BUDGET
        if row["over_budget"]:
            failed = True
            print(f"  over budget ({BUDGET} per step); the allocating stacks, innermost frames last:")
            for n, frames in worst[1][:8]:
                print(f"  {n:>5} x " + " ; ".join(short(f) for f in frames[-6:]))
    with open(os.path.join(work, "alloc_audit.json"), "w") as f:
        json.dump(rows, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
