#!/usr/bin/env python3
"""The README's `plan` examples are what `plan` prints today.

Every fenced block of README.md that starts with `$ build/apps/plan ...`
(continuation lines ending in a backslash) is run with the built binary, and
its table rows and model line must equal the README's. The cluster line and
the recommendation name this host's memory when the example gives no
--device-mem, so they are compared only for examples that give it.
A stale table (a cost-model change without the README's) fails here.
    readme_plan.py PLAN README
"""
import shlex
import subprocess
import sys


def examples(readme):
    lines = open(readme, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ build/apps/plan "):
            cmd = lines[i][2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            out = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(lines[i])
                i += 1
            yield cmd, out
        i += 1


def compared(lines, host_free):
    keep = [l for l in lines if l.startswith("| ") or l.startswith("model ")]
    if host_free:
        keep += [l for l in lines if l.startswith("cluster: ") or l.startswith("recommendation: ")]
    return keep


def main():
    plan, readme = sys.argv[1], sys.argv[2]
    n = 0
    failed = False
    for cmd, want in examples(readme):
        n += 1
        argv = shlex.split(cmd)
        argv[0] = plan
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode not in (0, 3):
            print(f"FAIL: {cmd}: exit {run.returncode}\n{run.stderr}")
            failed = True
            continue
        host_free = "--device-mem" in argv
        got_rows, want_rows = compared(run.stdout.split("\n"), host_free), compared(want, host_free)
        if len(want_rows) < 3:
            print(f"FAIL: {cmd}: the README's block has no table")
            failed = True
        elif got_rows != want_rows:
            failed = True
            print(f"FAIL: the README's output of `{cmd}` is stale; plan prints now:")
            print("\n".join(run.stdout.rstrip("\n").split("\n")))
            for g, w in zip(got_rows, want_rows):
                if g != w:
                    print(f"first difference:\n  README: {w}\n  plan:   {g}")
                    break
        else:
            print(f"ok: {cmd} ({len(want_rows)} lines equal)")
    if n < 2:
        print(f"FAIL: found {n} plan examples in {readme}, expected at least 2")
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
