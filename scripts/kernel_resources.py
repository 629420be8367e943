#!/usr/bin/env python3
"""Checks the CUDA backend's kernel launches against the limits of the SMs
we build for, without a GPU, and prints what each launch costs an SM.

ptxas knows what a kernel needs on an SM (registers per thread, static
shared memory, stack, spills) but not how it is launched; the emulated runs
know how each kernel is launched (threads per block, dynamic shared memory,
its opt-in: GPT_EMULATED_LAUNCH_LOG, tests/unit/host_cuda/launch_log.hpp)
but not what it needs. Together they answer what a real GPU would:

  * the launch is possible: threads within the kernel's __launch_bounds__,
    registers of the whole block within the SM's register file (at 255
    registers a thread, at most 256 threads), static plus dynamic shared
    memory within what a block may have, and dynamic shared memory above
    48 KiB less the static part only with the kernel's opt-in (otherwise
    the launch fails: "too many resources requested", "invalid argument");
  * every kernel the backend compiles is launched by some test (a kernel no
    test launches is checked by nothing), unless named in --unlaunched;
  * no kernel outside the SIMT attention fallback spills to local memory
    (--spill-ok): a spill in the training path is a slow kernel;
  * a kernel the backend launches only where the device gives a block its
    shared memory (--smem-gated: the tensor-core attention, which
    attention_tensor_core_ok holds to cudaDevAttrMaxSharedMemoryPerBlockOptin)
    may opt into more than an architecture's block has: it is listed as not
    run there, not as a violation;

and reports, for each kernel and launch configuration, the resident blocks
and occupancy an SM allows and what limits them (the CUDA occupancy
calculator's rules for compute capability 8.0, 8.6, 8.9, 9.0, 10.0 and
12.0). 8.6 and 8.9 (A10, L4, L40S, RTX 30/40) run the sm_80 code (binary
compatible within a major version) on smaller SMs: 1536 threads and
100 KiB of shared memory; give them the sm_80 PTX, which ptxas assembles
for sm_80 once. 12.0 (RTX 50, RTX PRO Blackwell) has SMs of that size
(blocks per SM from the toolkit's cuda_occupancy.h): sm_120 is its own
code (a build configured on such a machine has it), sm_120_jit what it runs
of a build without: the driver compiles the newest PTX, sm_100's, for it;
give sm_120_jit the sm_100 PTX, which ptxas assembles for sm_120.

  kernel_resources.py --ptxas PTXAS --logs DIR --json OUT \\
      [--unlaunched REGEX] [--spill-ok REGEX] [--smem-gated REGEX] sm_80=a.ptx:b.ptx sm_90=...

Exit status 1 on any violation, with one line per violation.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# Per compute capability (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"; occupancy calculator granularities).
SM_LIMITS = {
    "sm_80": dict(name="A100 (8.0)", threads_per_sm=2048, blocks_per_sm=32, regs_per_sm=65536,
                  smem_per_sm=164 * 1024, smem_per_block_optin=163 * 1024),
    "sm_86": dict(name="A10/RTX 30 (8.6)", code="sm_80", threads_per_sm=1536, blocks_per_sm=16, regs_per_sm=65536,
                  smem_per_sm=100 * 1024, smem_per_block_optin=99 * 1024),
    "sm_89": dict(name="L4/L40S/RTX 40 (8.9)", code="sm_80", threads_per_sm=1536, blocks_per_sm=24,
                  regs_per_sm=65536, smem_per_sm=100 * 1024, smem_per_block_optin=99 * 1024),
    "sm_90": dict(name="H100/H200 (9.0)", threads_per_sm=2048, blocks_per_sm=32, regs_per_sm=65536,
                  smem_per_sm=228 * 1024, smem_per_block_optin=227 * 1024),
    "sm_100": dict(name="B200/GB200 (10.0)", threads_per_sm=2048, blocks_per_sm=32, regs_per_sm=65536,
                   smem_per_sm=228 * 1024, smem_per_block_optin=227 * 1024),
    "sm_120": dict(name="RTX 50/RTX PRO Blackwell (12.0)", threads_per_sm=1536, blocks_per_sm=24,
                   regs_per_sm=65536, smem_per_sm=100 * 1024, smem_per_block_optin=99 * 1024),
}
# 12.0 running a build without sm_120 code: the sm_100 PTX, compiled for it.
SM_LIMITS["sm_120_jit"] = dict(SM_LIMITS["sm_120"], name="RTX 50/RTX PRO Blackwell (12.0), sm_100 PTX", code="sm_120")
REG_ALLOC_UNIT = 256       # registers, allocated per warp
SUB_PARTITIONS = 4         # an SM's register file is 4 x 16K registers, one per warp scheduler
SMEM_ALLOC_UNIT = 128      # bytes
SMEM_RESERVED = 1024       # bytes the system takes per block (8.0 and later)
DEFAULT_DYNAMIC_SMEM = 48 * 1024  # a block's static + dynamic shared memory without the opt-in


def ceil_to(x, unit):
    return (x + unit - 1) // unit * unit


def ptx_entries(ptx_text):
    """Entry name -> .maxntid thread count (None without __launch_bounds__)."""
    out = {}
    for m in re.finditer(r"\.entry\s+([\w$.]+)\s*\(", ptx_text):
        body = ptx_text[m.end():ptx_text.find("{", m.end())]
        nt = re.search(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", body)
        out[m.group(1)] = None if not nt else int(nt.group(1)) * int(nt.group(2) or 1) * int(nt.group(3) or 1)
    return out


def ptxas_usage(ptxas, arch, ptx):
    """Entry name -> registers, static smem, stack, spill bytes, from ptxas -v."""
    r = subprocess.run([ptxas, "-v", f"--gpu-name={arch}", "-O3", ptx, "-o", os.devnull],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"kernel_resources: ptxas failed on {ptx} for {arch}:\n{r.stderr}")
    usage, entry = {}, None
    for line in r.stderr.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            entry = m.group(1)
            usage[entry] = dict(regs=0, smem=0, stack=0, spill_stores=0, spill_loads=0)
        elif entry and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                                       line)):
            usage[entry].update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif entry and (m := re.search(r"Used (\d+) registers", line)):
            usage[entry]["regs"] = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                usage[entry]["smem"] = int(s.group(1))
            entry = None  # the entry's last line
    return usage


def read_launches(log_dir):
    launches = {}
    files = glob.glob(os.path.join(log_dir, "launches.*.txt"))
    for path in files:
        with open(path) as f:
            for line in f:
                name, threads, smem, opt_in, count = line.split()
                key = (name, int(threads), int(smem), int(opt_in))
                launches[key] = launches.get(key, 0) + int(count)
    return files, launches


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return dict(zip(names, r.stdout.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def short(pretty):
    """void gpt::cuda::detail::tc::dq_kernel<64>(...) -> tc::dq_kernel<64>"""
    s = re.sub(r"^void ", "", pretty)
    s = s[:s.find("(")] if "(" in s else s
    s = s.replace("gpt::cuda::detail::", "").replace("__nv_bfloat16", "bf16")
    return s


def warps_by_registers(lim, regs):
    """Warps of `regs` registers a thread that an SM's register file holds."""
    regs_per_warp = ceil_to(max(regs, 1) * 32, REG_ALLOC_UNIT)
    return SUB_PARTITIONS * ((lim["regs_per_sm"] // SUB_PARTITIONS) // regs_per_warp)


def occupancy(lim, threads, regs, smem_block):
    """Resident blocks per SM, occupancy, and the limit that binds."""
    warps = (threads + 31) // 32
    limits = {"blocks": lim["blocks_per_sm"], "threads": lim["threads_per_sm"] // (warps * 32),
              "registers": warps_by_registers(lim, regs) // warps}
    smem = ceil_to(smem_block + SMEM_RESERVED, SMEM_ALLOC_UNIT)
    limits["shared memory"] = lim["smem_per_sm"] // smem
    blocks = min(limits.values())
    limiter = min(limits, key=lambda k: limits[k])
    return blocks, blocks * warps / (lim["threads_per_sm"] // 32), limiter


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--logs", required=True, help="directory of launches.*.txt")
    ap.add_argument("--json", required=True, help="where to write the report")
    ap.add_argument("--unlaunched", default=None, help="regex of kernels no test needs to launch")
    ap.add_argument("--spill-ok", default=None, help="regex of kernels allowed to spill")
    ap.add_argument("--smem-gated", default=None,
                    help="regex of kernels launched only where a block may have their shared memory")
    ap.add_argument("ptx", nargs="+", help="ARCH=file.ptx[:file.ptx...]")
    a = ap.parse_args()

    files, launches = read_launches(a.logs)
    errors = []
    if not launches:
        sys.exit(f"kernel_resources: no launches logged in {a.logs} (GPT_EMULATED_LAUNCH_LOG)")
    names = sorted({k[0] for k in launches})
    report = {"launch_logs": len(files), "archs": {}}
    assembled = {}  # (code, ptx) -> ptxas's usage: 8.6 and 8.9 reuse sm_80's

    for spec in a.ptx:
        arch, _, paths = spec.partition("=")
        if arch not in SM_LIMITS:
            sys.exit(f"kernel_resources: unknown architecture {arch!r} (known: {', '.join(SM_LIMITS)})")
        lim = SM_LIMITS[arch]
        code = lim.get("code", arch)
        ptx_files = [p for p in paths.split(":") if p]
        bounds, usage = {}, {}
        todo = [p for p in ptx_files if (code, p) not in assembled]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for p, u in zip(todo, pool.map(lambda p: ptxas_usage(a.ptxas, code, p), todo)):
                assembled[(code, p)] = u
        for p in ptx_files:
            with open(p) as f:
                bounds.update(ptx_entries(f.read()))
            usage.update(assembled[(code, p)])
        pretty = demangle(sorted(set(usage) | set(names)))
        rows = []
        for (name, threads, dyn, opt_in), count in sorted(launches.items()):
            k = short(pretty.get(name, name))
            if name not in usage:
                errors.append(f"{arch}: {k}: launched, but no kernel of that name in the PTX")
                continue
            u, bound = usage[name], bounds.get(name)
            static = u["smem"]
            if bound is not None and threads > bound:
                errors.append(f"{arch}: {k}: {threads} threads a block, above its __launch_bounds__ {bound}")
            max_dynamic = opt_in if opt_in else DEFAULT_DYNAMIC_SMEM - static
            if dyn > max_dynamic:
                errors.append(f"{arch}: {k}: {dyn} bytes of dynamic shared memory, above the {max_dynamic} it may "
                              f"have ({static} static, opt-in {opt_in or 'none'})")
            row = dict(kernel=k, mangled=name, threads=threads, launch_bounds=bound, registers=u["regs"],
                       static_smem=static, dynamic_smem=dyn, smem_opt_in=opt_in, stack=u["stack"],
                       spill_bytes=u["spill_stores"] + u["spill_loads"], launches=count)
            if opt_in and opt_in + static > lim["smem_per_block_optin"]:
                if a.smem_gated and re.search(a.smem_gated, k):
                    rows.append(dict(row, runs=False, blocks_per_sm=0, occupancy=0,
                                     limited_by="not run: shared memory"))
                    continue
                errors.append(f"{arch}: {k}: opts into {opt_in} bytes of dynamic shared memory; with {static} "
                              f"static, above a block's {lim['smem_per_block_optin']}")
            blocks, occ, limiter = occupancy(lim, threads, u["regs"], static + dyn)
            if blocks < 1 and limiter == "registers":
                errors.append(f"{arch}: {k}: {threads} threads x {u['regs']} registers is more than an SM's register "
                              f"file ({warps_by_registers(lim, u['regs']) * 32} threads at most): too many resources "
                              f"requested")
            elif blocks < 1:
                errors.append(f"{arch}: {k}: no block of it fits on an SM (limited by {limiter})")
            rows.append(dict(row, runs=True, blocks_per_sm=blocks, occupancy=round(occ, 3), limited_by=limiter))
        launched = {r["mangled"] for r in rows}
        unlaunched = sorted(short(pretty.get(n, n)) for n in usage if n not in launched)
        for k in unlaunched:
            if not (a.unlaunched and re.search(a.unlaunched, k)):
                errors.append(f"{arch}: {k}: compiled but launched by no test")
        for n, u in sorted(usage.items()):
            k = short(pretty.get(n, n))
            if u["spill_stores"] + u["spill_loads"] and not (a.spill_ok and re.search(a.spill_ok, k)):
                errors.append(f"{arch}: {k}: spills {u['spill_stores']} bytes, reloads {u['spill_loads']} "
                              f"(local memory, {u['regs']} registers)")
        report["archs"][arch] = dict(device=lim["name"], limits=lim, kernels=len(usage), launched=rows,
                                     unlaunched=unlaunched)

        print(f"\n{arch}, {lim['name']}: {len(usage)} kernels compiled, {len(launched)} launched")
        hdr = f"{'kernel':<52} {'thr':>4} {'regs':>4} {'smem KiB':>9} {'spill':>5} {'blk/SM':>6} {'occ':>5}  limit"
        print(hdr)
        print("-" * len(hdr))
        for r in sorted(rows, key=lambda r: r["kernel"]):
            smem = (r["static_smem"] + r["dynamic_smem"]) / 1024
            print(f"{r['kernel'][:52]:<52} {r['threads']:>4} {r['registers']:>4} {smem:>9.1f} {r['spill_bytes']:>5} "
                  f"{r['blocks_per_sm']:>6} {r['occupancy']:>5.0%}  {r['limited_by']}")
        if unlaunched:
            print("not launched by any test: " + ", ".join(unlaunched))

    report["errors"] = errors
    with open(a.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nreport: {a.json}")
    for e in errors:
        print(f"VIOLATION {e}")
    print(f"{len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
