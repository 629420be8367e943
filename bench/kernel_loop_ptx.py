#!/usr/bin/env python3
"""Static instruction counts of the CUDA kernels' hot loops, no GPU needed.

Compiles a kernel source to PTX with the build's nvcc and flags (from
compile_commands.json) for one architecture, and for every kernel matching
--kernel prints each loop's body (a back edge spanning more than --min
instructions): its instruction count, tensor-core products (mma), shared
memory matrix loads (ldmatrix), exponentials (ex2) and branches, as a table
and a JSON line. The loop body of a tile kernel is what runs once per tile;
instructions other than mma compete with the products for issue slots, so
fewer of them per mma is the aim. PTX is before ptxas's scheduling and
register allocation (ptxas -v gives those): read counts, not cycles.

  bench/kernel_loop_ptx.py [--build build] [--source lib/model/cuda/attention_tc.cu]
                           [--arch 90] [--kernel tc::] [--min 150]
"""
import argparse
import collections
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ptx_for(build, source, arch):
    db = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db):
        sys.exit(f"kernel_loop_ptx: {db}: not found (configure a CUDA build there: scripts/build.sh)")
    entries = json.load(open(db))
    src = os.path.abspath(source)
    for e in entries:
        if os.path.abspath(e["file"]) == src and " -c " in f" {e['command']} ":
            args = shlex.split(e["command"])
            break
    else:
        sys.exit(f"kernel_loop_ptx: {source}: not in {build}/compile_commands.json (a CUDA build compiles it)")
    keep = []
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c") or a.startswith("--generate-code") or a.startswith("-gencode"):
            skip = a in ("-o", "-gencode")
            continue
        keep.append(a)
    out = tempfile.NamedTemporaryFile(suffix=".ptx", delete=False).name
    cmd = [args[0], *[a for a in keep if a != src], f"--generate-code=arch=compute_{arch},code=[compute_{arch}]",
           "-ptx", src, "-o", out]
    subprocess.run(cmd, check=True, cwd=e["directory"])
    text = open(out).read()
    os.unlink(out)
    return text


def demangle(name):
    try:
        return subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    except OSError:
        return name


def loops(body):
    """(start, end) instruction ranges of the loops: a branch back to an earlier label."""
    labels, ins = {}, []
    for line in body.split("\n"):
        line = line.strip()
        if re.match(r"^\$L__\w+:", line):
            labels[line[:-1]] = len(ins)
        elif line and not line.startswith(("//", ".", "{", "}")):
            ins.append(line)
    found = []
    for i, line in enumerate(ins):
        m = re.search(r"bra(?:\.uni)?\s+(\$L__\w+);", line)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            found.append(ins[labels[m.group(1)]:i + 1])
    return found


def opcode(line):
    words = line.split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--source", default=os.path.join(ROOT, "lib/model/cuda/attention_tc.cu"))
    ap.add_argument("--arch", default="90")
    ap.add_argument("--kernel", default="tc::", help="substring of the demangled kernel name")
    ap.add_argument("--min", type=int, default=150, help="smallest loop body reported, in instructions")
    a = ap.parse_args()
    ptx = ptx_for(a.build, a.source, a.arch)
    rows = []
    for m in re.finditer(r"\.entry (\S+)\((.*?)\n\}\n", ptx, re.S):
        name = demangle(m.group(1)).split("(")[0].replace("gpt::cuda::detail::", "").replace("void ", "")
        if a.kernel not in name:
            continue
        for body in loops(m.group(2)):
            if len(body) < a.min:
                continue
            ops = collections.Counter(opcode(x) for x in body)
            rows.append({"kernel": name, "instructions": len(body), "mma": ops["mma"], "ldmatrix": ops["ldmatrix"],
                         "ex2": ops["ex2"], "branches": ops["bra"],
                         "other_per_mma": round((len(body) - ops["mma"]) / ops["mma"], 2) if ops["mma"] else None})
    print(f"# {os.path.relpath(a.source, ROOT)}, sm_{a.arch} PTX, loops of at least {a.min} instructions")
    print(f"  {'kernel':<44} {'instr':>6} {'mma':>5} {'ldmatrix':>8} {'ex2':>5} {'bra':>5} {'other/mma':>9}")
    for r in rows:
        per = "-" if r["other_per_mma"] is None else f"{r['other_per_mma']:.2f}"
        print(f"  {r['kernel'][:44]:<44} {r['instructions']:>6} {r['mma']:>5} {r['ldmatrix']:>8} {r['ex2']:>5} "
              f"{r['branches']:>5} {per:>9}")
    print(json.dumps({"bench": "kernel_loop_ptx", "source": os.path.relpath(a.source, ROOT), "arch": a.arch,
                      "loops": rows}))


if __name__ == "__main__":
    main()
